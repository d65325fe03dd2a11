package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const paramSpec = `params:
  T: {default: 64, min: 16, max: 1024, multiple_of: 16}
buffers:
  h_x: {size: "T * 4 KiB", placement: pinned, init: {value: 1.0}}
  d_x: {dtype: f32, count: T * 1024}
ops:
  - copy: {from: "h_x[0:T*4KiB]", to: d_x}
  - launch: scale
    grid: (T * 1024 + 255) / 256
    args: {x: d_x, alpha: 2.0}
  - copy: {from: d_x, to: h_x}
`

func TestParamsSizes(t *testing.T) {
	for _, tc := range []struct {
		set  []Option
		want int64
	}{
		{nil, 64 * 4096},
		{[]Option{WithParam("T", 512)}, 512 * 4096},
		{[]Option{WithParam("T", 16)}, 16 * 4096},
	} {
		s, err := Parse("p.yaml", []byte(paramSpec), tc.set...)
		require.NoError(t, err)
		require.Len(t, s.Params, 1)
		assert.Equal(t, tc.want, s.Graph.Buffers[0].Size)
		assert.Equal(t, tc.want/4096, s.Params[0].Value)
		assert.Equal(t, int((tc.want/4+255)/256), s.Graph.Ops[1].Launch.Grid.X)
	}
}

func TestParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		opts []Option
		want string
	}{
		{"not a multiple", paramSpec, []Option{WithParam("T", 500)}, "p.yaml:2:3: --set T: T = 500 is not a multiple of 16 (496 or 512 are)"},
		{"outside", paramSpec, []Option{WithParam("T", 2048)}, "p.yaml:2:3: --set T: T = 2048 is outside 16..1024"},
		{"unknown", paramSpec, []Option{WithParam("U", 1)}, `--set U: the spec declares no parameter "U"`},
		{"no params", "buffers: {x: 4}\nops: [{fill: {buffer: x, value: 0}}]\n", []Option{WithParam("T", 1)}, "--set T: the spec declares no parameters"},
		{"unknown name", "params: {T: {default: 1}}\nbuffers: {x: U * 4}\nops: [{fill: {buffer: x, value: 0}}]\n", nil, `p.yaml:2:14: buffer "x" size U * 4: "U" is not a parameter of the spec`},
		{"default outside", "params: {T: {default: 1, min: 2, max: 4}}\nbuffers: {x: 4}\nops: [{fill: {buffer: x, value: 0}}]\n", nil, "default: T = 1 is outside 2..4"},
		// Only the greatest value overflows: found by the range check,
		// at the expression's place, with the value.
		{"overflow at max", "params: {T: {default: 1, min: 1, max: 4096}}\nbuffers: {x: \"T * T * 1 TiB\"}\nops: [{fill: {buffer: x, value: 0}}]\n", []Option{CheckParamRange()}, "p.yaml:2:14: buffer \"x\" size T * T * 1 TiB overflows a 64-bit integer at T = 2897"},
		{"overflow bounded", "params: {T: {default: 1, min: 1, max: 1099511627776}}\nbuffers: {x: \"T * T\"}\nops: [{fill: {buffer: x, value: 0}}]\n", []Option{CheckParamRange()}, "overflows a 64-bit integer somewhere in the parameters' range"},
		{"negative", "params: {T: {default: 8, min: 0, max: 8}}\nbuffers: {x: \"(T - 4) * 4\"}\nops: [{fill: {buffer: x, value: 0}}]\n", []Option{CheckParamRange()}, "is -16, negative, at T = 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.src), tc.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Without the range check, a spec whose largest value overflows loads at
// the values it is given.
func TestParamsOnlyValuesUsed(t *testing.T) {
	src := "params: {T: {default: 1, min: 1, max: 1048576}}\nbuffers: {x: \"T * T * T * 8 TiB\"}\nops: [{fill: {buffer: x, value: 0}}]\n"
	_, err := Parse("p.yaml", []byte(src))
	require.NoError(t, err)
}

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{"T", "T * 4096", "(T + 15) / 16", "T*8KiB + 64", "-(T % 3)", "((((T))))", "9223372036854775807 + T"} {
		f.Add(s)
	}
	known := func(s string) bool { return s == "T" || s == "B" }
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseExpr(s, true, known)
		if err != nil {
			return
		}
		v, err := e.eval(map[string]int64{"T": 7, "B": 3})
		lo, hi, berr := e.bounds(map[string][2]int64{"T": {7, 7}, "B": {3, 3}})
		if err == nil && berr == nil && (lo.Int64() != v || hi.Int64() != v) && !containsMod(s) {
			t.Fatalf("%q: value %d outside its bounds [%v, %v]", s, v, lo, hi)
		}
	})
}

// containsMod: % bounds are an interval around the value, not the value.
func containsMod(s string) bool {
	for i := range s {
		if s[i] == '%' {
			return true
		}
	}
	return false
}

// The range check loads the spec at the least and the greatest values,
// and reports what only those values get wrong, saying which they are.
func TestParamsExtremes(t *testing.T) {
	src := "params: {T: {default: 8, min: 1, max: 8}}\nbuffers: {x: \"T * 4\"}\nops: [{fill: {buffer: \"x[0:20]\", value: 0}}]\n"
	_, err := Parse("p.yaml", []byte(src))
	require.NoError(t, err)
	_, err = Parse("p.yaml", []byte(src), CheckParamRange())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(with T = 1)")
	// A spec without parameters is checked once.
	_, err = Parse("p.yaml", []byte("buffers: {x: 4}\nops: [{fill: {buffer: x, value: 0}}]\n"), CheckParamRange())
	require.NoError(t, err)
}
