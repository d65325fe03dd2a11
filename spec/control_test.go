package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

const loopSpec = `buffers:
  x: {size: 4 KiB, init: {value: 1}}
  y: 4 KiB
  flag: {size: 4, dtype: i32, init: {value: 1}}
  pick: {size: 4, dtype: i32}
ops:
  - {fill: {buffer: y, value: 0}, name: clear}
  - while: flag
    max: 1000
    name: refine
    body:
      - {launch: scale, args: {x: x, alpha: 0.5}}
      - {launch: set_flag, args: {flag: flag, x: x, threshold: 0.001}, block: 1}
  - {launch: set_flag, args: {flag: pick, x: x, threshold: 0.5}, block: 1}
  - if: pick
    then:
      - {launch: scale, args: {x: y, alpha: 2}, name: grow}
    else:
      - {copy: {from: x, to: y}}
outputs: [x, y]
`

func TestParseLoops(t *testing.T) {
	s, err := Parse("loop.yaml", []byte(loopSpec))
	require.NoError(t, err)
	g := s.Graph
	require.Len(t, g.Ops, 4)
	loop := g.Ops[1]
	assert.Equal(t, dag.While, loop.Kind)
	assert.Equal(t, "refine", loop.Name)
	assert.EqualValues(t, 1000, loop.Control.Max)
	assert.Empty(t, loop.Deps, "clear writes y, which the body does not touch")
	body := loop.Control.Body
	require.Len(t, body.Ops, 2)
	assert.Equal(t, "refine/scale2", body.Ops[0].Name, "made-up names in a body start with the loop's")
	assert.Equal(t, "refine/set_flag3", body.Ops[1].Name)
	assert.Same(t, dag.SetFlag, body.Ops[1].Launch.Kernel)

	branch := g.Ops[3]
	assert.Equal(t, dag.If, branch.Kind)
	require.Len(t, branch.Bodies(), 2)
	assert.Equal(t, "grow", branch.Control.Body.Ops[0].Name)
	assert.Equal(t, "if5/copy7", branch.Control.Else.Ops[0].Name)
	assert.Contains(t, branch.Deps, int32(2), "the branch reads the flag set_flag writes")

	// Every op of every body has a place.
	for _, name := range []string{"refine", "refine/scale2", "refine/set_flag3", "grow", "if5/copy7"} {
		p, ok := s.OpPos(name)
		require.True(t, ok, name)
		assert.Positive(t, p.Line, name)
	}
	p, _ := s.OpPos("refine/scale2")
	assert.Equal(t, 12, p.Line)
	assert.Equal(t, `op "refine/scale2"`, s.OpLabel("refine/scale2"))
	assert.Equal(t, "ops[2]", s.OpLabel("set_flag4"), "top-level ops keep their place in the ops list")
}

func TestLoopErrors(t *testing.T) {
	head := "buffers:\n  x: {size: 64}\n  h: {size: 64, placement: pinned}\n  flag: {size: 4, dtype: i32}\n  z: {size: 64, device: 1}\nops:\n"
	cases := []struct {
		name, ops string
		want      []string
	}{
		{"named op in body", "  - while: flag\n    name: w\n    body:\n      - {all_reduce: {view: x}, name: down}\n", []string{
			`10:22: op "down": a while body cannot hold a all_reduce: every rank issues its collectives in one order, which passes decided by each rank's own flag could break (move it before or after the while w)`}},
		{"collective in then", "  - if: flag\n    then: [{all_reduce: {view: x}}]\n", []string{
			`8:25: ops[0].then[0]: a if body cannot hold a all_reduce: every rank issues its collectives in one order, which passes decided by each rank's own flag could break (move it before or after the if ops[0])`}},
		{"other device", "  - while: flag\n    body: [{fill: {buffer: z, value: 0}}]\n", []string{
			`8:12: ops[0].body[0]: it runs on device 1 and the while ops[0] on device 0: a body runs on one device (move it before or after the while ops[0])`}},
		{"empty body", "  - while: flag\n    body: []\n", []string{
			`8:11: ops[0] body is empty (give it the ops it runs, or remove the while)`}},
		{"no body", "  - while: flag\n", []string{
			`7:5: ops[0] while needs a body (write body: [...], the ops the loop repeats)`}},
		{"no then", "  - if: flag\n    else: [{fill: {buffer: x, value: 0}}]\n", []string{
			`7:5: ops[0] if needs then (write then: [...], the ops run when the flag is set, and else: [...] if some run when it is not)`}},
		{"max too big", "  - while: flag\n    max: 2000000000000\n    body: [{fill: {buffer: x, value: 0}}]\n", []string{
			`8:10: ops[0] max 2000000000000 is out of range (bound the loop between 1 and 1099511627776 iterations, or leave max out)`}},
		{"max zero", "  - while: flag\n    max: 0\n    body: [{fill: {buffer: x, value: 0}}]\n", []string{
			`8:10: ops[0] max 0 is out of range (bound the loop between 1 and 1099511627776 iterations, or leave max out)`}},
		{"max on if", "  - if: flag\n    max: 3\n    then: [{fill: {buffer: x, value: 0}}]\n", []string{
			`8:5: unknown field "max" in ops[0] (use one of if, name, after, priority, cost, device, then, else)`}},
		{"unknown key", "  - while: flag\n    bdy: [{fill: {buffer: x, value: 0}}]\n", []string{
			`7:5: ops[0] while needs a body (write body: [...], the ops the loop repeats)`,
			`8:5: unknown field "bdy" in ops[0] (did you mean "body"?)`}},
		{"flag not i32", "  - while: x[0:4]\n    body: [{fill: {buffer: x, value: 0}}]\n", []string{
			`7:12: ops[0]: the flag x is f32, not i32 (declare x as i32)`}},
		{"after into a body", "  - while: flag\n    body: [{fill: {buffer: x, value: 0}, name: inner}]\n  - {fill: {buffer: x, value: 1}, after: inner}\n", []string{
			`9:42: ops[1]: after names op "inner", which is not in the same list of ops (name the while or if that holds it: ops after it wait for its whole body)`}},
		{"after out of a body", "  - {fill: {buffer: x, value: 1}, name: first}\n  - while: flag\n    body: [{fill: {buffer: x, value: 0}, after: first}]\n", []string{
			`9:49: ops[1].body[0]: after names op "first", which is not in the same list of ops (name ops of the same body; put the after on ops[1] for ops outside it)`}},
		{"wrong op in body of a wrong loop", "  - while: nope\n    body: [{fill: {buffer: nope, value: 0}}]\n", []string{
			`7:12: ops[0] while names unknown buffer "nope" (use one of x, h, flag, z)`,
			`8:28: ops[0].body[0] fill buffer names unknown buffer "nope" (use one of x, h, flag, z)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(head+c.ops))
			require.Error(t, err)
			var got []string
			for _, e := range Errors(err) {
				got = append(got, strings.TrimPrefix(e.Error(), "c.yaml:"))
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// nestedLoops is a spec whose loops nest depth deep.
func nestedLoops(depth int) string {
	var b strings.Builder
	b.WriteString("buffers:\n  x: 64\n  flag: {size: 4, dtype: i32, init: zeros}\nops:\n")
	indent := "  "
	for range depth {
		fmt.Fprintf(&b, "%s- while: flag\n%s  body:\n", indent, indent)
		indent += "    "
	}
	fmt.Fprintf(&b, "%s- {fill: {buffer: x, value: 0}}\n", indent)
	return b.String()
}

func TestNestingLimit(t *testing.T) {
	s, err := Parse("n.yaml", []byte(nestedLoops(MaxNesting)))
	require.NoError(t, err)
	depth := 0
	for g := s.Graph; len(g.Ops) > 0 && g.Ops[0].Kind == dag.While; g = g.Ops[0].Control.Body {
		depth++
	}
	assert.Equal(t, MaxNesting, depth)

	_, err = Parse("n.yaml", []byte(nestedLoops(MaxNesting+1)))
	require.Error(t, err)
	errs := Errors(err)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Msg, fmt.Sprintf("nest more than %d deep", MaxNesting))
	assert.Equal(t, 4+2*MaxNesting+3, errs[0].Pos.Line, "at the body that is one too deep: its first op")
}

// Ops of bodies count towards the spec's ops, and names made up in one
// body do not clash with the spec's.
func TestBodiesNameAndCount(t *testing.T) {
	src := "buffers: {x: 64, flag: {size: 4, dtype: i32, init: zeros}}\nops:\n" +
		"  - {fill: {buffer: x, value: 0}, name: w/fill1}\n"
	_, err := Parse("b.yaml", []byte(src))
	require.Error(t, err, "a spec cannot name an op as a body's made-up names are")

	src = "buffers: {x: 64, flag: {size: 4, dtype: i32, init: zeros}}\nops:\n" +
		"  - {fill: {buffer: x, value: 0}, name: fill1}\n" +
		"  - while: flag\n    name: w\n    body: [{fill: {buffer: x, value: 1}}, {fill: {buffer: x, value: 2}}]\n"
	s, err := Parse("b.yaml", []byte(src))
	require.NoError(t, err)
	var names []string
	s.Graph.Walk(func(o *dag.Op) { names = append(names, o.Name) })
	assert.Equal(t, []string{"fill1", "w", "w/fill2", "w/fill3"}, names)
}
