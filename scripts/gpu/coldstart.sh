#!/usr/bin/env bash
# Cold start: the wall time of `dagrun run` of each example on the cuda
# backend against a raw C program that initialises the driver, creates the
# context, loads one module and runs one kernel (coldstart.c), measured
# alternately in the same run; medians of RUNS (default 15) after one
# warm-up each (which also fills NVRTC's disk cache), then each against the
# median of all the floor's samples. Target: at most 1.1x the floor.
# EXAMPLES overrides the list. Runs on the GPU machine from the checkout's
# root, with .gpu/ from scripts/gpu-build.sh.
# Usage: scripts/gpu/coldstart.sh OUTDIR
set -euo pipefail
out=${1:?usage: scripts/gpu/coldstart.sh OUTDIR}
mkdir -p "$out"
runs=${RUNS:-15}
here=$(dirname "$0")
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
printf 'extern "C" __global__ void empty_k() {}\n' >"$out/empty.cu"
/usr/local/cuda/bin/nvcc -ptx -o "$out/empty.ptx" "$out/empty.cu"
gcc -O2 -o "$out/coldstart" "$here/coldstart.c" -I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda

# wall CMD...: seconds the command took, its output to the log.
wall() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >>"$out/coldstart.log" 2>&1
	t1=$(date +%s%N)
	echo "$(( (t1 - t0) / 1000 ))"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for ex in ${EXAMPLES:-branch double_buffer fan_out jacobi memory_budget priority profile_guided temporaries}; do
	spec=.gpu/examples/$ex.yaml
	wall "$out/coldstart" "$out/empty.ptx" >/dev/null
	wall .gpu/dagrun run "$spec" --backend cuda --save-dir "$out" >/dev/null
	: >"$out/raw-$ex.us"
	: >"$out/dagrun-$ex.us"
	for _ in $(seq "$runs"); do
		wall "$out/coldstart" "$out/empty.ptx" >>"$out/raw-$ex.us"
		wall .gpu/dagrun run "$spec" --backend cuda --save-dir "$out" >>"$out/dagrun-$ex.us"
	done
	raw=$(median <"$out/raw-$ex.us")
	dr=$(median <"$out/dagrun-$ex.us")
	awk -v ex="$ex" -v raw="$raw" -v dr="$dr" 'BEGIN { printf "%-16s dagrun run %.1f ms, raw floor %.1f ms, ratio %.2f (target <= 1.1)\n", ex, dr/1000, raw/1000, dr/raw }' | tee -a "$out/coldstart.txt"
	examples="${examples:-} $ex"
done
# The floor is one program whatever the example: the median of all its
# samples is the steadier denominator (one example's 15 moved 295-331 ms
# between examples of one run).
pooled=$(cat "$out"/raw-*.us | median)
for ex in $examples; do
	dr=$(median <"$out/dagrun-$ex.us")
	awk -v ex="$ex" -v raw="$pooled" -v dr="$dr" 'BEGIN { printf "%-16s against the pooled floor %.1f ms: ratio %.2f\n", ex, raw/1000, dr/raw }'
done | tee -a "$out/coldstart.txt"
