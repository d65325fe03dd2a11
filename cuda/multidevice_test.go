//go:build cgo

package cuda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner"
)

// Session-level multi-GPU tests: ranks as sessions of one backend, each
// joined from its own goroutine; plans across devices captured as one
// graph. They skip without 2 devices (or NCCL, where they need it) and
// fail instead under DAGRUN_REQUIRE_GPUS=N. Worlds of ranks run at 2 and
// at every device of the machine (up to 8), one device per rank.

// twoDeviceBackend opens a backend on a machine with at least 2 devices.
func twoDeviceBackend(tb testing.TB, opts ...Option) *Backend {
	tb.Helper()
	os.Setenv("NCCL_NVLS_ENABLE", "0") // never NVLink multicast on a shared host
	b, err := New(opts...)
	if err != nil {
		skipOrFailNCCL(tb, requireTwo(), "no driver: %v", err)
	}
	n, err := b.drv.deviceCount()
	require.NoError(tb, err)
	if n < max(2, requiredGPUs()) {
		b.Close()
		skipOrFailNCCL(tb, requireTwo(), "%d device(s); the test needs %d", n, max(2, requiredGPUs()))
	}
	tb.Cleanup(func() {
		assert.NoError(tb, b.Close())
		assert.Zero(tb, b.Live().Total(), "the closed backend holds %+v", b.Live())
	})
	return b
}

// needNCCL skips (or fails) when b cannot load NCCL.
func needNCCL(tb testing.TB, b *Backend) {
	tb.Helper()
	if _, err := b.loadNCCL(); err != nil {
		skipOrFailNCCL(tb, requireTwo(), "%v", err)
	}
}

// worlds is the world sizes to test on b's machine: 2, and every device
// (up to 8) where there are more.
func worlds(tb testing.TB, b *Backend) []int {
	tb.Helper()
	n, err := b.drv.deviceCount()
	require.NoError(tb, err)
	if n = min(n, 8); n > 2 {
		return []int{2, n}
	}
	return []int{2}
}

// onRanks runs f for every rank at once, each in its own goroutine (NCCL's
// ranks of one process block until all have joined), and returns their
// errors.
func onRanks(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	return errs
}

// ranks opens a session of graphs[r] for every rank r, joins them into
// one world and makes their plans' streams and events. The test closes
// them.
func ranks(t testing.TB, b *Backend, graphs []*dag.Graph, timeout time.Duration) ([]*Session, []*planner.Plan) {
	t.Helper()
	id, err := b.UniqueID()
	require.NoError(t, err)
	n := len(graphs)
	ss := make([]*Session, n)
	ps := make([]*planner.Plan, n)
	for r, g := range graphs {
		ps[r], err = planner.New(g)
		require.NoError(t, err)
		ss[r], err = b.OpenSession(t.Context(), g)
		require.NoError(t, err)
		se := ss[r]
		t.Cleanup(func() { se.Close() })
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for r, err := range onRanks(n, func(r int) error {
		return ss[r].Join(ctx, device.World{Rank: r, Size: n, UniqueID: id})
	}) {
		require.NoError(t, err, "rank %d joins", r)
	}
	for r, se := range ss {
		se.colls.SetCollectiveTimeout(timeout)
		for _, s := range ps[r].Streams {
			require.NoError(t, se.sub.NewStream(s.Device, s.Priority))
		}
		for range ps[r].Events {
			require.NoError(t, se.sub.NewEvent())
		}
	}
	return ss, ps
}

// collCase is one collective of the rank graphs, with its CPU reference.
type collCase struct {
	label   string
	in, out []*dag.Buffer // per rank
	cpu     func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error
}

// rankGraphs builds rank r's graph for every rank of world: every
// collective of dt, each on buffers of its own, its input copied from a
// persistent source first so that runs and replays repeat. It ends with a
// send/recv ring (rank r sends to r+1 and receives from r-1; a swap for 2).
func rankGraphs(t testing.TB, dt dag.DType, elems, world int) ([]*dag.Graph, []collCase) {
	es := dt.Size()
	var cases []collCase
	type decl struct {
		label   string
		kind    dag.OpKind
		red     dag.Reduction
		in, out int // elements per rank
		cpu     func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error
	}
	var decls []decl
	for _, red := range dag.Reductions() {
		decls = append(decls,
			decl{"all_reduce " + red.String(), dag.AllReduce, red, elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
				copy(out, in)
				return c.AllReduce(ctx, out, dt, red)
			}},
			decl{"reduce_scatter " + red.String(), dag.ReduceScatter, red, world * elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
				return c.ReduceScatter(ctx, in, out, dt, red)
			}})
	}
	decls = append(decls,
		decl{"all_gather", dag.AllGather, 0, elems, world * elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			return c.AllGather(ctx, in, out)
		}},
		decl{"broadcast root 1", dag.Broadcast, 0, elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			copy(out, in)
			return c.Broadcast(ctx, out, 1)
		}},
		decl{"send/recv ring", dag.Send, 0, elems, elems, func(ctx context.Context, c *comm.Comm, in, out []byte, dt dag.DType) error {
			next, prev := (c.Rank()+1)%world, (c.Rank()+world-1)%world
			errc := make(chan error, 1)
			go func() { errc <- c.Send(ctx, in, next) }()
			return errors.Join(c.Recv(ctx, out, prev), <-errc)
		}})
	graphs := make([]*dag.Graph, world)
	cases = make([]collCase, len(decls))
	for r := range world {
		g := dag.New()
		for i, d := range decls {
			src := g.Buffer(fmt.Sprintf("src%d", i), int64(d.in)*es, dag.OnDevice(r), dag.Of(dt), dag.Contents(gpuRankData(dt, r, d.in)))
			in := g.Buffer(fmt.Sprintf("in%d", i), int64(d.in)*es, dag.OnDevice(r), dag.Of(dt), dag.Zeros())
			g.Copy(in.All(), src.All(), dag.OnDevice(r))
			out := in
			if d.kind != dag.AllReduce && d.kind != dag.Broadcast {
				out = g.Buffer(fmt.Sprintf("out%d", i), int64(d.out)*es, dag.OnDevice(r), dag.Of(dt), dag.Zeros())
			}
			switch d.kind {
			case dag.AllReduce:
				g.AllReduce(in.All(), d.red, dag.OnDevice(r))
			case dag.ReduceScatter:
				g.ReduceScatter(in.All(), out.All(), d.red, dag.OnDevice(r))
			case dag.AllGather:
				g.AllGather(in.All(), out.All(), dag.OnDevice(r))
			case dag.Broadcast:
				g.Broadcast(in.All(), 1, dag.OnDevice(r))
			case dag.Send:
				// Every rank sends first: only a group keeps them apart.
				g.Send(in.All(), (r+1)%world, dag.OnDevice(r))
				g.Recv(out.All(), (r+world-1)%world, dag.OnDevice(r))
			}
			cases[i].label, cases[i].cpu = d.label, d.cpu
			cases[i].in, cases[i].out = append(cases[i].in, src), append(cases[i].out, out)
		}
		var err error
		graphs[r], err = g.Build()
		require.NoError(t, err)
	}
	return graphs, cases
}

// wantOnCPU computes every case's expected outputs with internal/comm.
func wantOnCPU(t testing.TB, dt dag.DType, cases []collCase) [][][]byte {
	want := make([][][]byte, len(cases))
	for i, c := range cases {
		world := len(c.in)
		cpu, err := comm.NewLocal(world, comm.Options{Timeout: 30 * time.Second})
		require.NoError(t, err)
		want[i] = make([][]byte, world)
		for r, err := range onRanks(world, func(r int) error {
			want[i][r] = make([]byte, c.out[r].Size)
			return c.cpu(t.Context(), cpu[r], c.in[r].InitialBytes(), want[i][r], dt)
		}) {
			require.NoError(t, err, "%s on the CPU, rank %d", c.label, r)
		}
	}
	return want
}

func checkRanks(t testing.TB, ss []*Session, dt dag.DType, cases []collCase, want [][][]byte, what string) {
	t.Helper()
	for i, c := range cases {
		for r, se := range ss {
			got, err := se.Read(c.out[r])
			require.NoError(t, err)
			assert.NoError(t, closeEnough(dt, got, want[i][r]), "%s %s, rank %d", what, c.label, r)
		}
	}
}

// TestSessionCollectivesGPU runs every collective and dtype through a
// world of joined sessions (2, and every device of the machine), eagerly
// (twice) and as captured graphs replayed twice, each against
// internal/comm's CPU collectives; then closes and checks that nothing is
// left.
func TestSessionCollectivesGPU(t *testing.T) {
	b := twoDeviceBackend(t)
	needNCCL(t, b)
	const elems = 4099
	for _, world := range worlds(t, b) {
		for _, dt := range []dag.DType{dag.U8, dag.I32, dag.I64, dag.F16, dag.BF16, dag.F32, dag.F64} {
			t.Run(fmt.Sprintf("world%d/%s", world, dt), func(t *testing.T) { sessionCollectives(t, b, dt, elems, world) })
		}
	}
}

// TestSessionCopyCollectivesGPU is TestSessionCollectivesGPU on a backend
// with CopyCollectives: the sum all-reduces of f16, bf16 and f32 run by
// copies (each rank checks it has one), every other collective by NCCL,
// all against the CPU's, eager and replayed.
func TestSessionCopyCollectivesGPU(t *testing.T) {
	if err := copyConnections(os.Getenv(maxConnectionsVar)); err != nil {
		t.Skip(err) // scripts/gpu/tp.sh runs it with the variable set
	}
	b := twoDeviceBackend(t, CopyCollectives())
	needNCCL(t, b)
	for _, world := range worlds(t, b) {
		for _, dt := range []dag.DType{dag.I32, dag.F16, dag.BF16, dag.F32} {
			t.Run(fmt.Sprintf("world%d/%s", world, dt), func(t *testing.T) { sessionCollectives(t, b, dt, 4099, world) })
		}
	}
}

func sessionCollectives(t *testing.T, b *Backend, dt dag.DType, elems, world int) {
	graphs, cases := rankGraphs(t, dt, elems, world)
	want := wantOnCPU(t, dt, cases)
	ss, ps := ranks(t, b, graphs, time.Minute)
	for r, se := range ss {
		copies := 0
		if c := se.colls.coll; c != nil && c.copy != nil {
			copies = len(c.copy.colls)
		}
		if b.copyColl && dag.Add.Variant(dt) != nil {
			require.Equal(t, 1, copies, "rank %d runs its sum all-reduce by copies", r)
		} else {
			require.Zero(t, copies, "rank %d runs its collectives by NCCL", r)
		}
	}
	for run := range 2 {
		for r, err := range onRanks(world, func(r int) error {
			if err := submit(ss[r], ps[r]); err != nil {
				return err
			}
			return ss[r].Sync(t.Context())
		}) {
			require.NoError(t, err, "eager run %d, rank %d", run, r)
		}
		checkRanks(t, ss, dt, cases, want, fmt.Sprintf("eager run %d", run))
	}
	gids := make([]int, world)
	for r, err := range onRanks(world, func(r int) error {
		se := ss[r]
		if err := se.capt.BeginCapture(0); err != nil {
			return err
		}
		if err := submit(se, ps[r]); err != nil {
			se.capt.EndCapture(0)
			return err
		}
		gi, err := se.capt.EndCapture(0)
		if err != nil {
			return err
		}
		gids[r] = gi
		return se.capt.Instantiate(gi)
	}) {
		require.NoError(t, err, "capture, rank %d", r)
	}
	for replay := range 2 {
		for r, se := range ss { // outputs (in place: the working copy) to zeros, so a replay that does nothing fails
			for _, c := range cases {
				require.NoError(t, se.Write(c.out[r], make([]byte, c.out[r].Size)))
			}
		}
		for r, err := range onRanks(world, func(r int) error {
			if err := ss[r].LaunchGraph(gids[r], 0); err != nil {
				return err
			}
			return ss[r].Sync(t.Context())
		}) {
			require.NoError(t, err, "replay %d, rank %d", replay, r)
		}
		checkRanks(t, ss, dt, cases, want, fmt.Sprintf("replay %d", replay))
	}
	closeRanks(t, b, ss)
}

// twoDevicePlan is a pipeline across devices 0 and 1 with peer copies
// both ways, into and out of t0 and t1, with kernels on both devices. With
// tmp, t0 and t1 are temporaries (pool memory reached by the peer; memory
// nodes in a graph, which the driver will not update in place).
func twoDevicePlan(t testing.TB, tmp bool, n int64) *dag.Graph {
	g := dag.New()
	grid, block := dag.Dim3{X: 256, Y: 1, Z: 1}, dag.Dim3{X: 256, Y: 1, Z: 1}
	x0 := g.Buffer("x0", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(1))
	y1 := g.Buffer("y1", 4*n, dag.OnDevice(1), dag.Of(dag.F32), dag.Random(2))
	life := []dag.BufferOption{dag.Zeros()}
	if tmp {
		life = []dag.BufferOption{dag.Temporary()}
	}
	t1 := g.Buffer("t1", 4*n, append(life, dag.OnDevice(1), dag.Of(dag.F32))...)
	t0 := g.Buffer("t0", 4*n, append(life, dag.OnDevice(0), dag.Of(dag.F32))...)
	alloc := func(b *dag.Buffer, dev int) {
		if tmp {
			g.Alloc(b, dag.OnDevice(dev))
		}
	}
	free := func(b *dag.Buffer, dev int) {
		if tmp {
			g.Free(b, dag.OnDevice(dev))
		}
	}
	out0 := g.Buffer("out0", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	out1 := g.Buffer("out1", 4*n, dag.OnDevice(1), dag.Of(dag.F32), dag.Zeros())
	g.Launch(dag.Scale, grid, block, x0, float32(1.5))
	alloc(t1, 1)
	g.Copy(t1.All(), x0.All(), dag.OnDevice(1)) // peer: device 0 to device 1
	g.Launch(dag.Axpy, grid, block, y1, t1, float32(0.25), dag.OnDevice(1))
	g.Copy(out1.All(), t1.All(), dag.OnDevice(1))
	free(t1, 1)
	alloc(t0, 0)
	g.Copy(t0.All(), y1.All()) // peer: device 1 to device 0
	g.Launch(dag.Axpy, grid, block, t0, x0, float32(-2))
	g.Copy(out0.All(), t0.All())
	free(t0, 0)
	graph, err := g.Build()
	require.NoError(t, err)
	return graph
}

// TestCaptureAcrossDevicesGPU runs a plan whose ops span 2 devices in
// every combination of peer access or copies through host memory
// (NoPeer), persistent or temporary buffers, copies of one staging chunk
// or several (pipelined through host memory), and timing off, by events or
// by CUPTI: twice eagerly, then captured as one graph and replayed three
// times, then recaptured and updated in place. Every run's inputs are reset
// first, and every result must equal the sequential reference and the CPU
// backend's; every timed run must have a span for every copy between the
// devices (replays are timed per op by CUPTI only).
func TestCaptureAcrossDevicesGPU(t *testing.T) {
	for _, noPeer := range []bool{false, true} {
		for _, tmp := range []bool{false, true} {
			for _, n := range []int64{1 << 18, 5 << 20} { // 1 MiB and 20 MiB: 1 and 3 staging chunks
				for _, timing := range []device.TimingSource{"", TimingEvents, TimingCUPTI} {
					name := fmt.Sprintf("noPeer=%v/temporaries=%v/%s/timing=%s", noPeer, tmp, dag.FormatBytes(4*n), cmp.Or(timing, "off"))
					t.Run(name, func(t *testing.T) { acrossDevices(t, noPeer, tmp, timing, n) })
				}
			}
		}
	}
}

func acrossDevices(t *testing.T, noPeer, tmp bool, timing device.TimingSource, n int64) {
	var opts []Option
	if noPeer {
		opts = append(opts, NoPeer())
	}
	b := twoDeviceBackend(t, opts...)
	topo, err := b.Topology()
	require.NoError(t, err)
	if noPeer {
		assert.False(t, topo.PeerAccess(0, 1), "NoPeer reports no peer access")
	}
	g := twoDevicePlan(t, tmp, n)
	p, err := planner.New(g, planner.OnTopology(topo))
	require.NoError(t, err)
	se := openSession(t, b, g)
	if timing != "" {
		se.tim.SetTiming(true)
		require.NoError(t, se.tim.SetTimingSource(timing))
		source, why, _ := se.tim.TimingSource()
		require.Equal(t, timing, source, "timing source: %s", why)
	}
	var peerCopies []int
	for _, op := range g.Ops {
		if op.Kind == dag.Copy && op.Access[0].Buf.Device != op.Access[1].Buf.Device {
			peerCopies = append(peerCopies, op.ID)
		}
	}
	require.Len(t, peerCopies, 2)
	checkSpans := func(what string, replay bool) {
		t.Helper()
		if timing == "" || (replay && timing != TimingCUPTI) {
			return
		}
		seen := map[int]int{}
		require.NoError(t, se.tim.Spans(func(op, _ int, start, end time.Duration) {
			if end >= start {
				seen[op]++
			}
		}))
		source, why, _ := se.tim.TimingSource()
		for _, id := range peerCopies {
			assert.Positive(t, seen[id], "%s: copy %q between the devices has no span (timing: %s, %s)", what, g.Ops[id].Name, source, why)
		}
	}
	for run := range 2 {
		resetInputs(t, se, g)
		require.NoError(t, runPlan(t.Context(), se, p, run == 0), "eager run %d", run)
		checkResults(t, se, p, 1)
		checkSpans(fmt.Sprintf("eager run %d", run), false)
	}
	require.NoError(t, se.capt.BeginCapture(0))
	require.NoError(t, submit(se, p))
	gi, err := se.capt.EndCapture(0)
	require.NoError(t, err)
	require.NoError(t, se.capt.Instantiate(gi))
	for replay := range 3 {
		resetInputs(t, se, g)
		require.NoError(t, se.capt.LaunchGraph(gi, 0))
		require.NoError(t, se.host.Sync(t.Context()), "replay %d", replay)
		checkResults(t, se, p, 1)
		checkSpans(fmt.Sprintf("replay %d", replay), true)
	}
	require.NoError(t, se.capt.BeginCapture(0))
	require.NoError(t, submit(se, p))
	fresh, err := se.capt.EndCapture(0)
	require.NoError(t, err)
	inPlace, err := se.capt.UpdateGraph(gi, fresh)
	require.NoError(t, err)
	if !tmp {
		assert.True(t, inPlace, "the same plan recaptured updates in place: %s", se.capt.stats().LastUpdateError)
	}
	resetInputs(t, se, g)
	require.NoError(t, se.capt.LaunchGraph(gi, 0))
	require.NoError(t, se.host.Sync(t.Context()))
	checkResults(t, se, p, 1)
	require.NoError(t, se.Close())
	assertReleased(t, b, "after the session closed")
}

// resetInputs writes every persistent buffer's initial contents, so that
// the next run or replay starts where a fresh session does.
func resetInputs(t testing.TB, se *Session, g *dag.Graph) {
	t.Helper()
	for _, buf := range g.Buffers {
		if !buf.Temporary {
			require.NoError(t, se.Write(buf, buf.InitialBytes()))
		}
	}
}

// TestFailedCaptureGPU: a capture that fails after it allocated a
// temporary (a copy from pageable memory cannot be captured) leaves the
// session usable, eagerly, and closable with everything freed once.
func TestFailedCaptureGPU(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	const n = 1 << 20
	h := g.Buffer("h", n, dag.PageableHost(), dag.Random(3))
	tmp := g.Buffer("tmp", n, dag.Temporary(), dag.OnDevice(0))
	out := g.Buffer("out", n, dag.OnDevice(0), dag.Zeros())
	g.Alloc(tmp)
	g.Fill(tmp.All(), 0)
	g.Copy(tmp.All(), h.All())
	g.Copy(out.All(), tmp.All())
	g.Free(tmp)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph)
	require.NoError(t, err)
	se := openSession(t, b, graph)
	require.NoError(t, runPlan(t.Context(), se, p, true))
	require.NoError(t, se.capt.BeginCapture(0))
	require.Error(t, submit(se, p), "a pageable copy under capture")
	_, err = se.capt.EndCapture(0)
	require.Error(t, err, "the capture was invalidated")
	assert.Zero(t, se.Live().PoolAllocs, "the failed capture's temporary is the graph's, not the session's")
	resetInputs(t, se, graph)
	require.NoError(t, runPlan(t.Context(), se, p, false), "an eager run after the failed capture")
	checkResults(t, se, p, 0)
	require.NoError(t, se.Close())
	assertReleased(t, b, "after the session closed")
}

// warmRanks runs every rank's plan once, so that NCCL has connected the
// ranks (a rank lost before that leaves its peers blocked inside NCCL's
// first call, which no timeout of dagrun's reaches).
func warmRanks(t testing.TB, ss []*Session, ps []*planner.Plan) {
	t.Helper()
	for r, err := range onRanks(len(ss), func(r int) error {
		if err := submit(ss[r], ps[r]); err != nil {
			return err
		}
		return ss[r].Sync(t.Context())
	}) {
		require.NoError(t, err, "warm-up, rank %d", r)
	}
}

// closeRanks closes the ranks' sessions at once, as the ranks of a
// process do, and checks that nothing is left.
func closeRanks(t testing.TB, b *Backend, ss []*Session) {
	t.Helper()
	for r, err := range onRanks(len(ss), func(r int) error { return ss[r].Close() }) {
		assert.NoError(t, err, "closing rank %d", r)
	}
	assertReleased(t, b, "after the ranks closed")
}

// deviceFree is cuMemGetInfo's free memory of devices 0 to n-1.
func deviceFree(t testing.TB, b *Backend, n int) []uint64 {
	t.Helper()
	free := make([]uint64, n)
	for d := range n {
		g, err := b.device(d)
		require.NoError(t, err)
		free[d], _, err = b.drv.memInfo(g.ctx)
		require.NoError(t, err)
	}
	return free
}

// assertFreeBack checks that the devices' free memory came back to
// before, within slack (the driver and NCCL keep a little for reuse; a
// leaked communicator or buffer set is far larger).
func assertFreeBack(t testing.TB, b *Backend, before []uint64, what string) {
	t.Helper()
	const slack = 64 << 20
	for d, now := range deviceFree(t, b, len(before)) {
		assert.GreaterOrEqual(t, now+slack, before[d], "device %d: free memory %s is %d MiB below the baseline", d, what, (int64(before[d])-int64(now))>>20)
	}
}

// TestRankFailureGPU: in a world of 2 and of every device, rank 1 fails
// before its collective (it aborts, as the executor's ranks helper does on
// an op error); every other rank, waiting in Sync, fails within the
// collective timeout instead of hanging, and everything is released.
func TestRankFailureGPU(t *testing.T) {
	for name, b := range failureBackends(t) {
		for _, world := range worlds(t, b) {
			t.Run(fmt.Sprintf("%s/world%d", name, world), func(t *testing.T) { rankFailure(t, b, world) })
		}
	}
}

// failureBackends are the backends the failure tests run on: NCCL's
// collectives, and copy collectives where the environment allows them
// (scripts/gpu/tp.sh).
func failureBackends(t *testing.T) map[string]*Backend {
	b := twoDeviceBackend(t)
	needNCCL(t, b)
	out := map[string]*Backend{"nccl": b}
	if copyConnections(os.Getenv(maxConnectionsVar)) == nil {
		out["copies"] = twoDeviceBackend(t, CopyCollectives())
	}
	return out
}

func rankFailure(t *testing.T, b *Backend, world int) {
	graphs, _ := rankGraphs(t, dag.F32, 1<<20, world)
	ss, ps := ranks(t, b, graphs, time.Minute) // a clean cycle first: what stays loaded for good
	warmRanks(t, ss, ps)
	closeRanks(t, b, ss)
	before := deviceFree(t, b, world)
	ss, ps = ranks(t, b, graphs, 3*time.Second)
	warmRanks(t, ss, ps)
	failed := errors.New("rank 1 failed (test)")
	start := time.Now()
	errs := onRanks(world, func(r int) error {
		if r == 1 {
			ss[1].AbortCollectives(failed)
			return failed
		}
		if err := submit(ss[r], ps[r]); err != nil {
			return err
		}
		return ss[r].Sync(t.Context())
	})
	took := time.Since(start)
	for r, err := range errs {
		require.Error(t, err, "rank %d must fail when rank 1 does", r)
	}
	t.Logf("world %d: every rank failed after %v; rank 0: %v", world, took, errs[0])
	assert.Less(t, took, 60*time.Second, "the ranks gave up within the timeout")
	err := ss[1].Run(0, graphs[1].Ops[1])
	if err == nil {
		err = ss[1].Sync(t.Context())
	}
	assert.ErrorContains(t, err, "aborted", "an aborted rank refuses collectives")
	closeRanks(t, b, ss)
	assertFreeBack(t, b, before, "after the failed ranks closed")
}

// TestRankCancelGPU: in a world of 2 and of every device, rank 1's context
// ends mid-run and it aborts; every other rank fails within the timeout.
func TestRankCancelGPU(t *testing.T) {
	for name, b := range failureBackends(t) {
		for _, world := range worlds(t, b) {
			t.Run(fmt.Sprintf("%s/world%d", name, world), func(t *testing.T) { rankCancel(t, b, world) })
		}
	}
}

func rankCancel(t *testing.T, b *Backend, world int) {
	graphs, _ := rankGraphs(t, dag.F32, 1<<20, world)
	ss, ps := ranks(t, b, graphs, time.Minute)
	warmRanks(t, ss, ps)
	closeRanks(t, b, ss)
	before := deviceFree(t, b, world)
	ss, ps = ranks(t, b, graphs, 5*time.Second)
	warmRanks(t, ss, ps)
	start := time.Now()
	errs := onRanks(world, func(r int) error {
		ctx := t.Context()
		if r == 1 {
			c, cancel := context.WithCancel(ctx)
			cancel()
			ctx = c
			// Rank 1 submits only its first op and gives up.
			if err := ss[1].Run(int(ps[1].OpStream[0]), graphs[1].Ops[0]); err != nil {
				return err
			}
		} else if err := submit(ss[r], ps[r]); err != nil {
			return err
		}
		return ss[r].Sync(ctx)
	})
	if errs[1] != nil { // nil when its one op finished before Sync looked at ctx
		assert.ErrorIs(t, errs[1], context.Canceled)
	}
	for r, err := range errs {
		if r != 1 {
			assert.Error(t, err, "rank %d must fail when rank 1 gives up", r)
		}
	}
	assert.Less(t, time.Since(start), 60*time.Second)
	err := ss[1].Run(0, graphs[1].Ops[1])
	if err == nil {
		err = ss[1].Sync(t.Context())
	}
	assert.ErrorContains(t, err, "aborted", "a rank whose context ended has aborted its communicator")
	closeRanks(t, b, ss)
	assertFreeBack(t, b, before, "after the cancelled ranks closed")
}

// TestSessionNCCLMissing: with no NCCL to load, UniqueID and Join fail with an
// error that names libnccl.so.2, and a graph with collectives still opens
// (and refuses to run them) on one device.
func TestSessionNCCLMissing(t *testing.T) {
	b := gpuBackend(t, LibNCCL(t.TempDir()))
	_, err := b.UniqueID()
	require.ErrorIs(t, err, ErrNoNCCL)
	assert.ErrorContains(t, err, "libnccl.so.2")
	g := dag.New()
	v := g.Buffer("v", 1024, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	ar := g.AllReduce(v.All(), dag.Sum)
	graph, err := g.Build()
	require.NoError(t, err)
	se := openSession(t, b, graph)
	err = se.colls.Join(t.Context(), device.World{Rank: 0, Size: 1, UniqueID: make([]byte, 128)})
	require.ErrorIs(t, err, ErrNoNCCL)
	assert.ErrorContains(t, err, "libnccl.so.2")
	require.NoError(t, se.sub.NewStream(0, dag.Normal))
	err = se.sub.Run(0, ar)
	assert.ErrorContains(t, err, "Join the session")
	require.NoError(t, se.Close())
	assertReleased(t, b, "")
}
