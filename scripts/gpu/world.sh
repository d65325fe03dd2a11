#!/usr/bin/env bash
# Worlds of every GPU of the host (4 or 8), over .gpu/ (built by
# scripts/gpu-build.sh): run on the 4- or 8-GPU machine.
#  - cuda tests at worlds of 2 and N: every collective kind and dtype
#    eager and replayed against the CPU collectives (send/recv as a ring),
#    a failing and a cancelled rank;
#  - the command line at world N, in one process and as N processes
#    (--rank, and torchrun's variables), eager and replayed, each equal
#    to the CPU backend; a failing rank and mismatched programs stop every
#    rank within the timeout, naming the cause;
#  - a 4-stage pipeline across 4 devices (examples/pipeline_4gpu.yaml)
#    eager and replayed, with and without --no-peer, equal to the CPU
#    backend, its trace drawn with every device; a copy between every
#    pair of devices, each with its spans in the trace;
#  - benchmarks beside their raw floors in the same run (all-reduce at
#    world N, peer copy per pair, the N-device pipeline replay), then
#    PyTorch's all-reduce (.gpu/baseline/nccl_ar.py under torchrun) at N.
# NVLink multicast stays off in every process. Usage: scripts/gpu/world.sh OUTDIR
set -uo pipefail
n=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$n" -lt 4 ]; then
	echo "world: skipped: $n GPU(s) visible; these checks need 4 or more"
	exit 0
fi
n=$((n > 8 ? 8 : n))
out=${1:?usage: scripts/gpu/world.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export DAGRUN_REQUIRE_GPUS=$n
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$root/.gpu/cuda.test
dagrun=$root/.gpu/dagrun
status=0
nvidia-smi topo -m >"$out/topology.txt" 2>&1 || true
echo "world of $n GPUs"

tests='SessionCollectivesGPU|RankFailureGPU|RankCancelGPU'
if (cd "$root/cuda" && timeout 600 "$bin" -test.v -test.timeout 500s -test.run "$tests") >"$out/world-tests.log" 2>&1; then
	echo "ok   cuda tests: $(grep -c -- '--- PASS' "$out/world-tests.log") passed (worlds of 2 and $n), $(grep -c -- '--- SKIP' "$out/world-tests.log") skipped"
else
	echo "FAIL cuda tests (see world-tests.log)"
	grep -E -- '--- FAIL|panic|timed out' "$out/world-tests.log" | head -n 20
	status=1
fi
grep -h 'every rank failed after' "$out/world-tests.log" | head -n 4

cd "$out" || exit 1
# The command line at world n: every collective, on buffers of their own;
# send and recv as a ring.
q=262144
cat >w.yaml <<SPEC
run: {world: $n}
buffers:
  g:  {dtype: f32, count: $((q * n)), init: {random: {seed: 3, per_rank: true}}}
  s:  {dtype: f32, count: $q, init: {random: {seed: 4, per_rank: true}}}
  ar: {dtype: f32, count: $((q * n))}
  mx: {dtype: f32, count: $((q * n))}
  ag: {dtype: f32, count: $((q * n))}
  rs: {dtype: f32, count: $q}
  bc: {dtype: f32, count: $((q * n))}
  rv: {dtype: f32, count: $q}
ops:
  - {copy: {from: g, to: ar}, name: load_ar}
  - {all_reduce: {view: ar, op: sum}, name: sum}
  - {copy: {from: g, to: mx}, name: load_mx}
  - {all_reduce: {view: mx, op: max}, name: max}
  - {all_gather: {in: s, out: ag}, name: gather}
  - {reduce_scatter: {in: g, out: rs, op: avg}, name: scatter}
  - {copy: {from: g, to: bc}, name: load_bc}
  - {broadcast: {view: bc, root: $((n - 1))}, name: bcast}
  - {send: {view: s, to: "(rank + 1) % world"}, name: pass}
  - {recv: {view: rv, from: "(rank + world - 1) % world"}, name: take}
outputs:
  - {buffer: rv, save: "rv_{rank}.bin"}
  - {buffer: ar, save: "ar_{rank}.bin"}
  - {buffer: mx, save: "mx_{rank}.bin"}
  - {buffer: ag, save: "ag_{rank}.bin"}
  - {buffer: rs, save: "rs_{rank}.bin"}
  - {buffer: bc, save: "bc_{rank}.bin"}
SPEC

check() { # name command...
	local name=$1
	shift
	if "$@" >"$name.out" 2>"$name.err"; then
		echo "ok   $name"
	else
		echo "FAIL $name (status $?)"
		tail -n 5 "$name.err"
		status=1
	fi
}

# same DIR_A DIR_B [RTOL]: the float32 files agree within a relative RTOL,
# 1e-6 by default (NCCL sums in another order than the CPU collectives;
# cuBLAS's GEMMs in another order than gonum's: 1e-4).
same() {
	python3 - "$1" "$2" "${3:-1e-6}" <<'PY'
import sys, glob, os, array
a, b, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
bad, files = 0, sorted(glob.glob(os.path.join(a, "*.bin")))
for fa in files:
    fb = os.path.join(b, os.path.basename(fa))
    if not os.path.exists(fb):
        print(f"{os.path.basename(fa)}: missing"); bad = 1; continue
    xa, xb = array.array("f"), array.array("f")
    xa.frombytes(open(fa, "rb").read()); xb.frombytes(open(fb, "rb").read())
    worst = max((abs(p - q) / max(abs(p), abs(q), 1e-30) for p, q in zip(xa, xb)), default=0.0)
    bad |= len(xa) != len(xb) or worst > rtol
    print(f"{os.path.basename(fa)}: {len(xa)} elements, worst relative difference {worst:.3g}")
print(f"{len(files)} files within {rtol:g}: {not bad}")
sys.exit(bad or not files)
PY
}

# procs NAME PORT ARGS...: n processes of w.yaml, one rank each.
procs() {
	local name=$1 port=$2 r pids=() bad=0
	shift 2
	for ((r = 1; r < n; r++)); do
		DAGRUN_PORT=$port "$dagrun" run w.yaml --backend cuda --rank $r --world $n --save-dir "$name" "$@" >"$name.$r.out" 2>"$name.$r.err" &
		pids+=($!)
	done
	check "$name" env DAGRUN_PORT=$port "$dagrun" run w.yaml --backend cuda --rank 0 --world $n --save-dir "$name" "$@"
	for ((r = 1; r < n; r++)); do
		wait "${pids[r - 1]}" || { echo "FAIL $name rank $r"; tail -n 5 "$name.$r.err"; bad=1; }
	done
	[ $bad = 0 ] || status=1
}

check cpu "$dagrun" run w.yaml --backend cpu --save-dir cpu
check world-eager "$dagrun" run w.yaml --backend cuda --save-dir world-eager
check world-graph "$dagrun" run w.yaml --backend cuda --graph --repeat 3 --save-dir world-graph
procs procs-eager 29621
procs procs-graph 29622 --graph --repeat 3
pids=()
for ((r = 1; r < n; r++)); do
	DAGRUN_PORT=29623 RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r "$dagrun" run w.yaml --backend cuda --save-dir torchvars >"tv.$r.out" 2>"tv.$r.err" &
	pids+=($!)
done
check procs-torchrun-vars env DAGRUN_PORT=29623 RANK=0 WORLD_SIZE=$n LOCAL_RANK=0 "$dagrun" run w.yaml --backend cuda --save-dir torchvars
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL procs-torchrun-vars: a rank failed"; status=1; }; done
for d in world-eager world-graph procs-eager procs-graph torchvars; do
	check "same-$d" same cpu "$d"
	tail -n 1 "same-$d.out"
done

# A rank that fails mid-run (its save is blocked by a directory; its
# all-reduce waits for the save): every other rank stops within the
# collective timeout, naming rank 1, and every process exits 1.
cat >failing.yaml <<SPEC
run: {world: $n, repeat: 3}
buffers:
  h: {dtype: f32, count: 4, placement: pinned, init: {value: 1}}
  d: {dtype: f32, count: 4}
ops:
  - {host: save, buffer: h, path: "h_{rank}", name: save_h}
  - {copy: {from: h, to: d}, name: upload, after: [save_h]}
  - {all_reduce: {view: d}, name: reduce}
SPEC
mkdir -p h_1
# stopall PORT SPEC_FOR_RANK...: runs rank r of SPEC_FOR_RANK[r] in its own
# process; prints how long the slowest took and every status.
stopall() {
	local port=$1 r pids=() start
	shift
	start=$(date +%s)
	for ((r = 0; r < n; r++)); do
		DAGRUN_PORT=$port timeout 120 "$dagrun" run "${@:r+1:1}" --backend cuda --rank $r --world $n >"stop.$r.out" 2>"stop.$r.err" &
		pids+=($!)
	done
	statuses=()
	for p in "${pids[@]}"; do
		wait "$p"
		statuses+=($?)
	done
	took=$(($(date +%s) - start))
}
specs=()
for ((r = 0; r < n; r++)); do specs+=(failing.yaml); done
stopall 29624 "${specs[@]}"
named=$(grep -l 'rank 1' stop.*.err | wc -l)
if [ "$took" -lt 60 ] && [ "$(printf '%s\n' "${statuses[@]}" | sort -u)" = 1 ] && [ "$named" = "$n" ]; then
	echo "ok   failing-rank: every rank exited 1 within $took s; $named of $n name rank 1"
else
	echo "FAIL failing-rank: statuses ${statuses[*]} after $took s; $named of $n name rank 1"
	head -n 3 stop.*.err
	status=1
fi
grep -h . stop.0.err | head -n 2

# Mismatched programs: rank 2 reduces mx by min, the others by max. Every rank
# refuses at the rendezvous, naming the collective that differs.
sed "s/op: max/op: min/" w.yaml >w_other.yaml
specs=()
for ((r = 0; r < n; r++)); do
	if [ $r = 2 ]; then specs+=(w_other.yaml); else specs+=(w.yaml); fi
done
stopall 29625 "${specs[@]}"
named=$(grep -l 'differ' stop.*.err | wc -l)
if [ "$took" -lt 60 ] && ! printf '%s\n' "${statuses[@]}" | grep -qx 0 && [ "$named" = "$n" ]; then
	echo "ok   mismatched-programs: every rank refused within $took s (statuses ${statuses[*]}); $named of $n say what differs"
else
	echo "FAIL mismatched-programs: statuses ${statuses[*]} after $took s; $named of $n say what differs"
	head -n 3 stop.*.err
	status=1
fi
grep -h differ stop.0.err | head -n 1

# Several devices of one process: the 4-stage pipeline and a copy between
# every pair of devices, eager and replayed, with and without peer access.
{
	echo "buffers:"
	for ((d = 0; d < n; d++)); do echo "  src$d: {dtype: f32, count: 16777216, device: $d, init: {random: $((40 + d))}}"; done
	for ((f = 0; f < n; f++)); do for ((t = 0; t < n; t++)); do [ $f = $t ] || echo "  c${f}to$t: {dtype: f32, count: 16777216, device: $t}"; done; done
	echo "ops:"
	for ((f = 0; f < n; f++)); do for ((t = 0; t < n; t++)); do [ $f = $t ] || echo "  - {copy: {from: src$f, to: c${f}to$t}, name: copy${f}to$t}"; done; done
	echo "outputs:"
	for ((f = 0; f < n; f++)); do for ((t = 0; t < n; t++)); do [ $f = $t ] || echo "  - {buffer: c${f}to$t, save: c${f}to$t.bin}"; done; done
} >pairs.yaml
cp "$root/.gpu/examples/pipeline_4gpu.yaml" pipeline_4gpu.yaml
sed -i 's/^  - h_y$/  - {buffer: h_y, save: h_y.bin}/' pipeline_4gpu.yaml
for spec in pipeline_4gpu pairs; do
	check "$spec-cpu" "$dagrun" run $spec.yaml --backend cpu --save-dir "$spec-cpu"
	for peer in "" --no-peer; do
		for mode in "" "--graph --repeat 3"; do
			access=${peer#--}
			what="$spec-${access:-peer}-$(echo "${mode:-eager}" | tr -d ' -')"
			# shellcheck disable=SC2086
			check "$what" "$dagrun" run $spec.yaml --backend cuda $peer $mode --save-dir "$what"
			check "same-$what" same "$spec-cpu" "$what" 1e-4
			tail -n 1 "same-$what.out"
			rm -rf "$what"
		done
	done
	rm -rf "$spec-cpu"
done
for spec in pipeline_4gpu pairs; do
	for mode in "" --graph; do
		what="trace-$spec${mode:+-graph}"
		# shellcheck disable=SC2086
		check "$what" "$dagrun" run $spec.yaml --backend cuda $mode --repeat 3 --trace "$what.json"
		python3 - "$what.json" "$spec" "$n" <<'PY' || status=1
import json, sys, re
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
spans = [e for e in ev if e.get("ph") == "X"]
names = {}
for e in spans:
    names.setdefault(e.get("name"), []).append(e)
if sys.argv[2] == "pairs":
    n = int(sys.argv[3])
    want = [f"copy{f}to{t}" for f in range(n) for t in range(n) if f != t]
    bad = [w for w in want if len(names.get(w, [])) < 3 or not any("byte" in k for k in names[w][0].get("args", {}))]
    rates = []
    for w in want:
        a = names.get(w, [{}])[0].get("args", {})
        rate = next((v for k, v in a.items() if "GB/s" in k or "rate" in k.lower()), None)
        rates.append(f"{w[4:]} {rate}" if rate is not None else w[4:])
    print(("ok  " if not bad else "FAIL") + f" {sys.argv[1]}: {len(want) - len(bad)} of {len(want)} pairs have their spans with bytes; " + ", ".join(rates[:12]))
    sys.exit(1 if bad else 0)
pids = sorted({str(e.get("pid")) for e in spans})
print(f"ok   {sys.argv[1]}: {len(spans)} spans over {pids}")
PY
		want=4
		[ "$spec" = pairs ] && want=$n
		drawn=0
		if "$dagrun" viz "$what.json" -o "$what.svg"; then
			drawn=$(for ((d = 0; d < n; d++)); do grep -q ">dev$d\." "$what.svg" && echo $d; done | wc -l)
		fi
		if [ "$drawn" -ge "$want" ]; then
			echo "ok   $what: viz draws $drawn devices"
		else
			echo "FAIL $what: viz draws $drawn devices, not $want"
			status=1
		fi
	done
done

bench() { # name pattern benchtime count
	if ! (cd "$root/cuda" && timeout 600 "$bin" -test.run '^$' -test.bench "$2" -test.benchtime "$3" -test.count "$4" -test.timeout 500s) \
		>"$out/bench-$1.log" 2>&1; then
		echo "FAIL benchmark $1 (see bench-$1.log)"
		tail -n 5 "$out/bench-$1.log"
		status=1
	fi
}
bench allreduce "SessionAllReduce/world$n/" 20x 5
bench pairs 'PeerCopyPairs' 30x 3
bench pipeline "PipelineReplay/devices$n/graph" 300x 5
awk -f "$root/scripts/gpu/bench-table.awk" "$out"/bench-*.log | tee "$out/table.txt"
echo "goals: 256MiB all-reduce >= 0.97x the raw NCCL loop and PyTorch's bus bandwidth; 4KiB <= 1.1x the raw loop's time; peer copy >= 0.95x per pair; the $n-device pipeline replay <= 1.02x the raw graph"

torchrun=/opt/torch/.venv/bin/torchrun
if [ -x "$torchrun" ] && [ -f "$root/.gpu/baseline/nccl_ar.py" ]; then
	if timeout 300 "$torchrun" --nproc_per_node "$n" "$root/.gpu/baseline/nccl_ar.py" >"$out/torch-allreduce.log" 2>&1; then
		echo "PyTorch all-reduce at world $n:"
		grep all_reduce "$out/torch-allreduce.log"
	else
		echo "FAIL PyTorch's all-reduce (see torch-allreduce.log)"
		tail -n 5 "$out/torch-allreduce.log"
		status=1
	fi
else
	echo "PyTorch's all-reduce: skipped ($torchrun or .gpu/baseline/nccl_ar.py missing)"
fi
exit $status
