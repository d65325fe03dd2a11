#!/usr/bin/env python3
"""Compares the outputs of two `dagrun run --json` reports, A (cuda) and B
(cpu), and writes the specs that make such reports comparable.

  outputs.py [compare] [--rtol R] A.json B.json
      Each output must be equal byte for byte, or, where both runs saved
      its bytes ("saved" in the report: run a spec from `outputs.py saving`
      with --save-dir), equal element by element within its dtype's
      tolerance: |a - b| <= rtol*|b| + atol*max|B|, with rtol and atol of
      the dtype (--rtol raises both, for GEMMs whose libraries sum in
      other orders). Integers are compared exactly. Sums are never
      compared: they cannot see permuted or offsetting errors. An output
      whose hashes differ and whose bytes were not saved is a difference.
      Prints "ok: ..." or "DIFF: ..." and exits 1 on a difference.

  outputs.py saving SPEC
      Writes SPEC's copy beside it (NAME.saving.yml) whose outputs are each
      saved as BUFFER.bin (BUFFER_{rank}.bin in a spec with ranks; those
      with a save path keep theirs), and prints its path.

stdout may hold lines that host steps print (checksums) before the report:
the last JSON object with outputs is the report."""
import json
import os
import re
import sys

# dtype: (rtol, atol as a fraction of the largest magnitude of B's output).
TOLERANCE = {
    "f64": (1e-9, 1e-12),
    "f32": (1e-5, 1e-6),
    "f16": (2e-3, 1e-3),   # two units in the last place of 11 bits
    "bf16": (1.6e-2, 8e-3),  # two units in the last place of 8 bits
}
INTEGER = {"u8": "<u1", "i32": "<i4", "i64": "<i8"}


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


def elements(path, dtype):
    import numpy as np
    raw = np.fromfile(path, dtype=np.uint8)
    if dtype in INTEGER:
        return raw.view(INTEGER[dtype])
    if dtype == "f64":
        return raw.view("<f8")
    if dtype == "f32":
        return raw.view("<f4").astype(np.float64)
    if dtype == "f16":
        return raw.view("<f2").astype(np.float64)
    if dtype == "bf16":
        return (raw.view("<u2").astype(np.uint32) << 16).view("<f4").astype(np.float64)
    raise ValueError("unknown dtype %r" % dtype)


def compare_saved(x, y, pa, pb, scale):
    """Returns None when the saved outputs agree, else what differs."""
    import numpy as np
    dtype = x["dtype"]
    a, b = elements(pa, dtype), elements(pb, dtype)
    if a.shape != b.shape:
        return "%d elements vs %d" % (a.size, b.size)
    if dtype in INTEGER:
        bad = np.flatnonzero(a != b)
        if bad.size:
            i = bad[0]
            return "%d of %d elements differ (the first at %d: %s vs %s)" % (bad.size, a.size, i, a[i], b[i])
        return None
    rtol, atol = TOLERANCE[dtype]
    rtol, atol = max(rtol, scale), max(atol, scale)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if (nan_a != nan_b).any():
        i = np.flatnonzero(nan_a != nan_b)[0]
        return "NaN at element %d in one only (%s vs %s)" % (i, a[i], b[i])
    a, b = np.where(nan_a, 0, a), np.where(nan_b, 0, b)
    inf = np.isinf(a) | np.isinf(b)
    if (a[inf] != b[inf]).any():
        i = np.flatnonzero(inf & (a != b))[0]
        return "infinity at element %d differs (%s vs %s)" % (i, a[i], b[i])
    a, b = np.where(inf, 0, a), np.where(inf, 0, b)
    largest = float(np.abs(b).max()) if b.size else 0.0
    err = np.abs(a - b)
    bad = np.flatnonzero(err > rtol * np.abs(b) + atol * largest)
    if bad.size:
        i = bad[np.argmax(err[bad])]
        return "%d of %d elements outside rtol %g, atol %g*%g (worst at %d: %r vs %r)" % (
            bad.size, a.size, rtol, atol, largest, i, a[i], b[i])
    return None


def saved_path(report_path, saved):
    if not saved:
        return None
    for p in (saved, os.path.join(os.path.dirname(report_path), saved)):
        if os.path.isfile(p):
            return p
    return None


def compare(args):
    scale = 0.0
    if args and args[0] == "--rtol":
        scale, args = float(args[1]), args[2:]
    if len(args) != 2:
        sys.exit("usage: outputs.py [compare] [--rtol R] A.json B.json")
    a, b = load(args[0]), load(args[1])
    oa = {o["buffer"]: o for o in a.get("outputs", [])}
    ob = {o["buffer"]: o for o in b.get("outputs", [])}
    exact = close = 0
    bad = [] if oa else ["no outputs"]
    for name in sorted(set(oa) | set(ob)):
        x, y = oa.get(name), ob.get(name)
        if x is None or y is None:
            bad.append(name + " missing")
            continue
        if x["dtype"] != y["dtype"] or x["bytes"] != y["bytes"]:
            bad.append("%s is %s of %d bytes vs %s of %d" % (name, x["dtype"], x["bytes"], y["dtype"], y["bytes"]))
            continue
        pa, pb = saved_path(args[0], x.get("saved")), saved_path(args[1], y.get("saved"))
        if pa and pb:
            if open(pa, "rb").read() == open(pb, "rb").read():
                exact += 1
                continue
            why = compare_saved(x, y, pa, pb, scale)
            if why is None:
                close += 1
            else:
                bad.append("%s (%s): %s" % (name, x["dtype"], why))
            continue
        if x["fnv"] == y["fnv"]:
            exact += 1
            continue
        bad.append("%s: bytes differ (fnv %s vs %s), and they were not saved to compare element by element" % (name, x["fnv"], y["fnv"]))
    print(("ok" if not bad else "DIFF") + ": %d outputs equal byte for byte, %d element by element within their dtype's tolerance (cuda backend %s, wall %.2f ms vs cpu %.2f ms)%s" % (
        exact, close, a.get("backend"), a.get("wall_ns", 0) / 1e6, b.get("wall_ns", 0) / 1e6, ("; " + "; ".join(bad)) if bad else ""))
    sys.exit(1 if bad else 0)


NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"


def saving_item(item, suffix):
    """An outputs entry, saved: a name becomes a mapping with a save path."""
    item = item.strip()
    if re.fullmatch(NAME, item):
        return "{buffer: %s, save: \"%s%s.bin\"}" % (item, item, suffix)
    m = re.fullmatch(r"\{(.*)\}", item)
    if m and re.search(r"\bsave\s*:", m.group(1)) is None:
        buf = re.search(r"\bbuffer\s*:\s*(" + NAME + ")", m.group(1))
        if buf:
            return "{%s, save: \"%s%s.bin\"}" % (m.group(1).strip(), buf.group(1), suffix)
    return item


def saving(args):
    if len(args) != 1:
        sys.exit("usage: outputs.py saving SPEC")
    spec = args[0]
    text = open(spec).read()
    lines = text.split("\n")
    # Every rank of a spec with ranks saves a file of its own.
    suffix = "_{rank}" if re.search(r"^\s*world\s*:", text, re.M) else ""
    out, i, found = [], 0, False
    while i < len(lines):
        line = lines[i]
        flow = re.fullmatch(r"outputs:\s*\[(.*)\]\s*(#.*)?", line)
        if flow:
            found = True
            out.append("outputs:")
            out += ["  - " + saving_item(x, suffix) for x in flow.group(1).split(",") if x.strip()]
            i += 1
            continue
        if re.fullmatch(r"outputs:\s*(#.*)?", line):
            found = True
            out.append(line)
            i += 1
            while i < len(lines) and (lines[i].startswith(" ") or lines[i].strip() == "" or lines[i].lstrip().startswith("#")):
                m = re.fullmatch(r"(\s*-\s*)([^#]*?)(\s*#.*)?", lines[i])
                out.append(m.group(1) + saving_item(m.group(2), suffix) + (m.group(3) or "") if m else lines[i])
                i += 1
            continue
        out.append(line)
        i += 1
    if not found:
        sys.exit("outputs.py saving: %s has no top-level outputs: list" % spec)
    base = spec[:-5] if spec.endswith(".yaml") else spec
    dst = base + ".saving.yml"
    open(dst, "w").write("\n".join(out))
    print(dst)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] == "saving":
        saving(argv[1:])
    elif argv and argv[0] == "compare":
        compare(argv[1:])
    else:
        compare(argv)
