package planner

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/dagtest"
)

// TestRankSet checks rankSet's next and previous members against a plain
// list, over sizes around the word boundaries of its levels.
func TestRankSet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 63, 64, 65, 127, 4095, 4096, 4097, 300000} {
		s := newRankSet(n)
		in := make([]bool, n)
		var members []int
		for range 3000 {
			x := r.IntN(n)
			if r.IntN(3) == 0 && len(members) > 0 {
				x = members[r.IntN(len(members))]
			}
			if in[x] {
				s.remove(x)
				in[x] = false
				members = slices.DeleteFunc(members, func(y int) bool { return y == x })
			} else {
				s.add(x)
				in[x] = true
				members = append(members, x)
			}
			slices.Sort(members)
			if len(members) == 0 {
				continue
			}
			m := members[r.IntN(len(members))]
			k, _ := slices.BinarySearch(members, m)
			wantPrev, wantNext := -1, -1
			if k > 0 {
				wantPrev = members[k-1]
			}
			if k+1 < len(members) {
				wantNext = members[k+1]
			}
			require.Equal(t, wantPrev, s.prev(m), "n %d prev of %d in %v", n, m, members)
			require.Equal(t, wantNext, s.next(m), "n %d next of %d in %v", n, m, members)
		}
	}
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
		p, err := New(g, Options{Streams: 1 + int(seed%6)})
		require.NoError(t, err)
		set := collect(p)
		good := p.Memory
		r := rand.New(rand.NewPCG(seed, 7))
		for range 20 {
			m := &Memory{Memories: slices.Clone(good.Memories), Temporaries: slices.Clone(good.Temporaries)}
			slots := 1 + r.IntN(4)
			if r.IntN(3) == 0 {
				slots = 1 + r.IntN(64) // sparse: gaps between temporaries
			}
			for k := range m.Temporaries {
				if r.IntN(2) == 0 {
					m.Temporaries[k].Offset = int64(r.IntN(slots)) * ArenaAlign
				}
			}
			for k := range m.Memories {
				for _, tmp := range m.Temporaries {
					if tmp.Device == m.Memories[k].Device {
						m.Memories[k].ArenaBytes = max(m.Memories[k].ArenaBytes, tmp.Offset+tmp.Bytes)
					}
				}
			}
			at := map[int]Temporary{}
			for _, tmp := range m.Temporaries {
				at[tmp.Buffer] = tmp
			}
			bad := false
			for i, a := range set.temps {
				for j := i + 1; j < len(set.temps); j++ {
					x, y := at[a.Buffer], at[set.temps[j].Buffer]
					if x.Device == y.Device && x.Bytes > 0 && y.Bytes > 0 &&
						x.Offset < y.Offset+y.Bytes && y.Offset < x.Offset+x.Bytes && !set.before(int32(i), int32(j)) && !set.before(int32(j), int32(i)) {
						bad = true
					}
				}
			}
			p.Memory = m
			err := Verify(p)
			if bad {
				var ve *VerifyError
				require.True(t, errors.As(err, &ve), "seed %d: %v", seed, err)
				require.Equal(t, ArenaOverlap, ve.Kind, "seed %d: %v", seed, err)
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
