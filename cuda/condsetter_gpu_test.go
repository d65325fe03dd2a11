//go:build cgo

package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// condGraph is a graph of TestCondInLastKernelGPU: its loops, and whether
// each one's body ends in a set_flag that sets its condition.
type condGraph struct {
	g     *dag.Graph
	loops map[*dag.Op]bool
}

// countDown declares in body: counter -= 1, then set_flag(flag, counter,
// 0.5) named name: the flag stays set while counter is above 0.5.
func countDown(body *dag.Builder, counter, one, flag *dag.Buffer, name string) {
	body.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(1), counter, dag.In(one.All()), -1.0, dag.Name(name+"_dec"))
	body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(counter.All()), 0.5, dag.Name(name))
}

// condGraphs are loops whose condition rides in their body's last kernel
// (and, for comparison, some whose does not), by name: trips counted by
// an f32 counter, work on x and y to show each iteration ran.
func condGraphs() map[string]func(t *testing.T) condGraph {
	build := func(fill func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool) func(t *testing.T) condGraph {
		return func(t *testing.T) condGraph {
			b := dag.New()
			x := b.Buffer("x", 64*4, dag.Value(1))
			y := b.Buffer("y", 64*4, dag.Value(1))
			one := b.Buffer("one", 4, dag.Value(1))
			loops := fill(b, x, y, one)
			g, err := b.Build()
			require.NoError(t, err)
			return condGraph{g, loops}
		}
	}
	// counted is a loop in b of trips iterations (at most most) around
	// work, its buffers declared in top (b, or the graph around b).
	counted := func(top, b *dag.Builder, one *dag.Buffer, name string, trips float64, most int64, work func(body *dag.Builder)) *dag.Op {
		counter := top.Buffer(name+"_count", 4)
		flag := top.Buffer(name+"_flag", 4, dag.Of(dag.I32))
		b.Fill(counter.All(), trips, dag.Name(name+"_reset"))
		b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(counter.All()), 0.5, dag.Name(name+"_arm"))
		return b.While(flag.All(), func(body *dag.Builder) {
			work(body)
			countDown(body, counter, one, flag, name+"_again")
		}, dag.Name(name), dag.AtMost(most))
	}
	return map[string]func(t *testing.T) condGraph{
		"five trips": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			return map[*dag.Op]bool{counted(b, b, one, "loop", 5, 0, func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
			}): true}
		}),
		"zero trips": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			return map[*dag.Op]bool{counted(b, b, one, "loop", 0, 3, func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
			}): true}
		}),
		"max reached": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			return map[*dag.Op]bool{counted(b, b, one, "loop", 100, 4, func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
			}): true}
		}),
		"max just enough": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			return map[*dag.Op]bool{counted(b, b, one, "loop", 4, 4, func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
			}): true}
		}),
		"work beside on other streams": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			return map[*dag.Op]bool{counted(b, b, one, "loop", 3, 0, func(body *dag.Builder) {
				for i := range int64(4) {
					body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x.Slice(i*64, 64), 2.0)
					body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), y.Slice(i*64, 64), 0.5)
				}
			}): true}
		}),
		"wide set_flag launch, f64 x": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			x64 := b.Buffer("x64", 8, dag.Of(dag.F64), dag.Value(1))
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			loop := b.While(flag.All(), func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
				body.Fill(x64.All(), 0)
				body.Launch(dag.SetFlag, dag.Grid1(4), dag.Threads(64), dag.Out(flag.All()), dag.In(x64.All()), 0.5, dag.Name("again"))
			}, dag.Name("loop"))
			return map[*dag.Op]bool{loop: true}
		}),
		"nested": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			var inner *dag.Op
			outer := counted(b, b, one, "outer", 3, 0, func(body *dag.Builder) {
				inner = counted(b, body, one, "inner", 2, 5, func(ib *dag.Builder) {
					ib.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
				})
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), y, 0.5)
			})
			return map[*dag.Op]bool{outer: true, inner: true}
		}),
		"if/else inside": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			pick := b.Buffer("pick", 4, dag.Of(dag.I32), dag.Zeros())
			return map[*dag.Op]bool{counted(b, b, one, "loop", 4, 0, func(body *dag.Builder) {
				body.If(pick.All(), func(then *dag.Builder) {
					then.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
					then.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), y, 0.5)
				}, func(els *dag.Builder) {
					els.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), y, 2.0)
				}, dag.Name("branch"))
				// pick alternates: else, then, else, then.
				body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(pick.All()), dag.In(y.Slice(0, 4)), 1.5, dag.Name("pick_next"))
			}): true}
		}),
		"flag read after set_flag (condition kernel)": build(func(b *dag.Builder, x, y, one *dag.Buffer) map[*dag.Op]bool {
			seen := b.Buffer("seen", 4, dag.Of(dag.I32), dag.Zeros())
			counter := b.Buffer("count", 4, dag.Value(3))
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			loop := b.While(flag.All(), func(body *dag.Builder) {
				body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
				countDown(body, counter, one, flag, "again")
				body.Copy(seen.All(), flag.All(), dag.Name("peek"))
			}, dag.Name("loop"))
			return map[*dag.Op]bool{loop: false}
		}),
	}
}

// runOrFail runs p on be eagerly, or captured and replayed, and returns
// every persistent buffer and the run's error (the replay's: the capture
// must not shadow it).
func runOrFail(t *testing.T, ctx context.Context, be device.Backend, p *planner.Plan, replay bool, check func(device.Session)) (map[string][]byte, error) {
	s, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	if check != nil {
		check(s.Device())
	}
	var runErr error
	if replay {
		gr, err := s.Capture(ctx)
		require.NoError(t, err)
		runErr = gr.Run(ctx)
	} else {
		runErr = s.Run(ctx)
	}
	out := map[string][]byte{}
	for _, buf := range p.Graph.Buffers {
		if !buf.Temporary {
			data, rerr := s.Read(buf)
			require.NoError(t, rerr)
			out[buf.Name] = data
		}
	}
	return out, runErr
}

// TestCondGraphsOnCPU checks TestCondInLastKernelGPU's graphs where no
// GPU is needed: which loops may set their condition in their last
// kernel, and what the cpu backend leaves, eagerly and replayed, that
// cuda must leave too; runOrFail returns a replay's error as it does an
// eager run's.
func TestCondGraphsOnCPU(t *testing.T) {
	cb := cpu.New()
	defer cb.Close()
	wantX := map[string]float32{"five trips": 32, "zero trips": 1, "max reached": 16, "max just enough": 16,
		"work beside on other streams": 8, "wide set_flag launch, f64 x": 2, "nested": 64, "if/else inside": 4,
		"flag read after set_flag (condition kernel)": 8}
	for name, mk := range condGraphs() {
		t.Run(name, func(t *testing.T) {
			cg := mk(t)
			for loop, fused := range cg.loops {
				assert.Equal(t, fused, loop.CondSetter() != nil, loop.Name)
			}
			p, err := planner.New(cg.g, planner.Streams(3))
			require.NoError(t, err)
			require.NoError(t, verify.Verify(p))
			for _, replay := range []bool{false, true} {
				got, err := runOrFail(t, context.Background(), cb, p, replay, nil)
				if name == "max reached" {
					require.Error(t, err, "replayed %v", replay)
					assert.Contains(t, err.Error(), `op "loop": the loop ran its 4 iterations (max) and its flag is still set`, "replayed %v", replay)
				} else {
					require.NoError(t, err, "replayed %v", replay)
				}
				assert.Equal(t, f32bytes(wantX[name]), got["x"][:4], "replayed %v", replay)
			}
		})
	}
}

// TestCondInLastKernelGPU: a loop whose body ends in a set_flag of its own
// flag lets that kernel set the condition (no condition kernel), and
// gives what the cpu backend gives, eagerly and replayed: trips, zero
// trips, max reached (the same error) and not, nested loops, branches
// and streams in the body; a loop whose flag is read after its set_flag
// keeps its condition kernel and gives the same too.
func TestCondInLastKernelGPU(t *testing.T) {
	b := gpuBackend(t)
	cb := cpu.New()
	defer cb.Close()
	ctx := context.Background()
	for name, mk := range condGraphs() {
		for _, streams := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/streams=%d", name, streams), func(t *testing.T) {
				cg := mk(t)
				for loop, fused := range cg.loops {
					assert.Equal(t, fused, loop.CondSetter() != nil, "%s: dag.Op.CondSetter", loop.Name)
				}
				p, err := planner.New(cg.g, planner.Streams(streams))
				require.NoError(t, err)
				require.NoError(t, verify.Verify(p))
				check := func(d device.Session) {
					se, ok := d.(*Session)
					require.True(t, ok, "a cuda session, not %T", d)
					for loop, fused := range cg.loops {
						c := se.ctl.controls[opSlot(loop)]
						require.NotNil(t, c, "%s has its bodies", loop.Name)
						assert.Equal(t, fused, c.setter != nil, "%s: the condition in the body's last kernel", loop.Name)
						assert.Equal(t, fused, c.next == nil, "%s: no condition kernel", loop.Name)
					}
				}
				want, wantErr := runOrFail(t, ctx, cb, p, false, nil)
				for _, replay := range []bool{false, true} {
					got, err := runOrFail(t, ctx, b, p, replay, check)
					if wantErr == nil {
						require.NoError(t, err, "replayed %v", replay)
					} else {
						require.Error(t, err, "replayed %v", replay)
						assert.Contains(t, err.Error(), "the loop ran its 4 iterations (max) and its flag is still set")
						assert.Contains(t, wantErr.Error(), "the loop ran its 4 iterations (max) and its flag is still set")
					}
					assert.Equal(t, want, got, "replayed %v", replay)
				}
			})
		}
	}
}

// TestRandomCondInLastKernelGPU runs dagtest's random graphs, whose loops
// end in a set_flag of their own flag (nested, with branches, some of no
// trips), on cuda eagerly and replayed: every buffer is what the cpu
// backend leaves (dagtest checks the cpu backend against the graph's
// reference).
func TestRandomCondInLastKernelGPU(t *testing.T) {
	b := gpuBackend(t)
	cb := cpu.New()
	defer cb.Close()
	ctx := context.Background()
	for seed := range int64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rc := dagtest.RandomControl(seed, 10, 2)
			rc.Graph.Walk(func(op *dag.Op) {
				if op.Kind == dag.While {
					require.NotNil(t, op.CondSetter(), "%s ends in its set_flag", op.Name)
				}
			})
			p, err := planner.New(rc.Graph, planner.Streams(1+int(seed%3)))
			require.NoError(t, err)
			require.NoError(t, verify.Verify(p))
			want := runAndRead(t, ctx, cb, p, false)
			require.Equal(t, want, runAndRead(t, ctx, b, p, false), "eager on cuda")
			require.Equal(t, want, runAndRead(t, ctx, b, p, true), "replayed on cuda")
		})
	}
}

// TestSetFlagCondKernels: the kernels that set a loop's condition in its
// set_flag take set_flag's arguments first, as the builtin's launch holds
// them (setFlagSlots: each buffer a pointer and a count, then the
// threshold), for both of set_flag's entries.
func TestSetFlagCondKernels(t *testing.T) {
	n := 0
	for _, p := range dag.SetFlag.Params {
		n++
		if p.Kind == dag.BufferParam {
			n++
		}
	}
	assert.Equal(t, setFlagSlots, n)
	for _, tc := range []struct {
		k      *dag.Kernel
		setter *dag.Kernel
		x      string
	}{{dag.SetFlag, condSetFlag, "float"}, {dag.SetFlag.Variant(dag.F64), condSetFlag64, "double"}} {
		assert.Contains(t, builtinSource, `extern "C" __global__ void `+tc.k.EntryName()+`(int* flag, i64 nflag, const `+tc.x+`* x, i64 nx, double threshold)`)
		assert.Contains(t, condSource, `extern "C" __global__ void `+tc.setter.EntryName()+`(int* __restrict__ flag, long long nflag, const `+tc.x+`* __restrict__ x, long long nx,
		double threshold, cudaGraphConditionalHandle h, dr_loop* __restrict__ loop, unsigned long long max, unsigned long long pause)`)
		assert.Contains(t, condKernels(), tc.setter)
	}
}

// TestCondSetterMaxStateGPU runs a loop that reaches its max with its
// condition in its last kernel in the ways TestCondInLastKernelGPU does,
// one change at a time, and, where a run reports no error, says what the
// kernel was given and left: its arguments after set_flag's (handle,
// state, max) and the loop's state (count, overflow).
func TestCondSetterMaxStateGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		streams  int
		cpuFirst bool
		replay   bool
	}{{"default", 0, false, false}, {"streams=1", 1, false, false}, {"cpu first", 0, true, false}, {"replayed", 0, false, true}, {"replayed, streams=1", 1, false, true}, {"condition kernel, replayed", -1, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cg := condGraphs()["max reached"](t)
			if tc.streams < 0 { // a loop that keeps its condition kernel
				bd := dag.New()
				x := bd.Buffer("x", 64*4, dag.Value(1))
				flag := bd.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
				loop := bd.While(flag.All(), func(body *dag.Builder) {
					body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0)
				}, dag.Name("loop"), dag.AtMost(4))
				g, err := bd.Build()
				require.NoError(t, err)
				cg = condGraph{g, map[*dag.Op]bool{loop: false}}
				tc.streams = 0
			}
			p, err := planner.New(cg.g, planner.Streams(tc.streams))
			require.NoError(t, err)
			if tc.cpuFirst {
				_, err := executor.Execute(ctx, cpu.New(), p)
				require.Error(t, err)
			}
			s, err := executor.Open(ctx, b, p)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			if tc.replay {
				g, cerr := s.Capture(ctx)
				require.NoError(t, cerr)
				defer func() { require.NoError(t, g.Close()) }()
				err = g.Run(ctx)
			} else {
				err = s.Run(ctx)
			}
			if err != nil {
				assert.Contains(t, err.Error(), "the loop ran its 4 iterations (max) and its flag is still set")
				return
			}
			se := s.Device().(*Session)
			for loop := range cg.loops {
				c := se.ctl.controls[opSlot(loop)]
				require.NotNil(t, c)
				var st [loopStateBytes]byte
				require.NoError(t, se.ctl.drv.dtoh(c.dev.ctx, st[:], c.state))
				var slots []uint64
				if c.setFlag != nil {
					for _, v := range unsafe.Slice(c.setFlag.slots, c.setFlag.nslots) {
						slots = append(slots, uint64(v))
					}
				}
				t.Errorf("%s: no error; state at %#x: count %d, overflow %d; max %d; setFlag slots %#x",
					loop.Name, uint64(c.state), binary.LittleEndian.Uint64(st[:8]), binary.LittleEndian.Uint64(st[8:]), loop.Control.Max, slots)
			}
			x, err := s.Read(cg.g.Buffers[0])
			require.NoError(t, err)
			t.Logf("x[0] = %v", dag.ElemValue(x, dag.F32))
		})
	}
}
