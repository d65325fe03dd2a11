import collections, json, re, sys
# Usage: python3 scripts/gpu/ops.py TRACE.json (a dagrun run --trace file).
# Prints, for the last traced run, each op name (trailing digits dropped, so
# chunk0..chunk7 are one row) with its count and mean duration in us.
d = json.load(open(sys.argv[1]))
ev = d['traceEvents'] if isinstance(d, dict) else d
xs = [e for e in ev if e.get('ph') == 'X' and 'run' in e.get('args', {})]
last = max(e['args']['run'] for e in xs)
ops = collections.defaultdict(list)
for e in xs:
    if e['args']['run'] == last:
        ops[re.sub(r'\d+$', '', e['name'])].append(e['dur'])
for name, durs in sorted(ops.items()):
    print(f"{name:16s} n={len(durs):3d} mean {sum(durs) / len(durs):9.1f} us")
