package job

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/spec"
)

// NewRank is the program of rank in a world, from s, its spec loaded for
// that rank (spec.WithRank): on device rank, or with place (this process's
// rank of a world of processes) on its local rank's device, modulo the
// devices CUDA_VISIBLE_DEVICES (through getenv) leaves. A spec that runs as
// several ranks places nothing itself (the loader refuses device: there),
// so its buffers and ops move to that device.
func NewRank(s *spec.Spec, rank int, place *executor.Place, getenv func(string) string) *Program {
	device := rank
	if place != nil {
		device = localDevice(place.LocalRank, getenv)
	}
	for _, b := range s.Graph.Buffers {
		if b.Placement == dag.Device {
			b.Device = device
		}
	}
	for _, op := range s.Graph.Ops {
		op.Device = device
	}
	return &Program{Rank: rank, Device: device, Spec: s}
}

// localDevice is the device of the process of local rank local: local
// modulo the devices CUDA_VISIBLE_DEVICES leaves (all of them when it is
// unset, since ranks then share the machine's devices in order).
func localDevice(local int, getenv func(string) string) int {
	v := strings.TrimSpace(getenv("CUDA_VISIBLE_DEVICES"))
	if v == "" {
		return local
	}
	return local % len(strings.Split(v, ","))
}

// RankWriter is where the host steps of rank, one rank of a world run in
// one process, print (spec.Spec.Stdout): w, a line at a time, each line
// after "rank N ", so that the ranks' lines neither tear nor lose their
// rank. The writers of one world share mu.
func RankWriter(w io.Writer, rank int, mu *sync.Mutex) io.Writer {
	return &rankLines{prefix: fmt.Sprintf("rank %d ", rank), w: w, mu: mu}
}

type rankLines struct {
	prefix string
	w      io.Writer
	mu     *sync.Mutex
	part   []byte // a line not yet ended
}

func (l *rankLines) Write(p []byte) (int, error) {
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.mu.Lock()
		_, err := io.WriteString(l.w, l.prefix+string(l.part[:i+1]))
		l.mu.Unlock()
		l.part = l.part[i+1:]
		if err != nil {
			return len(p), err
		}
	}
}

// World is how a run spans ranks: every rank of a world in this process
// (Place nil), or this process's rank of a world of processes.
type World struct {
	Size  int
	Place *executor.Place
}

// Ranks are the ranks of w that this process runs: every rank, or with a
// Place its own.
func (w *World) Ranks() []int {
	if w.Place != nil {
		return []int{w.Place.Rank}
	}
	ranks := make([]int, w.Size)
	for r := range ranks {
		ranks[r] = r
	}
	return ranks
}

// MaxWorld bounds the ranks of one world: each is a session with its own
// goroutines, and in one process its own device.
const MaxWorld = 1024

// WorldOf is the world a run of s spans: of world ranks in this process
// (world 0: s's run.world), or, where world is 0 and a launcher (torchrun,
// Slurm, Open MPI; through getenv) started more than one process, this
// process's rank of theirs. It is nil for an ordinary run of one rank.
func WorldOf(s *spec.Spec, world int, getenv func(string) string) (*World, error) {
	own := s.Run.World
	if world == 0 {
		p, ok, err := comm.Discover(getenv)
		if err != nil {
			return nil, err
		}
		if ok && p.World > 1 {
			if own > 1 && own != p.World {
				return nil, fmt.Errorf("%s sets run.world: %d, but %s started a world of %d processes", s.File, own, p.Launcher, p.World)
			}
			if p.World > MaxWorld {
				return nil, fmt.Errorf("%s started a world of %d processes; at most %d ranks", p.Launcher, p.World, MaxWorld)
			}
			return &World{Size: p.World, Place: &p}, nil
		}
		world = own
	}
	if world < 1 || (world == 1 && own <= 1) {
		return nil, nil // one rank, as the spec was loaded: an ordinary run
	}
	return &World{Size: world}, nil
}
