#!/usr/bin/env bash
# The build without a C compiler: CGO_ENABLED=0 must build and vet, every
# package's tests must pass in it (-short: the full-length ones run with
# cgo; the cgo-free build differs only in cuda and what reports on it), its
# cuda backend must say it was built without cgo, and every example must
# run with it, auto falling back to the CPU backend (mlp_stream.yaml, GPU-
# sized, is only planned).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export CGO_ENABLED=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "nocgo: build and vet"
$GO build ./...
$GO vet ./...
$GO build -o "$tmp/dagrun" ./cmd/dagrun
echo "nocgo: go test -short ./..."
$GO test -short ./...

echo "nocgo: --backend cuda says why not"
if "$tmp/dagrun" run --backend cuda examples/fan_out.yaml 2>"$tmp/err"; then
	echo "nocgo: --backend cuda ran without cgo" >&2
	exit 1
fi
grep -q 'built without cgo' "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }

for f in examples/*.yaml examples/ranks/*.yaml; do
	case $f in
	*/mlp_stream.yaml) echo "nocgo: plan $f"; "$tmp/dagrun" plan "$f" >/dev/null; continue ;;
	esac
	echo "nocgo: run $f"
	"$tmp/dagrun" run --save-dir "$tmp/out" "$f" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
done
for p in examples/go/*/; do
	echo "nocgo: go run ./$p"
	$GO run "./$p" >/dev/null
done
echo "nocgo: ok"
