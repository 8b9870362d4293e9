"""sources.py ROOT: the tables are the only place each fact is written (issue 13). Checks that
every key the library (shim/*.c) and the Python hook write is a row of shim/logschema.def with
the writer function's type, that every reason they log is a row of shim/reasons.def, and that no
other source file holds a copy of a reason's advice. Prints "good" or what is wrong."""
import os
import re
import sys

root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "tools/python/ncclguard_hook"))
import _schema  # noqa: E402

types = {k: t for k, t, w in _schema.KEYS}
reasons = {n for n, lvl, w in _schema.REASONS}
bad = []


def key_type(k):
    if k in types:
        return types[k]
    for p, t in types.items():
        if p.endswith("_") and k.startswith(p):
            return t
    return None


fn_type = {"str": ("str", "ptr", "hex64", "any"), "int": ("int", "any", "bool"), "dbl": ("float",),
           "ptr": ("ptr",), "u64hex": ("hex64",)}
DECISIONS = r'"(?:pass|internal|register|retry|degrade|error|noop|deferred|warmup|inactive|installed)"'
n_keys = n_reasons = 0
for d in ("shim", "tools/python/ncclguard_hook"):
    for f in sorted(os.listdir(os.path.join(root, d))):
        p = os.path.join(root, d, f)
        if not (f.endswith(".c") or f.endswith(".py")) or f == "_schema.py":
            continue
        src = open(p).read()
        if f.endswith(".c"):
            for m in re.finditer(r'ng_kv_(str|int|dbl|ptr|u64hex)\(\s*&?\w+,\s*"([^"]+)"', src):
                n_keys += 1
                t = key_type(m.group(2))
                if t not in fn_type[m.group(1)]:
                    bad.append("%s: key %s written with ng_kv_%s, schema type %s" % (p, m.group(2), m.group(1), t))
            # ng_log_call(level, fn, comm, res, t0, "decision", <reason>, msg): literals of the reason argument
            calls = "\n".join(src[m.start():src.find(";", m.start())] for m in re.finditer(r"ng_log_call\(", src))
            for m in re.finditer(DECISIONS + r',\s*([^,]*(?:\?[^,:]*:[^,]*)?),', calls):
                for r in re.findall(r'"([a-z_]+)"', m.group(1)):
                    n_reasons += 1
                    if r not in reasons:
                        bad.append("%s: reason %s is not in shim/reasons.def" % (p, r))
        else:
            for m in re.finditer(r'\(\s*"([A-Za-z_][A-Za-z_0-9]*)",\s*[^)]', src):
                k = m.group(1)
                if k in ("fn",) or key_type(k) is not None:
                    n_keys += 1
                    continue
            for m in re.finditer(r'\("reason",\s*"([a-z_]+)"\)|_pass\(\s*"([a-z_]+)"', src):
                r = m.group(1) or m.group(2)
                n_reasons += 1
                if r not in reasons:
                    bad.append("%s: reason %s is not in shim/reasons.def" % (p, r))
            for m in re.finditer(r'_log\.log\([^\[]*\[([^\]]*)\]', src):
                for k in re.findall(r'\("([A-Za-z_]+)",', m.group(1)):
                    if key_type(k) is None:
                        bad.append("%s: key %s is not in shim/logschema.def" % (p, k))

# no copy of an advice outside its table (and the files generated from it)
adv = re.findall(r'NG_(?:HOOK_)?REASON\((?:[A-Z_]+, )?"[a-z_]+", [A-Z]+,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)',
                 open(os.path.join(root, "shim/reasons.def")).read())
texts = ["".join(re.findall(r'"((?:[^"\\]|\\.)*)"', a)) for a in adv]
assert len(texts) == len(_schema.REASONS), (len(texts), len(_schema.REASONS))
for d in ("shim", "tools", "tools/python/ncclguard_hook"):
    for f in sorted(os.listdir(os.path.join(root, d))):
        p = os.path.join(root, d, f)
        if f == "reasons.def" or not os.path.isfile(p) or f.endswith((".md", ".pyc")):
            continue
        src = open(p, errors="replace").read()
        for t in texts:
            probe = t[:60]  # a sentence long enough to be a copy, not a phrase
            if len(probe) == 60 and probe in src:
                bad.append("%s holds a copy of the advice %r" % (p, probe))
if n_keys < 40 or n_reasons < 10:
    bad.append("too few keys (%d) or reasons (%d) found: the patterns no longer match the sources" % (n_keys, n_reasons))
print("\n".join(bad) if bad else "good (%d keys, %d reasons checked)" % (n_keys, n_reasons))
