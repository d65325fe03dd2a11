#!/usr/bin/env bash
# The MLP benchmark on the GPU machine, over what
# scripts/gpu-build.sh left in .gpu/: BenchmarkMLP (cuda/mlp_bench_test.go:
# the chunked MLP pipeline of examples/mlp_stream.yaml built with
# dag.Builder at T = 512, 2048, 8192; dagrun eager and graph replay, fused
# and not, beside the compute-alone bounds measured in the same run), PyTorch's figures from
# the project's baseline (../shared/baseline/mlp.py, copied to
# .gpu/mlp_baseline.py) run right after each T of it on the same machine, one table of
# both, and the chunked pipeline's trace overlap from the CLI when the
# spec is there. Logs go to OUTDIR.
set -uo pipefail
out=${1:?usage: scripts/gpu/mlp.sh OUTDIR}
mkdir -p "$out"
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
# Each T in a process of its own, PyTorch's figures right after it:
# the device drifts over minutes, and CUPTI, once the breakdown
# (DAGRUN_BENCH_CUPTI) has loaded it, instruments every later launch of
# its process.
: >"$out/mlp-bench.log"
py=/opt/torch/.venv/bin/python
for t in 512 2048 8192; do
	(cd cuda && DAGRUN_BENCH_CUPTI=1 ../.gpu/cuda.test -test.run '^$' -test.bench "^BenchmarkMLP\$/^T=$t\$" -test.benchtime 1x -test.timeout 900s) \
		>>"$out/mlp-bench.log" 2>&1 || status=1
	if [ -f .gpu/mlp_baseline.py ]; then
		"$py" .gpu/mlp_baseline.py "$t" >"$out/mlp-torch-$t.log" 2>&1 || status=1
	else
		echo "no .gpu/mlp_baseline.py: scripts/gpu-build.sh copies it from ../shared/baseline/mlp.py" >"$out/mlp-torch-$t.log"
		status=1
	fi
done

# One table: dagrun's medians (fused and split, the defaults, and as
# declared: decl), the bounds of the same run (compute alone unfused and
# fused; the unfused pipeline bound adds the first upload and the last
# download), the ratios
# to the unfused pipeline bound, and PyTorch's best pipeline (serial, by
# hand with events, its graph, and the last two with gelu fused) with
# dagrun's ratios to it.
{
	printf '%-5s %9s %9s %9s %9s | %9s %9s %9s %8s %8s %8s | %9s %-13s %8s %8s\n' \
		T eager_ms replay_ms decl_ms raw_ms bound_ms fbound_ms pipe_ms eager/p replay/p decl/p torch_ms torch_best eager/t replay/t
	for t in 512 2048 8192; do
		line=$(grep "^BenchmarkMLP/T=$t" "$out/mlp-bench.log" | head -n 1)
		metric() { echo "$line" | awk -v k="$1" '{for (i = 2; i <= NF; i++) if ($i == k) print $(i-1)}'; }
		best=$(awk '$1 == "M" && ($2 == "serial_ms" || $2 == "manual_ms" || $2 == "graph_ms" || $2 == "manual_fused_ms" || $2 == "graph_fused_ms") {print $3, $2}' "$out/mlp-torch-$t.log" | sort -g | head -n 1)
		tms=${best%% *} tname=${best#* }
		ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "-" }'; }
		printf '%-5s %9s %9s %9s %9s | %9s %9s %9s %8s %8s %8s | %9s %-13s %8s %8s\n' "$t" \
			"$(metric eager-ms)" "$(metric replay-ms)" "$(metric unfused-replay-ms)" "$(metric raw-replay-ms)" \
			"$(metric bound-ms)" "$(metric fused-bound-ms)" "$(metric pipeline-bound-ms)" \
			"$(metric eager/pipeline)" "$(metric replay/pipeline)" "$(metric unfused-replay/pipeline)" \
			"${tms:--}" "${tname%_ms}" "$(ratio "$(metric eager-ms)" "$tms")" "$(ratio "$(metric replay-ms)" "$tms")"
	done
} | tee "$out/mlp-table.txt"

# The chunked pipeline's trace: copies in both directions overlapping GEMMs.
spec=.gpu/examples/mlp_stream.yaml
if [ -x .gpu/dagrun ] && [ -f "$spec" ]; then
	# The last of three runs, so the first's module loading is not in it.
	.gpu/dagrun run --backend cuda --repeat 3 --trace-runs last:1 --trace "$out/mlp-trace.json" \
		-o "$out/mlp-run.txt" "$spec" >"$out/mlp-trace.log" 2>&1 || status=1
	grep -E 'overlap|makespan' "$out/mlp-run.txt" || { echo "no overlap line in $out/mlp-run.txt"; status=1; }
else
	echo "mlp trace skipped: no .gpu/dagrun or $spec"
fi
exit $status
