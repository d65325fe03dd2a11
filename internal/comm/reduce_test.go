package comm

import (
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestReduceSemantics pins NCCL's rules on small cases worked by hand.
func TestReduceSemantics(t *testing.T) {
	third := float32(1) / 3
	tests := []struct {
		name string
		dt   dag.DType
		op   dag.Reduction
		srcs [][]byte
		want []byte
	}{
		{"u8 sum wraps", dag.U8, dag.Sum, [][]byte{{200, 1}, {100, 2}}, []byte{44, 3}},
		{"u8 avg divides the wrapped sum", dag.U8, dag.Avg, [][]byte{{200, 1}, {100, 2}}, []byte{22, 1}},
		{"i32 avg truncates toward zero", dag.I32, dag.Avg, [][]byte{i32s(1, -3), i32s(2, 0)}, i32s(1, -1)},
		{"i32 prod wraps", dag.I32, dag.Prod, [][]byte{i32s(1 << 20), i32s(1 << 12)}, i32s(0)},
		{"i32 min max", dag.I32, dag.Min, [][]byte{i32s(5, -7), i32s(-2, 3)}, i32s(-2, -7)},
		{"i32 max", dag.I32, dag.Max, [][]byte{i32s(5, -7), i32s(-2, 3)}, i32s(5, 3)},
		{"f32 avg multiplies first", dag.F32, dag.Avg, [][]byte{f32s(1), f32s(1), f32s(1)}, f32s(third + third + third)},
		{"f32 sum", dag.F32, dag.Sum, [][]byte{f32s(0.5, 2), f32s(0.25, -2)}, f32s(0.75, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]byte, len(tt.want))
			require.NoError(t, Reduce(tt.dt, tt.op, got, tt.srcs))
			assert.Equal(t, tt.want, got)
		})
	}
	// Views at any offset: unaligned bytes take the copying path.
	a, b := make([]byte, 9)[1:], make([]byte, 9)[1:]
	copy(a, f32s(1.5, -2))
	copy(b, f32s(0.5, 4))
	dst := make([]byte, 10)[2:]
	for _, op := range []dag.Reduction{dag.Sum, dag.Avg} {
		require.NoError(t, Reduce(dag.F32, op, dst, [][]byte{a, b}))
		want := f32s(2, 2)
		if op == dag.Avg {
			want = f32s(1, 1)
		}
		assert.Equal(t, want, dst, "%s", op)
	}
	assert.Equal(t, f32s(0.5, 4), b, "sources are left alone")
	assert.Error(t, Reduce(dag.F32, dag.Sum, make([]byte, 4), [][]byte{make([]byte, 8)}))
	assert.Error(t, Reduce(dag.F32, dag.Reduction(7), make([]byte, 4), [][]byte{make([]byte, 4)}))
	assert.Error(t, Reduce(dag.F32, dag.Sum, make([]byte, 6), [][]byte{make([]byte, 6)}))
	assert.Error(t, Reduce(dag.F32, dag.Sum, nil, nil))
}

func TestReadPayload(t *testing.T) {
	b, err := readPayload(strings.NewReader("abc"), 3)
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), b)
	_, err = readPayload(strings.NewReader("abc"), 1<<40) // a claim the peer cannot back
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
