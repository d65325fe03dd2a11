#!/usr/bin/env bash
# Multi-GPU checks of cuda sessions on the 2-GPU machine (issue 9), over
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

tests='SessionCollectivesGPU|CaptureAcrossDevicesGPU|RankFailureGPU|RankCancelGPU|SessionNCCLMissing|NCCL|CaptureProbe|PeerAccess'
if timeout 900 "$bin" -test.v -test.timeout 600s -test.run "$tests" >"$out/multigpu-tests.log" 2>&1; then
	echo "multi-GPU tests: ok ($(grep -c '^--- PASS' "$out/multigpu-tests.log") passed, $(grep -c -- '--- SKIP' "$out/multigpu-tests.log") skipped)"
else
	echo "multi-GPU tests: FAIL (see $out/multigpu-tests.log)"
	grep -E -- '^\s*--- FAIL|panic|timed out' "$out/multigpu-tests.log" | head -n 20
	status=1
fi
grep -h 'topology:\|rank 0 after' "$out/multigpu-tests.log" | head -n 4

bench() { # name pattern benchtime
	if ! timeout 900 "$bin" -test.run '^$' -test.bench "$2" -test.benchtime "$3" -test.count "${COUNT:-5}" -test.timeout 600s \
		>"$out/bench-$1.log" 2>&1; then
		echo "benchmark $1: FAIL (see $out/bench-$1.log)"
		status=1
	fi
}
bench peer 'SessionPeerCopy|^BenchmarkPeerCopy$' "${PEER_BENCHTIME:-100x}"
bench allreduce 'SessionAllReduce' "${AR_BENCHTIME:-20x}"

# Table: the median of each benchmark's metric (GB/s, busGB/s or us/call)
# and its ratio to the raw floor of the same run: "rate" for GB/s (goal: at
# least 0.9 or 0.95), "time" for us/call (goal: at most 1.1). Replays are
# held to the raw eager loop.
cat "$out"/bench-*.log | awk '
function isort(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) if ($(i+1) == "GB/s" || $(i+1) == "busGB/s" || $(i+1) == "us/call") {
		if (!(name in unit)) order[++n] = name
		unit[name] = $(i+1); v[name] = v[name] " " $i
	}
}
END {
	printf "%-58s %12s %10s %14s\n", "benchmark", "median", "unit", "vs raw floor"
	for (j = 1; j <= n; j++) {
		k = order[j]; m = split(v[k], a, " "); isort(a, m)
		med[k] = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	for (j = 1; j <= n; j++) {
		k = order[j]; ratio = ""
		if (k ~ /\/(session|binding)$/) {
			raw = k; sub(/\/(session|binding)$/, "/raw", raw); sub(/\/replay\/raw$/, "/eager/raw", raw)
			if (raw in med && med[raw] > 0) ratio = sprintf("%.3fx %s", med[k] / med[raw], unit[k] == "us/call" ? "time" : "rate")
		}
		printf "%-58s %12.3f %10s %14s\n", k, med[k], unit[k], ratio
	}
}' | tee "$out/table.txt"
echo "goals: peer copy >= 0.9x rate; 256MiB all-reduce >= 0.95x rate; 4KiB all-reduce <= 1.1x time (eager and replay)"
exit $status
