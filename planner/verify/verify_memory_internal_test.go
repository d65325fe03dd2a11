package verify

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
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
