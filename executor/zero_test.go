package executor_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/trace"
)

// TestZeroValuesWorkOrFailAtOnce calls the methods of the zero value of
// every exported type with methods in executor, cpu, cuda, planner and
// trace: each returns within a second, without a panic. Those that must
// refuse (a session nobody opened) must say so with an error.
func TestZeroValuesWorkOrFailAtOnce(t *testing.T) {
	ctx := context.Background()
	g := &dag.Graph{}
	op := &dag.Op{Name: "x"}
	buf := &dag.Buffer{Name: "b"}
	tmp := filepath.Join(t.TempDir(), "model.json")
	mustErr := func(err error) error {
		if err == nil {
			return fmt.Errorf("no error from a zero value")
		}
		return nil
	}
	ignore := func(error) error { return nil }
	cases := cudaZeroCases(ctx, g, op, buf, mustErr, ignore)
	for name, call := range map[string]func() error{
		"executor.Session.Run":     func() error { return mustErr((&executor.Session{}).Run(ctx)) },
		"executor.Session.Read":    func() error { _, err := (&executor.Session{}).Read(buf); return mustErr(err) },
		"executor.Session.Write":   func() error { return mustErr((&executor.Session{}).Write(buf, nil)) },
		"executor.Session.Capture": func() error { _, err := (&executor.Session{}).Capture(ctx); return mustErr(err) },
		"executor.Session.Spans":   func() error { (&executor.Session{}).Spans(); return nil },
		"executor.Session.Device":  func() error { (&executor.Session{}).Device(); return nil },
		"executor.Session.Unfused": func() error { (&executor.Session{}).Unfused(); return nil },
		"executor.Session.Close":   func() error { return ignore((&executor.Session{}).Close()) },
		"executor.Graph.Launch":    func() error { return mustErr((&executor.Graph{}).Launch(ctx)) },
		"executor.Graph.Sync":      func() error { return mustErr((&executor.Graph{}).Sync(ctx)) },
		"executor.Graph.Run":       func() error { return mustErr((&executor.Graph{}).Run(ctx)) },
		"executor.Graph.Update":    func() error { return mustErr((&executor.Graph{}).Update(ctx)) },
		"executor.Graph.Stats":     func() error { (&executor.Graph{}).Stats(); return nil },
		"executor.Graph.Close":     func() error { return ignore((&executor.Graph{}).Close()) },
		"executor.MemoryError":     func() error { _ = (&executor.MemoryError{}).Error(); return nil },
		"executor.MemoryNeed":      func() error { _ = executor.MemoryNeed{}.Bytes(); return nil },
		"executor.Execute(zero cpu.Backend)": func() error {
			// The zero cpu.Backend is a backend with the default options.
			bld := dag.New()
			x := bld.Buffer("x", 16, dag.Zeros())
			bld.Fill(x.All(), 2)
			g, err := bld.Build()
			if err != nil {
				return err
			}
			p, err := planner.New(g)
			if err != nil {
				return err
			}
			out, err := executor.Execute(ctx, &cpu.Backend{}, p)
			if err == nil && len(out[x]) != 16 {
				err = fmt.Errorf("got %d bytes of x", len(out[x]))
			}
			return err
		},
		"executor.Execute(empty plan)": func() error {
			_, err := executor.Execute(ctx, &cpu.Backend{}, &planner.Plan{})
			return mustErr(err)
		},

		"cpu.Backend.Open":      func() error { _, err := (&cpu.Backend{}).Open(ctx, g); return ignore(err) },
		"cpu.Backend.Sessions":  func() error { (&cpu.Backend{}).Sessions(); return nil },
		"cpu.Backend.Memory":    func() error { _, _, err := (&cpu.Backend{}).FreeMemory(0); return ignore(err) },
		"cpu.Backend.Close":     func() error { return ignore((&cpu.Backend{}).Close()) },
		"cpu.Session.NewStream": func() error { return mustErr((&cpu.Session{}).NewStream(0, 0)) },
		"cpu.Session.NewEvent":  func() error { return mustErr((&cpu.Session{}).NewEvent()) },
		"cpu.Session.Record":    func() error { return mustErr((&cpu.Session{}).Record(0, 0)) },
		"cpu.Session.Wait":      func() error { return mustErr((&cpu.Session{}).Wait(0, 0)) },
		"cpu.Session.Run":       func() error { return mustErr((&cpu.Session{}).Run(0, op)) },
		"cpu.Session.Delay":     func() error { return mustErr((&cpu.Session{}).Delay(0, time.Millisecond)) },
		"cpu.Session.Fail":      func() error { return mustErr((&cpu.Session{}).Fail(0, op, io.EOF)) },
		"cpu.Session.Sync":      func() error { return mustErr((&cpu.Session{}).Sync(ctx)) },
		"cpu.Session.Read":      func() error { _, err := (&cpu.Session{}).Read(buf); return mustErr(err) },
		"cpu.Session.Write":     func() error { return mustErr((&cpu.Session{}).Write(buf, nil)) },
		"cpu.Session.Spans": func() error {
			return ignore((&cpu.Session{}).Spans(func(int, int, time.Duration, time.Duration) {}))
		},
		"cpu.Session.SetTiming":    func() error { (&cpu.Session{}).SetTiming(true); return nil },
		"cpu.Session.BeginCapture": func() error { return mustErr((&cpu.Session{}).BeginCapture(0)) },
		"cpu.Session.EndCapture":   func() error { _, err := (&cpu.Session{}).EndCapture(0); return mustErr(err) },
		"cpu.Session.Instantiate":  func() error { return mustErr((&cpu.Session{}).Instantiate(0)) },
		"cpu.Session.LaunchGraph":  func() error { return mustErr((&cpu.Session{}).LaunchGraph(0, 0)) },
		"cpu.Session.UpdateGraph":  func() error { _, err := (&cpu.Session{}).UpdateGraph(0, 0); return mustErr(err) },
		"cpu.Session.DestroyGraph": func() error { return mustErr((&cpu.Session{}).DestroyGraph(0)) },
		"cpu.Session.Graphs":       func() error { (&cpu.Session{}).Graphs(); return nil },
		"cpu.Session.Close":        func() error { return ignore((&cpu.Session{}).Close()) },

		"planner.Plan.WriteText":   func() error { return ignore((&planner.Plan{}).WriteText(io.Discard)) },
		"planner.Plan.StreamSteps": func() error { (&planner.Plan{}).StreamSteps(0); return nil },
		"planner.Plan.MarshalJSON": func() error { _, err := (&planner.Plan{}).MarshalJSON(); return ignore(err) },
		"perf.PerfModel": func() error {
			m := &perf.PerfModel{}
			m.Duration(op)
			m.Measured(op)
			m.Covered([]*dag.Op{op})
			m.OpStats(op)
			m.Len()
			m.CopyFit("h2d")
			_, _ = m.MarshalJSON()
			_ = m.Update(nil)
			_ = m.Save(tmp)
			_ = os.Remove(tmp)
			return nil
		},
		"perf.PerfStats": func() error {
			var s perf.PerfStats
			s.Add(1)
			s.Mean()
			s.Std()
			return nil
		},
		"trace.Trace": func() error {
			tr := &trace.Trace{}
			tr.Makespan()
			tr.Summarize()
			_ = tr.WriteChrome(io.Discard)
			_ = tr.WriteSummary(io.Discard)
			_ = tr.WriteSVG(io.Discard)
			_ = tr.WriteHTML(io.Discard)
			return nil
		},
		"trace.Lane":  func() error { l := trace.Lane{}; l.Title(); l.Process(); l.Copy(); return nil },
		"trace.Slice": func() error { trace.Slice{}.End(); return nil },
	} {
		cases[name] = call
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done <- fmt.Errorf("panic: %v", p)
					}
				}()
				done <- call()
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(time.Second):
				t.Fatal("did not return within a second")
			}
		})
	}
}
