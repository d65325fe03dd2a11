package cuda

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestBodyKinds fails when an op kind has no entry in bodyKinds: adding a
// kind to dag means deciding whether a conditional node can hold it.
func TestBodyKinds(t *testing.T) {
	for _, k := range dag.OpKinds() {
		_, ok := bodyKinds[k]
		assert.True(t, ok, "bodyKinds has no entry for op kind %s", k)
	}
	assert.Len(t, bodyKinds, len(dag.OpKinds()), "entries for kinds dag does not have")
}

// TestCheckBody: a plan whose loop holds host work is refused when its
// session opens, before any driver is asked, naming each op and why.
func TestCheckBody(t *testing.T) {
	host := func(context.Context, [][]byte) error { return nil }
	b := dag.New()
	x := b.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
	y := b.Buffer("y", 64, dag.OnDevice(0), dag.Zeros())
	h := b.Buffer("h", 64, dag.PinnedHost(), dag.Zeros())
	flag := b.Buffer("flag", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
	b.While(flag.All(), func(body *dag.Builder) {
		body.Copy(y.All(), x.All(), dag.Name("d2d"))
		body.Copy(h.All(), x.All(), dag.Name("down"))
		body.Host(host, dag.In(h.All()), dag.Name("peek"))
		body.If(flag.All(), func(then *dag.Builder) {
			then.Task(func(context.Context, dag.TaskStream) error { return nil }, dag.InOut(x.All()), dag.Name("t"), dag.RunsOnCPU())
		}, nil, dag.Name("inner"))
	}, dag.Name("loop"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)

	_, err = executor.Open(context.Background(), &Backend{}, p)
	require.Error(t, err)
	list, ok := err.(interface{ Unwrap() error })
	require.True(t, ok, "%v", err)
	errs, ok := list.Unwrap().(dag.ErrorList)
	require.True(t, ok, "the ops refused are a dag.ErrorList: %v", err)
	got := map[string]string{}
	for _, e := range errs {
		got[e.Op] = e.Msg + " (" + e.Hint + ")"
	}
	assert.Equal(t, map[string]string{
		"down": "it copies pinned host memory: a body copies within device memory only on the cuda backend (move it before or after the while loop)",
		"peek": "a while body cannot hold a host: a CUDA conditional node holds only kernels, fills, copies in device memory and further loops and branches (move it before or after the while loop)",
		"t":    "a if body cannot hold a task: a CUDA conditional node holds only kernels, fills, copies in device memory and further loops and branches (move it before or after the if inner)",
	}, got)
}
