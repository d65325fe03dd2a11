#!/usr/bin/env bash
# Loops and branches on CUDA: the conditional-node probe (raw WHILE node,
# unrolled body and host-driven loop per iteration), the loop tests of the
# cuda package (tracing a loop among them, against its goals), BenchmarkWhileGPU beside the probe's floors (a while ending
# in set_flag, whose last kernel sets the condition, against the raw WHILE
# node: target ratio at most 1.03), and every
# example with a while or an if on cuda against cpu, eager and replayed.
# Usage: scripts/gpu/loops.sh OUTDIR (run from the directory that holds
# .gpu/, as scripts/gpu-check.sh does).
set -uo pipefail
out=${1:?usage: loops.sh OUTDIR}
mkdir -p "$out"
examples=.gpu/examples
[ -d "$examples" ] || examples=examples
fail=0

(cd cuda && ../.gpu/cuda.test -test.v -test.timeout 300s \
	-test.run 'TestConditionalProbe|TestWhileGPU|TestWhileMaxGPU|TestIfElseAndNestingGPU|TestRandomLoopsGPU|TestLoopIterationSpansGPU|TestCondInLastKernelGPU|TestRandomCondInLastKernelGPU|TestCondGraphsOnCPU|TestCondInLastKernelSpansGPU|TestLoopTraceGPU') >"$out/tests.log" 2>&1 || fail=1
echo "tests: $(grep -c '^--- PASS' "$out/tests.log") passed, $(grep -c '^--- FAIL' "$out/tests.log") failed, $(grep -c '^--- SKIP' "$out/tests.log") skipped"
grep -E 'FAIL|Error|WRONG' "$out/tests.log" | head -n 20
# Tracing a loop of 1000 iterations (9 empty kernels, a count down and
# set_flag) with CUPTI, against the same loop untraced in the same run:
# eager at most 1.3x, and a traced replay's loop span at least 0.9 of the
# replay's wall time (TestLoopTraceGPU's line; BenchmarkLoopTracing has
# the same figures).
grep -o 'loop trace: .*' "$out/tests.log" | head -n 1 | grep . || echo "loop trace: no figures (TestLoopTraceGPU did not run)"
(cd cuda && ../.gpu/cuda.test -test.run '^$' -test.bench 'BenchmarkWhileGPU' -test.benchtime 5x -test.timeout 120s) >"$out/bench.log" 2>&1 || fail=1

# One row per body size: dagrun's replayed whiles against the probe's raw
# WHILE node, every body k empty kernels, a count down and the kernel
# that sets the condition (k+2 kernels): dagrun's set_flag ending its body
# (its kernel sets the condition), and dagrun's condition kernel after a
# count down that sets the flag.
for k in 1 9 99; do
	raw=$(grep -o "K=$k while_us=[0-9.]* unrolled_us=[0-9.]* host_us=[0-9.]*" "$out/tests.log" | head -n 1)
	fused=$(grep "BenchmarkWhileGPU/set_flag/k=$k-" "$out/bench.log" | grep -o '[0-9.]* us/iter' | head -n 1)
	ours=$(grep "BenchmarkWhileGPU/k=$k-" "$out/bench.log" | grep -o '[0-9.]* us/iter' | head -n 1)
	python3 - "$k" "$raw" "$fused" "$ours" <<'PY'
import re, sys
k, raw, fused, ours = sys.argv[1:5]
f = dict(re.findall(r'(\w+)_us=([0-9.]+)', raw))
s, d = re.match(r'([0-9.]+)', fused), re.match(r'([0-9.]+)', ours)
if not f or not s or not d:
    print("K=%s: no figures (probe %r, bench %r, %r)" % (k, raw, fused, ours)); sys.exit()
w, u, h, sf, o = (float(f["while"]), float(f["unrolled"]), float(f["host"]), float(s.group(1)), float(d.group(1)))
verdict = "ok" if sf / w <= 1.03 else "OVER"
print("K=%s per iteration, us: dagrun while ending in set_flag %.2f; raw WHILE node %.2f (ratio %.3f, target <= 1.03: %s); "
      "dagrun while with its condition kernel %.2f (ratio %.3f); unrolled %.2f; host loop %.2f" % (k, sf, w, sf / w, verdict, o, o / w, u, h))
PY
done

for spec in "$examples"/*.yaml; do
	grep -qE '^\s*- *(while|if):|^\s*-? *\{ *(while|if):' "$spec" || continue
	ex=$(basename "$spec" .yaml)
	# Outputs saved, to compare element by element.
	spec=$(python3 scripts/gpu/outputs.py saving "$spec") || { echo "$ex: FAIL (its outputs cannot be saved)"; fail=1; continue; }
	for mode in eager graph; do
		# A replayed run repeats: the cpu backend runs as many times.
		flags=() repeat=()
		[ $mode = graph ] && flags=(--graph) repeat=(--repeat 20)
		.gpu/dagrun run "$spec" --backend cpu "${repeat[@]}" --json --save-dir "$out/$ex-cpu-$mode" >"$out/$ex-cpu-$mode.json" 2>"$out/$ex-cpu.err" || { echo "$ex: cpu FAIL"; fail=1; continue; }
		if .gpu/dagrun run "$spec" --backend cuda "${flags[@]}" "${repeat[@]}" --json --save-dir "$out/$ex-$mode" >"$out/$ex-$mode.json" 2>"$out/$ex-$mode.err" &&
			python3 scripts/gpu/outputs.py compare "$out/$ex-$mode.json" "$out/$ex-cpu-$mode.json" >"$out/$ex-$mode.verdict"; then
			echo "$ex $mode: ok, equal to cpu"
		else
			echo "$ex $mode: FAIL ($(cat "$out/$ex-$mode.verdict" 2>/dev/null; head -c 300 "$out/$ex-$mode.err"))"
			fail=1
		fi
	done
done

# Traces: on cuda (CUPTI), the summary counts a loop's iterations as the
# cpu backend's does, eager and replayed.
if [ -f "$examples/jacobi.yaml" ]; then
	for mode in "" "--graph --repeat 3"; do
		# shellcheck disable=SC2086
		.gpu/dagrun run "$examples/jacobi.yaml" --backend cuda $mode --trace "$out/jacobi-trace.json" >"$out/jacobi-trace.txt" 2>&1
		if grep -qE '^refine +[0-9]+ +50( |$)' "$out/jacobi-trace.txt"; then
			echo "jacobi trace ${mode:-eager}: ok, 50 iterations in the summary"
		else
			echo "jacobi trace ${mode:-eager}: FAIL"; tail -n 12 "$out/jacobi-trace.txt"; fail=1
		fi
	done
fi
# The same loop traced by hand in CUDA C, no dagrun
# (scripts/gpu/cupti_loop_raw.cu): a sample recorded, the rest not, as
# cuda/loopsample.go traces an eager loop, against the loop untraced.
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
	if "$nvcc" -O3 -arch=native -I/usr/local/cuda/extras/CUPTI/include -o "$out/cupti_loop_raw" scripts/gpu/cupti_loop_raw.cu \
		-L/usr/local/cuda/lib64 -lcupti -lcuda >"$out/cupti-loop-raw.log" 2>&1 &&
		timeout -s KILL 120 "$out/cupti_loop_raw" >>"$out/cupti-loop-raw.log" 2>&1; then
		grep -E 'untraced|toggled' "$out/cupti-loop-raw.log"
	else
		echo "cupti_loop_raw failed: $out/cupti-loop-raw.log"
		fail=1
	fi
	rm -f "$out/cupti_loop_raw"
	# What the kernel that ends an iteration costs, dagrun's kernels
	# copied as they were and as they are (scripts/gpu/loopk.cu).
	if "$nvcc" -O3 -arch=native -o "$out/loopk" scripts/gpu/loopk.cu >"$out/loopk.log" 2>&1 &&
		timeout -s KILL 60 "$out/loopk" >>"$out/loopk.log" 2>&1; then
		grep 'us/iter' "$out/loopk.log"
	else
		echo "loopk failed: $out/loopk.log"
		fail=1
	fi
	rm -f "$out/loopk"
fi
exit $fail
