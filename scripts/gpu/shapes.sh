#!/usr/bin/env bash
# Shapes on the GPU machine, over what scripts/gpu-build.sh left in .gpu/:
# examples/mlp_stream.yaml at T = 512, 2048 and 8192 from one session.
# BenchmarkShapes (cuda/shapes_bench_test.go: one executor.Shapes against
# sessions of their own, in the same run: device memory, replays switching
# shapes against steady ones, first runs against an eager run plus a
# capture), PyTorch's graphs of the same block with private pools and one
# shared pool (scripts/gpu/shapes_torch.py), and dagrun run --set, then
# one short table. Logs go to OUTDIR. Exit status 1 when a command fails
# or prints no figures; a target missed is marked MISS in the table.
set -uo pipefail
out=${1:?usage: scripts/gpu/shapes.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py=${TORCH_PYTHON:-/opt/torch/.venv/bin/python}
status=0

(cd cuda && ../.gpu/cuda.test -test.run '^$' -test.bench '^BenchmarkShapes$' -test.benchtime 1x -test.timeout 600s) \
	>"$out/shapes-bench.log" 2>&1 || { echo "BenchmarkShapes failed: $out/shapes-bench.log"; status=1; }
"$py" scripts/gpu/shapes_torch.py 512 2048 8192 >"$out/shapes-torch.log" 2>&1 ||
	{ echo "shapes_torch.py failed: $out/shapes-torch.log"; status=1; }
spec=.gpu/examples/mlp_stream.yaml
[ -f "$spec" ] || spec=examples/mlp_stream.yaml
.gpu/dagrun run "$spec" --backend cuda --set T=512,2048,8192 --repeat 20 --json \
	>"$out/shapes-cli.json" 2>"$out/shapes-cli.err" || { echo "dagrun run --set failed: $out/shapes-cli.err"; status=1; }

python3 - "$out" <<'PY' | tee "$out/shapes-table.txt" || status=1
import json, os, re, sys
out = sys.argv[1]
TS = [512, 2048, 8192]
missing = []

def read(name):
    try:
        with open(os.path.join(out, name)) as f:
            return f.read()
    except OSError:
        return ""

bench = {}  # sub-benchmark -> unit -> value
for line in read("shapes-bench.log").splitlines():
    f = line.split()
    if not f or not f[0].startswith("BenchmarkShapes/"):
        continue
    sub = re.sub(r"-\d+$", "", f[0].split("/", 1)[1])  # less the GOMAXPROCS suffix
    bench[sub] = {f[i + 1]: float(f[i]) for i in range(2, len(f) - 1, 2)}
torch = {}
for line in read("shapes-torch.log").splitlines():
    f = line.split()
    if len(f) == 3 and f[0] == "M":
        try:
            torch[f[1]] = float(f[2])
        except ValueError:
            torch[f[1]] = f[2]
try:
    cli = json.loads(read("shapes-cli.json"))
except ValueError:
    cli = {}

def get(d, key, where):
    if key in d:
        return d[key]
    missing.append(f"{where} {key}")
    return None

def b(sub, unit):
    return get(bench.get(sub, {}), unit, "BenchmarkShapes/" + sub)

def t(key):
    return get(torch, key, "shapes_torch.py")

def num(v, w, p=3):
    return f"{v:{w}.{p}f}" if isinstance(v, float) else f"{'-':>{w}}"

def ratio(a, c):  # None where either is missing or not positive (memory measured wrong)
    return a / c if isinstance(a, float) and isinstance(c, float) and a > 0 and c > 0 else None

cli_shapes = {s["values"].get("T"): s for s in cli.get("shapes", [])}

def cli_ms(T, key):
    g = (cli_shapes.get(T) or {}).get("graph") or {}
    if key not in g:
        missing.append(f"dagrun run --set T={T} graph.{key}")
        return None
    return g[key] / 1e6

print("shapes: examples/mlp_stream.yaml, one Shapes of T=512,2048,8192; times in ms, medians (BenchmarkShapes); PyTorch: its shared-pool graphs")
print(f"{'T':<5} {'steady':>7} {'switch':>7} {'sw/st':>6} | {'new':>7} {'back':>7} {'eager':>7} {'capt':>6} {'plan':>6} {'n/(e+c)':>7} {'b/(e+c)':>7} |"
      f" {'fresh':>7} {'cold':>7} {'fr/cold':>7} | {'torch_st':>8} {'torch_sw':>8} {'sw/st':>6} | {'cli_rep':>7}")
worst = {"switch": None, "first": None}
for T in TS:
    l = f"T{T}"
    sw_st = b("switch", f"{l}-switch/steady")
    f_ec = b("first", f"{l}-firstnew/eager+capture")
    back_ec = b("first", f"{l}-first/eager+capture")
    for k, v in (("switch", sw_st), ("first", f_ec)):
        if v is not None:
            worst[k] = v if worst[k] is None else max(worst[k], v)
    tst, tsw = t(f"steady_ms_{T}"), t(f"switch_ms_{T}")
    print(f"{T:<5} {num(b('switch', f'{l}-steady-ms'), 7)} {num(b('switch', f'{l}-switch-ms'), 7)} {num(sw_st, 6)} |"
          f" {num(b('first', f'{l}-firstnew-ms'), 7)} {num(b('first', f'{l}-first-ms'), 7)} {num(b('first', f'{l}-eager-ms'), 7)}"
          f" {num(b('first', f'{l}-capture-ms'), 6)} {num(b('first', f'{l}-plan-ms'), 6)} {num(f_ec, 7)} {num(back_ec, 7)} |"
          f" {num(b('fresh', f'{l}-fresh-ms'), 7, 1)} {num(b('fresh', f'{l}-cold-ms'), 7, 1)} {num(b('fresh', f'{l}-fresh/cold'), 7)} |"
          f" {num(tst, 8)} {num(tsw, 8)} {num(ratio(tsw, tst), 6)} |"
          f" {num(cli_ms(T, 'per_replay_ns'), 7)}")

parts = ["build", "plan", "drop", "open", "capture", "instantiate", "replay"]
print("first run of a new shape (never seen: built and planned) and of one back (its plan kept), part by part (ShapeRun.Took; replay: the rest), ms")
print(f"{'T':<5} {'':<4} " + " ".join(f"{p:>11}" for p in parts))
for T in TS:
    f = bench.get("first", {})
    for kind, what in (("firstnew", "new"), ("first", "back")):
        print(f"{T:<5} {what:<4} " + " ".join(num(f.get(f"T{T}-{kind}-{p}-ms"), 11) for p in parts))

def verdict(v, target):
    return "-" if v is None else f"{v:.3f} {'ok' if v <= target else 'MISS'}"

print(f"targets: switch/steady <= 1.05: worst {verdict(worst['switch'], 1.05)}; a new shape's first/(eager+capture) <= 1.0: worst {verdict(worst['first'], 1.0)}")
shapes, largest, separate = b("memory", "shapes-MiB"), b("memory", "largest-MiB"), b("memory", "separate-MiB")
print(f"memory MiB, dagrun:  one Shapes {num(shapes, 0, 0).strip()}, T=8192 alone {num(largest, 0, 0).strip()}:"
      f" {verdict(ratio(shapes, largest), 1.1)} (target <= 1.1); three sessions {num(separate, 0, 0).strip()} ({num(ratio(separate, largest), 0).strip()}x)")
talone = t("alone_MiB")
parts = []
for mode, what in (("private", "private pools"), ("shared", "one shared pool"), ("shared_up", "shared, smallest first")):
    v = t(f"{mode}_MiB")
    parts.append(f"{what} {num(v, 0, 0).strip()} ({num(ratio(v, talone), 0).strip()}x)")
print(f"memory MiB, PyTorch: T=8192 alone {num(talone, 0, 0).strip()}; " + "; ".join(parts) + " (weights included, as dagrun's)")
for m in cli.get("memory", []):
    if m.get("memory") == "device 0":
        held = (m["persistent_bytes"] + m["arena_bytes"]) / 2**20
        print(f"memory MiB, dagrun run --set (planned, device 0): held {held:.0f}, largest alone {m['largest_shape_bytes'] / 2**20:.0f},"
              f" sessions of their own {m['separate_sessions_bytes'] / 2**20:.0f}")
        break
else:
    missing.append("dagrun run --set memory of device 0")
if missing:
    print("missing figures: " + "; ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else ""))
    sys.exit(1)
PY
exit $status
