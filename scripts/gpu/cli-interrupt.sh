#!/usr/bin/env bash
# The CLI on CUDA: SIGINT and SIGTERM during a long eager run and a long
# graph replay stop dagrun with exit status 130 and the word "interrupted",
# and --backend gpu means cuda. Usage: scripts/gpu/cli-interrupt.sh OUTDIR
# (run from the directory that holds .gpu/, as scripts/gpu-check.sh does).
set -uo pipefail
out=${1:?usage: cli-interrupt.sh OUTDIR}
mkdir -p "$out"
dagrun=.gpu/dagrun
fail=0

cat >"$out/long.yaml" <<'SPEC'
buffers:
  d: {dtype: f32, count: 16777216}
  h: {dtype: f32, count: 1024, placement: pinned}
ops:
  - {launch: iota, args: {x: d, start: 1}}
  - {launch: scale, args: {x: d, alpha: 2}}
  - {launch: scale, args: {x: d, alpha: 0.5}}
  - copy: {from: "d[0:4KiB]", to: h}
outputs: [h]
SPEC

for mode in eager graph; do
	for sig in INT TERM; do
		args=(run "$out/long.yaml" --backend cuda --repeat 100000000)
		[ "$mode" = graph ] && args+=(--graph)
		"$dagrun" "${args[@]}" >"$out/$mode-$sig.out" 2>"$out/$mode-$sig.err" &
		pid=$!
		sleep 3
		kill -"$sig" "$pid"
		wait "$pid"
		status=$?
		if [ "$status" -ne 130 ] || ! grep -q 'interrupted' "$out/$mode-$sig.err"; then
			echo "FAIL $mode SIG$sig: exit status $status (want 130)"; cat "$out/$mode-$sig.err"
			fail=1
		else
			echo "ok   $mode SIG$sig: exit status 130: $(head -1 "$out/$mode-$sig.err")"
		fi
	done
done

if "$dagrun" run .gpu/examples/fan_out.yaml --backend gpu >"$out/gpu.out" 2>&1 && grep -q ' on cuda:' "$out/gpu.out"; then
	echo "ok   --backend gpu runs on cuda"
else
	echo "FAIL --backend gpu"; cat "$out/gpu.out"; fail=1
fi
exit $fail
