#!/usr/bin/env bash
# Fault injection on CUDA through the CLI: every example under --chaos for
# 20 seeds gives the outputs of the plain run bit for bit, and --fail-op of
# every op of every example exits 1 naming the op, with no output file
# written. Usage: scripts/gpu/faults.sh OUTDIR (run from the directory that
# holds .gpu/, as scripts/gpu-check.sh does).
set -uo pipefail
out=${1:?usage: faults.sh OUTDIR}
mkdir -p "$out"
dagrun=.gpu/dagrun
examples=.gpu/examples
[ -d "$examples" ] || examples=examples
fail=0

# same_outputs A B: the outputs of two --format json reports are equal.
same_outputs() {
	python3 - "$1" "$2" <<'PY'
import json, sys
def load(p):
    text, dec, found = open(p).read(), json.JSONDecoder(), {}
    for i, c in enumerate(text):
        if c == "{" and (i == 0 or text[i - 1] == "\n"):
            try:
                doc, _ = dec.raw_decode(text[i:])
            except ValueError:
                continue
            if isinstance(doc, dict) and "outputs" in doc:
                found = doc
    return {o["buffer"]: o["fnv"] for o in found.get("outputs", [])}
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a and a == b else 1)
PY
}

chaos_runs=0 chaos_ok=0 fail_runs=0 fail_ok=0
for spec in "$examples"/*.yaml; do
	ex=$(basename "$spec" .yaml)
	# The model block is minutes of fail-op runs; ranks and the 2-device
	# pipeline have scripts of their own (ranks.sh, multigpu.sh).
	case $ex in mlp_stream | data_parallel | pipeline_2gpu) continue ;; esac
	if ! "$dagrun" run "$spec" --backend cuda --format json >"$out/$ex-plain.json" 2>"$out/$ex-plain.err"; then
		echo "FAIL $ex: the plain run failed"; cat "$out/$ex-plain.err"; fail=1; continue
	fi
	for seed in $(seq 0 19); do
		chaos_runs=$((chaos_runs + 1))
		if "$dagrun" run "$spec" --backend cuda --chaos "$seed" --format json >"$out/$ex-chaos$seed.json" 2>"$out/$ex-chaos$seed.err" &&
			same_outputs "$out/$ex-plain.json" "$out/$ex-chaos$seed.json"; then
			chaos_ok=$((chaos_ok + 1))
		else
			echo "FAIL $ex --chaos $seed: outputs differ from the plain run or the run failed"; cat "$out/$ex-chaos$seed.err"; fail=1
		fi
	done
	# Every op, from the plan's steps; each run saves its outputs in a
	# fresh directory that must stay empty.
	ops=$("$dagrun" plan "$spec" --format json | python3 -c 'import json,sys; print("\n".join(dict.fromkeys(s["op"] for s in json.load(sys.stdin)["steps"] if s["kind"] == "run")))')
	while IFS= read -r op; do
		[ -n "$op" ] || continue
		fail_runs=$((fail_runs + 1))
		dir="$out/$ex-fail-$fail_runs"
		mkdir -p "$dir"
		cp "$spec" "$dir/spec.yaml"
		python3 - "$dir/spec.yaml" <<'PY'
import sys, re
p = sys.argv[1]
lines = open(p).read().splitlines(keepends=True)
out, names, inside = [], [], False
for l in lines:
    if l.startswith("outputs:"):
        flow = re.match(r"outputs:\s*\[(.*)\]\s*$", l)
        if flow:  # outputs: [a, b]
            names += [n.strip() for n in flow.group(1).split(",") if n.strip()]
            continue
        inside = True; continue
    if inside and (l.startswith(" ") or l.startswith("-") or not l.strip()):
        m = re.match(r"\s*-\s*([A-Za-z_][\w]*)\s*$", l)
        if m: names.append(m.group(1))
        continue
    inside = False
    out.append(l)
out.append("outputs:\n" + "".join("  - {buffer: %s, save: %s.bin}\n" % (n, n) for n in names))
open(p, "w").write("".join(out))
PY
		"$dagrun" run "$dir/spec.yaml" --backend cuda --fail-op "$op" >"$dir/stdout" 2>"$dir/stderr"
		status=$?
		left=$(find "$dir" -name '*.bin' | wc -l)
		if [ "$status" -eq 1 ] && grep -q "op \"$op\" failed: injected fault" "$dir/stderr" && [ "$left" -eq 0 ]; then
			fail_ok=$((fail_ok + 1))
		else
			echo "FAIL $ex --fail-op $op: exit status $status, $left files written"; cat "$dir/stderr"; fail=1
		fi
	done <<<"$ops"
done
echo "chaos: $chaos_ok of $chaos_runs runs gave the plain run's outputs"
echo "fail-op: $fail_ok of $fail_runs runs failed cleanly, naming the op, writing nothing"
exit $fail
