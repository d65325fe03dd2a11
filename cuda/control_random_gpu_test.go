//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// randomLoops is a graph of random work around loops and branches: each
// loop counts a random number of iterations (dagtest.Counter) around a
// body of random scales and fills of slices of x, some bodies holding a
// branch on a flag that earlier work set, some loops nested.
func randomLoops(seed uint64) *dag.Graph {
	r := rand.New(rand.NewPCG(seed, 7))
	b := dag.New()
	const slices = 8
	x := b.Buffer("x", slices*1024*4, dag.Value(1))
	pick := b.Buffer("pick", 4, dag.Of(dag.I32), dag.Zeros())
	slice := func() dag.View { i := int64(r.IntN(slices)); return x.Slice(i*4096, 4096) }
	var work func(body *dag.Builder, depth int, name string)
	work = func(body *dag.Builder, depth int, name string) {
		for i := range 1 + r.IntN(4) {
			n := fmt.Sprintf("%s_%d", name, i)
			switch r.IntN(6) {
			case 0:
				body.Fill(slice(), float64(r.IntN(5)), dag.Name(n))
			case 1:
				if depth < 2 {
					body.If(pick.All(), func(then *dag.Builder) { work(then, depth+1, n+"t") },
						func(els *dag.Builder) {
							if r.IntN(2) == 0 {
								work(els, depth+1, n+"e")
							}
						}, dag.Name(n))
					continue
				}
				fallthrough
			case 2:
				if depth < 2 {
					c := dagtest.NewCounter(b, n+"_flag", 1+r.IntN(4))
					c.Arm(body)
					body.While(c.Flag.All(), func(in *dag.Builder) {
						work(in, depth+1, n+"w")
						c.Step(in)
					}, dag.Name(n))
					continue
				}
				fallthrough
			default:
				body.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), slice(), 1+float64(r.IntN(3))/4, dag.Name(n))
			}
		}
	}
	b.Fill(pick.All(), float64(r.IntN(2)), dag.Name("pick"))
	work(b, 0, "top")
	c := dagtest.NewCounter(b, "outer", 2+r.IntN(3))
	c.Arm(b)
	b.While(c.Flag.All(), func(body *dag.Builder) {
		work(body, 1, "outer")
		c.Step(body)
	}, dag.Name("outer"))
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	return g
}

// TestRandomLoopsGPU runs random graphs with loops and branches on cuda,
// eagerly and replayed, and on the cpu backend: every buffer is equal.
func TestRandomLoopsGPU(t *testing.T) {
	b := gpuBackend(t)
	cb := cpu.New()
	defer cb.Close()
	ctx := context.Background()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := randomLoops(seed)
			p, err := planner.New(g, planner.Streams(1+int(seed%4)))
			require.NoError(t, err)
			require.NoError(t, verify.Verify(p))
			want := runAndRead(t, ctx, cb, p, false)
			require.Equal(t, want, runAndRead(t, ctx, b, p, false), "eager on cuda")
			require.Equal(t, want, runAndRead(t, ctx, b, p, true), "replayed on cuda")
		})
	}
}

// runAndRead runs p on be (eagerly, or captured and replayed twice) and
// returns every persistent buffer.
func runAndRead(t *testing.T, ctx context.Context, be device.Backend, p *planner.Plan, replay bool) map[string][]byte {
	s, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	if replay {
		gr, err := s.Capture(ctx)
		require.NoError(t, err)
		require.NoError(t, gr.Run(ctx))
	} else {
		require.NoError(t, s.Run(ctx))
	}
	out := map[string][]byte{}
	for _, buf := range p.Graph.Buffers {
		if !buf.Temporary {
			data, err := s.Read(buf)
			require.NoError(t, err)
			out[buf.Name] = data
		}
	}
	return out
}
