#!/usr/bin/env python3
"""Compares the outputs of two `dagrun run --json` reports, A (cuda) and B
(cpu): each output equal bit for bit (fnv), or, for f32 and f64, its sum
within 1e-5. Prints "ok: ..." or "DIFF: ..." and exits 1 on a difference.
stdout may hold lines that host steps print (checksums) before the report:
the last JSON object with outputs is the report."""
import json
import sys


def load(path):
    text, dec, found = open(path).read(), json.JSONDecoder(), {}
    for i, c in enumerate(text):
        if c == "{" and (i == 0 or text[i - 1] == "\n"):
            try:
                doc, _ = dec.raw_decode(text[i:])
            except ValueError:
                continue
            if isinstance(doc, dict) and "outputs" in doc:
                found = doc
    return found


a, b = load(sys.argv[1]), load(sys.argv[2])
oa = {o["buffer"]: o for o in a.get("outputs", [])}
ob = {o["buffer"]: o for o in b.get("outputs", [])}
exact = close = 0
bad = [] if oa else ["no outputs"]
for name in sorted(set(oa) | set(ob)):
    x, y = oa.get(name), ob.get(name)
    if x is None or y is None:
        bad.append(name + " missing")
        continue
    if x["fnv"] == y["fnv"]:
        exact += 1
        continue
    sx, sy = float(x["sum"]), float(y["sum"])
    if x["dtype"] in ("f32", "f64") and abs(sx - sy) <= 1e-5 * max(1.0, abs(sx), abs(sy)):
        close += 1
        continue
    bad.append("%s sum %s vs %s" % (name, x["sum"], y["sum"]))
print(("ok" if not bad else "DIFF") + ": %d outputs equal bit for bit, %d within 1e-5 (cuda backend %s, wall %.2f ms vs cpu %.2f ms)%s" % (
    exact, close, a.get("backend"), a.get("wall_ns", 0) / 1e6, b.get("wall_ns", 0) / 1e6, ("; " + "; ".join(bad)) if bad else ""))
sys.exit(1 if bad else 0)
