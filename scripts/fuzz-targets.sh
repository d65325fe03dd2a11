#!/usr/bin/env bash
# Fails when a fuzz target of the tree is missing from the Makefile's
# fuzz-short, so that a new target is fuzzed in make check from the start.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=0
for name in $(grep -rhoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | sed 's/^func //' | sort -u); do
	if ! grep -qF -- "-fuzz '^$name\$\$'" Makefile; then
		echo "fuzz-targets: $name is not fuzzed by make fuzz-short: add it to the Makefile" >&2
		missing=1
	fi
done
exit $missing
