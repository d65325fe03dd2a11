//go:build cgo

package executor_test

import (
	"context"
	"time"

	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/dag"
)

// cudaZeroCases are TestZeroValuesWorkOrFailAtOnce's calls on the cuda
// package's zero values.
func cudaZeroCases(ctx context.Context, g *dag.Graph, op *dag.Op, buf *dag.Buffer, mustErr, ignore func(error) error) map[string]func() error {
	return map[string]func() error{
		"cuda.Backend.Open":         func() error { _, err := (&cuda.Backend{}).Open(ctx, g); return mustErr(err) },
		"cuda.Backend.Sessions":     func() error { (&cuda.Backend{}).Sessions(); return nil },
		"cuda.Backend.Live":         func() error { (&cuda.Backend{}).Live(); return nil },
		"cuda.Backend.Unfused":      func() error { (&cuda.Backend{}).Unfused(&cuda.Session{}); return nil },
		"cuda.Backend.Close":        func() error { return ignore((&cuda.Backend{}).Close()) },
		"cuda.Session.NewStream":    func() error { return mustErr((&cuda.Session{}).NewStream(0, 0)) },
		"cuda.Session.NewEvent":     func() error { return mustErr((&cuda.Session{}).NewEvent()) },
		"cuda.Session.Record":       func() error { return mustErr((&cuda.Session{}).Record(0, 0)) },
		"cuda.Session.Wait":         func() error { return mustErr((&cuda.Session{}).Wait(0, 0)) },
		"cuda.Session.Run":          func() error { return mustErr((&cuda.Session{}).Run(0, op)) },
		"cuda.Session.Sync":         func() error { return mustErr((&cuda.Session{}).Sync(ctx)) },
		"cuda.Session.Read":         func() error { _, err := (&cuda.Session{}).Read(buf); return mustErr(err) },
		"cuda.Session.Write":        func() error { return mustErr((&cuda.Session{}).Write(buf, nil)) },
		"cuda.Session.Live":         func() error { (&cuda.Session{}).Live(); return nil },
		"cuda.Session.BeginCapture": func() error { return mustErr((&cuda.Session{}).BeginCapture(0)) },
		"cuda.Session.EndCapture":   func() error { _, err := (&cuda.Session{}).EndCapture(0); return mustErr(err) },
		"cuda.Session.Instantiate":  func() error { return mustErr((&cuda.Session{}).Instantiate(0)) },
		"cuda.Session.LaunchGraph":  func() error { return mustErr((&cuda.Session{}).LaunchGraph(0, 0)) },
		"cuda.Session.UpdateGraph":  func() error { _, err := (&cuda.Session{}).UpdateGraph(0, 0); return mustErr(err) },
		"cuda.Session.DestroyGraph": func() error { return mustErr((&cuda.Session{}).DestroyGraph(0)) },
		"cuda.Session.Spans": func() error {
			return ignore((&cuda.Session{}).Spans(func(int, int, time.Duration, time.Duration) {}))
		},
		"cuda.Session.SetTiming": func() error { (&cuda.Session{}).SetTiming(true); return nil },
		"cuda.Session.SetBodies": func() error { return mustErr((&cuda.Session{}).SetBodies(nil, nil)) },
		"cuda.Session.LoopIterations": func() error {
			(&cuda.Session{}).LoopIterations(func(int, int) {})
			return nil
		},
		"cuda.Session.Close": func() error { return ignore((&cuda.Session{}).Close()) },
	}
}
