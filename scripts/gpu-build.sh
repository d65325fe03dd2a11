#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on the GPU machine (which has no Go)
# into .gpu/ (ignored by git): one test binary per package with GPU tests,
# dagrun, and the examples. Run it from anywhere in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

rm -rf .gpu
mkdir -p .gpu
: >.gpu/tests.txt
# Packages with GPU tests are those whose tests mention DAGRUN_REQUIRE_GPU.
for dir in $(grep -rl --include='*_test.go' DAGRUN_REQUIRE_GPU . | xargs -n1 dirname | sort -u); do
	name=$(echo "${dir#./}" | tr / _)
	go test -c -ldflags='-s -w' -o ".gpu/$name.test" "$dir"
	echo "$name ${dir#./}" >>.gpu/tests.txt
	echo "built .gpu/$name.test"
done
# The examples' reference checks, for the large one (DAGRUN_LARGE_EXAMPLES=1)
# that CI's cores cannot run.
go test -c -ldflags='-s -w' -o .gpu/examples_large.test ./examples
echo "built .gpu/examples_large.test"
if go build -ldflags='-s -w' -o .gpu/dagrun ./cmd/dagrun; then
	echo "built .gpu/dagrun"
else
	echo "gpu-build: cmd/dagrun does not build; the examples will be skipped" >&2
fi
# Go example programs that pick the cuda backend when a driver is present.
for dir in examples/go/replay examples/go/cublas_task; do
	if [ -d "$dir" ]; then
		go build -ldflags='-s -w' -o ".gpu/$(basename "$dir")" "./$dir"
		echo "built .gpu/$(basename "$dir")"
	fi
done
for f in ../shared/baseline/mlp.py ../../shared/baseline/mlp.py; do [ -f "$f" ] && cp "$f" .gpu/mlp_baseline.py && break; done # PyTorch's MLP baseline, for scripts/gpu/mlp.sh
mkdir -p .gpu/baseline # PyTorch's all-reduce and tensor-parallel block, for scripts/gpu/world.sh and tp.sh
for f in nccl_ar.py tp_mlp.py; do for d in ../shared/baseline ../../shared/baseline; do [ -f "$d/$f" ] && cp "$d/$f" .gpu/baseline/ && break; done; done
if [ -d examples ]; then
	cp -r examples .gpu/examples
fi
du -sh .gpu
