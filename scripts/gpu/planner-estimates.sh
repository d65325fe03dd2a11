#!/usr/bin/env bash
# planner-estimates.sh OUTDIR: for every example, the planner's estimated
# makespan (dagrun plan --compare: each strategy, eager and replay) against
# the measured one on the CUDA backend in the same session: an eager run
# (wall time per run of --repeat 20) and a graph replay (per replay of
# --graph --repeat 200), medians of three rounds. Prints one row per example with the ratios
# estimate / measured, and the same runs of the plan placed in declaration
# order (--strategy declared, the old planner) beside: measured list /
# declared, eager and replayed (no regression beyond noise). Uses .gpu/dagrun and .gpu/examples from
# scripts/gpu-build.sh.
set -u
out=${1:?usage: scripts/gpu/planner-estimates.sh OUTDIR}
mkdir -p "$out"
if [ ! -x .gpu/dagrun ]; then
	echo "planner estimates: skipped: .gpu/dagrun was not built"
	exit 0
fi
status=0
printf '%-16s %-12s %-12s %-8s %-12s %-12s %-8s %-12s %-12s %-9s %-9s\n' example est-eager meas-eager ratio est-replay meas-replay ratio old-eager old-replay list/old-e list/old-r
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
for spec in .gpu/examples/*.yaml; do
	ex=$(basename "$spec" .yaml)
	# Ranks and the 2-device pipeline need 2 GPUs (scripts/gpu/ranks.sh, multigpu.sh).
	case $ex in data_parallel | pipeline_2gpu) [ "$gpus" -ge 2 ] || continue ;; esac
	# Three rounds, the two strategies alternating within each; the
	# medians of the three are compared.
	ok=1
	.gpu/dagrun plan "$spec" --compare >"$out/est-$ex.txt" 2>"$out/est-$ex.err" || ok=0
	for round in 1 2 3; do
		for st in list declared; do
			.gpu/dagrun run "$spec" --backend cuda --repeat 20 --strategy $st --json >"$out/eager-$st-$round-$ex.json" 2>"$out/eager-$st-$ex.err" || ok=0
			.gpu/dagrun run "$spec" --backend cuda --graph --repeat 200 --strategy $st --json >"$out/replay-$st-$round-$ex.json" 2>"$out/replay-$st-$ex.err" || ok=0
		done
	done
	if [ $ok = 0 ]; then
		echo "$ex: FAIL (see $out/*-$ex.err)"
		status=1
		continue
	fi
	python3 - "$ex" "$out/est-$ex.txt" "$out" <<'PY'
import json, re, statistics, sys
ex, est, out = sys.argv[1:]
def ns(s):
    m = re.fullmatch(r'([0-9.]+)(ns|µs|us|ms|s)', s)
    return float(m.group(1)) * {'ns': 1, 'µs': 1e3, 'us': 1e3, 'ms': 1e6, 's': 1e9}[m.group(2)]
row = next(l.split() for l in open(est) if l.startswith('list '))
est_eager, est_replay = ns(row[1]), ns(row[2])
def eager(st):
    rs = [json.load(open('%s/eager-%s-%d-%s.json' % (out, st, i, ex))) for i in (1, 2, 3)]
    return statistics.median(r['wall_ns'] / max(r['repeat'], 1) for r in rs)
def replay(st):
    return statistics.median(json.load(open('%s/replay-%s-%d-%s.json' % (out, st, i, ex)))['graph']['per_replay_ns'] for i in (1, 2, 3))
meas_eager, meas_replay, old_e, old_r = eager('list'), replay('list'), eager('declared'), replay('declared')
print('%-16s %-12.1f %-12.1f %-8.2f %-12.1f %-12.1f %-8.2f %-12.1f %-12.1f %-9.3f %-9.3f' % (ex, est_eager / 1e3, meas_eager / 1e3, est_eager / meas_eager,
      est_replay / 1e3, meas_replay / 1e3, est_replay / meas_replay, old_e / 1e3, old_r / 1e3, meas_eager / old_e, meas_replay / old_r))
PY
done
echo "(times in us; estimates of the default list-scheduled plan; each strategy's in $out/est-*.txt)"
exit $status
