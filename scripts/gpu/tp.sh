#!/usr/bin/env bash
# The tensor-parallel MLP block on 2 GPUs or more, over .gpu/ (built by
# scripts/gpu-build.sh):
#  - examples/ranks/tp_mlp.yaml and tp_mlp_sp.yaml on CUDA, as a world in
#    one process and as 2 processes (--rank), eager and replayed, each
#    within bf16's tolerance of the CPU backend;
#  - BenchmarkTPMLP (cuda): the block at worlds of 2 and of every GPU, at
#    T = 8192, H = 4096 and T = 2048, H = 8192: the compute-alone and
#    all-reduce-alone bounds, the block serial and split into chunks whose
#    all-reduces run beside the next chunk's GEMMs, with NCCL's CTAs
#    bounded or not, ms per block;
#  - PyTorch's figures of the same block (.gpu/baseline/tp_mlp.py under
#    torchrun) right after, on the same machine;
#  - a table of each figure over the bound max(compute, comm) of its run.
# NVLink multicast stays off in every process. Usage: scripts/gpu/tp.sh OUTDIR
set -uo pipefail
# shellcheck source=common.bash
. "$(dirname "$0")/common.bash"
multi_gpu tp 2 "${1:-}"
cd "$out" || exit 1

# same_bf16 DIR_A DIR_B: the bf16 files agree within 2 units in the last place
# (cuBLAS and the CPU sum in other orders; NCCL rounds at every hop).
same_bf16() {
	python3 - "$1" "$2" <<'PY'
import sys, glob, os, array, struct
a, b = sys.argv[1], sys.argv[2]
def bf16(path):
    h = array.array("H"); h.frombytes(open(path, "rb").read())
    return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in h]
files, bad = sorted(glob.glob(os.path.join(a, "*.bin"))), 0
for fa in files:
    fb = os.path.join(b, os.path.basename(fa))
    xa, xb = bf16(fa), bf16(fb) if os.path.exists(fb) else []
    scale = max((abs(v) for v in xa), default=1.0)
    worst = max((abs(p - q) / (abs(q) + 1e-2 * scale) for p, q in zip(xa, xb)), default=0.0)
    bad |= len(xa) != len(xb) or worst > 1.6e-2
    print(f"{os.path.basename(fa)}: {len(xa)} elements, worst {worst:.3g}")
print(f"{len(files)} files within bf16's tolerance: {not bad}")
sys.exit(bad or not files)
PY
}
for spec in tp_mlp tp_mlp_sp; do
	cp "$root/.gpu/examples/ranks/$spec.yaml" .
	check "$spec-cpu" "$dagrun" run $spec.yaml --backend cpu --save-dir "$spec-cpu"
	check "$spec-world" "$dagrun" run $spec.yaml --backend cuda --save-dir "$spec-world"
	check "$spec-world-graph" "$dagrun" run $spec.yaml --backend cuda --graph --repeat 3 --save-dir "$spec-world-graph"
	for mode in eager graph; do
		args=()
		[ $mode = graph ] && args=(--graph --repeat 3)
		port=$((29630 + RANDOM % 100))
		DAGRUN_PORT=$port "$dagrun" run $spec.yaml --backend cuda --rank 1 --world 2 "${args[@]}" --save-dir "$spec-procs-$mode" >"$spec-p1.out" 2>"$spec-p1.err" &
		check "$spec-procs-$mode" env DAGRUN_PORT=$port "$dagrun" run $spec.yaml --backend cuda --rank 0 --world 2 "${args[@]}" --save-dir "$spec-procs-$mode"
		wait $! || { echo "FAIL $spec-procs-$mode rank 1"; tail -n 3 "$spec-p1.err"; status=1; }
	done
	for d in world world-graph procs-eager procs-graph; do
		check "same-$spec-$d" same_bf16 "$spec-cpu" "$spec-$d"
		tail -n 1 "same-$spec-$d.out"
	done
done

# The all-reduce by copies (cuda.CopyCollectives) needs the driver's 32
# hardware queues, set before the process's first CUDA call.
export CUDA_DEVICE_MAX_CONNECTIONS=32
check copy-collectives sh -c "cd '$root/cuda' && '$bin' -test.run 'TestSessionCopyCollectivesGPU|TestRankFailureGPU|TestRankCancelGPU' -test.timeout 300s"
if ! (cd "$root/cuda" && timeout 540 "$bin" -test.run '^$' -test.bench 'TPMLP' -test.benchtime "${TP_BENCHTIME:-20x}" -test.count "${COUNT:-3}" -test.timeout 500s) >"$out/bench-tp.log" 2>&1; then
	echo "FAIL BenchmarkTPMLP (see bench-tp.log)"
	tail -n 5 "$out/bench-tp.log"
	status=1
fi

torchrun=/opt/torch/.venv/bin/torchrun
: >"$out/torch-tp.log"
if [ -x "$torchrun" ] && [ -f "$root/.gpu/baseline/tp_mlp.py" ]; then
	for w in 2 $([ "$n" -gt 2 ] && echo "$n"); do
		for shape in "8192 4096" "2048 8192"; do
			# shellcheck disable=SC2086
			echo "== world $w T H = $shape" >>"$out/torch-tp.log"
			# shellcheck disable=SC2086
			timeout 300 "$torchrun" --nproc_per_node "$w" "$root/.gpu/baseline/tp_mlp.py" $shape 4 >>"$out/torch-tp.log" 2>&1 ||
				{ echo "FAIL PyTorch's block at world $w, $shape"; status=1; }
		done
	done
else
	echo "PyTorch's block: skipped ($torchrun or .gpu/baseline/tp_mlp.py missing)"
fi

# The table: medians of each figure, over the bound of its run.
awk '
function isort(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
/^BenchmarkTPMLP/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkTPMLP\//, "", name)
	for (i = 3; i < NF; i++) if ($(i+1) == "ms/block") { if (!(name in v)) order[++n] = name; v[name] = v[name] " " $i }
}
END {
	for (j = 1; j <= n; j++) { k = order[j]; m = split(v[k], a, " "); isort(a, m); med[k] = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
	printf "%-44s %9s %9s\n", "dagrun (replay unless eager)", "ms", "/bound"
	for (j = 1; j <= n; j++) {
		k = order[j]
		split(k, parts, "/"); pre = parts[1] "/" parts[2] "/" parts[3]
		b = med[pre "/compute"]; c = med[pre "/comm"]; bound = b > c ? b : c
		printf "%-44s %9.3f %9.3f\n", k, med[k], (bound > 0 ? med[k] / bound : 0)
	}
}' "$out/bench-tp.log" | tee "$out/table.txt"
echo "PyTorch (torchrun, ms per block, its own bound max(compute, comm) in its last line):"
grep -E '^(==|  |tp_mlp)' "$out/torch-tp.log" | tee -a "$out/table.txt"
echo "goals: replay at most 1.05x the bound; at least 6% faster than PyTorch's serial; faster than its manual overlap"
exit $status
