package dag

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemset2DBound(t *testing.T) {
	tests := []struct {
		m    Memset2DSpec
		es   int64
		want int64
		ok   bool
	}{
		{Memset2DSpec{Rows: 1, Width: 4, Pitch: 4}, 4, 16, true},
		{Memset2DSpec{Rows: 3, Width: 2, Pitch: 10}, 2, 24, true},
		{Memset2DSpec{Rows: 0, Width: 2, Pitch: 10}, 2, 0, false},
		{Memset2DSpec{Rows: 2, Width: 0, Pitch: 10}, 2, 0, false},
		{Memset2DSpec{Rows: math.MaxInt, Width: 1, Pitch: math.MaxInt64}, 1, 0, false},
	}
	for _, tc := range tests {
		got, ok := tc.m.Bound(tc.es)
		assert.Equal(t, tc.ok, ok, "%+v", tc.m)
		assert.Equal(t, tc.want, got, "%+v", tc.m)
	}
}

// The op's access is the region's bounding range, so an op that touches
// only a gap between rows still follows it, and one past the region does
// not.
func TestMemset2DAccessAndDeps(t *testing.T) {
	b := New()
	x := b.Buffer("x", 64, Of(U8), Zeros())
	set := b.Memset2D(x.Slice(4, 60), Memset2DSpec{Rows: 3, Width: 4, Pitch: 16}, 1)
	gap := b.Fill(x.Slice(10, 2), 2)    // between rows 0 and 1
	after := b.Fill(x.Slice(40, 24), 3) // past the last row (ends at 40)
	g, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, View{Buf: x, Offset: 4, Size: 36}, set.Access[0].View)
	assert.Equal(t, int64(12), set.Bytes(), "the rows' bytes, gaps left out")
	assert.Contains(t, g.Ops[gap.ID].Deps, int32(set.ID))
	assert.NotContains(t, g.Ops[after.ID].Deps, int32(set.ID))
	var rows [][2]int64
	set.Memset2DRows(func(s, e int64) { rows = append(rows, [2]int64{s, e}) })
	assert.Equal(t, [][2]int64{{0, 4}, {16, 20}, {32, 36}}, rows)
}

func TestMemset2DChecks(t *testing.T) {
	tests := []struct {
		name string
		dt   DType
		view func(b *Buffer) View
		m    Memset2DSpec
		v    float64
		want string
	}{
		{"8-byte elements", F64, (*Buffer).All, Memset2DSpec{Rows: 1, Width: 1, Pitch: 8}, 0, "at most 4 bytes an element"},
		{"no rows", F32, (*Buffer).All, Memset2DSpec{Rows: 0, Width: 1, Pitch: 4}, 0, "region of 0 rows"},
		{"pitch below a row", F32, (*Buffer).All, Memset2DSpec{Rows: 2, Width: 4, Pitch: 8}, 0, "pitch of 8 bytes is less than a row"},
		{"pitch not whole elements", F32, (*Buffer).All, Memset2DSpec{Rows: 2, Width: 1, Pitch: 6}, 0, "not a multiple"},
		{"too large for the view", F32, func(b *Buffer) View { return b.Slice(0, 8) }, Memset2DSpec{Rows: 2, Width: 1, Pitch: 8}, 0, "does not fit"},
		{"value out of range", U8, (*Buffer).All, Memset2DSpec{Rows: 1, Width: 1, Pitch: 1}, 300, "memset2d value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			x := b.Buffer("x", 64, Of(tc.dt), Zeros())
			b.Memset2D(tc.view(x), tc.m, tc.v)
			_, err := b.Build()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
