#!/usr/bin/env bash
# The MLP benchmark on the GPU machine, over what
# scripts/gpu-build.sh left in .gpu/: BenchmarkMLP (cuda/mlp_bench_test.go:
# the chunked MLP pipeline of examples/mlp_stream.yaml built with
# dag.Builder at T = 512, 2048, 8192; dagrun eager and graph replay beside
# the compute-alone bound measured in the same run), PyTorch's figures from
# the project's baseline (../shared/baseline/mlp.py, copied to
# .gpu/mlp_baseline.py) run right after on the same machine, one table of
# both, and the chunked pipeline's trace overlap from the CLI when the
# spec is there. Logs go to OUTDIR.
set -uo pipefail
out=${1:?usage: scripts/gpu/mlp.sh OUTDIR}
mkdir -p "$out"
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
# DAGRUN_BENCH_CUPTI: BenchmarkMLP's CUPTI breakdown, in this process of its own.
(cd cuda && DAGRUN_BENCH_CUPTI=1 ../.gpu/cuda.test -test.run '^$' -test.bench '^BenchmarkMLP$' -test.benchtime 1x -test.timeout 900s) \
	>"$out/mlp-bench.log" 2>&1 || status=1
py=/opt/torch/.venv/bin/python
for t in 512 2048 8192; do
	if [ -f .gpu/mlp_baseline.py ]; then
		"$py" .gpu/mlp_baseline.py "$t" >"$out/mlp-torch-$t.log" 2>&1 || status=1
	else
		echo "no .gpu/mlp_baseline.py: scripts/gpu-build.sh copies it from ../shared/baseline/mlp.py" >"$out/mlp-torch-$t.log"
		status=1
	fi
done

# One table: dagrun's medians and ratios to its own bound, PyTorch's beside.
{
	printf '%-6s %10s %10s %10s %10s %8s %8s %10s %8s %8s | %10s %10s %10s %10s\n' T eager_ms replay_ms rawrep_ms bound_ms eager/b replay/b pipe_ms eager/p replay/p torch_1s torch_ev torch_gr torch_cmp
	for t in 512 2048 8192; do
		line=$(grep "^BenchmarkMLP/T=$t" "$out/mlp-bench.log" | head -n 1)
		metric() { echo "$line" | awk -v k="$1" '{for (i = 2; i <= NF; i++) if ($i == k) print $(i-1)}'; }
		torch() { awk -v k="$1" '$2 == k {print $3}' "$out/mlp-torch-$t.log"; }
		printf '%-6s %10s %10s %10s %10s %8s %8s %10s %8s %8s | %10s %10s %10s %10s\n' "$t" \
			"$(metric eager-ms)" "$(metric replay-ms)" "$(metric raw-replay-ms)" "$(metric bound-ms)" "$(metric eager/bound)" "$(metric replay/bound)" \
			"$(metric pipeline-bound-ms)" "$(metric eager/pipeline)" "$(metric replay/pipeline)" \
			"$(torch serial_ms)" "$(torch manual_ms)" "$(torch graph_ms)" "$(torch compute_only_ms)"
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
