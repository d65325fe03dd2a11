package executor_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/comm"
)

// loggingBackend is the cpu backend with each session's device calls
// logged, for what a world's runs ask of the device.
type loggingBackend struct {
	device.Backend
	mu       sync.Mutex
	sessions []*loggingSession
}

func (b *loggingBackend) Open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	s, err := b.Backend.Open(ctx, g)
	if err != nil {
		return nil, err
	}
	ls := &loggingSession{Session: s}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sessions = append(b.sessions, ls)
	return ls, nil
}

// loggingSession logs the calls that run, capture, replay, wait, read
// and write; a session is used from one goroutine at a time.
type loggingSession struct {
	device.Session
	calls []string
}

func (s *loggingSession) log(call string) { s.calls = append(s.calls, call) }

func (s *loggingSession) Run(stream int, op *dag.Op) error {
	s.log("Run")
	return s.Session.Run(stream, op)
}

func (s *loggingSession) Sync(ctx context.Context) error {
	s.log("Sync")
	return s.Session.Sync(ctx)
}

func (s *loggingSession) Read(b *dag.Buffer) ([]byte, error) {
	s.log("Read")
	return s.Session.Read(b)
}

func (s *loggingSession) Write(b *dag.Buffer, data []byte) error {
	s.log("Write")
	return s.Session.(device.Writer).Write(b, data)
}

func (s *loggingSession) Join(ctx context.Context, w device.World) error {
	return s.Session.(device.Joiner).Join(ctx, w)
}

func (s *loggingSession) capturer() device.Capturer { return s.Session.(device.Capturer) }

func (s *loggingSession) BeginCapture(origin int) error {
	s.log("BeginCapture")
	return s.capturer().BeginCapture(origin)
}

func (s *loggingSession) EndCapture(origin int) (int, error) {
	s.log("EndCapture")
	return s.capturer().EndCapture(origin)
}

func (s *loggingSession) Instantiate(graph int) error {
	s.log("Instantiate")
	return s.capturer().Instantiate(graph)
}

func (s *loggingSession) LaunchGraph(graph, stream int) error {
	s.log("LaunchGraph")
	return s.capturer().LaunchGraph(graph, stream)
}

func (s *loggingSession) UpdateGraph(graph, fresh int) (bool, error) {
	s.log("UpdateGraph")
	return s.capturer().UpdateGraph(graph, fresh)
}

func (s *loggingSession) DestroyGraph(graph int) error {
	s.log("DestroyGraph")
	return s.capturer().DestroyGraph(graph)
}

// A world replayed under GraphAlways asks of each rank's device, per
// replay, one launch of its graph and one wait, as a program replaying a
// WorldGraph does (BenchmarkTPMLP): nothing read, written or submitted
// op by op. The replays' figures leave out the first, eager run and the
// capture (what the observer's pause stands for: NCCL's connections and
// the libraries' first calls), which Wall holds.
func TestRunnerRanksReplaysAlone(t *testing.T) {
	ctx := context.Background()
	b := &loggingBackend{Backend: cpu.New()}
	defer b.Close()
	_, plans := programs(t, 2, nil)
	const firstRun = 300 * time.Millisecond
	slowFirst := func(o executor.Observation) error {
		if o.Run == 1 && o.Rank == 0 {
			time.Sleep(firstRun)
		}
		return nil
	}
	rn, err := executor.NewWorldRunner(ctx, b, plans, executor.WithGraph(executor.GraphAlways), executor.WithObserver(slowFirst))
	require.NoError(t, err)
	defer rn.Close()
	const runs = 9
	rep, err := rn.Run(ctx, runs)
	require.NoError(t, err)
	assert.Equal(t, runs, rep.Runs)
	require.Len(t, b.sessions, 2)
	for i, s := range b.sessions {
		at := slices.Index(s.calls, "Instantiate")
		require.GreaterOrEqual(t, at, 0, "session %d captured", i)
		assert.Contains(t, s.calls[:at], "Run", "session %d: the first run is eager", i)
		var want []string
		for range runs - 1 {
			want = append(want, "LaunchGraph", "Sync")
		}
		assert.Equal(t, want, s.calls[at+1:], "session %d: per replay one launch and one wait", i)
	}

	rr := rep.Replays
	require.NotNil(t, rr, "the replays are timed apart")
	assert.Equal(t, runs-1, rr.Replays)
	assert.Positive(t, rr.PerReplay)
	assert.Positive(t, rr.FirstReplay)
	assert.Positive(t, rr.Capture)
	assert.Less(t, rr.Wall, firstRun, "the first run is not a replay")
	assert.Less(t, rr.PerReplay, firstRun/runs, "the first run is not spread over the replays")
	assert.GreaterOrEqual(t, rep.Wall, firstRun+rr.Wall, "Wall holds every run")

	// A later Run replays every run.
	rep, err = rn.Run(ctx, 2)
	require.NoError(t, err)
	require.NotNil(t, rep.Replays)
	assert.Equal(t, runs+1, rep.Replays.Replays, "the graph's launches")
	assert.Less(t, rep.Replays.Wall, firstRun)
}

// A rank of a world of processes times its replays apart too.
func TestJoinRunnerReplaysAlone(t *testing.T) {
	_, plans := programs(t, 2, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	reps := make([]*executor.Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			place, err := comm.Explicit(r, 2, func(k string) string {
				if k == "DAGRUN_PORT" {
					return port
				}
				return ""
			})
			if err != nil {
				errs[r] = err
				return
			}
			opts := []executor.Option{executor.WithGraph(executor.GraphAlways), executor.WithRankTimeout(20 * time.Second)}
			if r == 0 {
				opts = append(opts, executor.WithRendezvousListener(ln))
			}
			b := cpu.New()
			defer b.Close()
			rn, err := executor.JoinRunner(t.Context(), b, plans[r], place, opts...)
			if err != nil {
				errs[r] = err
				return
			}
			reps[r], errs[r] = rn.Run(t.Context(), 4)
			errs[r] = errors.Join(errs[r], rn.Close())
		})
	}
	wg.Wait()
	for r := range 2 {
		require.NoError(t, errs[r], "rank %d", r)
		require.NotNil(t, reps[r].Replays, "rank %d", r)
		assert.Equal(t, 3, reps[r].Replays.Replays, "rank %d: the first run is eager", r)
		assert.Positive(t, reps[r].Replays.PerReplay, "rank %d", r)
		assert.LessOrEqual(t, reps[r].Replays.Wall, reps[r].Wall, "rank %d", r)
	}
}

// Ranks that stay eager report no replays.
func TestRunnerRanksEagerNoReplays(t *testing.T) {
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	_, plans := programs(t, 2, nil)
	rn, err := executor.NewWorldRunner(ctx, b, plans)
	require.NoError(t, err)
	defer rn.Close()
	rep, err := rn.Run(ctx, 3)
	require.NoError(t, err)
	assert.Nil(t, rep.Replays)
	assert.Positive(t, rep.Wall)
}
