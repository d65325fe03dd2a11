package job

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
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
