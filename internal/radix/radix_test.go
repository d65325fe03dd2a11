package radix_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dagrun/dagrun/internal/radix"
)

// Sort orders by key and keeps equal keys in their order, as a stable
// comparison sort does, for keys small and large.
func TestSortMatchesStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []uint64{1, 7, 1 << 20, 1 << 63} {
		keys := make([]uint64, 500)
		for i := range keys {
			keys[i] = r.Uint64N(limit)
		}
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		want := slices.Clone(order)
		slices.SortStableFunc(want, func(a, b int) int {
			switch {
			case keys[a] < keys[b]:
				return -1
			case keys[a] > keys[b]:
				return 1
			}
			return 0
		})
		radix.Sort(order, make([]int, len(order)), keys)
		assert.Equal(t, want, order, "keys below %d", limit)
	}
}
