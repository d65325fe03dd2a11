package planner

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/dagtest"
)

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
		p, err := New(g, Options{Streams: 1 + int(seed%8)})
		require.NoError(t, err)
		require.NoError(t, Verify(p))
		set := collect(p)
		lives := set.temps
		good := p.Memory
		for i, a := range lives {
			for j, b := range lives {
				if i == j || a.Device != b.Device {
					continue
				}
				m := &Memory{Memories: good.Memories, Temporaries: append([]Temporary(nil), good.Temporaries...)}
				m.Memories = append([]MemoryUse(nil), good.Memories...)
				// Move b onto a's first byte, and grow the arena to hold it.
				m.Temporaries[j].Offset = m.Temporaries[i].Offset
				for k := range m.Memories {
					if m.Memories[k].Device == a.Device {
						m.Memories[k].ArenaBytes = max(m.Memories[k].ArenaBytes, m.Temporaries[j].Offset+m.Temporaries[j].Bytes)
					}
				}
				p.Memory = m
				err := Verify(p)
				overlap := a.Bytes > 0 && b.Bytes > 0
				if overlap && !set.before(int32(i), int32(j)) && !set.before(int32(j), int32(i)) {
					var ve *VerifyError
					require.True(t, errors.As(err, &ve), "seed %d: %d onto %d: %v", seed, j, i, err)
					require.Equal(t, ArenaOverlap, ve.Kind)
					caught++
				} else if overlap {
					// Only b moved: it may now overlap others it is not
					// ordered with; Verify's verdict then depends on them.
					ok := true
					for k, c := range lives {
						if k != j && c.Device == b.Device && k != i && c.Bytes > 0 &&
							m.Temporaries[k].Offset < m.Temporaries[j].Offset+b.Bytes && m.Temporaries[j].Offset < m.Temporaries[k].Offset+c.Bytes &&
							!set.before(int32(j), int32(k)) && !set.before(int32(k), int32(j)) {
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

// TestMemoryConcurrent: a memory of more than minConcurrentPack
// temporaries is packed, and its arena checked, on goroutines beside the
// peak and the verifier's other checks (run under -race in CI). Its
// result is the same every time, and the verifier accepts it.
func TestMemoryConcurrent(t *testing.T) {
	g := dagtest.Family("pipeline", 1500, 1)
	opts, err := Options{}.withDefaults()
	require.NoError(t, err)
	p := plan(g, opts, byEarliestStart, nil)
	p.Memory = MemoryOf(p)
	most := 0
	for _, m := range p.Memory.Memories {
		most = max(most, m.Temporaries)
	}
	require.Greater(t, most, minConcurrentPack, "enough temporaries in one memory for the concurrent path")
	require.NoError(t, Verify(p))
	require.Equal(t, p.Memory, MemoryOf(p), "the same packing again")
}
