# PyTorch's side of scripts/gpu/shapes.sh: examples/mlp_stream.yaml's MLP block at several T
# (512, 2048 and 8192 unless given), each shape a CUDA graph, the graphs kept at once as a program
# serving several shapes keeps them. Per chunk (8 of T x 4096 bf16 tokens): upload x from pinned
# memory, h = gelu(x W1 / H) with W1 H x F (gelu fused into the GEMM where PyTorch can), y = h W2 / F
# + x, download y; two device buffers each for x, h and y alternate between chunks, copies on streams
# of their own with events by hand (as ../shared/baseline/mlp.py's "manual"). The weights are
# allocated once, for every shape.
#
# The device buffers are allocated inside each capture, so that they are the graph's memory (where
# PyTorch puts a graph's own tensors), and the graphs hold:
#   alone      the largest shape's graph alone
#   private    one graph per shape, each with its own pool (torch.cuda.graph's default)
#   shared_up  the graphs in one pool (torch.cuda.graph_pool_handle()), captured smallest first
#   shared     the same, captured largest first, so that each capture can reuse what the one before
#              freed (PyTorch's best case)
# Memory is the drop in free device memory (torch.cuda.mem_get_info) from before the capture, and
# the growth of torch.cuda.memory_reserved(); *_MiB adds the weights, which dagrun's figures count.
# Times (the shared graphs, medians of rounds in which the shapes run in turn): steady, a replay right
# after one of the same shape; switch, right after one of another shape.
# Prints "M key value" lines.
import gc, sys, time, torch

H, F, C = 4096, 16384, 8
TS = sorted(int(a) for a in sys.argv[1:]) or [512, 2048, 8192]
ROUNDS = 11
MiB = 1 << 20
dt = torch.bfloat16
dev = torch.device("cuda")
A1, A2 = 1.0 / H, 1.0 / F  # the GEMMs' alphas in examples/mlp_stream.yaml
torch.manual_seed(0)


def settle():
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()


def free_bytes():
    settle()
    return torch.cuda.mem_get_info()[0]


W1 = torch.rand(H, F, device=dev, dtype=dt)
W2 = torch.rand(F, H, device=dev, dtype=dt)
zb = torch.zeros(F, device=dev, dtype=dt)
weights = W1.nbytes + W2.nbytes + zb.nbytes


def pinned(T, fill):
    t = torch.empty(C * T, H, dtype=dt, pin_memory=True)
    if fill:
        t.copy_(torch.rand(C * T, H, device=dev, dtype=dt))
    return t


hx = {T: pinned(T, True) for T in TS}
hy = {T: pinned(T, False) for T in TS}


# The first GEMM with gelu: fused into cuBLASLt's epilogue where this PyTorch can, else after it.
def fc1_fused(x, h):
    torch._addmm_activation(zb, x, W1, alpha=A1, use_gelu=True, out=h)


def fc1_inplace(x, h):
    torch.addmm(zb, x, W1, beta=0, alpha=A1, out=h)
    torch.ops.aten.gelu_(h, approximate="tanh")


def fc1_copy(x, h):
    torch.addmm(zb, x, W1, beta=0, alpha=A1, out=h)
    h.copy_(torch.nn.functional.gelu(h, approximate="tanh"))


fc1, gelu_path = None, None
for f, name in ((fc1_fused, "fused"), (fc1_inplace, "inplace"), (fc1_copy, "copy")):
    try:
        f(torch.rand(16, H, device=dev, dtype=dt), torch.empty(16, F, device=dev, dtype=dt))
        torch.cuda.synchronize()
        fc1, gelu_path = f, name
        break
    except (RuntimeError, TypeError, AttributeError) as e:
        print(f"# gelu {name}: {e}".splitlines()[0], file=sys.stderr)
if fc1 is None:
    sys.exit("no way to run the first GEMM with gelu")

up, comp, down = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()


def buffers(T):
    def two(n):
        return [torch.empty(T, n, device=dev, dtype=dt) for _ in range(2)]
    return two(H), two(F), two(H)


def pipeline(T, bufs):
    dx, dh, dy = bufs
    xs, ys = hx[T].split(T), hy[T].split(T)
    cur = torch.cuda.current_stream()
    up.wait_stream(cur); comp.wait_stream(cur); down.wait_stream(cur)
    upl, done, freed = [None] * C, [None] * C, [None] * C
    for i in range(C):
        b = i % 2
        with torch.cuda.stream(up):
            if i >= 2:
                up.wait_event(done[i - 2])  # x[b]: chunk i-2's second GEMM reads it
            dx[b].copy_(xs[i], non_blocking=True)
            upl[i] = torch.cuda.Event(); upl[i].record(up)
        with torch.cuda.stream(comp):
            comp.wait_event(upl[i])
            if i >= 2:
                comp.wait_event(freed[i - 2])  # y[b]: chunk i-2's download reads it
            fc1(dx[b], dh[b])
            torch.addmm(dx[b], dh[b], W2, beta=1, alpha=A2, out=dy[b])
            done[i] = torch.cuda.Event(); done[i].record(comp)
        with torch.cuda.stream(down):
            down.wait_event(done[i])
            ys[i].copy_(dy[b], non_blocking=True)
            freed[i] = torch.cuda.Event(); freed[i].record(down)
    cur.wait_stream(up); cur.wait_stream(comp); cur.wait_stream(down)


# Warm-up, eagerly on a side stream (cuBLAS's handles and workspaces, per stream, made outside any
# graph's pool), then everything but the weights and the pinned memory freed.
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for T in TS:
        bufs = buffers(T)
        for _ in range(2):
            pipeline(T, bufs)
        del bufs
torch.cuda.current_stream().wait_stream(side)
base, base_reserved = free_bytes(), torch.cuda.memory_reserved()


def capture(T, pool):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        bufs = buffers(T)
        pipeline(T, bufs)
    del bufs  # the graph's memory now: freed to its pool, which keeps it for the replays
    return g


def kept(mode):
    if mode == "alone":
        return {TS[-1]: capture(TS[-1], None)}
    if mode == "private":
        return {T: capture(T, None) for T in TS}
    pool = torch.cuda.graph_pool_handle()
    order = TS if mode == "shared_up" else TS[::-1]
    return {T: capture(T, pool) for T in order}


def timed(f):
    t0 = time.perf_counter(); f(); torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


print(f"M torch {torch.__version__}")
print(f"M gelu {gelu_path}")
print(f"M weights_MiB {weights / MiB:.1f}")
shared = None
for mode in ("alone", "private", "shared_up", "shared"):  # shared last: its graphs stay for the times
    graphs = kept(mode)
    for T in TS:
        if T in graphs:
            graphs[T].replay()
    used = base - free_bytes()
    reserved = torch.cuda.memory_reserved() - base_reserved
    print(f"M {mode}_MiB {(used + weights) / MiB:.1f}")
    print(f"M {mode}_graph_MiB {used / MiB:.1f}")
    print(f"M {mode}_reserved_MiB {reserved / MiB:.1f}")
    if mode == "shared":
        shared = graphs
    else:
        del graphs
    settle()

steady, switch = {T: [] for T in TS}, {T: [] for T in TS}
n = len(TS)
for r in range(ROUNDS + 1):
    rot = r % n if n >= 3 else 0  # two runs in a row are never of one shape across rounds
    for j in range(n):
        T = TS[(rot + j) % n]
        sw = timed(shared[T].replay)
        st = timed(shared[T].replay)
        if r > 0:  # the first round warms up
            switch[T].append(sw); steady[T].append(st)
for T in TS:
    s, w = sorted(steady[T])[ROUNDS // 2], sorted(switch[T])[ROUNDS // 2]
    print(f"M steady_ms_{T} {s:.3f}")
    print(f"M switch_ms_{T} {w:.3f}")
    print(f"M switch_over_steady_{T} {w / s:.3f}")
del shared
print(f"M leftover_MiB {(base - free_bytes()) / MiB:.1f}")
