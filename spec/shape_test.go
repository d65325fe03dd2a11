package spec_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/spec"
)

const shapeSpec = `params:
  T: {default: 64, min: 16, max: 1024, multiple_of: 16, paddable: true}
  U: {default: 2, min: 1, max: 4}
buffers:
  h_x: {dtype: f32, count: T * U, placement: pinned, init: {random: 1}}
  d_x: {dtype: f32, count: T * U}
ops:
  - copy: {from: h_x, to: d_x}
  - launch: scale
    args: {x: d_x, alpha: 2.0}
  - copy: {from: d_x, to: h_x}
`

// A spec with parameters is a function from their values to a graph.
func ExampleSpec_Shape() {
	s, err := spec.Parse("p.yaml", []byte(shapeSpec))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Values(), s.Paddable())
	for _, T := range []int64{16, 512} {
		g, err := s.Shape(context.Background(), map[string]int64{"T": T})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(T, g.Buffers[0].Name, g.Buffers[0].Size)
	}
	_, err = s.Shape(context.Background(), map[string]int64{"T": 100})
	fmt.Println(err)
	// Output:
	// map[T:64 U:2] [T]
	// 16 h_x 128
	// 512 h_x 4096
	// the spec at T=100: p.yaml:2:3: --set T: T = 100 is not a multiple of 16 (96 or 112 are) (give --set a value in the range the spec declares)
}

// At keeps the values s was loaded with for the parameters it does not
// name, and the initial contents of each shape are its own.
func TestSpecAt(t *testing.T) {
	s, err := spec.Parse("p.yaml", []byte(shapeSpec), spec.WithParam("U", 3))
	require.NoError(t, err)
	r, err := s.At(map[string]int64{"T": 32})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"T": 32, "U": 3}, r.Values())
	assert.Equal(t, int64(32*3*4), r.Graph.Buffers[0].Size)
	small, large := r.Graph.Buffers[0].InitialBytes(), s.Graph.Buffers[0].InitialBytes()
	assert.Equal(t, large[:len(small)], small, "seeded random contents are one stream: the smaller are the first bytes of the larger")
	_, err = s.At(map[string]int64{"V": 1})
	require.ErrorContains(t, err, `--set V: the spec declares no parameter "V"`)
}

// paddable: is a boolean, read at its place.
func TestParamsPaddable(t *testing.T) {
	for _, tc := range []struct {
		decl string
		want []string
		err  string
	}{
		{"{default: 1}", nil, ""},
		{"{default: 1, paddable: false}", nil, ""},
		{"{default: 1, paddable: true}", []string{"T"}, ""},
		{"{default: 1, paddable: 3}", nil, `p.yaml:1:36: parameter "T" paddable must be a boolean, not the integer 3 (write true or false)`},
		{"{default: 1, padable: true}", nil, `p.yaml:1:26: unknown field "padable" in parameter "T" (did you mean "paddable"?)`},
	} {
		src := "params: {T: " + tc.decl + "}\nbuffers: {x: T * 4}\nops: [{fill: {buffer: x, value: 0}}]\n"
		s, err := spec.Parse("p.yaml", []byte(src))
		if tc.err != "" {
			require.Error(t, err, tc.decl)
			assert.Equal(t, tc.err, spec.Errors(err)[0].Error(), tc.decl)
			continue
		}
		require.NoError(t, err, tc.decl)
		assert.Equal(t, tc.want, s.Paddable(), tc.decl)
	}
}

// At reads the document s parsed, not the text again, and shapes made at
// once from one spec are each their own.
func TestSpecAtConcurrent(t *testing.T) {
	s, err := spec.Parse("p.yaml", []byte(shapeSpec))
	require.NoError(t, err)
	sizes := make([]int64, 8)
	done := make(chan error, len(sizes))
	for i := range sizes {
		go func() {
			r, err := s.At(map[string]int64{"T": int64(16 * (i + 1))})
			if err == nil {
				sizes[i] = r.Graph.Buffers[0].Size
			}
			done <- err
		}()
	}
	for range sizes {
		require.NoError(t, <-done)
	}
	for i, size := range sizes {
		assert.Equal(t, int64(16*(i+1)*2*4), size)
	}
}

// At at a value makes the graph that a load of the text at that value
// makes, while it reuses what the first load parsed (the document, the
// expressions, where paths resolve), at one value after another.
func TestSpecAtIsAFreshLoad(t *testing.T) {
	const file = "../examples/mlp_stream.yaml"
	s, err := spec.Load(file)
	require.NoError(t, err)
	for _, T := range []int64{512, 16, 8192, 512, 2048} {
		at, err := s.At(map[string]int64{"T": T})
		require.NoError(t, err, "T=%d", T)
		fresh, err := spec.Load(file, spec.WithParam("T", T))
		require.NoError(t, err, "T=%d", T)
		require.Equal(t, fresh.Graph, at.Graph, "T=%d", T)
	}
}
