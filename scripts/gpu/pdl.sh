#!/usr/bin/env bash
# Programmatic dependent launch on the GPU machine, over what
# scripts/gpu-build.sh left in .gpu/: the binding's check against cuda.h,
# the tests (chains of early-launched builtins equal to the cpu backend,
# eagerly and replayed; the fallback with a reason) and BenchmarkPDL
# (cuda/pdl_bench_test.go: 1,000 dependent axpy kernels at 64 KiB, 1 MiB
# and 16 MiB, dagrun against a raw graph and a raw launch loop without
# PDL), the same chains by hand in CUDA C (scripts/gpu/pdl_raw.cu, where
# nvcc is found), then one table of the benchmark's medians. Logs go to
# OUTDIR.
# BENCHTIME (default 20x) sets the samples.
set -uo pipefail
out=${1:?usage: scripts/gpu/pdl.sh OUTDIR}
mkdir -p "$out"
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
(cd cuda && ../.gpu/cuda.test -test.run '^(TestPDL|TestBuiltinsWaitForProducer|TestBuiltinKernels$)' -test.v -test.timeout 600s) \
	>"$out/pdl-test.log" 2>&1 || status=1
grep -E '^(--- |ok|FAIL|PASS)|no early launches here' "$out/pdl-test.log" | grep -v -- '--- PASS: TestBuiltinKernels/' || true
(cd cuda && ../.gpu/cuda.test -test.run '^$' -test.bench '^BenchmarkPDL$' -test.benchtime "${BENCHTIME:-20x}" -test.timeout 600s) \
	>"$out/pdl-bench.log" 2>&1 || status=1

# The same chains by hand (scripts/gpu/pdl_raw.cu), where nvcc is here.
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
	"$nvcc" -O3 -arch=native -o "$out/pdl_raw" scripts/gpu/pdl_raw.cu >"$out/pdl-raw.log" 2>&1 &&
		timeout -s KILL 300 "$out/pdl_raw" >>"$out/pdl-raw.log" 2>&1 || { echo "pdl_raw failed: $out/pdl-raw.log"; status=1; }
	rm -f "$out/pdl_raw"
	# Programmatic edges of both ports in graphs built by hand
	# (scripts/gpu/pdl_edges.cu).
	"$nvcc" -O3 -arch=native -o "$out/pdl_edges" scripts/gpu/pdl_edges.cu >"$out/pdl-edges.log" 2>&1 &&
		timeout -s KILL 120 "$out/pdl_edges" >>"$out/pdl-edges.log" 2>&1 || { echo "pdl_edges failed: $out/pdl-edges.log"; status=1; }
	rm -f "$out/pdl_edges"
	grep 'us/kernel' "$out/pdl-edges.log"
fi

# One table: per size, the edges launched early, dagrun's replay and eager
# times a kernel beside the raw floors, and the ratios (targets:
# replay/raw-graph <= 0.7 at 64KiB, <= 1.0 at 1MiB and 16MiB; eager/raw-eager <= 1.0).
{
	printf '%-6s %6s %8s %9s %8s %9s %8s %9s %8s %9s\n' \
		size early rawg_us replay_us ratio plain/rg rawe_us eager_us ratio target
	for size in 64KiB 1MiB 16MiB; do
		line=$(grep "^BenchmarkPDL/$size" "$out/pdl-bench.log" | head -n 1)
		metric() { echo "$line" | awk -v k="$1" '{for (i = 2; i <= NF; i++) if ($i == k) print $(i-1)}'; }
		target="<=1.0"
		[ "$size" = 64KiB ] && target="<=0.7"
		printf '%-6s %6s %8s %9s %8s %9s %8s %9s %8s %9s\n' "$size" \
			"$(metric early-launches)" "$(metric raw-graph-us/kernel)" "$(metric replay-us/kernel)" "$(metric replay/raw-graph)" \
			"$(metric replay-plain/raw-graph)" "$(metric raw-eager-us/kernel)" "$(metric eager-us/kernel)" "$(metric eager/raw-eager)" "$target"
		[ -n "$line" ] || status=1
	done
} | tee "$out/pdl-table.txt"
exit $status
