"""pykeys: writes, through the Python hook's writer (tools/python/ncclguard_hook/_log.py), one line
holding every key of the log schema with the value roundtrip.py expects for its row (the same
rule as tests/report/logkeys.c). Settings from NCCLGUARD_LOG_FILE / NCCLGUARD_LOG_FORMAT."""
import os
import sys

os.environ["NCCLGUARD_LOG"] = "trace"
from ncclguard_hook import _log, _schema  # noqa: E402

STR = {"fn": "ncclCommWindowRegister", "decision": "error", "reason": "not_vmm",
       "result": "ncclInvalidArgument"}
kvs = []
for i, (k, t, w) in enumerate(_schema.KEYS):
    if w == "prefix" or k in ("msg", "truncated"):
        continue
    if t == "int":
        kvs.append((k, 1000 + i))
    elif t == "float":
        kvs.append((k, i + 0.5))
    elif t == "ptr":
        kvs.append((k, 0x1000 + i))          # an integer: the writer formats it as the library does
    elif t == "hex64":
        kvs.append((k, 0x0123456789abc000 + i))
    elif t == "any":
        kvs.append(("NCCLGUARD_TIMEOUT", "v_NCCLGUARD_"))
    else:
        kvs.append((k, STR.get(k, "v_" + k)))
kvs.reverse()  # the writer puts them in the schema's order
_log.log(_log.WARN, kvs, 'a "quoted" msg with = and \\ and a\nnewline', dev=7)
sys.exit(0)
