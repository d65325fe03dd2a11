# What the multi-GPU scripts of scripts/gpu share; they source it (it is
# not a script of its own: scripts/gpu-check.sh runs only *.sh files).
#
# multi_gpu NAME MIN OUTDIR sets n (the visible GPUs, at most 8), out
# (OUTDIR, made and absolute), root (the checkout), dagrun and bin (the
# binaries of .gpu/), status=0, and the environment every process on a
# shared multi-GPU host needs (no NVLink multicast); it exits 0, saying
# why, where fewer than MIN GPUs are visible.
multi_gpu() {
	local name=$1 min=$2
	n=$(nvidia-smi -L 2>/dev/null | wc -l)
	if [ "$n" -lt "$min" ]; then
		echo "$name: skipped: $n GPU(s) visible; these checks need $min or more"
		exit 0
	fi
	n=$((n > 8 ? 8 : n))
	out=${3:?usage: scripts/gpu/$name.sh OUTDIR}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
	export DAGRUN_REQUIRE_GPUS=$n
	export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	dagrun=$root/.gpu/dagrun
	bin=$root/.gpu/cuda.test
	status=0
}

# check NAME COMMAND...: runs COMMAND with its output in NAME.out and
# NAME.err and prints ok, or FAIL with the end of NAME.err (status=1).
check() {
	local name=$1
	shift
	if "$@" >"$name.out" 2>"$name.err"; then
		echo "ok   $name"
	else
		echo "FAIL $name (status $?)"
		tail -n 5 "$name.err"
		status=1
	fi
}

# same DIR_A DIR_B [RTOL]: the float32 files agree within a relative RTOL,
# 1e-6 by default (NCCL sums in another order than the CPU collectives;
# cuBLAS's GEMMs in another order than gonum's: 1e-4).
same() {
	python3 - "$1" "$2" "${3:-1e-6}" <<'PY'
import sys, glob, os, array
a, b, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
bad, files = 0, sorted(glob.glob(os.path.join(a, "*.bin")))
for fa in files:
    fb = os.path.join(b, os.path.basename(fa))
    if not os.path.exists(fb):
        print(f"{os.path.basename(fa)}: missing"); bad = 1; continue
    xa, xb = array.array("f"), array.array("f")
    xa.frombytes(open(fa, "rb").read()); xb.frombytes(open(fb, "rb").read())
    worst = max((abs(p - q) / max(abs(p), abs(q), 1e-30) for p, q in zip(xa, xb)), default=0.0)
    bad |= len(xa) != len(xb) or worst > rtol
    print(f"{os.path.basename(fa)}: {len(xa)} elements, worst relative difference {worst:.3g}")
print(f"{len(files)} files within {rtol:g}: {not bad}")
sys.exit(bad or not files)
PY
}
