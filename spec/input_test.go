package spec

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// problems parses src and returns its errors as "line:col: message (hint)".
func problems(t *testing.T, src string) []string {
	t.Helper()
	s, err := Parse("t.yaml", []byte(src))
	require.NotNil(t, s)
	var got []string
	for _, e := range Errors(err) {
		got = append(got, strings.TrimPrefix(e.Error(), "t.yaml:"))
	}
	return got
}

// YAML as users write it: a byte-order mark, and numbers as YAML 1.2's
// core schema reads them wherever a number is expected.
func TestYAMLAsWritten(t *testing.T) {
	cases := []struct {
		name, value string
		want        float64
	}{
		{"small exponent", "1e-3", 1e-3},
		{"large exponent", "1e20", 1e20},
		{"signed exponent", "-2.5E+3", -2500},
		{"infinity", ".inf", math.Inf(1)},
		{"negative infinity", "-.Inf", math.Inf(-1)},
		{"hex", "0x1F", 31},
		{"octal", "0o17", 15},
		{"leading zero is decimal", "017", 17},
		{"plain", "42", 42},
		{"float", "2.5", 2.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "\ufeffbuffers:\n  x: {dtype: f64, count: 4, init: {value: " + c.value + "}}\n  y: {dtype: f32, count: 4, init: zeros}\nops:\n  - {fill: {buffer: x, value: " + c.value + "}}\n  - {launch: scale, args: {x: y, alpha: " + c.value + "}}\n"
			s, err := Parse("n.yaml", []byte(src))
			require.NoError(t, err)
			assert.Equal(t, c.want, s.Graph.Buffers[0].Init.Value)
			assert.Equal(t, c.want, s.Graph.Ops[0].FillValue)
			assert.Equal(t, c.want, s.Graph.Ops[1].Launch.Args[1].Float)
		})
	}
	t.Run("nan", func(t *testing.T) {
		s, err := Parse("n.yaml", []byte("buffers: {x: {dtype: f32, count: 4, init: {value: .nan}}}\nops: [{fill: {buffer: x, value: .NaN}}]\n"))
		require.NoError(t, err)
		assert.True(t, math.IsNaN(s.Graph.Buffers[0].Init.Value))
	})
	t.Run("integers written as floats and in other bases", func(t *testing.T) {
		s, err := Parse("n.yaml", []byte("buffers:\n  x: {dtype: u8, count: 1e3, init: zeros}\n  y: {size: 0x400}\n  z: 2 KiB\nops:\n  - copy: {from: \"x[0:1000]\", to: \"y[0:1000]\"}\n    cost: 0\n  - {launch: iota, args: {x: z, start: 0o17}}\n"))
		require.NoError(t, err)
		assert.Equal(t, int64(1000), s.Graph.Buffers[0].Size)
		assert.Equal(t, int64(1024), s.Graph.Buffers[1].Size)
		assert.Equal(t, int64(2048), s.Graph.Buffers[2].Size, "sizes with units keep working")
	})
	errs := []struct{ name, src string }{
		{"fraction as count", "buffers: {x: {dtype: u8, count: 1.5}}\nops: [{alloc: x}]\n"},
		{"huge count", "buffers: {x: {dtype: u8, count: 1e30}}\nops: [{alloc: x}]\n"},
		{"huge integer", "buffers: {x: {dtype: u8, count: 99999999999999999999}}\nops: [{alloc: x}]\n"},
		{"infinite size", "buffers: {x: {size: .inf}}\nops: [{alloc: x}]\n"},
	}
	want := []string{
		`1:33: buffer "x" count must be an integer, not the number 1.5`,
		`1:33: buffer "x" count 1e30 is too large`,
		`1:33: buffer "x" count 99999999999999999999 is too large`,
		`1:21: buffer "x" size .inf is too large`,
	}
	for i, c := range errs {
		assert.Equal(t, []string{want[i]}, problems(t, c.src), c.name)
	}
}

// Every problem of a spec in one round: field errors, unknown names and
// the graph's own problems (a cycle) together.
func TestOneRound(t *testing.T) {
	src := `run: {backend: gpu, repeat: 2}
buffers:
  x: 16
  t: {size: 16, temporary: true}
ops:
  - fill: {buffer: x, value: 1}
    name: a
    after: b
  - fill: {buffer: x, value: 2}
    name: b
    priorty: 1
  - fill: {buffer: nope, value: 0}
  - alloc: t
  - {fill: {buffer: x, value: 3}, cost: 25h}
`
	s, err := Parse("t.yaml", []byte(src))
	require.Error(t, err)
	assert.Equal(t, "cuda", s.Run.Backend, "gpu means cuda")
	assert.Equal(t, []string{
		`8:12: op "a": dependency cycle: a -> b -> a (remove one of these after edges or reorder the operations)`,
		`11:5: unknown field "priorty" in op "b" (did you mean "priority"?)`,
		`12:20: ops[2] fill buffer names unknown buffer "nope" (use one of x, t)`,
		`14:41: ops[4] cost 25h0m0s is more than 24h (give an estimate of at most 24h)`,
	}, problems(t, src))

	var list ErrorList
	require.ErrorAs(t, err, &list)
	assert.Len(t, list, 4)
	assert.Equal(t, err.Error(), list.Error())
}

func TestStaticChecks(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"temporary left allocated across repeats", "run: {repeat: 2}\nbuffers:\n  t: {size: 16, temporary: true}\nops:\n  - alloc: t\n", []string{
			`5:5: ops[0] allocates temporary t and nothing frees it, but run.repeat is 2: the next run would allocate it again (add free: t after its last use, or drop the alloc to let dagrun place both)`}},
		{"temporary left allocated under replay", "run: {graph: true}\nbuffers:\n  t: {size: 16, temporary: true}\nops:\n  - {alloc: t, name: get}\n", []string{
			`5:5: op "get" allocates temporary t and nothing frees it, but run.graph replays the graph: the next run would allocate it again (add free: t after its last use, or drop the alloc to let dagrun place both)`}},
		{"cuda kernel on the cpu backend", "run: {backend: cpu}\nbuffers: {x: 16}\nkernels:\n  k: {cuda: 'extern \"C\" __global__ void k(float* x) {}', params: [{name: x, type: buffer}]}\nops:\n  - {launch: k, args: [x]}\n", []string{
			`6:14: ops[0] launches kernel k, which is cuda code, but run.backend is cpu: the cpu backend runs only the builtins (set run.backend: cuda (or auto), or launch a builtin kernel)`}},
		{"misspelt backend", "run: {backend: cdua}\nbuffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n", []string{
			`1:16: run.backend "cdua" is not valid (did you mean "cuda"?)`}},
		{"unknown backend", "run: {backend: quantum}\nbuffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n", []string{
			`1:16: run.backend "quantum" is not valid (use auto, cpu or cuda (gpu means cuda))`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, problems(t, c.src))
		})
	}
	for _, alias := range []string{"gpu", "GPU", "nvidia", "CUDA"} {
		s, err := Parse("t.yaml", []byte("run: {backend: "+alias+"}\nbuffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n"))
		require.NoError(t, err, alias)
		assert.Equal(t, "cuda", s.Run.Backend, alias)
	}
}

func TestOpLabel(t *testing.T) {
	s, err := Parse("t.yaml", []byte("buffers: {x: 16}\nops:\n  - {fill: {buffer: x, value: 1}, name: first}\n  - {fill: {buffer: x, value: 2}}\n"))
	require.NoError(t, err)
	assert.Equal(t, `op "first"`, s.OpLabel("first"))
	assert.Equal(t, "ops[1]", s.OpLabel(s.Graph.Ops[1].Name))
	assert.Equal(t, dag.Fill, s.Graph.Ops[1].Kind)
}

func TestErrorList(t *testing.T) {
	a := &Error{Pos: Position{"f", 3, 1}, Msg: "c"}
	b := &Error{Pos: Position{"f", 1, 2}, Msg: "a", Hint: "h"}
	l := ErrorList{a, b}
	l.Sort()
	assert.Equal(t, ErrorList{b, a}, l)
	assert.Equal(t, "f:1:2: a (h)\nf:3:1: c", l.Error())
	assert.NoError(t, ErrorList(nil).Err())
	assert.Equal(t, []*Error{b, a}, Errors(l.Err()))
	var e *Error
	require.ErrorAs(t, l.Err(), &e)
	assert.Equal(t, b, e)
}
