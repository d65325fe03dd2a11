package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// How a Shapes finds, opens and drops its shapes.

// resolve returns the shape that runs values, opening it if it is not
// kept: the shape of values themselves, or the bucket they pad to. With
// running, the caller runs it at once: a shape opened for that may leave
// its capture to its first run (shape.captureFirst).
func (s *Shapes) resolve(ctx context.Context, values map[string]int64, running bool) (*shape, *ShapeRun, error) {
	sr := &ShapeRun{Values: maps.Clone(values)}
	key := shapeKey(values)
	run, eager := values, ""
	if len(s.buckets) > 0 && !slices.Contains(s.buckets, key) {
		if b := s.padTo(values); b != nil {
			run, sr.Padded = b, true
		} else {
			eager = s.whyEager(values)
		}
	}
	sr.Shape = maps.Clone(run)
	sh := s.find(shapeKey(run))
	if sh == nil {
		var err error
		if sh, err = s.open(ctx, []map[string]int64{run}, eager, running, sr); err != nil {
			return nil, sr, err
		}
	}
	s.touch(sh)
	sr.Plan, sr.Eager = sh.plan, sh.eager
	return sh, sr, nil
}

// find returns the kept shape of key, or nil.
func (s *Shapes) find(key string) *shape {
	for _, sh := range s.kept {
		if sh.key == key {
			return sh
		}
	}
	return nil
}

// touch makes sh the most recently run shape.
func (s *Shapes) touch(sh *shape) {
	if i := slices.Index(s.kept, sh); i >= 0 {
		s.kept = append(slices.Delete(s.kept, i, i+1), sh)
	}
}

// padTo is the bucket values run on: of the buckets at least as large in
// every parameter and differing only in paddable ones, the smallest (by
// the product of its values, then by name); nil when none is.
func (s *Shapes) padTo(values map[string]int64) map[string]int64 {
	var best map[string]int64
	bestSize := math.Inf(1)
	for _, b := range s.cfg.shapes.buckets {
		if !s.pads(values, b) {
			continue
		}
		size := 1.0
		for _, v := range b {
			size *= float64(v)
		}
		if size < bestSize || size == bestSize && shapeKey(b) < shapeKey(best) {
			best, bestSize = b, size
		}
	}
	return best
}

// pads reports whether values may run on bucket b.
func (s *Shapes) pads(values, b map[string]int64) bool {
	if len(values) != len(b) {
		return false
	}
	for name, v := range values {
		bv, ok := b[name]
		if !ok || bv < v || bv > v && !slices.Contains(s.cfg.shapes.paddable, name) {
			return false
		}
	}
	return true
}

// whyEager says why values, which are no bucket, run eagerly.
func (s *Shapes) whyEager(values map[string]int64) string {
	var larger []string // the parameters of buckets larger in every one that are not paddable
	for _, b := range s.cfg.shapes.buckets {
		if len(b) != len(values) {
			continue
		}
		fits := true
		var fixed []string
		for name, v := range values {
			bv, ok := b[name]
			if !ok || bv < v {
				fits = false
				break
			}
			if bv > v && !slices.Contains(s.cfg.shapes.paddable, name) {
				fixed = append(fixed, name)
			}
		}
		if fits {
			larger = append(larger, fixed...)
		}
	}
	buckets := strings.Join(s.buckets, "; ")
	if len(larger) == 0 {
		return fmt.Sprintf("%s is not a bucket (%s), and no bucket is as large in every parameter", shapeKey(values), buckets)
	}
	slices.Sort(larger)
	return fmt.Sprintf("%s is not a bucket (%s), and a larger bucket would pad %s, which is not paddable",
		shapeKey(values), buckets, strings.Join(slices.Compact(larger), ", "))
}

// openBuckets opens and captures the buckets, with memory for them all
// allocated once.
func (s *Shapes) openBuckets(ctx context.Context) error {
	if len(s.cfg.shapes.buckets) == 0 {
		return nil
	}
	_, err := s.open(ctx, s.cfg.shapes.buckets, "", false, &ShapeRun{})
	return err
}

// pending is a shape planned and not yet open.
type pending struct {
	values map[string]int64
	key    string
	plan   *planner.Plan
	need   need
}

// open plans and opens the shapes of values (eager, with that reason,
// when eager is not ""), with the memory grown for them all first, and
// returns the last; sr notes what was dropped and opened.
func (s *Shapes) open(ctx context.Context, values []map[string]int64, eager string, running bool, sr *ShapeRun) (*shape, error) {
	ps := make([]pending, len(values))
	took := &sr.Took
	for i, v := range values {
		p := &ps[i]
		p.values, p.key = maps.Clone(v), shapeKey(v)
		if p.plan = s.plans.get(p.key); p.plan != nil {
			p.need = needOf(p.key, p.plan)
			continue
		}
		start := time.Now()
		g, err := s.build(ctx, maps.Clone(v))
		took.Build += time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("executor: Shapes: the graph of %s: %w", p.key, err)
		}
		if g == nil {
			return nil, fmt.Errorf("executor: Shapes: the graph of %s: the function made none and reported no error", p.key)
		}
		start = time.Now()
		p.plan, err = s.planOf(ctx, g)
		took.Plan += time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("executor: Shapes: plan %s: %w", p.key, err)
		}
		p.need = needOf(p.key, p.plan)
		s.plans.put(p.key, p.plan)
	}
	start := time.Now()
	if s.sharer != nil {
		if err := s.cover(ctx, ps, sr); err != nil {
			return nil, err
		}
	}
	took.Drop += time.Since(start)
	var last *shape
	for _, p := range ps {
		for len(s.kept) >= s.cfg.shapes.keep {
			sr.Dropped = append(sr.Dropped, maps.Clone(s.kept[0].values))
			s.retire(s.kept[0])
		}
		sh, err := s.openOne(ctx, p, eager, running, took)
		if err != nil {
			return nil, errors.Join(err, s.closeRetired(took))
		}
		s.kept = append(s.kept, sh)
		sr.Opened, sr.Captured = true, sh.graph != nil
		last = sh
		if !last.captureFirst {
			if err := s.closeRetired(took); err != nil {
				return nil, err
			}
		}
	}
	return last, nil
}

// retire takes sh out of the shapes kept. Its session is closed by
// closeRetired: where a shape opened for a run is captured while it runs,
// while the device runs it.
func (s *Shapes) retire(sh *shape) {
	if i := slices.Index(s.kept, sh); i >= 0 {
		s.kept = slices.Delete(s.kept, i, i+1)
	}
	if s.last == sh {
		s.last = nil
	}
	s.retired = append(s.retired, sh)
}

// closeRetired closes the sessions of the shapes retired, counting the
// time in took's Drop.
func (s *Shapes) closeRetired(took *OpenTimes) error {
	start := time.Now()
	var errs []error
	for _, sh := range s.retired {
		if err := sh.sess.Close(); err != nil {
			errs = append(errs, fmt.Errorf("executor: Shapes: close %s: %w", sh.key, err))
		}
	}
	s.retired = nil
	took.Drop += time.Since(start)
	return errors.Join(errs...)
}

// cover grows the shared memory, where it does not hold what ps need,
// dropping every shape kept first (their sessions use the memory that
// goes).
func (s *Shapes) cover(ctx context.Context, ps []pending, sr *ShapeRun) error {
	var ns []need
	covered := true
	for _, p := range ps {
		ns = append(ns, p.need)
		covered = covered && s.holder.covers(p.need)
	}
	// Shapes that cannot share the memory are refused before any shape
	// kept is dropped.
	if _, err := layout(s.holder, ns); err != nil {
		return err
	}
	if covered {
		return nil
	}
	for len(s.kept) > 0 {
		sr.Dropped = append(sr.Dropped, maps.Clone(s.kept[0].values))
		if err := s.drop(s.kept[0]); err != nil {
			return err
		}
	}
	sr.Grew = s.holder != nil
	h, err := s.grow(ctx, s.holder, ns)
	if err != nil {
		if h == nil {
			// The old memory is gone and no new one came: the buffers'
			// contents are lost, so nothing may run any more.
			s.broken = fmt.Errorf("the shapes' memory was lost while it grew: %w", err)
		}
		s.holder = h
		return err
	}
	s.holder = h
	return nil
}

// planOf plans g as WithPlanner says, or with planner.New.
func (s *Shapes) planOf(ctx context.Context, g *dag.Graph) (*planner.Plan, error) {
	if f := s.cfg.shapes.plan; f != nil {
		p, err := f(ctx, g)
		if err == nil && p == nil {
			err = errors.New("the planner made no plan and reported no error")
		}
		return p, err
	}
	m, err := MachineOf(s.b, g)
	if err != nil {
		return nil, err
	}
	return planner.New(g, append(slices.Clip(s.cfg.run.plan), m.Options()...)...)
}

// openOne opens the session of p, over the shared memory where there is
// one, and captures it unless eager says why not, or the plan or the
// backend cannot be captured (then the shape is eager, saying why). With
// running, a plan that can be captured while it runs (captureWhileRunning)
// is captured at its first run instead.
func (s *Shapes) openOne(ctx context.Context, p pending, eager string, running bool, took *OpenTimes) (*shape, error) {
	sh := &shape{key: p.key, values: p.values, plan: p.plan, eager: eager}
	opts := s.opts
	if s.sharer != nil {
		sh.lend = s.holder.lend(s.sharer, p.plan.Graph, p.need)
		opts = append(slices.Clip(opts), func(c *config) { c.lend = sh.lend })
	}
	var err error
	start := time.Now()
	sh.sess, err = Open(ctx, s.b, p.plan, opts...)
	took.Open += time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("executor: Shapes: open %s: %w", p.key, err)
	}
	if sh.eager == "" {
		sh.eager = s.whyNoGraph(sh)
	}
	if sh.eager != "" {
		return sh, nil
	}
	if running && captureWhileRunning(sh.sess) {
		sh.captureFirst = true
		return sh, nil
	}
	if sh.graph, err = sh.sess.Capture(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("executor: Shapes: capture %s: %w", p.key, err), sh.sess.Close())
	}
	st := sh.graph.Stats()
	took.Capture += st.Capture
	took.Instantiate += st.Instantiate
	return sh, nil
}

// whyNoGraph says why sh's session is not captured, or "".
func (s *Shapes) whyNoGraph(sh *shape) string {
	if s.cfg.runner.graphSet && s.cfg.runner.graph == GraphNever {
		return "graphs were not asked for"
	}
	if _, ok := sh.sess.d.(device.Capturer); !ok {
		return fmt.Sprintf("the backend's sessions (%T) cannot capture graphs", sh.sess.d)
	}
	if err := CheckCapture(sh.plan); err != nil {
		return "the plan cannot be captured: " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return ""
}

// drop closes sh's graph and session now, with any retired before it,
// and forgets it.
func (s *Shapes) drop(sh *shape) error {
	s.retire(sh)
	return s.closeRetired(&OpenTimes{})
}

// dropAll closes every shape kept.
func (s *Shapes) dropAll() []error {
	var errs []error
	for len(s.kept) > 0 {
		if err := s.drop(s.kept[0]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.closeRetired(&OpenTimes{}); err != nil { // none kept, some retired
		errs = append(errs, err)
	}
	return errs
}

// planCache keeps the plans of the shapes opened, kept or dropped, the
// least recently opened forgotten first beyond its bound: a dropped shape
// that returns is opened and captured again, but not built and planned
// again (plans are host memory, and never change once made).
type planCache struct {
	keys  []string // least recently opened first
	plans map[string]*planner.Plan
	max   int
}

// get returns the plan of key, or nil, and makes it the most recent.
func (c *planCache) get(key string) *planner.Plan {
	p, ok := c.plans[key]
	if ok {
		i := slices.Index(c.keys, key)
		c.keys = append(slices.Delete(c.keys, i, i+1), key)
	}
	return p
}

// put keeps p as key's plan, forgetting the least recent beyond max.
func (c *planCache) put(key string, p *planner.Plan) {
	if c.plans == nil {
		c.plans = map[string]*planner.Plan{}
	}
	if _, ok := c.plans[key]; !ok {
		c.keys = append(c.keys, key)
	}
	c.plans[key] = p
	for len(c.keys) > c.max {
		delete(c.plans, c.keys[0])
		c.keys = c.keys[1:]
	}
}
