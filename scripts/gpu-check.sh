#!/usr/bin/env bash
# Runs on the GPU machine, from the checkout's root, over what
# scripts/gpu-build.sh left in .gpu/: every GPU test (DAGRUN_REQUIRE_GPU=1,
# so a driver that fails to load fails them), every example on the cuda
# backend compared with the cpu backend, and the GPU benchmarks. Full logs
# go to OUTDIR; a short table is printed last. Exit status 1 if anything
# failed.
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
export DAGRUN_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
benchtime=${BENCHTIME:-30x}
LARGE_EXAMPLES="mlp_stream mlp_stream_small pipeline_2gpu data_parallel"
status=0
table=()
row() { table+=("$(printf '%-34s %s' "$1" "$2")"); }

{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm --format=csv; } >"$out/device.txt" 2>&1
row device "$(head -n 1 "$out/device.txt")"

# Tests, one binary per package, run in the package's folder. Of the
# command's, the scripts (their [cuda] lines: the binary runs itself as
# dagrun) and the check that [cuda] fails rather than skips here.
while read -r name dir; do
	log="$out/test-$name.log"
	run=${TESTRUN:-}
	[ "$dir" = cmd/dagrun ] && run=${TESTRUN:-'^(TestScripts|TestCudaConditionRequired)$'}
	if (cd "$dir" && "$OLDPWD/.gpu/$name.test" -test.v -test.timeout 300s ${run:+-test.run "$run"}) >"$log" 2>&1; then
		res="ok"
	else
		res="FAIL"
		status=1
	fi
	row "tests $dir" "$res: $(grep -c '^--- PASS' "$log") passed, $(grep -c '^--- FAIL' "$log") failed, $(grep -c '^--- SKIP' "$log") skipped"
	# Tests that measure something log it on a line tagged PRIORITY or OVERLAP.
	for tag in PRIORITY OVERLAP; do
		grep -h "$tag " "$log" | sed "s/.*$tag //" | head -n 1 >>"$out/figures-$tag.txt"
	done
done <.gpu/tests.txt
for tag in PRIORITY OVERLAP; do
	if [ -s "$out/figures-$tag.txt" ]; then
		row "$(echo "$tag" | tr 'A-Z' 'a-z') (tests)" "$(head -n 1 "$out/figures-$tag.txt")"
	fi
done

# compare_outputs A B prints "ok: ..." or "DIFF: ..." for the outputs of two
# dagrun run --json reports (A on cuda, B on cpu): byte for byte, or
# element by element where both runs saved them (saving_spec).
compare_outputs() { python3 scripts/gpu/outputs.py compare "$1" "$2"; }
# saving_spec SPEC prints the path of SPEC's copy that saves every output
# (run it with --save-dir), so that outputs compare element by element.
saving_spec() { python3 scripts/gpu/outputs.py saving "$1"; }

# The large example's reference check: examples/mlp_stream.yaml on the cpu
# backend against values worked out in Go (too large for CI's cores).
if [ -x .gpu/examples_large.test ]; then
	log="$out/test-examples-large.log"
	if (cd examples && DAGRUN_LARGE_EXAMPLES=1 ../.gpu/examples_large.test -test.v -test.run '^TestExamples$/^mlp_stream\.yaml$' -test.timeout 600s) >"$log" 2>&1 &&
		[ "$(grep -c -- '--- PASS: TestExamples/mlp_stream.yaml/streams=.*/delays=' "$log")" = 1 ] && ! grep -q -- '--- SKIP' "$log"; then
		row "examples large (reference)" "ok: mlp_stream.yaml, run as planned on the cpu backend, matches the reference"
	else
		row "examples large (reference)" "FAIL (test-examples-large.log)"
		status=1
	fi
fi

# gpus_needed SPEC prints how many GPUs SPEC's buffers name (device: N; not
# run.memory's "device: 88 KiB", a size).
gpus_needed() { grep -oE 'device: *[0-9]+ *([,}]|$)' "$1" | grep -oE '[0-9]+' | sort -n | tail -n 1 | awk '{print $1 + 1} END {if (NR == 0) print 1}'; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# Examples: cuda against cpu, output by output (saved bytes, element by
# element); those that name more GPUs than the machine has are skipped.
if [ -x .gpu/dagrun ]; then
	for spec in .gpu/examples/*.yaml; do
		ex=$(basename "$spec" .yaml)
		# The model block, the ranks and the 2-device example have
		# scripts/gpu/examples.sh (and the rank scripts) of their own.
		case " $LARGE_EXAMPLES " in *" $ex "*) continue ;; esac
		if [ "$(gpus_needed "$spec")" -gt "$gpus" ]; then
			row "example $ex" "skipped: it names $(gpus_needed "$spec") GPUs, this machine has $gpus"
			continue
		fi
		if ! spec=$(saving_spec "$spec"); then
			row "example $ex" "FAIL (its outputs cannot be saved)"
			status=1
			continue
		fi
		ok=1
		for be in cuda cpu; do
			mkdir -p "$out/ex-$ex-$be"
			if ! .gpu/dagrun run "$spec" --backend "$be" --json --save-dir "$out/ex-$ex-$be" \
				>"$out/ex-$ex-$be.json" 2>"$out/ex-$ex-$be.err"; then
				ok=0
			fi
		done
		if [ $ok = 0 ]; then
			row "example $ex" "FAIL (see ex-$ex-*.err)"
			status=1
			continue
		fi
		verdict=$(compare_outputs "$out/ex-$ex-cuda.json" "$out/ex-$ex-cpu.json")
		case "$verdict" in ok*) ;; *) status=1 ;; esac
		row "example $ex" "$verdict"
		# The plan as declared (nothing fused, nothing split) gives the
		# same outputs.
		mkdir -p "$out/ex-$ex-declared"
		if .gpu/dagrun run "$spec" --backend cuda --fuse none --split none --json --save-dir "$out/ex-$ex-declared" \
			>"$out/ex-$ex-declared.json" 2>"$out/ex-$ex-declared.err"; then
			verdict=$(compare_outputs "$out/ex-$ex-declared.json" "$out/ex-$ex-cpu.json")
		else
			verdict="FAIL (see ex-$ex-declared.err)"
		fi
		case "$verdict" in ok*) ;; *) status=1 ;; esac
		row "example $ex, declared" "$verdict"
	done
else
	row examples "skipped: .gpu/dagrun was not built"
fi

# repeated_runs KIND N DETAIL [FLAGS...]: each example run N times on cuda
# with FLAGS, against N eager runs on cpu, a row "KIND xN example" each;
# DETAIL is a Python expression over the cuda run's JSON report (r) that
# the row adds.
repeated_runs() {
	local kind=$1 n=$2 detail=$3 spec ex verdict extra
	shift 3
	[ -x .gpu/dagrun ] || return 0
	for spec in .gpu/examples/*.yaml; do
		ex=$(basename "$spec" .yaml)
		case " $LARGE_EXAMPLES " in *" $ex "*) continue ;; esac
		[ "$(gpus_needed "$spec")" -gt "$gpus" ] && continue
		spec=$(saving_spec "$spec") || { row "$kind x$n $ex" "FAIL (its outputs cannot be saved)"; status=1; continue; }
		mkdir -p "$out/$kind-$ex-cuda" "$out/$kind-$ex-cpu"
		if .gpu/dagrun run "$spec" --backend cuda --repeat "$n" "$@" --json --save-dir "$out/$kind-$ex-cuda" >"$out/$kind-$ex-cuda.json" 2>"$out/$kind-$ex-cuda.err" &&
			.gpu/dagrun run "$spec" --backend cpu --repeat "$n" --json --save-dir "$out/$kind-$ex-cpu" >"$out/$kind-$ex-cpu.json" 2>"$out/$kind-$ex-cpu.err"; then
			verdict=$(compare_outputs "$out/$kind-$ex-cuda.json" "$out/$kind-$ex-cpu.json")
			extra=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($detail)" "$out/$kind-$ex-cuda.json" 2>&1)
			case "$verdict" in ok*) ;; *) status=1 ;; esac
			row "$kind x$n $ex" "${verdict%% (*}; $extra"
		else
			row "$kind x$n $ex" "FAIL (see $kind-$ex-*.err)"
			status=1
		fi
	done
}

# Graph replays from the CLI: each example captured once on cuda and
# replayed 200 times.
repeated_runs graph 200 '"capture %.3f ms, instantiate %.3f ms, %.1f us per replay, %.3f us per op" % (r["graph"]["capture_ns"]/1e6, r["graph"]["instantiate_ns"]/1e6, r["graph"]["per_replay_ns"]/1e3, r["graph"]["per_op_ns"]/1e3)' --graph
# Automatic capture from the CLI: each example run 20 times without
# --graph (3 eager runs, then captured and replayed).
repeated_runs auto 20 'r.get("runs", "?")'
# The same two with the plan as declared (--fuse none --split none).
repeated_runs graph-declared 20 '"%.1f us per replay" % (r["graph"]["per_replay_ns"]/1e3)' --graph --fuse none --split none
repeated_runs auto-declared 20 'r.get("runs", "?")' --fuse none --split none

# The graph replay example: a plan captured once, a new batch per replay
# (Write + Rebind + SetArg updates in place); its per-batch checksums on cuda
# must equal those on cpu.
if [ -x .gpu/replay ]; then
	for be in cuda cpu; do
		.gpu/replay -backend "$be" -batches 16 >"$out/replay-$be.txt" 2>&1 || status=1
	done
	if diff <(grep '^batch' "$out/replay-cuda.txt") <(grep '^batch' "$out/replay-cpu.txt") >"$out/replay-diff.txt" &&
		[ "$(grep -c '^batch' "$out/replay-cuda.txt")" = 16 ]; then
		row "example go/replay" "ok: 16 batches equal on cuda and cpu; $(tail -n 1 "$out/replay-cuda.txt")"
	else
		row "example go/replay" "FAIL (see replay-*.txt)"
		status=1
	fi
fi

# Benchmarks of the cuda package (BENCH selects some: a -test.bench pattern).
# BenchmarkShapes is scripts/gpu/shapes.sh's, once: at $benchtime its fresh
# sessions of T = 8192 alone would take minutes. BenchmarkPDL is
# scripts/gpu/pdl.sh's.
if [ -x .gpu/cuda.test ] && [ "${BENCH:-.}" != none ]; then
	(cd cuda && ../.gpu/cuda.test -test.run '^$' -test.bench "${BENCH:-.}" -test.skip '^Benchmark(Shapes|PDL)$' -test.benchtime "$benchtime" -test.timeout 300s) >"$out/bench-cuda.log" 2>&1 || status=1
	while read -r line; do
		set -- $line
		name=${1%-*}
		shift 2
		row "$name" "$*"
	done < <(grep '^Benchmark' "$out/bench-cuda.log")
fi

# The feature scripts of scripts/gpu/ (each prints its own short table and
# exits non-zero on a failure). SCRIPTS picks some by name ("gemm cupti");
# by default every one runs; multi-GPU ones skip on a single GPU.
for script in scripts/gpu/*.sh; do
	name=$(basename "$script" .sh)
	if [ -n "${SCRIPTS:-}" ] && ! [[ " $SCRIPTS " == *" $name "* ]]; then
		continue
	fi
	if bash "$script" "$out/$name" >"$out/script-$name.txt" 2>&1; then
		res=ok
	else
		res=FAIL
		status=1
	fi
	row "script $name" "$res (script-$name.txt)"
	sed 's/^/    /' "$out/script-$name.txt" | tail -n 25 >>"$out/scripts-tail.txt"
done

echo
echo "== dagrun GPU check ($(date -u +%FT%TZ)) =="
printf '%s\n' "${table[@]}" | tee "$out/summary.txt"
exit $status
