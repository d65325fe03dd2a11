package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deepFlow is a spec whose ops hold a flow sequence nested depth deep.
func deepFlow(depth int) []byte {
	return []byte("buffers: {x: 16}\nops: " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n")
}

// deepBlock is the same nesting written as block mappings.
func deepBlock(depth int) []byte {
	var b strings.Builder
	b.WriteString("buffers:\n")
	for i := range depth {
		b.WriteString(strings.Repeat(" ", i+1))
		fmt.Fprintf(&b, "k%d:\n", i)
	}
	b.WriteString("ops: []\n")
	return []byte(b.String())
}

// aliasBomb is a "billion laughs": each level a list of ten aliases of
// the level before.
func aliasBomb(levels int) []byte {
	var b strings.Builder
	b.WriteString("a0: &a0 [{fill: {buffer: x, value: 1}}]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, "buffers: {x: 16}\nops: *a%d\n", levels)
	return []byte(b.String())
}

// aliasFanOut repeats one op with a long after list n times by alias:
// reading it would visit n times the op's nodes.
func aliasFanOut(n int) []byte {
	var b strings.Builder
	b.WriteString("buffers: {x: 16}\nops:\n  - &op {fill: {buffer: x, value: 1}, after: [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("a")
	}
	b.WriteString("]}\n")
	for range n {
		b.WriteString("  - *op\n")
	}
	return []byte(b.String())
}

// longName is a spec that names an unknown buffer with a name n bytes
// long, close to a declared one of that length.
func longName(n int) []byte {
	name := strings.Repeat("b", n)
	return []byte("buffers: {" + name + ": 16}\nops: [{fill: {buffer: " + name[1:] + "c, value: 1}}]\n")
}

func TestHostile(t *testing.T) {
	cases := []struct {
		name string
		src  []byte
		want string // the first error, without the file
	}{
		{"deep flow", deepFlow(5000), `2:69: the spec is nested more than 64 levels deep (a spec needs a few levels; flatten the data)`},
		{"deeper than the parser takes", deepFlow(20000), `2:1: YAML: exceeded max depth of 10000`},
		{"deep block", deepBlock(100), `64:64: the spec is nested more than 64 levels deep (a spec needs a few levels; flatten the data)`},
		{"billion laughs", aliasBomb(9), `1:1: unknown field "a0" in the spec (use one of params, run, buffers, kernels, ops, outputs)`},
		{"alias fan-out", aliasFanOut(1000), `aliases expand to more than 1048576 nodes (expand the aliases by hand)`},
		{"long name", longName(300), `1:11: buffer name "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb..." is 300 characters long (use at most 256 characters)`},
		{"huge size", []byte("buffers: {x: 9999999 TiB}\nops: [{fill: {buffer: x, value: 1}}]\n"), `1:14: buffer "x" size: size "9999999 TiB" is too large (` + sizeHint + `)`},
		{"huge count", []byte("buffers: {x: {dtype: f64, count: 2305843009213693952}}\nops: [{fill: {buffer: x, value: 1}}]\n"), `1:34: buffer "x" count 2305843009213693952 is too large`},
		{"view overflow", []byte("buffers: {x: 16}\nops: [{launch: scale, args: {x: {buffer: x, offset: 9223372036854775807, size: 2}, alpha: 1}}]\n"), `2:33: ops[0] argument x range overflows`},
		{"huge cost", []byte("buffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}, cost: 1500000h}]\n"), `2:43: ops[0] cost 1500000h0m0s is more than 24h (give an estimate of at most 24h)`},
		{"overflowing cost", []byte("buffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}, cost: 9999999999h}]\n"), `2:43: ops[0] cost: duration "9999999999h" is not valid (` + durationHint + `)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse("h.yaml", c.src)
			require.NotNil(t, s)
			errs := Errors(err)
			require.NotEmpty(t, errs)
			if strings.HasPrefix(c.want, "aliases") {
				found := false
				for _, e := range errs {
					found = found || strings.HasSuffix(e.Error(), c.want)
				}
				assert.True(t, found, "%v", err)
				return
			}
			assert.Equal(t, c.want, strings.TrimPrefix(errs[0].Error(), "h.yaml:"))
		})
	}
}

func TestSpecTooLarge(t *testing.T) {
	s, err := Parse("big.yaml", make([]byte, MaxSpecBytes+1))
	require.NotNil(t, s)
	assert.EqualError(t, err, fmt.Sprintf("big.yaml:1:1: the spec is %d bytes, more than %d (split it, or generate it in smaller parts)", MaxSpecBytes+1, MaxSpecBytes))
}

// A misspelt name far longer than any candidate is not compared at all;
// one of the same length is, in linear space.
func TestSuggestBounded(t *testing.T) {
	long := strings.Repeat("x", 45000)
	assert.Equal(t, "use one of a, b", suggest(long, []string{"a", "b"}))
	name := strings.Repeat("ab", 30)
	assert.Equal(t, fmt.Sprintf("did you mean %q?", name), suggest(name[:59]+"c", []string{name, "a"}))
	r := reader{suggestBudget: 10}
	assert.Equal(t, "use one of size", r.suggest("szie", []string{"size"}), "no budget left, no comparison")
}
