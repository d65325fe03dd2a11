#!/usr/bin/env bash
# The new examples on CUDA: mlp_stream_small.yaml and pipeline_2gpu.yaml
# (when 2 GPUs are visible) give the CPU backend's output sums within a
# relative 1e-3 (cuBLAS and gonum sum in other orders; bf16 rounds), eager
# and as a replayed graph; mlp_stream.yaml (the model block, T=2048)
# runs eagerly and replayed with a trace, for its timings and overlap.
# data_parallel.yaml needs ranks and is only planned.
# Usage: scripts/gpu/examples.sh OUTDIR (run from the directory that holds
# .gpu/, as scripts/gpu-check.sh does).
set -uo pipefail
out=${1:?usage: examples.sh OUTDIR}
mkdir -p "$out"
dagrun=.gpu/dagrun
ex=.gpu/examples
fail=0

# sums FILE: the "output NAME: ... sum=S" lines as "NAME S".
sums() { sed -n 's/^output \([^:]*\):.* sum=\([^ ]*\).*/\1 \2/p' "$1"; }

same() { # same WHAT CPUFILE GPUFILE
	if ! paste <(sums "$2") <(sums "$3") | awk '{ d = $2 - $4; if (d < 0) d = -d; s = ($2 < 0 ? -$2 : $2) + 1e-9; if ($1 != $3 || d / s > 1e-3) { bad = 1; print "  " $1 ": cpu " $2 ", cuda " $4 } } END { exit bad }'; then
		echo "FAIL $1: outputs differ from the cpu backend's"; fail=1
	else
		echo "ok   $1: outputs match the cpu backend's (sums within 1e-3)"
	fi
}

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
specs=(mlp_stream_small)
[ "$gpus" -ge 2 ] && specs+=(pipeline_2gpu) || echo "skip pipeline_2gpu: $gpus GPU(s) visible"
for s in "${specs[@]}"; do
	"$dagrun" run "$ex/$s.yaml" --backend cpu >"$out/$s.cpu" 2>&1 || { echo "FAIL $s on cpu"; cat "$out/$s.cpu"; fail=1; continue; }
	for mode in eager graph; do
		args=(run "$ex/$s.yaml" --backend cuda --repeat 3)
		[ "$mode" = graph ] && args+=(--graph)
		if "$dagrun" "${args[@]}" >"$out/$s.$mode" 2>&1; then
			same "$s $mode" "$out/$s.cpu" "$out/$s.$mode"
		else
			echo "FAIL $s $mode:"; cat "$out/$s.$mode"; fail=1
		fi
	done
done

s=mlp_stream
for mode in eager graph; do
	args=(run "$ex/$s.yaml" --backend cuda --repeat 10)
	if [ "$mode" = graph ]; then args+=(--graph); else args+=(--trace "$out/$s.trace.json" --trace-runs last:3); fi
	if "$dagrun" "${args[@]}" >"$out/$s.$mode" 2>&1; then
		echo "ok   $s $mode:"; sed 's/^/  /' "$out/$s.$mode"
	else
		echo "FAIL $s $mode:"; cat "$out/$s.$mode"; fail=1
	fi
done
"$dagrun" plan "$ex/data_parallel.yaml" >"$out/data_parallel.plan" 2>&1 || { echo "FAIL data_parallel plan"; cat "$out/data_parallel.plan"; fail=1; }
exit $fail
