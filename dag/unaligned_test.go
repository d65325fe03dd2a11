package dag

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInferenceUnalignedRanges checks hand-made accesses whose ranges meet
// at odd bytes: one byte of overlap is a dependency, a range that ends
// where another starts is none.
func TestInferenceUnalignedRanges(t *testing.T) {
	noop := func(context.Context, [][]byte) error { return nil }
	for _, tc := range []struct {
		name          string
		first, second Access
		dep           bool
	}{
		{"read of [7,12) after a write of [0,8)", Access{View{Offset: 0, Size: 8}, Write}, Access{View{Offset: 7, Size: 5}, Read}, true},
		{"write of [7,8) after a write of [0,8)", Access{View{Offset: 0, Size: 8}, Write}, Access{View{Offset: 7, Size: 1}, Write}, true},
		{"read of [8,9) after a write of [0,8)", Access{View{Offset: 0, Size: 8}, Write}, Access{View{Offset: 8, Size: 1}, Read}, false},
		{"write of [0,4) after a read of [3,4)", Access{View{Offset: 3, Size: 1}, Read}, Access{View{Offset: 0, Size: 4}, Write}, true},
		{"write of [0,3) after a read of [3,4)", Access{View{Offset: 3, Size: 1}, Read}, Access{View{Offset: 0, Size: 3}, Write}, false},
		{"write of [5,6) after a write of [1,6)", Access{View{Offset: 1, Size: 5}, Write}, Access{View{Offset: 5, Size: 1}, ReadWrite}, true},
		{"read of [0,1) after a write of [1,2)", Access{View{Offset: 1, Size: 1}, Write}, Access{View{Offset: 0, Size: 1}, Read}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			x := b.Buffer("x", 13, PinnedHost(), Zeros())
			// A wider write first, so that the first access cuts a
			// segment of it rather than starting from an empty index.
			b.Host(noop, Access{x.All(), Write}, Name("init"))
			first, second := tc.first, tc.second
			first.Buf, second.Buf = x, x
			b.Host(noop, first, Name("first"))
			b.Host(noop, second, Name("second"))
			g, err := b.Build()
			require.NoError(t, err)
			require.Empty(t, bruteForceDeps(g, nil))
			var names []string
			for _, d := range g.Ops[2].Deps {
				names = append(names, g.Ops[d].Name)
			}
			if tc.dep {
				assert.Contains(t, names, "first")
			} else {
				assert.NotContains(t, names, "first")
			}
		})
	}
}

// TestInferenceMatchesBruteForceBytes checks inference against the byte by
// byte reading of the rules on random graphs whose views start and end at
// any byte, one-byte views common, on buffers of odd sizes.
func TestInferenceMatchesBruteForceBytes(t *testing.T) {
	graphs := 400
	if testing.Short() {
		graphs = 150
	}
	noop := func(context.Context, [][]byte) error { return nil }
	deps := 0
	for seed := range uint64(graphs) {
		r := rand.New(rand.NewPCG(seed, 0xb17e))
		b := New()
		var bufs []*Buffer
		for i := range 1 + r.IntN(3) {
			bufs = append(bufs, b.Buffer(fmt.Sprint("b", i), 1+r.Int64N(24), PinnedHost(), Zeros()))
		}
		view := func() View {
			x := bufs[r.IntN(len(bufs))]
			size := int64(1)
			if r.IntN(2) == 0 {
				size = 1 + r.Int64N(x.Size)
			}
			return x.Slice(r.Int64N(x.Size-size+1), size)
		}
		for range 5 + r.IntN(40) {
			acc := []OpOption{Access{view(), Mode(1 + r.IntN(3))}}
			if r.IntN(3) == 0 {
				acc = append(acc, Access{view(), Mode(1 + r.IntN(3))})
			}
			b.Host(noop, acc...)
		}
		g, err := b.Build()
		require.NoError(t, err, "seed %d", seed)
		require.Empty(t, bruteForceDeps(g, nil), "seed %d", seed)
		for _, o := range g.Ops {
			deps += len(o.Deps)
		}
	}
	require.Positive(t, deps)
}

// TestViewBoundsToTheByte: a view may end at its buffer's last byte, and
// not one byte past it, whatever its offset.
func TestViewBoundsToTheByte(t *testing.T) {
	noop := func(context.Context, [][]byte) error { return nil }
	for _, tc := range []struct {
		off, size int64
		ok        bool
	}{
		{0, 13, true}, {12, 1, true}, {5, 8, true},
		{0, 14, false}, {12, 2, false}, {13, 1, false}, {5, 9, false},
	} {
		b := New()
		x := b.Buffer("x", 13, PinnedHost(), Zeros())
		b.Host(noop, Access{x.Slice(tc.off, tc.size), ReadWrite}, Name("h"))
		_, err := b.Build()
		if tc.ok {
			assert.NoError(t, err, "[%d, %d)", tc.off, tc.off+tc.size)
			continue
		}
		if assert.Error(t, err, "[%d, %d)", tc.off, tc.off+tc.size) {
			assert.Contains(t, err.Error(), "out of range")
		}
	}
}
