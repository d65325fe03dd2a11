#!/usr/bin/env bash
# Multi-GPU checks of cuda sessions on the 2-GPU machine, over
# .gpu/cuda.test (built by scripts/gpu-build.sh): the session-level tests
# with DAGRUN_REQUIRE_GPUS=2 (collectives of every kind and dtype eager and
# replayed against the CPU collectives, a 2-device plan captured as one
# graph, a failing and a cancelled rank, NCCL missing), the binding's NCCL
# tests and the raw capture probe; then the benchmarks, each beside its raw
# floor in the same run, and a table of medians and ratios. NVLink
# multicast stays off (NCCL_NVLS_ENABLE=0); nothing calls cuMulticastCreate.
# Usage: scripts/gpu/multigpu.sh OUTDIR
set -uo pipefail
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ]; then
	echo "$(basename "$0" .sh): skipped: $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s) visible; these checks need 2"
	exit 0
fi
out=${1:?usage: scripts/gpu/multigpu.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
export NCCL_NVLS_ENABLE=0
export DAGRUN_REQUIRE_GPUS=2
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$root/.gpu/cuda.test
status=0
cd "$root/cuda" || exit 1
nvidia-smi topo -m >"$out/topology.txt" 2>&1 || true

tests='SessionCollectivesGPU|CaptureAcrossDevicesGPU|FailedCaptureGPU|PeerCaptureProbe|RankFailureGPU|RankCancelGPU|SessionNCCLMissing|NCCL|CaptureProbe|PeerAccess'
if timeout 900 "$bin" -test.v -test.timeout 600s -test.run "$tests" >"$out/multigpu-tests.log" 2>&1; then
	echo "multi-GPU tests: ok ($(grep -c '^--- PASS' "$out/multigpu-tests.log") passed, $(grep -c -- '--- SKIP' "$out/multigpu-tests.log") skipped)"
else
	echo "multi-GPU tests: FAIL (see $out/multigpu-tests.log)"
	grep -E -- '^\s*--- FAIL|panic|timed out' "$out/multigpu-tests.log" | head -n 20
	status=1
fi
grep -h 'topology:\|rank 0 after' "$out/multigpu-tests.log" | head -n 4

# The command line on two devices: every two-device spec, eager and
# replayed (--graph --repeat 3), with peer access and through host memory
# (--no-peer), must leave the CPU backend's outputs; a traced run and a
# traced replay must have a span, with bytes, for every copy between the
# devices, and viz must draw both devices.
dagrun=$root/.gpu/dagrun
cli=$out/cli
mkdir -p "$cli"
cat >"$cli/peer_copies.yaml" <<'SPEC'
# Three 256 MiB copies from device 1 to device 0 (one into a temporary),
# a copy inside device 0, and a 20 MiB copy back to device 1.
buffers:
  a:  {dtype: f32, count: 67108864, device: 1, init: {random: 5}}
  b:  {dtype: f32, count: 67108864, device: 1, init: {random: 6}}
  c:  {dtype: f32, count: 67108864, device: 1, init: {random: 7}}
  a0: {dtype: f32, count: 67108864, device: 0}
  b0: {dtype: f32, count: 67108864, device: 0}
  t0: {dtype: f32, count: 67108864, device: 0, temporary: true}
  c0: {dtype: f32, count: 67108864, device: 0}
  d0: {dtype: f32, count: 67108864, device: 0}
  back: {dtype: f32, count: 5242880, device: 1}
ops:
  - {copy: {from: a, to: a0}, name: peer_a}
  - {copy: {from: b, to: b0}, name: peer_b}
  - {copy: {from: c, to: t0}, name: peer_c}
  - {launch: scale, args: {x: t0, alpha: 2}, name: double_c}
  - {copy: {from: t0, to: c0}, name: keep_c}
  - {copy: {from: a0, to: d0}, name: local_a}
  - {launch: axpy, args: {y: d0, x: b0, alpha: 0.5}, name: mix}
  - {copy: {from: "d0[0:20971520]", to: back}, name: peer_back}
outputs: [a0, b0, c0, d0, back]
SPEC
# same WHAT GOT WANT: the reports (dagrun run --json of a spec whose
# outputs are saved) hold the same outputs, byte for byte, or (GEMMs:
# cuBLAS and gonum sum in other orders) element by element within a
# relative 1e-4.
same() {
	local verdict
	if verdict=$(python3 "$root/scripts/gpu/outputs.py" compare --rtol 1e-4 "$2" "$3"); then
		echo "ok   $1: the CPU backend's outputs ($verdict)"
	else
		echo "FAIL $1: $verdict"
		status=1
	fi
}
for spec in "$root/.gpu/examples/pipeline_2gpu.yaml" "$cli/peer_copies.yaml"; do
	name=$(basename "$spec" .yaml)
	spec=$(python3 "$root/scripts/gpu/outputs.py" saving "$spec") || { echo "FAIL $name: its outputs cannot be saved"; status=1; continue; }
	if ! (cd "$(dirname "$spec")" && "$dagrun" run "$spec" --backend cpu --json --save-dir "$cli/$name-cpu" >"$cli/$name-cpu.json" 2>"$cli/$name-cpu.err"); then
		echo "FAIL $name on cpu"; cat "$cli/$name-cpu.err"; status=1; continue
	fi
	for peer in "" --no-peer; do
		for mode in "" "--graph --repeat 3" "--repeat 2"; do
			what="$name ${peer:-peer} ${mode:-eager}"
			rm -rf "$cli/$name-cuda"
			# shellcheck disable=SC2086
			if (cd "$(dirname "$spec")" && "$dagrun" run "$spec" --backend cuda $peer $mode --json --save-dir "$cli/$name-cuda" >"$cli/$name-cuda.json" 2>"$cli/last.err"); then
				same "$what" "$cli/$name-cuda.json" "$cli/$name-cpu.json"
			else
				echo "FAIL $what: the run failed"
				cat "$cli/last.err"
				status=1
			fi
		done
	done
	rm -rf "$cli/$name-cuda" "$cli/$name-cpu" # GiBs of outputs
done
for mode in "" "--graph"; do
	what="trace ${mode:-eager}"
	# shellcheck disable=SC2086
	if ! "$dagrun" run "$cli/peer_copies.yaml" --backend cuda $mode --repeat 3 --trace "$cli/trace${mode}.json" >"$cli/trace${mode}.txt" 2>&1; then
		echo "FAIL $what: the traced run failed"; cat "$cli/trace${mode}.txt"; status=1; continue
	fi
	if python3 - "$cli/trace${mode}.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
want = {"peer_a", "peer_b", "peer_c", "peer_back", "local_a"}
seen = {}
for e in ev:
    if e.get("ph") == "X" and e.get("name") in want:
        seen.setdefault(e["name"], []).append(e)
bad = 0
for n in sorted(want):
    spans = seen.get(n, [])
    args = spans[0].get("args", {}) if spans else {}
    print(f"  {n}: {len(spans)} spans, args {sorted(args)[:6]}, pids {sorted({s.get('pid') for s in spans})}")
    bad |= len(spans) < 3 or not any("byte" in k for k in args)
sys.exit(bad)
PY
	then echo "ok   $what: every copy has its spans with bytes"; else echo "FAIL $what: copies missing from the trace"; status=1; fi
	grep -i -E 'peer|copy|GB/s' "$cli/trace${mode}.txt" | head -n 8
	if "$dagrun" viz "$cli/trace${mode}.json" -o "$cli/trace${mode}.svg" && grep -q '>dev1\.' "$cli/trace${mode}.svg" && grep -q '>dev0\.' "$cli/trace${mode}.svg"; then
		echo "ok   $what: viz draws both devices"
	else
		echo "FAIL $what: viz does not draw both devices"; status=1
	fi
done

bench() { # name pattern benchtime
	if ! timeout 900 "$bin" -test.run '^$' -test.bench "$2" -test.benchtime "$3" -test.count "${COUNT:-5}" -test.timeout 600s \
		>"$out/bench-$1.log" 2>&1; then
		echo "benchmark $1: FAIL (see $out/bench-$1.log)"
		status=1
	fi
}
bench peer 'SessionPeerCopy|^BenchmarkPeerCopy$' "${PEER_BENCHTIME:-100x}"
bench allreduce 'SessionAllReduce' "${AR_BENCHTIME:-20x}"
bench pipeline 'PipelineReplay/devices2/' "${PIPE_BENCHTIME:-500x}"

# Table: the median of each benchmark's metric (GB/s, busGB/s or us/call)
# and its ratio to the raw floor of the same run: "rate" for GB/s (goal: at
# least 0.9 or 0.95), "time" for us/call (goal: at most 1.1). Replays are
# held to the same calls captured by hand into a raw graph, and shown
# beside the raw eager loop too.
awk -f "$root/scripts/gpu/bench-table.awk" "$out"/bench-*.log | tee "$out/table.txt"
echo "goals: a captured two-device pipeline <= 1.02x time; peer copy >= 0.95x rate, via host >= 0.9x the raw staged copy; 256MiB all-reduce >= 0.95x rate; 4KiB all-reduce <= 1.1x time (eager and replay)"
exit $status
