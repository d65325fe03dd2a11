#!/usr/bin/env bash
# GEMM checks on the GPU machine, over the binaries that
# scripts/gpu-build.sh left in .gpu/: the cuBLASLt binding against the
# real headers, GEMMs against the cpu backend, and BenchmarkGemm (one gemm
# op through the backend against a raw C loop of cublasLtMatmul with the
# same algorithm and workspace, samples alternated in one run; medians of
# BENCHTIME samples, default 15). Logs go to OUTDIR.
set -uo pipefail
out=${1:?usage: scripts/gpu/gemm.sh OUTDIR}
mkdir -p "$out"
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
cd cuda || exit 1
../.gpu/cuda.test -test.v -test.run 'CuBLAS|Gemm|ColMajor|ViewAlign|BuiltinKernels|HalfBuiltins' -test.timeout 600s >"$out/gemm-tests.log" 2>&1 || status=1
../.gpu/cuda.test -test.run '^$' -test.bench 'BenchmarkGemm' -test.benchtime "${BENCHTIME:-15x}" -test.timeout 600s >"$out/gemm-bench.log" 2>&1 || status=1
grep -E '^(--- |ok|FAIL|PASS)' "$out/gemm-tests.log" | grep -v '^    ' | tail -n 20
grep '^BenchmarkGemm' "$out/gemm-bench.log"
exit $status
