#!/usr/bin/env bash
# profile.sh OUTDIR: the perf-model figures on the CUDA backend, with
# .gpu/dagrun, .gpu/examples and .gpu/cuda.test from scripts/gpu-build.sh.
#  1. Profile-guided planning: examples/profile_guided.yaml run with a fresh
#     perf model (the default plan; its spans fill the model), then run
#     again (the plan made with the model): measured makespans of both.
#  2. Estimated against measured makespan per example and workloads C and
#     E, eager and replayed, after one profiled run of each mode (the ratio
#     per example and mode); eager runs measured in three processes.
#  3. Tracing cost: BenchmarkCUPTISessionTracing (workload E eager, CUPTI
#     against events, and against the raw C loop traced the same way in
#     the same process (E-raw, three processes); workload C replayed 50 times back to back, traced
#     against untraced, raw and through sessions, op by op and whole from
#     graph-level records: the replays' makespan and the host's processing
#     of the records apart) in a process of its own.
# Logs and JSON reports go to OUTDIR.
set -u
out=${1:?usage: scripts/gpu/profile.sh OUTDIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ ! -x .gpu/dagrun ]; then
	echo "profile: skipped: .gpu/dagrun was not built"
	exit 0
fi
status=0
dagrun=.gpu/dagrun

# field FILE EXPR prints a field of a JSON report (python3 expression on r).
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# eager_repeat SPEC prints how many eager runs of SPEC take about a second
# (EAGER_WINDOW_S; 40 to 5000): the host's submission speed on the H100
# machine drifts by up to 1.8x over tens of milliseconds (BENCHMARKS.md,
# host drift), so a makespan measured over 40 runs of a 0.1 ms example
# is one moment of that drift, and one learned over them another. Runs
# spread over a second average it, in the learning process and in the
# measured ones alike.
eager_repeat() {
	$dagrun run "$1" --backend cuda --repeat 20 --json >"$out/repeat.json" 2>/dev/null || { echo 40; return; }
	python3 -c "import json,math,sys; r=json.load(open(sys.argv[1])); t=r['wall_ns']/r['repeat']/1e9; print(min(5000, max(40, math.ceil(float(sys.argv[2])/t))))" "$out/repeat.json" "${EAGER_WINDOW_S:-1}"
}

n=$(eager_repeat .gpu/examples/profile_guided.yaml)
echo "== profile-guided planning (examples/profile_guided.yaml, --repeat $n)"
m="$out/models-guided.json"
rm -f "$m"
if $dagrun run .gpu/examples/profile_guided.yaml --backend cuda --repeat "$n" --perf-model "$m" --json \
	>"$out/guided-default.json" 2>"$out/guided-default.err" &&
	$dagrun run .gpu/examples/profile_guided.yaml --backend cuda --repeat "$n" --perf-model "$m" --json \
		>"$out/guided-profiled.json" 2>"$out/guided-profiled.err"; then
	d=$(field "$out/guided-default.json" "r['makespan']['measured_ns']")
	p=$(field "$out/guided-profiled.json" "r['makespan']['measured_ns']")
	pe=$(field "$out/guided-profiled.json" "r['makespan']['estimated_ns']")
	cov=$(field "$out/guided-profiled.json" "'%d of %d' % (r['perf_model']['ops_measured'], r['perf_model']['ops'])")
	python3 -c "import sys; d,p,pe=map(float,sys.argv[1:]); print('default plan measured %.1f us; profiled plan measured %.1f us (estimated %.1f us); default/profiled %.2f' % (d/1e3, p/1e3, pe/1e3, d/p))" "$d" "$p" "$pe"
	echo "ops costed from measurements in the profiled plan: $cov"
	# The same two plans replayed (the device's time alone: an eager run of
	# this short example is mostly the host's submission), three rounds
	# alternating, medians; the profiled plan from a copy of the model.
	for round in 1 2 3; do
		$dagrun run .gpu/examples/profile_guided.yaml --backend cuda --graph --repeat 500 --json \
			>"$out/guided-default-replay-$round.json" 2>>"$out/guided-replay.err" || status=1
		cp "$m" "$out/models-guided-copy.json"
		$dagrun run .gpu/examples/profile_guided.yaml --backend cuda --graph --repeat 500 --perf-model "$out/models-guided-copy.json" --json \
			>"$out/guided-profiled-replay-$round.json" 2>>"$out/guided-replay.err" || status=1
	done
	python3 - "$out" <<'PY' || status=1
import json, statistics, sys
out = sys.argv[1]
def per(kind):
    return statistics.median(json.load(open('%s/guided-%s-replay-%d.json' % (out, kind, i)))['graph']['per_replay_ns'] for i in (1, 2, 3))
d, p = per('default'), per('profiled')
print('replayed: default plan %.1f us, profiled plan %.1f us per replay; default/profiled %.2f' % (d / 1e3, p / 1e3, d / p))
PY
	$dagrun plan .gpu/examples/profile_guided.yaml --backend cuda >"$out/guided-default-plan.txt" 2>&1
	$dagrun plan .gpu/examples/profile_guided.yaml --backend cuda --perf-model "$m" >"$out/guided-profiled-plan.txt" 2>&1
else
	echo "profile-guided: FAIL (see $out/guided-*.err)"
	status=1
fi

# Workloads C and E of BASELINES.md as specs: 8 independent chains of 100
# kernels (spins of 10 us; empty ones), declared round by round.
mkdir -p "$out/workloads"
python3 - "$out/workloads" <<'PY'
import sys
for name, kernel, args in (('workload_c', 'spin', ', args: {us: 10}'), ('workload_e', 'empty', '')):
    lines = ['# Workload %s of BASELINES.md: 8 chains of 100 %s kernels.' % (name[-1].upper(), kernel), 'run: {streams: 8}', 'ops:']
    for i in range(100):
        for c in range(8):
            after = ', after: [c%d_%d]' % (c, i - 1) if i else ''
            lines.append('  - {launch: %s, grid: 1, block: 32%s, name: c%d_%d%s}' % (kernel, args, c, i, after))
    open('%s/%s.yaml' % (sys.argv[1], name), 'w').write('\n'.join(lines) + '\n')
PY

echo "== estimated / measured makespan after one profiled run"
printf '%-16s %-7s %-10s %-10s %-8s %-15s %-10s %-22s %s\n' example mode estimated measured ratio quartiles learned 'processes (ratio)' covered
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
for spec in .gpu/examples/*.yaml "$out"/workloads/*.yaml; do
	ex=$(basename "$spec" .yaml)
	# Ranks and the 2-device pipeline need 2 GPUs (scripts/gpu/ranks.sh, multigpu.sh).
	case $ex in data_parallel | pipeline_2gpu) [ "$gpus" -ge 2 ] || continue ;; esac
	m="$out/models-$ex.json"
	rm -f "$m"
	n=$(eager_repeat "$spec")
	echo "$ex $n" >>"$out/eager-repeats.txt"
	# One profiled run of each mode (the replay's teaches the model what a
	# replay costs beyond its ops), then the measured ones, as many runs
	# each.
	if ! $dagrun run "$spec" --backend cuda --repeat "$n" --perf-model "$m" --json >"$out/learn-$ex.json" 2>"$out/learn-$ex.err" ||
		! $dagrun run "$spec" --backend cuda --graph --repeat 400 --perf-model "$m" --json >"$out/learn-replay-$ex.json" 2>"$out/learn-replay-$ex.err" ||
		! $dagrun run "$spec" --backend cuda --repeat "$n" --perf-model "$m" --json >"$out/eager-$ex.json" 2>"$out/eager-$ex.err" ||
		! $dagrun run "$spec" --backend cuda --graph --repeat 400 --perf-model "$m" --json >"$out/replay-$ex.json" 2>"$out/replay-$ex.err"; then
		echo "$ex: FAIL (see $out/*-$ex.err)"
		status=1
		continue
	fi
	# The eager run measured again in two more processes, each from the
	# model as the first measured run found it: how far the same plan
	# moves between processes.
	for i in 2 3; do
		cp "$m" "$out/models-$ex-again.json"
		$dagrun run "$spec" --backend cuda --repeat "$n" --perf-model "$out/models-$ex-again.json" --json \
			>"$out/eager-$ex-$i.json" 2>>"$out/eager-$ex.err" || status=1
	done
	for mode in eager replay; do
		f="$out/$mode-$ex.json"
		l="$out/learn-$ex.json"
		[ $mode = replay ] && l="$out/learn-replay-$ex.json"
		python3 - "$f" "$l" "$ex" <<'PY'
import json, sys
r, l = (json.load(open(p))['makespan'] for p in sys.argv[1:3])
q = '%.1f-%.1f' % (r['measured_q1_ns'] / 1e3, r['measured_q3_ns'] / 1e3) if r.get('measured_q3_ns') else '-'
cov = json.load(open(sys.argv[1]))['perf_model']
procs = '-'
if r['mode'] == 'eager':
    ms = [r['measured_ns']]
    for i in (2, 3):
        try:
            ms.append(json.load(open(sys.argv[1][:-len('.json')] + '-%d.json' % i))['makespan']['measured_ns'])
        except (OSError, ValueError, KeyError):
            pass
    ms.sort()
    procs = '%.1f-%.1f (%.2f)' % (ms[0] / 1e3, ms[-1] / 1e3, r['estimated_ns'] / ms[len(ms) // 2])
mode = r['mode'] + ('*' if r.get('host_bound') else '')
print('%-16s %-7s %-10.1f %-10.1f %-8.2f %-15s %-10.1f %-22s %d/%d' % (sys.argv[3], mode, r['estimated_ns'] / 1e3, r['measured_ns'] / 1e3, r['ratio'], q, l['measured_ns'] / 1e3, procs, cov['ops_measured'], cov['ops']))
PY
	done
done
echo "(times in us; eager measured: mean wall time of the untraced runs after the warm-up, with the quartiles; replay: time per replay;"
echo " learned: the profiled run's own measured makespan, in another process;"
echo " processes: the eager measured makespan's range over three processes, and the estimate over their median;"
echo " eager*: host-bound by the model, the host's submission speed sets the estimate;"
echo " eager runs per process: about a second's worth, $out/eager-repeats.txt)"
grep -h "ops timed by" "$out"/*.err 2>/dev/null | sort | uniq -c | head -5

# The same with one model for the machine, as a user keeps it: every
# example's profiled runs teach models-shared.json first, then each is
# estimated from it (the fixed costs of a run's start are then a mean
# over the examples weighted toward the short runs, not the example's
# own).
echo "== estimated / measured makespan with one shared model"
printf '%-16s %-10s %-12s %-12s %-8s %s\n' example mode estimated measured ratio covered
shared="$out/models-shared.json"
rm -f "$shared"
examples=()
for spec in .gpu/examples/*.yaml "$out"/workloads/*.yaml; do
	ex=$(basename "$spec" .yaml)
	case $ex in data_parallel | pipeline_2gpu) [ "$gpus" -ge 2 ] || continue ;; esac
	examples+=("$spec")
	$dagrun run "$spec" --backend cuda --repeat "$(grep "^$ex " "$out/eager-repeats.txt" | cut -d' ' -f2)" --perf-model "$shared" >/dev/null 2>>"$out/shared-learn.err" || status=1
	$dagrun run "$spec" --backend cuda --graph --repeat 400 --perf-model "$shared" >/dev/null 2>>"$out/shared-learn.err" || status=1
done
cp "$shared" "$out/models-shared-learned.json"
for spec in "${examples[@]}"; do
	ex=$(basename "$spec" .yaml)
	for mode in eager replay; do
		f="$out/shared-$mode-$ex.json"
		flags="--repeat $(grep "^$ex " "$out/eager-repeats.txt" | cut -d' ' -f2)"
		[ $mode = replay ] && flags="--graph --repeat 400"
		# Each from the model as learned, not as the runs before it left it.
		cp "$out/models-shared-learned.json" "$out/models-shared-now.json"
		if $dagrun run "$spec" --backend cuda $flags --perf-model "$out/models-shared-now.json" --json >"$f" 2>"$f.err"; then
			field "$f" "'%-16s %-10s %-12.1f %-12.1f %-8.2f %d/%d' % ('$ex', r['makespan']['mode'], r['makespan']['estimated_ns']/1e3, r['makespan']['measured_ns']/1e3, r['makespan']['ratio'], r['perf_model']['ops_measured'], r['perf_model']['ops'])"
		else
			echo "$ex $mode: FAIL (see $f.err)"
			status=1
		fi
	done
done

echo "== tracing cost (BenchmarkCUPTISessionTracing)"
if [ -n "${SKIP_TRACING_BENCH:-}" ]; then
	echo "tracing cost: skipped (SKIP_TRACING_BENCH)"
elif [ -x .gpu/cuda.test ]; then
	# The raw whole-graph one in a process of its own, last: it starts and
	# stops a whole-graph tracer per batch.
	# E-raw (the issue's ratio: dagrun's CUPTI cost per op against the raw
	# C loop's, one process, one tracer) three times, each in a process of
	# its own.
	for pat in 'CUPTISessionTracing$/^(E|C-replay|C-replay-session|C-replay-session-whole)$' 'CUPTISessionTracing$/^C-replay-whole$' \
		'CUPTISessionTracing$/^E-raw$' 'CUPTISessionTracing$/^E-raw$' 'CUPTISessionTracing$/^E-raw$'; do
		(cd cuda && DAGRUN_BENCH_CUPTI=1 DAGRUN_REQUIRE_GPU=1 "../.gpu/cuda.test" -test.run '^$' -test.bench "$pat" \
			-test.benchtime "${BENCHTIME:-30x}" -test.timeout 600s) >>"$out/tracing-bench.log" 2>&1 || status=1
	done
	grep -E '^(Benchmark|--- FAIL|FAIL)|medians over' "$out/tracing-bench.log"
	# A benchmark that skipped prints no line: that is a failure here.
	if ! grep -q '^BenchmarkCUPTISessionTracing' "$out/tracing-bench.log" || grep -q -- '--- SKIP' "$out/tracing-bench.log"; then
		echo "tracing cost: FAIL: BenchmarkCUPTISessionTracing skipped or printed no result"
		status=1
	fi
else
	echo "tracing cost: skipped: .gpu/cuda.test was not built"
fi
exit $status
