#!/usr/bin/env bash
# The new examples on CUDA: mlp_stream_small.yaml and pipeline_2gpu.yaml
# (when 2 GPUs are visible) give the CPU backend's outputs element by
# element within a relative 1e-3 of each element and 1e-3 of the largest
# (cuBLAS and gonum sum in other orders; bf16 rounds), eager and as a
# replayed graph, each planned as usual and as declared (nothing fused or
# split); mlp_stream.yaml (the model block, T=2048) runs eagerly
# and replayed with a trace, for its timings and overlap.
# data_parallel.yaml needs ranks and is only planned.
# Usage: scripts/gpu/examples.sh OUTDIR (run from the directory that holds
# .gpu/, as scripts/gpu-check.sh does).
set -uo pipefail
out=${1:?usage: examples.sh OUTDIR}
mkdir -p "$out"
dagrun=.gpu/dagrun
ex=.gpu/examples
fail=0

same() { # same WHAT CPUREPORT GPUREPORT (dagrun run --json, outputs saved)
	local verdict
	if verdict=$(python3 scripts/gpu/outputs.py compare --rtol 1e-3 "$3" "$2"); then
		echo "ok   $1: outputs match the cpu backend's element by element ($verdict)"
	else
		echo "FAIL $1: outputs differ from the cpu backend's: $verdict"; fail=1
	fi
}

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
specs=(mlp_stream_small)
[ "$gpus" -ge 2 ] && specs+=(pipeline_2gpu) || echo "skip pipeline_2gpu: $gpus GPU(s) visible"
for s in "${specs[@]}"; do
	spec=$(python3 scripts/gpu/outputs.py saving "$ex/$s.yaml") || { echo "FAIL $s: its outputs cannot be saved"; fail=1; continue; }
	"$dagrun" run "$spec" --backend cpu --json --save-dir "$out/$s-cpu" >"$out/$s.cpu" 2>"$out/$s.cpu.err" || { echo "FAIL $s on cpu"; cat "$out/$s.cpu.err"; fail=1; continue; }
	for mode in eager graph eager-declared graph-declared; do
		args=(run "$spec" --backend cuda --repeat 3 --json --save-dir "$out/$s-$mode")
		case $mode in graph*) args+=(--graph) ;; esac
		case $mode in *declared) args+=(--fuse none --split none) ;; esac # the plan as declared
		if "$dagrun" "${args[@]}" >"$out/$s.$mode" 2>"$out/$s.$mode.err"; then
			same "$s $mode" "$out/$s.cpu" "$out/$s.$mode"
		else
			echo "FAIL $s $mode:"; cat "$out/$s.$mode.err"; fail=1
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
