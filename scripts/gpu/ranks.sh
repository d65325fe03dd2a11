#!/usr/bin/env bash
# Ranks on CUDA: the data-parallel step as 2 ranks in one process, eager
# and replayed, and as 2 processes (--rank/--world, eager and replayed with
# NCCL inside the graph; torchrun's variables; each process seeing one GPU
# through CUDA_VISIBLE_DEVICES), each equal to the CPU
# backend's outputs (floats within 1e-6 relative: NCCL's reduction order
# differs); a rank that fails mid-run makes the other fail within seconds;
# the merged trace of the 2 processes draws. Usage: scripts/gpu/ranks.sh
# OUTDIR (run from the directory that holds .gpu/, as scripts/gpu-check.sh
# does). NCCL_NVLS_ENABLE=0 as on every run on the shared machine.
set -uo pipefail
out=${1:?usage: ranks.sh OUTDIR}
mkdir -p "$out"
dagrun=$(pwd)/.gpu/dagrun
export NCCL_NVLS_ENABLE=0
fail=0
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ] && [ -z "${DAGRUN_REQUIRE_GPUS:-}" ]; then
	echo "ranks: skipped: $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s) visible; a world of 2 in one process needs 2"
	exit 0
fi
cd "$out"

cat >dp.yaml <<'SPEC'
run: {world: 2, streams: 2}
buffers:
  x:      {dtype: f32, count: 1048576, init: {random: {seed: 7, per_rank: true}}}
  grad:   {dtype: f32, count: 1048576}
  act:    {dtype: f32, count: 1048576}
  h_grad: {dtype: f32, count: 1048576, placement: pinned}
  h_act:  {dtype: f32, count: 1048576, placement: pinned}
ops:
  - {copy: {from: x, to: grad}, name: load_grad}
  - {launch: scale, args: {x: grad, alpha: 2}, name: backward}
  - {all_reduce: {view: grad, op: avg}, name: reduce_grad}
  - {launch: gelu, args: {y: act, x: x}, name: next_layer}
  - {copy: {from: grad, to: h_grad}, name: download_grad}
  - {copy: {from: act, to: h_act}, name: download_act}
outputs:
  - {buffer: h_grad, save: "grad_{rank}.bin"}
  - {buffer: h_act, save: "act_{rank}.bin"}
SPEC

check() { # name command...
	local name=$1
	shift
	if "$@" >"$name.out" 2>"$name.err"; then
		echo "ok   $name"
	else
		echo "FAIL $name (status $?)"
		cat "$name.err"
		fail=1
	fi
}

# Compares the float32 files of two directories within a relative 1e-6.
same() { # dirA dirB
	python3 - "$1" "$2" <<'PY'
import sys, struct, glob, os
a, b = sys.argv[1], sys.argv[2]
bad = 0
for fa in sorted(glob.glob(os.path.join(a, "*.bin"))):
    fb = os.path.join(b, os.path.basename(fa))
    xa = struct.unpack("<%df" % (os.path.getsize(fa) // 4), open(fa, "rb").read())
    xb = struct.unpack("<%df" % (os.path.getsize(fb) // 4), open(fb, "rb").read())
    worst = max(abs(p - q) / max(abs(p), abs(q), 1e-30) for p, q in zip(xa, xb))
    print(f"{os.path.basename(fa)}: worst relative difference {worst:.3g}")
    bad |= worst > 1e-6
sys.exit(bad)
PY
}

check cpu "$dagrun" run dp.yaml --backend cpu --save-dir cpu
check cuda-world "$dagrun" run dp.yaml --backend cuda --save-dir world
check cuda-world-graph "$dagrun" run dp.yaml --backend cuda --graph --repeat 3 --save-dir graph
DAGRUN_PORT=29611 "$dagrun" run dp.yaml --backend cuda --rank 1 --world 2 --save-dir procs --trace procs/t_{rank}.json >p1.out 2>p1.err &
check cuda-procs env DAGRUN_PORT=29611 "$dagrun" run dp.yaml --backend cuda --rank 0 --world 2 --save-dir procs --trace procs/t_{rank}.json
wait $! || { echo "FAIL cuda-procs rank 1"; cat p1.err; fail=1; }
DAGRUN_PORT=29612 RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "$dagrun" run dp.yaml --backend cuda --save-dir torch >t1.out 2>t1.err &
check cuda-torchrun-vars env DAGRUN_PORT=29612 RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$dagrun" run dp.yaml --backend cuda --save-dir torch
wait $! || { echo "FAIL cuda-torchrun-vars rank 1"; cat t1.err; fail=1; }
DAGRUN_PORT=29614 "$dagrun" run dp.yaml --backend cuda --rank 1 --world 2 --graph --repeat 3 --save-dir procs-graph >pg1.out 2>pg1.err &
check cuda-procs-graph env DAGRUN_PORT=29614 "$dagrun" run dp.yaml --backend cuda --rank 0 --world 2 --graph --repeat 3 --save-dir procs-graph
wait $! || { echo "FAIL cuda-procs-graph rank 1"; cat pg1.err; fail=1; }
DAGRUN_PORT=29615 CUDA_VISIBLE_DEVICES=1 RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "$dagrun" run dp.yaml --backend cuda --graph --repeat 3 --save-dir visible >v1.out 2>v1.err &
check cuda-one-visible-gpu-each env DAGRUN_PORT=29615 CUDA_VISIBLE_DEVICES=0 RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$dagrun" run dp.yaml --backend cuda --graph --repeat 3 --save-dir visible
wait $! || { echo "FAIL cuda-one-visible-gpu-each rank 1"; cat v1.err; fail=1; }
for d in world graph procs procs-graph torch visible; do
	check "same-$d" same cpu "$d"
done
check viz "$dagrun" viz procs/t_0.json procs/t_1.json -o merged.html

# A rank that fails mid-run: rank 1's save is blocked by a directory and
# its all-reduce depends on the save (after:). On CUDA a host step's
# failure is found at the end of its run (the work queued behind it on the
# GPU cannot be stopped from the step), so rank 1 stops after its first
# run, never joins the second run's all-reduce, and rank 0 must stop within
# the collective timeout, naming rank 1, with both exiting 1.
cat >failing.yaml <<'SPEC'
run: {world: 2, repeat: 3}
buffers:
  h: {dtype: f32, count: 4, placement: pinned, init: {value: 1}}
  d: {dtype: f32, count: 4}
ops:
  - {host: save, buffer: h, path: "h_{rank}", name: save_h}
  - {copy: {from: h, to: d}, name: upload, after: [save_h]}
  - {all_reduce: {view: d}, name: reduce}
SPEC
mkdir -p h_1
start=$(date +%s)
DAGRUN_PORT=29613 "$dagrun" run failing.yaml --backend cuda --rank 1 --world 2 >f1.out 2>f1.err &
DAGRUN_PORT=29613 timeout 120 "$dagrun" run failing.yaml --backend cuda --rank 0 --world 2 >f0.out 2>f0.err
s0=$?
wait $!
s1=$?
took=$(($(date +%s) - start))
if [ "$s0" = 1 ] && [ "$s1" = 1 ] && [ "$took" -lt 60 ] && grep -q 'rank 1 failed' f0.err; then
	echo "ok   failing-rank ($took s)"
else
	echo "FAIL failing-rank: statuses $s0 $s1 after $took s"
	cat f0.err f1.err
	fail=1
fi
exit $fail
