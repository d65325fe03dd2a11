package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// runConfig is what Run takes beyond a session's options.
type runConfig struct {
	backend string        // a registered backend's name, or device.Auto
	device  device.Config // passed to the backend's Opener
	plan    []planner.Option
	opened  func(device.Opened) // told which backend Run opened
}

// WithBackend makes Run open the backend registered under name
// (device.Open): "cpu", "cuda", or device.Auto, the default, which opens
// the GPU backend when a driver and a device are there and the CPU backend
// otherwise. A backend is registered by importing its package, for
// example import _ "github.com/dagrun/dagrun/cpu". Open ignores it.
func WithBackend(name string) Option { return func(c *config) { c.run.backend = name } }

// WithDeviceConfig passes cfg to the backend Run opens. Open ignores it.
func WithDeviceConfig(cfg device.Config) Option { return func(c *config) { c.run.device = cfg } }

// WithPlan makes Run plan with opts (planner.Streams, planner.Optimize,
// ...; none by default). Open ignores it.
func WithPlan(opts ...planner.Option) Option {
	return func(c *config) { c.run.plan = append(c.run.plan, opts...) }
}

// WithOpened makes Run call f with the backend it opened, before it plans:
// its name, and under device.Auto why a preferred backend did not open
// (Fallback). Open ignores it.
func WithOpened(f func(device.Opened)) Option { return func(c *config) { c.run.opened = f } }

// Run runs graph g once, from the backend's opening to its closing: it
// opens a backend (WithBackend; device.Auto by default), plans g
// (WithPlan) with what the backend knows of its devices
// (MachineOf), opens a session on the plan with the other options,
// runs it, reads every persistent buffer, and closes the session and the
// backend whatever happens. For repeated runs keep the backend and a
// Session open instead (Open, Runner).
func Run(ctx context.Context, g *dag.Graph, opts ...Option) (out Results, err error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	name := c.run.backend
	if name == "" {
		name = device.Auto
	}
	o, err := device.Open(name, c.run.device)
	if err != nil {
		return nil, fmt.Errorf("executor: Run: %w", err)
	}
	defer func() {
		if cerr := o.Backend.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("executor: Run: closing the %s backend: %w", o.Name, cerr))
		}
	}()
	if c.run.opened != nil {
		c.run.opened(o)
	}
	m, err := MachineOf(o.Backend, g)
	if err != nil {
		return nil, fmt.Errorf("executor: Run: %w", err)
	}
	p, err := planner.New(g, append(slices.Clip(c.run.plan), m.Options()...)...)
	if err != nil {
		return nil, err
	}
	return execute(ctx, o.Backend, p, opts...)
}
