package cpu

import (
	"time"

	"github.com/dagrun/dagrun/dag"
)

// instrKind is what an instruction of a stream does.
type instrKind uint8

const (
	run            instrKind = iota // run op
	record                          // reach generation gen of event
	wait                            // wait until event has reached generation gen
	waitExternal                    // wait until the caller's ext has reached generation gen (external.go)
	recordExternal                  // reach generation gen of the caller's ext
)

// instr is one entry of a stream's queue.
type instr struct {
	kind  instrKind
	event int32
	gen   uint64
	op    *dag.Op
	ext   *Event // waitExternal, recordExternal
	fault error  // fail: what the op fails with (faults.go); pause: gen is the nanoseconds
	// replay is 1 + the launch number of the graph replay a run belongs to
	// (LaunchGraph), 0 for an eager op: what ReplaySpans names spans by.
	replay int64
}

// streamState says who is moving a stream forward.
type streamState uint8

const (
	idle    streamState = iota // its queue is empty
	blocked                    // its head is a wait on an event not yet reached
	ready                      // its head is an op; it is in the ready queue
	running                    // a worker runs its head op
)

// stream is an in-order queue. Its instructions are q[head:]; q is reset
// whenever it empties, so its storage is reused from run to run, and
// compacted when most of it is done: the stream of a running loop gets
// the next iteration's work before it empties, so it never would.
type stream struct {
	id       int32
	priority int
	seq      uint64 // when it last entered the ready queue
	state    streamState
	q        []instr
	head     int
	// advancing is set while advance moves the stream: work a loop or
	// branch appends to it then (control.go) is taken by that advance,
	// not by a second one nested in it.
	advancing bool
}

// event is a latch that counts generations, so that the same event can be
// recorded once per run, run after run: a wait for generation g is over
// once a record of generation g or later is done.
type event struct {
	recorded uint64 // records enqueued so far
	reached  uint64 // the latest generation whose record is done
}

// byPriority orders the ready queue: higher priority first, then first
// come, first served. The queue holds streams, a handful per session, so
// gods' boxed priority queue costs nothing that matters here; the hot heaps
// over op IDs (dag's Kahn order, the planner's ready list) are
// container/heap over ints.
func byPriority(a, b any) int {
	x, y := a.(*stream), b.(*stream)
	switch {
	case x.priority > y.priority:
		return -1
	case x.priority < y.priority:
		return 1
	case x.seq < y.seq:
		return -1
	case x.seq > y.seq:
		return 1
	}
	return 0
}

// enqueue appends in to s and, if nobody is moving s, moves it.
func (b *Session) enqueue(s *stream, in instr) {
	if !b.started {
		b.started = true
		b.epoch++
		if b.timing {
			b.origin = time.Now()
		}
	}
	s.q = append(s.q, in)
	b.pending++
	if s.state == idle && !s.advancing {
		b.resume(s)
	}
}

// resume moves a stream that nobody runs as far as it goes without a
// worker and, when an op is next, hands it to the workers.
func (b *Session) resume(s *stream) {
	if b.advance(s) {
		b.makeReady(s)
	}
}

func (b *Session) makeReady(s *stream) {
	b.seq++
	s.seq = b.seq
	s.state = ready
	b.ready.Enqueue(s)
	if b.idle > 0 {
		b.wake.Signal()
	}
}

// advance does the records and the satisfied waits at the head of s, and
// skips its ops once the run is aborted. It reports whether an op is next;
// otherwise it leaves s blocked or idle.
func (b *Session) advance(s *stream) bool {
	s.advancing = true
	next := b.advanceLoop(s)
	s.advancing = false
	return next
}

func (b *Session) advanceLoop(s *stream) bool {
	for s.head < len(s.q) {
		in := s.q[s.head]
		switch in.kind {
		case run, pause:
			if b.aborted {
				break
			}
			if in.kind == run && isControl(in.op) {
				b.expand(s, 0) // control.go: the head is now what the op does
				continue
			}
			return true
		case again:
			if !b.aborted {
				b.expand(s, in.gen) // control.go: the loop's next check
				continue
			}
		case fail:
			b.failAt(in)
		case wait:
			if !b.aborted && b.event(in.event).reached < in.gen {
				s.state = blocked
				b.blocked++
				return false
			}
		case record:
			ev := b.event(in.event)
			ev.reached = max(ev.reached, in.gen)
		case waitExternal, recordExternal:
			if !b.external(s, in) {
				return false
			}
		}
		s.head++
		s.compact()
		b.finish()
		if in.kind == record && b.blocked > 0 {
			b.release()
		}
	}
	s.q = s.q[:0]
	s.head = 0
	s.state = idle
	return false
}

// compactAt is the number of done instructions at which a stream's
// queue may be compacted: large enough that the copy is rare, small
// enough that a loop's stream keeps a few KiB.
const compactAt = 256

// compact moves the instructions still to do to the front of s.q once
// they are no more than those done, so a stream that never empties keeps
// memory in proportion to its pending work; the copy costs O(1) per
// instruction over time.
func (s *stream) compact() {
	if s.head < compactAt || 2*s.head < len(s.q) {
		return
	}
	n := copy(s.q, s.q[s.head:])
	clear(s.q[n:]) // drop the ops the done instructions point to
	s.q = s.q[:n]
	s.head = 0
}

// release resumes the blocked streams whose wait is over. Streams are few
// (tens), so a scan is cheaper than keeping lists of waiters.
func (b *Session) release() {
	for _, t := range b.streams {
		if t.state != blocked {
			continue
		}
		if in := t.q[t.head]; b.waitOver(in) {
			b.blocked--
			t.state = idle
			b.resume(t)
		}
	}
}

// finish counts one instruction done and wakes Sync when none are left.
func (b *Session) finish() {
	b.pending--
	if b.pending == 0 && b.drained != nil {
		close(b.drained)
		b.drained = nil
	}
}

// worker is the state of one worker goroutine, reused from op to op.
type worker struct {
	mem   [][]byte // the bytes of the current op's accesses
	timer *time.Timer
}

// work runs ready streams until the backend closes. A worker stays with a
// stream while it has ops to run, unless a stream of higher priority is
// ready: then it switches at the op boundary.
func (b *Session) work(w *worker) {
	defer b.workers.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for b.ready.Empty() && !b.closing {
			b.idle++
			b.wake.Wait()
			b.idle--
		}
		if b.closing {
			return
		}
		for s := b.pop(); s != nil; s = b.next(s) {
			b.step(w, s)
		}
	}
}

// pop takes the first ready stream; the ready queue is not empty.
func (b *Session) pop() *stream {
	v, _ := b.ready.Dequeue()
	s := v.(*stream)
	s.state = running
	return s
}

// next is the stream to run after an op of s.
func (b *Session) next(s *stream) *stream {
	if !b.advance(s) {
		return nil
	}
	if top, ok := b.ready.Peek(); ok && top.(*stream).priority > s.priority {
		b.makeReady(s)
		return b.pop()
	}
	return s
}

// step runs the op at the head of s, without the lock while it works.
func (b *Session) step(w *worker, s *stream) {
	if s.q[s.head].kind == pause {
		b.stepPause(w, s)
		return
	}
	op, replay := s.q[s.head].op, s.q[s.head].replay
	if b.aborted {
		s.head++
		b.finish()
		return
	}
	err := b.resolve(w, op)
	noop := b.inArena(op) // arena.go
	kernel, ctx, timing := b.kernels[b.index(op)], b.runCtx, b.timing
	if op.Kind.IsCollective() {
		ctx = withCollectives(ctx, b.collectives())
	}
	pause := b.delay(op)
	b.mu.Unlock()

	var made []byte
	var start, end time.Time
	if err == nil {
		if pause > 0 {
			w.pause(pause, ctx.Done())
		}
		if timing {
			start = time.Now()
		}
		if !noop {
			made, err = exec(ctx, &b.stop, op, kernel, w.mem)
		}
		if timing {
			end = time.Now()
		}
	}
	clear(w.mem)
	b.opsDone.Add(1)

	b.mu.Lock()
	if err == nil {
		err = b.commit(op, made)
	}
	if err != nil && !b.aborted {
		b.abort(&dag.OpError{Op: op.Name, Err: err})
	}
	if timing && !start.IsZero() {
		b.spans = append(b.spans, span{op: int32(b.index(op)), stream: s.id, replay: replay - 1, start: start.Sub(b.origin), end: end.Sub(b.origin)})
	}
	s.head++
	s.compact()
	b.finish()
}

// delay is the pause before op in this run, when Delays is on.
func (b *Session) delay(op *dag.Op) time.Duration {
	if b.cfg.delayLimit <= 0 {
		return 0
	}
	x := mix(b.cfg.delaySeed ^ mix(b.epoch<<32^uint64(b.index(op))))
	return time.Duration(x % uint64(b.cfg.delayLimit))
}

// mix is the SplitMix64 finaliser: a cheap, well-spread hash.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// pause sleeps for d, or until done is closed.
func (w *worker) pause(d time.Duration, done <-chan struct{}) {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.timer.C:
	case <-done:
		w.timer.Stop()
	}
}
