package memory_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/memory"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/stretchr/testify/require"
)

// TestPeakMatchesDinic: on random plans and the families, the peak found
// by push-relabel is the one Dinic's algorithm found, weight and set.
func TestPeakMatchesDinic(t *testing.T) {
	graphs := 1500
	if testing.Short() {
		graphs = 300
	}
	memories := 0
	for seed := range uint64(graphs) {
		g := dagtest.Random(dagtest.Config{Ops: 20 + int(seed%300), Buffers: 2 + int(seed%24), Seed: int64(seed), Temporaries: true,
			Ranges: seed%2 == 0, HostBuffers: seed%3 == 0, Devices: 1 + int(seed%3), After: seed%5 == 0})
		if seed%3 == 1 {
			fams := dagtest.Families()
			n := 4 + int(seed%60)
			if seed%100 == 1 {
				n = 1000 + int(seed) // big enough for gaps and global relabels
			}
			g = dagtest.Family(fams[seed/3%uint64(len(fams))], n, int64(seed))
		}
		p, err := planner.New(g, planner.Streams(1+int(seed%12)))
		require.NoError(t, err)
		got, want := memory.Collect(p).Peaks()
		for dev, w := range want {
			require.Equal(t, w, got[dev], "seed %d memory %d", seed, dev)
			memories++
		}
	}
	t.Logf("%d memories", memories)
}

// TestVerifyCatchesArenaMutations moves temporaries onto each other's
// bytes in random plans: Verify must refuse every move that puts two
// temporaries the plan does not order on shared bytes, and accept every
// move between ordered ones.
func TestVerifyCatchesArenaMutations(t *testing.T) {
	graphs := 200
	if testing.Short() {
		graphs = 40
	}
	caught, allowed := 0, 0
	for seed := range uint64(graphs) {
		// Random graphs, and the families, whose temporaries on several
		// streams are often unordered.
		g := dagtest.Random(dagtest.Config{Ops: 40 + int(seed%120), Buffers: 6 + int(seed%10), Seed: int64(seed), Temporaries: true,
			Ranges: seed%2 == 0, Devices: 1 + int(seed%2), After: seed%3 == 0})
		if seed%2 == 1 {
			fams := dagtest.Families()
			g = dagtest.Family(fams[seed/2%uint64(len(fams))], 6+int(seed%10), int64(seed))
		}
		p, err := planner.New(g, planner.Streams(1+int(seed%8)))
		require.NoError(t, err)
		require.NoError(t, verify.Verify(p))
		set := memory.Collect(p)
		lives := set.Temps()
		good := p.Memory
		for i, a := range lives {
			for j, b := range lives {
				if i == j || a.Device != b.Device {
					continue
				}
				m := &plan.Memory{Memories: good.Memories, Temporaries: append([]plan.Temporary(nil), good.Temporaries...)}
				m.Memories = append([]plan.MemoryUse(nil), good.Memories...)
				// Move b onto a's first byte, and grow the arena to hold it.
				m.Temporaries[j].Offset = m.Temporaries[i].Offset
				for k := range m.Memories {
					if m.Memories[k].Device == a.Device {
						m.Memories[k].ArenaBytes = max(m.Memories[k].ArenaBytes, m.Temporaries[j].Offset+m.Temporaries[j].Bytes)
					}
				}
				p.Memory = m
				err := verify.Verify(p)
				overlap := a.Bytes > 0 && b.Bytes > 0
				if overlap && !set.Before(int32(i), int32(j)) && !set.Before(int32(j), int32(i)) {
					var ve *verify.Error
					require.True(t, errors.As(err, &ve), "seed %d: %d onto %d: %v", seed, j, i, err)
					require.Equal(t, verify.ArenaOverlap, ve.Kind)
					caught++
				} else if overlap {
					// Only b moved: it may now overlap others it is not
					// ordered with; Verify's verdict then depends on them.
					ok := true
					for k, c := range lives {
						if k != j && c.Device == b.Device && k != i && c.Bytes > 0 &&
							m.Temporaries[k].Offset < m.Temporaries[j].Offset+b.Bytes && m.Temporaries[j].Offset < m.Temporaries[k].Offset+c.Bytes &&
							!set.Before(int32(j), int32(k)) && !set.Before(int32(k), int32(j)) {
							ok = false
						}
					}
					if ok {
						require.NoError(t, err, "seed %d: %d onto %d", seed, j, i)
						allowed++
					}
				}
			}
		}
		p.Memory = good
	}
	require.Positive(t, caught)
	require.Positive(t, allowed)
	t.Logf("caught %d unordered overlaps, allowed %d ordered ones", caught, allowed)
}

// TestMemoryConcurrent: a memory of more than memory.MinConcurrentPack
// temporaries is packed, and its arena checked, on goroutines beside the
// peak and the verifier's other checks (run under -race in CI). Its
// result is the same every time, and the verifier accepts it.
func TestMemoryConcurrent(t *testing.T) {
	g := dagtest.Family("pipeline", 1500, 1)
	p, err := planner.New(g)
	require.NoError(t, err)
	most := 0
	for _, m := range p.Memory.Memories {
		most = max(most, m.Temporaries)
	}
	require.Greater(t, most, memory.MinConcurrentPack, "enough temporaries in one memory for the concurrent path")
	require.NoError(t, verify.Verify(p))
	require.Equal(t, p.Memory, memory.Of(p), "the same packing again")
}

// TestVerifyArenaSweep scatters the temporaries of random plans over
// random offsets, many on top of each other: Verify must refuse the arena
// exactly when some two temporaries that share bytes are not ordered,
// every pair checked as the packer's lives order them.
func TestVerifyArenaSweep(t *testing.T) {
	graphs := 300
	if testing.Short() {
		graphs = 60
	}
	refused, accepted := 0, 0
	for seed := range uint64(graphs) {
		g := dagtest.Random(dagtest.Config{Ops: 30 + int(seed%90), Buffers: 4 + int(seed%12), Seed: int64(seed), Temporaries: true,
			Ranges: seed%2 == 0, Devices: 1 + int(seed%2), After: seed%3 == 0, HostBuffers: seed%3 == 0})
		p, err := planner.New(g, planner.Streams(1+int(seed%6)))
		require.NoError(t, err)
		set := memory.Collect(p)
		good := p.Memory
		r := rand.New(rand.NewPCG(seed, 7))
		for range 20 {
			m := &plan.Memory{Memories: slices.Clone(good.Memories), Temporaries: slices.Clone(good.Temporaries)}
			slots := 1 + r.IntN(4)
			if r.IntN(3) == 0 {
				slots = 1 + r.IntN(64) // sparse: gaps between temporaries
			}
			for k := range m.Temporaries {
				if r.IntN(2) == 0 {
					m.Temporaries[k].Offset = int64(r.IntN(slots)) * plan.ArenaAlign
				}
			}
			for k := range m.Memories {
				for _, tmp := range m.Temporaries {
					if tmp.Device == m.Memories[k].Device {
						m.Memories[k].ArenaBytes = max(m.Memories[k].ArenaBytes, tmp.Offset+tmp.Bytes)
					}
				}
			}
			at := map[int]plan.Temporary{}
			for _, tmp := range m.Temporaries {
				at[tmp.Buffer] = tmp
			}
			bad := false
			for i, a := range set.Temps() {
				for j := i + 1; j < len(set.Temps()); j++ {
					x, y := at[a.Buffer], at[set.Temps()[j].Buffer]
					if x.Device == y.Device && x.Bytes > 0 && y.Bytes > 0 &&
						x.Offset < y.Offset+y.Bytes && y.Offset < x.Offset+x.Bytes && !set.Before(int32(i), int32(j)) && !set.Before(int32(j), int32(i)) {
						bad = true
					}
				}
			}
			p.Memory = m
			err := verify.Verify(p)
			if bad {
				var ve *verify.Error
				require.True(t, errors.As(err, &ve), "seed %d: %v", seed, err)
				require.Equal(t, verify.ArenaOverlap, ve.Kind, "seed %d: %v", seed, err)
				refused++
			} else {
				require.NoError(t, err, "seed %d", seed)
				accepted++
			}
		}
		p.Memory = good
	}
	require.Positive(t, refused)
	require.Positive(t, accepted)
	t.Logf("refused %d arenas, accepted %d", refused, accepted)
}
