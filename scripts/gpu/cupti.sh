#!/usr/bin/env bash
# CUPTI checks on the GPU machine, from the checkout's root, with the test
# binary scripts/gpu-build.sh left in .gpu/: the layout check and the record
# tests (verbose, so their logs show the CUPTI version and record counts,
# CUPTI's dropped count and dagrun's losses apart, and the sink's
# diagnostics), the replays traced back to back (TestCUPTIGraphReplayMarkers,
# TestCUPTISessionReplayBatch) and timed whole from graph-level records
# (TestCUPTIGraphLevel, TestCUPTISessionReplayWhole), dagrun run
# --trace-detail replays on fan_out.yaml, then the tracing floor benchmark
# alone in its own process (CUPTI, once loaded, stays in the process). Logs
# go to OUTDIR.
set -uo pipefail
out=${1:?usage: scripts/gpu/cupti.sh OUTDIR}
mkdir -p "$out"
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
root=$PWD
(cd cuda && "$root/.gpu/cuda.test" -test.v -test.run 'CUPTI|ResolveRecords|ResolveGraphNodes|ResolveReplayMarkers' -test.timeout 300s) >"$out/cupti-tests.log" 2>&1 || status=1
if [ -x .gpu/dagrun ]; then
	.gpu/dagrun run examples/fan_out.yaml --backend cuda --graph --repeat 50 --trace "$out/whole.json" --trace-runs 1-3 \
		--trace-detail replays >"$out/whole-replays.txt" 2>&1 || status=1
fi
(cd cuda && DAGRUN_BENCH_CUPTI=1 "$root/.gpu/cuda.test" -test.run '^$' -test.bench 'CUPTITracing' \
	-test.benchtime "${BENCHTIME:-30x}" -test.timeout 300s) >"$out/cupti-bench.log" 2>&1 || status=1
grep -E '^(--- |ok|FAIL|PASS)' "$out/cupti-tests.log"
# Where records went missing: CUPTI's count, dagrun's, and the sink's view.
grep -E 'dropped by CUPTI|sink: |replays read|kinds enabled|  replay [0-9]+: ' "$out/cupti-tests.log"
# Whole replays from dagrun run: the source, each replay, and the trace's figures.
if [ -f "$out/whole-replays.txt" ]; then
	grep -E 'ops timed by|replays traced as whole|^  replay [0-9]+:|trace of' "$out/whole-replays.txt"
	grep -oE '"(timing|replay_timing)":"[^"]*"|"replays":\[[^]]*\]' "$out/whole.json"
fi
grep -E '^Benchmark' "$out/cupti-bench.log"
# A benchmark that skipped prints no line: that is a failure here.
if ! grep -q '^BenchmarkCUPTITracing' "$out/cupti-bench.log" || grep -q -- '--- SKIP' "$out/cupti-bench.log"; then
	echo "FAIL: BenchmarkCUPTITracing skipped or printed no result"
	status=1
fi
exit $status
