package planner_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/verify"
)

// Bits of FuzzPlan's flags argument.
const (
	fuzzRanges = 1 << iota
	fuzzPriorities
	fuzzTemporaries
	fuzzHostBuffers
	fuzzAfter
	fuzzSharedCopy
	fuzzDevices = 3 << 6 // two bits: how many devices beyond the first
)

// FuzzPlan plans random graphs made from the fuzzer's numbers and checks
// that New and Verify never panic, that Verify passes New's plan, and that
// with one wait taken out Verify fails exactly when a brute-force check
// finds two ops left unordered.
func FuzzPlan(f *testing.F) {
	f.Add(int64(1), uint16(50), uint8(4), uint8(0), uint8(4))
	f.Add(int64(2), uint16(200), uint8(10), uint8(0xff), uint8(32))
	f.Add(int64(3), uint16(120), uint8(6), uint8(fuzzRanges|fuzzTemporaries), uint8(1))
	f.Add(int64(4), uint16(300), uint8(12), uint8(fuzzRanges|fuzzPriorities|fuzzAfter), uint8(8))
	f.Add(int64(5), uint16(80), uint8(8), uint8(fuzzHostBuffers|fuzzSharedCopy|1<<6), uint8(2))
	f.Add(int64(6), uint16(1), uint8(1), uint8(0), uint8(0))
	f.Add(int64(-7), uint16(400), uint8(2), uint8(fuzzTemporaries|fuzzHostBuffers|fuzzDevices|fuzzAfter), uint8(3))
	// Costs near the int64 limit (seed bits 4-6 all set), every strategy
	// and mode (bits 1-3).
	f.Add(int64(0x70), uint16(60), uint8(1), uint8(0), uint8(2))
	f.Add(int64(0x72), uint16(200), uint8(4), uint8(fuzzRanges|fuzzTemporaries), uint8(4))
	f.Add(int64(0x7c), uint16(300), uint8(9), uint8(fuzzPriorities|fuzzAfter|1<<6), uint8(8))
	// Temporaries planned for a pool (seed bit 7).
	f.Add(int64(0x80), uint16(150), uint8(10), uint8(fuzzTemporaries|fuzzAfter|fuzzRanges), uint8(3))
	f.Fuzz(func(t *testing.T, seed int64, ops uint16, buffers, flags, streams uint8) {
		cfg := dagtest.Config{
			Ops:         int(ops % 400),
			Buffers:     1 + int(buffers%16),
			Seed:        seed,
			Ranges:      flags&fuzzRanges != 0,
			Priorities:  flags&fuzzPriorities != 0,
			Temporaries: flags&fuzzTemporaries != 0,
			HostBuffers: flags&fuzzHostBuffers != 0,
			After:       flags&fuzzAfter != 0,
			Devices:     1 + int(flags&fuzzDevices>>6),
		}
		opts := planner.Options{Streams: int(streams % 33), SharedCopyStreams: flags&fuzzSharedCopy != 0,
			Strategy: planner.Strategies()[uint64(seed)>>1%3], Mode: planner.Mode(uint64(seed) >> 3 & 1),
			PoolTemporaries: uint64(seed)>>7&1 == 1}
		if uint64(seed)>>4&7 == 7 {
			opts.Cost = plannertest.HugeCost{}
		}
		p, err := planner.New(dagtest.Random(cfg), plannertest.Options(opts)...)
		if err != nil {
			t.Fatalf("%+v %+v: %v", cfg, opts, err)
		}
		if err := verify.Verify(p); err != nil {
			t.Fatalf("%+v %+v: %v", cfg, opts, err)
		}
		var waits []int
		for i, st := range p.Steps {
			if st.Kind == planner.Wait {
				waits = append(waits, i)
			}
		}
		if len(waits) == 0 {
			return
		}
		cut := *p
		drop := waits[uint64(seed)%uint64(len(waits))]
		cut.Steps = slices.Delete(slices.Clone(p.Steps), drop, drop+1)
		err = verify.Verify(&cut)
		var ve *verify.Error
		switch ok := plannertest.BruteOrdered(&cut); {
		case ok && err != nil:
			t.Fatalf("%+v %+v: without wait step %d every pair is ordered, but Verify says %v", cfg, opts, drop, err)
		case !ok && !errors.As(err, &ve):
			t.Fatalf("%+v %+v: without wait step %d two ops are unordered, but Verify says %v", cfg, opts, drop, err)
		}
	})
}
