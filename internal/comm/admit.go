package comm

// Rank 0's door: the connections that have not yet said who they are.
// Anyone who reaches rank 0's port can open connections and stay silent;
// these rules keep such squatters from holding the door shut for the real
// ranks, which answer rank 0's challenge within a round trip:
//   - at most maxPending connections wait for their hello, at most
//     maxPendingPerHost of them from one address;
//   - when a connection arrives and there is no room, the oldest silent
//     connection (from the address that holds the most) makes room, and is
//     told so with a busy frame, so that a real rank dials again;
//   - once the first bytes of a hello arrive, the rest must follow within
//     helloRest.

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	maxPending        = 64
	maxPendingPerHost = maxPending / 2
	// helloTimeout (or a quarter of the rank timeout, if shorter) is how
	// long a connection may stay silent, helloRest how long a hello that
	// has started may take to finish.
	helloTimeout = 10 * time.Second
	helloRest    = 2 * time.Second
	// maxAcceptBackoff bounds the pause after a failed Accept (out of file
	// descriptors, a connection aborted before it was taken).
	maxAcceptBackoff = time.Second
)

// errBusy is rank 0's answer to a connection it had no room for.
var errBusy = errors.New("rank 0 had no room for this connection among others that did not say who they are")

// waiting is a connection whose hello rank 0 awaits.
type waiting struct {
	conn     net.Conn
	host     string
	order    uint64 // arrival order
	speaking bool   // its hello has started
	evicted  bool   // it made room for a newer one
}

// door admits connections until the rendezvous ends. Its mutex guards the
// waiting connections and every change of their deadlines.
type door struct {
	mu      sync.Mutex
	waiting map[net.Conn]*waiting
	perHost map[string]int
	next    uint64
	closed  bool

	refused   atomic.Int64 // connections that failed authentication
	dropped   atomic.Int64 // silent ones turned away, evicted or timed out
	acceptErr atomic.Pointer[error]
}

func newDoor() *door {
	return &door{waiting: map[net.Conn]*waiting{}, perHost: map[string]int{}}
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// admit makes room for conn, whose hello is due by deadline, and returns
// it, or nil when every waiting connection has started its hello. A
// connection evicted to make room has its read deadline set to now: its
// greeter answers it busy.
func (d *door) admit(conn net.Conn, deadline time.Time) *waiting {
	w := &waiting{conn: conn, host: hostOf(conn.RemoteAddr())}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if d.perHost[w.host] >= maxPendingPerHost || len(d.waiting) >= maxPending {
		victim := d.victim(w.host)
		if victim == nil {
			return nil
		}
		d.remove(victim)
		victim.evicted = true
		victim.conn.SetReadDeadline(time.Now())
	}
	w.order = d.next
	d.next++
	d.waiting[conn] = w
	d.perHost[w.host]++
	conn.SetDeadline(deadline)
	return w
}

// victim picks the oldest silent connection from host if host is at its
// limit, else from the address holding the most.
func (d *door) victim(host string) *waiting {
	full := d.perHost[host] >= maxPendingPerHost
	var best *waiting
	for _, w := range d.waiting {
		if w.speaking || (full && w.host != host) {
			continue
		}
		if best == nil || d.perHost[w.host] > d.perHost[best.host] ||
			(d.perHost[w.host] == d.perHost[best.host] && w.order < best.order) {
			best = w
		}
	}
	return best
}

func (d *door) remove(w *waiting) {
	delete(d.waiting, w.conn)
	if d.perHost[w.host]--; d.perHost[w.host] == 0 {
		delete(d.perHost, w.host)
	}
}

// speak marks w's hello as started: it is no longer evicted, and the rest
// must come within helloRest. False if w was evicted already.
func (d *door) speak(w *waiting) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.evicted || d.closed {
		return false
	}
	w.speaking = true
	w.conn.SetDeadline(time.Now().Add(helloRest))
	return true
}

// leave takes w off the door once its greeting is over, and reports
// whether it was evicted.
func (d *door) leave(w *waiting) (evicted bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !w.evicted {
		d.remove(w)
	}
	w.conn.SetDeadline(time.Time{})
	return w.evicted
}

// shut ends the wait of every connection still waiting: a hello still
// coming is too late.
func (d *door) shut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for c := range d.waiting {
		c.SetDeadline(time.Now())
	}
}

// answerBusy tells conn that rank 0 had no room for it, then closes it.
func answerBusy(conn net.Conn) {
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	hb := encodeHeader(header{kind: kindBusy})
	conn.Write(hb[:])
	conn.Close()
}

// accept admits connections from ln and greets each on a goroutine of its
// own, which hands the ones that authenticate to arrivals, until ln is
// closed or stop is. An Accept that fails otherwise (out of file
// descriptors, a connection aborted first) is retried after a pause that
// grows up to maxAcceptBackoff.
func (d *door) accept(ln net.Listener, secret []byte, wait func() time.Duration, arrivals chan<- arrival, stop <-chan struct{}, greeters *sync.WaitGroup) {
	var pause time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.acceptErr.Store(&err)
			pause = min(max(2*pause, 5*time.Millisecond), maxAcceptBackoff)
			select {
			case <-time.After(pause):
				continue
			case <-stop:
				return
			}
		}
		pause = 0
		w := d.admit(conn, time.Now().Add(wait()))
		if w == nil {
			d.dropped.Add(1)
			answerBusy(conn) // the real ranks dial again
			continue
		}
		greeters.Go(func() {
			a, err := greet(d, w, secret)
			if d.leave(w) {
				d.dropped.Add(1)
				answerBusy(conn)
				return
			}
			if err != nil {
				// Not a rank of this job: close without an answer, so that
				// a stranger learns nothing.
				switch {
				case errors.Is(err, errAuth):
					d.refused.Add(1)
				case !w.speaking:
					d.dropped.Add(1)
				}
				conn.Close()
				return
			}
			select {
			case arrivals <- a:
			case <-stop:
				conn.Close()
			}
		})
	}
}

// hint says what rank 0 saw of connections that did not join, for its
// timeout's error.
func (d *door) hint(where string) string {
	s := ""
	if n := d.refused.Load(); n > 0 {
		s += fmt.Sprintf("; %d connection%s failed authentication (is %s the same on every rank?)", n, plural(int(n)), SecretEnv)
	}
	if n := d.dropped.Load(); n > 0 {
		s += fmt.Sprintf("; %d connection%s stayed silent and %s dropped (is something else holding connections to %s open?)", n, plural(int(n)), were(int(n)), where)
	}
	if p := d.acceptErr.Load(); p != nil {
		s += fmt.Sprintf("; accepting connections failed: %v", *p)
	}
	return s
}

func were(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
