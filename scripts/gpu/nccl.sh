#!/usr/bin/env bash
# NCCL and peer-access checks on the 2-GPU machine, over .gpu/cuda.test
# (built by scripts/gpu-build.sh): the multi-GPU tests with
# DAGRUN_REQUIRE_GPUS=2 (so a missing NCCL or device fails them), then the
# all-reduce and peer-copy benchmarks, each beside its raw C loop of the
# same call in the same run. Logs go to OUTDIR.
set -uo pipefail
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ]; then
	echo "$(basename "$0" .sh): skipped: $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s) visible; these checks need 2"
	exit 0
fi
out=${1:?usage: scripts/gpu/nccl.sh OUTDIR}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on the shared host
export DAGRUN_REQUIRE_GPUS=2
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
cd "$root/cuda" || exit 1
if "$root/.gpu/cuda.test" -test.v -test.timeout 300s -test.run 'NCCL|CaptureProbe|PeerAccess' >"$out/nccl-tests.log" 2>&1; then
	echo "nccl tests: ok ($(grep -c '^--- PASS' "$out/nccl-tests.log") passed)"
else
	echo "nccl tests: FAIL (see $out/nccl-tests.log)"
	status=1
fi
grep -h 'ok: one capture' "$out/nccl-tests.log" | head -n 1
if "$root/.gpu/cuda.test" -test.run '^$' -test.bench 'NCCLAllReduce|PeerCopy' -test.benchtime "${BENCHTIME:-2000x}" -test.count 5 \
	>"$out/nccl-bench.log" 2>&1; then
	grep -E '^Benchmark' "$out/nccl-bench.log"
else
	echo "nccl benchmarks: FAIL (see $out/nccl-bench.log)"
	status=1
fi
exit $status
