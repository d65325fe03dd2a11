import json, sys
# Usage: python3 scripts/gpu/spans.py TRACE.json (a dagrun run --trace file).
# Prints, for the last traced run, each op's start and end relative to the run's first span, in ms.
d = json.load(open(sys.argv[1]))
ev = d['traceEvents'] if isinstance(d, dict) else d
names = {e['tid']: e['args']['name'].split(' ')[0] for e in ev if e.get('name') == 'thread_name'}
xs = [e for e in ev if e.get('ph') == 'X' and 'run' in e.get('args', {})]
last = max(e['args']['run'] for e in xs)
xs = sorted([e for e in xs if e['args']['run'] == last], key=lambda e: e['ts'])
t0 = xs[0]['ts']
print(f"run {last}: {len(xs)} spans")
for e in xs[:14] + [None] + xs[-8:]:
    if e is None:
        print('  ...'); continue
    print(f"  {e['name']:10s} {names.get(e['tid'], e['tid']):24s} {(e['ts']-t0)/1e3:8.3f} {(e['ts']+e['dur']-t0)/1e3:8.3f}  dur {e['dur']/1e3:.3f}")
