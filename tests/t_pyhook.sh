# The Python start-up hook (tools/python) against a stub torch (tests/data/fake_torch): when it
# warms a group up, when it leaves rendezvous alone, disabling, renamed PyTorch symbols, its own
# errors, chaining to the user's sitecustomize, silence without torch, the log format, in-process
# restart (a group re-created under its old name).
# Runs standalone too: sh tests/t_pyhook.sh
: "${NG_ROOT:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$NG_ROOT/tests/lib.sh"

PY=${NG_PYTHON:-python3}
HOOK=$NG_ROOT/tools/python
STUB=$NG_ROOT/tests/data/fake_torch
PROG=$STUB/prog.py
# The library's text line (docs/DESIGN.md, "Log format"), keys in any order, msg last.
TEXT_RE='^[^: ]+:[0-9]+:[0-9]+ \[-?[0-9]+\] NCCLGUARD (WARN|INFO|TRACE)( [a-z_A-Z][a-z_A-Z0-9.]*=("([^"\\]|\\.)*"|[^ "]+))* msg="([^"\\]|\\.)*"$'

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "# skip pyhook: no $PY"
  exit 0
fi

# py OUT ENV... -- ARGS...: run python with the hook and the stub first on PYTHONPATH;
# stdout+stderr in $T/OUT.out, stderr alone in $T/OUT.err, status in $T/OUT.rc
py() {
  o=$1; shift
  envs=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  # shellcheck disable=SC2086
  env -u NCCLGUARD_LOG -u NCCLGUARD_LOG_FILE -u NCCLGUARD_LOG_FORMAT -u NCCLGUARD_PYHOOK \
    -u NCCLGUARD_DISABLE -u RANK PYTHONPATH="$HOOK:$STUB" PYTHONDONTWRITEBYTECODE=1 $envs \
    timeout -k 2 "$NG_TIMEOUT" "$PY" "$@" >"$T/$o.std" 2>"$T/$o.err"
  echo $? >"$T/$o.rc"
  cat "$T/$o.std" "$T/$o.err" >"$T/$o.out"
}
rc() { cat "$T/$1.rc"; }
# count FILE PATTERN: number of lines matching
count() { grep -Ec -- "$2" "$1" || true; }

# 1. lazy world group: exactly one warm-up all-reduce on the group, on the tensor's device,
#    before PyTorch's rendezvous; a second rendezvous does not warm up again.
py lazy RANK=1 NCCLGUARD_LOG=trace -- "$PROG" --times 2
if [ "$(rc lazy)" != 0 ]; then fail lazy_warmup_once "exit $(rc lazy): $(tail -3 "$T/lazy.out")"
elif ! has "$T/lazy.out" "^EVENTS \[\('all_reduce', '0', 1, 1\), \('comm_init', '0', 1\), \('rendezvous', '0', 1\), \('rendezvous', '0', 1\)\]$"; then
  fail lazy_warmup_once "events: $(grep EVENTS "$T/lazy.out")"
elif [ "$(count "$T/lazy.err" 'INFO fn=pyhook.rendezvous .*decision=warmup reason=lazy_comm')" != 1 ]; then
  fail lazy_warmup_once "no single INFO warm-up line: $(cat "$T/lazy.err")"
elif ! has "$T/lazy.err" '\[1\] NCCLGUARD INFO fn=pyhook.rendezvous comm=0x0 rank=1 nranks=2 group=0 buff=0x[0-9a-f]+ size=64 newcomm=0x[0-9a-f]+ us=[0-9.]+ decision=warmup reason=lazy_comm msg='; then
  fail lazy_warmup_once "warm-up line keys: $(grep warmup "$T/lazy.err")"
elif ! has "$T/lazy.err" 'decision=pass reason=comm_exists'; then fail lazy_warmup_once "second call not passed"
else pass lazy_warmup_once; fi

# 2. the stub models the user's crash: without the hook the same program dies with SIGSEGV
py nohook NCCLGUARD_PYHOOK=0 -- "$PROG"
if [ "$(rc nohook)" = 139 ] && has "$T/nohook.out" '^WRAPPED False$' && has "$T/nohook.err" 'SIGSEGV'; then
  pass lazy_without_hook_crashes
else fail lazy_without_hook_crashes "exit $(rc nohook): $(tail -3 "$T/nohook.out")"; fi

# 3. eager group (device_id=): communicator exists, read on the tensor's device (cuda:1 while
#    the current device is 0), no warm-up
py eager RANK=1 NCCLGUARD_LOG=trace -- "$PROG" --init eager --times 2
if [ "$(rc eager)" = 0 ] && ! has "$T/eager.out" "all_reduce" && ! has "$T/eager.err" 'decision=warmup' \
   && [ "$(count "$T/eager.err" 'decision=pass reason=comm_exists')" = 2 ]; then
  pass eager_no_warmup
else fail eager_no_warmup "exit $(rc eager): $(cat "$T/eager.out")"; fi

# 4. not the NCCL backend: symm-mem backend CUDA, or a gloo process group
py cuda NCCLGUARD_LOG=trace -- "$PROG" --backend CUDA
if [ "$(rc cuda)" = 0 ] && ! has "$T/cuda.out" "all_reduce" && has "$T/cuda.err" 'decision=pass reason=not_nccl '; then
  pass backend_not_nccl
else fail backend_not_nccl "exit $(rc cuda): $(cat "$T/cuda.out")"; fi
py gloo NCCLGUARD_LOG=trace -- "$PROG" --init gloo
if [ "$(rc gloo)" = 0 ] && ! has "$T/gloo.out" "all_reduce" && has "$T/gloo.err" 'reason=not_nccl_pg' \
   && has "$T/gloo.out" '^ERROR RuntimeError: backend must be a NCCL process group$'; then
  pass group_not_nccl
else fail group_not_nccl "exit $(rc gloo): $(cat "$T/gloo.out")"; fi

# 5. subgroups from new_group, by object and by name; the default group by name
for g in sub sub-name world-name; do
  gname=1; [ "$g" = world-name ] && gname=0
  py "g_$g" RANK=1 NCCLGUARD_LOG=info -- "$PROG" --group "$g" --times 2
  if [ "$(rc "g_$g")" = 0 ] \
     && has "$T/g_$g.out" "^EVENTS \[\('all_reduce', '$gname', 1, 1\), \('comm_init', '$gname', 1\), \('rendezvous', '$gname', 1\), \('rendezvous', '$gname', 1\)\]$" \
     && [ "$(count "$T/g_$g.err" "decision=warmup reason=lazy_comm")" = 1 ] && has "$T/g_$g.err" " group=$gname "; then
    pass "group_$g"
  else fail "group_$g" "exit $(rc "g_$g"): $(cat "$T/g_$g.out")"; fi
done

# 6. disabled: NCCLGUARD_PYHOOK=0/off/false, NCCLGUARD_DISABLE=1 -> rendezvous untouched, silent
for e in NCCLGUARD_PYHOOK=0 NCCLGUARD_PYHOOK=off NCCLGUARD_PYHOOK=FALSE NCCLGUARD_DISABLE=1; do
  py off NCCLGUARD_LOG=trace "$e" -- "$PROG" --init eager
  if [ "$(rc off)" = 0 ] && has "$T/off.out" '^WRAPPED False$' && [ ! -s "$T/off.err" ]; then pass "disabled_$e"
  else fail "disabled_$e" "exit $(rc off): $(cat "$T/off.out")"; fi
done

# 7. a bad NCCLGUARD_PYHOOK warns once (fn=config, as the library does) and keeps the default (on)
py badval NCCLGUARD_PYHOOK=maybe -- "$PROG" --init eager
if [ "$(rc badval)" = 0 ] && has "$T/badval.out" '^WRAPPED True$' \
   && [ "$(count "$T/badval.err" 'NCCLGUARD WARN fn=config msg="NCCLGUARD_PYHOOK=maybe is not valid')" = 1 ] \
   && [ "$(wc -l <"$T/badval.err")" = 1 ]; then
  pass bad_pyhook_value
else fail bad_pyhook_value "$(cat "$T/badval.out")"; fi

# 8. PyTorch renamed what the hook needs: WARN inactive (reason=no_symbol), program unaffected
py renamed FAKE_TORCH_RENAME=1 -- "$PROG" --init eager --symbol rendezvous_v2
if [ "$(rc renamed)" = 0 ] && has "$T/renamed.out" '^WRAPPED False$' && has "$T/renamed.out" "'rendezvous'" \
   && has "$T/renamed.err" 'NCCLGUARD WARN fn=pyhook.rendezvous decision=inactive reason=no_symbol msg="Python hook inactive: PyTorch renamed torch.distributed._symmetric_memory.rendezvous'; then
  pass renamed_rendezvous_inactive
else fail renamed_rendezvous_inactive "exit $(rc renamed): $(cat "$T/renamed.out")"; fi
py nocomm FAKE_TORCH_NO_COMM_PTR=1 -- "$PROG" --init eager
if [ "$(rc nocomm)" = 0 ] && has "$T/nocomm.out" '^WRAPPED False$' \
   && has "$T/nocomm.err" 'WARN .*decision=inactive reason=no_symbol .*ProcessGroupNCCL._comm_ptr'; then
  pass renamed_comm_ptr_inactive
else fail renamed_comm_ptr_inactive "exit $(rc nocomm): $(cat "$T/nocomm.out")"; fi
# a build without NCCL: inactive, said at INFO only (nothing at the default level)
py nonccl FAKE_TORCH_NO_NCCL=1 -- "$PROG" --init gloo
if [ "$(rc nonccl)" = 0 ] && has "$T/nonccl.out" '^WRAPPED False$' && [ ! -s "$T/nonccl.err" ]; then
  pass no_nccl_build_quiet
else fail no_nccl_build_quiet "exit $(rc nonccl): $(cat "$T/nonccl.out")"; fi
# the module itself is gone: said when torch.distributed is imported
cp -R "$STUB" "$T/stub2" && rm -rf "$T/stub2/torch/distributed/_symmetric_memory"
env -u NCCLGUARD_LOG PYTHONPATH="$HOOK:$T/stub2" PYTHONDONTWRITEBYTECODE=1 \
  timeout -k 2 "$NG_TIMEOUT" "$PY" -c 'import torch' >"$T/nomod.out" 2>&1
if has "$T/nomod.out" 'WARN fn=pyhook.rendezvous decision=inactive reason=no_symbol msg="Python hook inactive: this PyTorch has no torch.distributed._symmetric_memory'; then
  pass module_gone_inactive
else fail module_gone_inactive "$(cat "$T/nomod.out")"; fi

# 9. an exception inside the hook: logged once at WARN, PyTorch's rendezvous still called
py boom FAKE_TORCH_BAD_GET_BACKEND=1 -- "$PROG" --init eager --times 3
if [ "$(rc boom)" = 0 ] && has "$T/boom.out" "\('rendezvous', '0', 0\), \('rendezvous', '0', 0\), \('rendezvous', '0', 0\)\]$" \
   && [ "$(count "$T/boom.err" 'WARN fn=pyhook.rendezvous decision=pass reason=hook_error msg="Python hook failed \(RuntimeError: stub: get_backend failed\)')" = 1 ] \
   && [ "$(wc -l <"$T/boom.err")" = 1 ]; then
  pass hook_error_calls_through
else fail hook_error_calls_through "exit $(rc boom): $(cat "$T/boom.out")"; fi

# 10. during CUDA graph capture no collective is added (the library handles the registration)
py capture NCCLGUARD_LOG=trace -- "$PROG" --init eager --capture
if [ "$(rc capture)" = 0 ] && ! has "$T/capture.out" all_reduce; then pass capture_no_warmup_eager
else fail capture_no_warmup_eager "$(cat "$T/capture.out")"; fi
py capture2 NCCLGUARD_LOG=trace -- "$PROG" --capture
if has "$T/capture2.err" 'decision=pass reason=capturing' && ! has "$T/capture2.out" all_reduce; then
  pass capture_no_warmup_lazy
else fail capture_no_warmup_lazy "$(cat "$T/capture2.out")"; fi

# 11. the user's own sitecustomize (later on sys.path) still runs, hook on or off; its errors are
#     reported the way site.py does and do not stop the program
mkdir -p "$T/user" "$T/userbad"
cat >"$T/user/sitecustomize.py" <<'EOF'
import os
MARK = "user-sitecustomize"
os.environ["USER_SITECUSTOMIZE_RAN"] = "1"
EOF
printf 'raise RuntimeError("user sitecustomize broke")\n' >"$T/userbad/sitecustomize.py"
chk='import os, sys, sitecustomize; print(os.environ.get("USER_SITECUSTOMIZE_RAN"), getattr(sitecustomize, "MARK", None), "ncclguard_hook" in sys.modules)'
for e in NCCLGUARD_PYHOOK=1 NCCLGUARD_PYHOOK=0; do
  env -u NCCLGUARD_LOG "$e" PYTHONPATH="$HOOK:$T/user" PYTHONDONTWRITEBYTECODE=1 "$PY" -c "$chk" >"$T/chain.out" 2>&1
  if [ "$(cat "$T/chain.out")" = "1 user-sitecustomize True" ]; then pass "chain_user_sitecustomize_$e"
  else fail "chain_user_sitecustomize_$e" "$(cat "$T/chain.out")"; fi
done
env PYTHONPATH="$HOOK:$T/userbad:$STUB" PYTHONDONTWRITEBYTECODE=1 "$PY" "$PROG" --init eager >"$T/chainbad.out" 2>&1
if has "$T/chainbad.out" '^Error in sitecustomize; set PYTHONVERBOSE for traceback:$' \
   && has "$T/chainbad.out" '^RuntimeError: user sitecustomize broke$' && has "$T/chainbad.out" '^WRAPPED True$'; then
  pass chain_broken_user_sitecustomize
else fail chain_broken_user_sitecustomize "$(cat "$T/chainbad.out")"; fi
# our directory twice on the path: no loop, no double import
env PYTHONPATH="$HOOK:$HOOK:$T/user" PYTHONDONTWRITEBYTECODE=1 "$PY" -c "$chk" >"$T/chain2.out" 2>&1
if [ "$(cat "$T/chain2.out")" = "1 user-sitecustomize True" ]; then pass chain_path_twice
else fail chain_path_twice "$(cat "$T/chain2.out")"; fi

# 12. a program that never imports torch: no output, no log file, torch not imported
env -u RANK NCCLGUARD_LOG=trace NCCLGUARD_LOG_FILE="$T/notorch.log" PYTHONPATH="$HOOK:$STUB" PYTHONDONTWRITEBYTECODE=1 \
  "$PY" -c 'import sys; print(sorted(m for m in sys.modules if m.split(".")[0] == "torch"), "ncclguard_hook" in sys.modules)' >"$T/notorch.out" 2>&1
if [ "$(cat "$T/notorch.out")" = "[] True" ] && [ ! -e "$T/notorch.log" ]; then pass no_torch_silent
else fail no_torch_silent "$(cat "$T/notorch.out"; ls "$T")"; fi

# 13. log file: %r and %p expanded, every line in the library's text format, appended
py lf RANK=1 NCCLGUARD_LOG=trace "NCCLGUARD_LOG_FILE=$T/ng.%r.%p.log" -- "$PROG" --times 2
set -- "$T"/ng.1.*.log
if [ "$(rc lf)" = 0 ] && [ $# = 1 ] && [ -f "$1" ] && [ ! -s "$T/lf.err" ]; then
  bad=$(grep -Evc -- "$TEXT_RE" "$1")
  n=$(wc -l <"$1")
  if [ "$bad" = 0 ] && [ "$n" -ge 3 ]; then pass log_file_text_format
  else fail log_file_text_format "$bad of $n lines do not match: $(grep -Ev -- "$TEXT_RE" "$1" | head -2)"; fi
else fail log_file_text_format "exit $(rc lf), files: $*; stderr: $(cat "$T/lf.err")"; fi
# a line from the library and from the hook in one file: appended, never truncated
printf 'vm:1:1 [-1] NCCLGUARD WARN fn=config msg="from the library"\n' >"$T/shared.log"
py shared NCCLGUARD_LOG=info "NCCLGUARD_LOG_FILE=$T/shared.log" -- "$PROG"
if has "$T/shared.log" 'msg="from the library"' && has "$T/shared.log" 'decision=warmup'; then pass log_file_append
else fail log_file_append "$(cat "$T/shared.log")"; fi
# a symbolic link is refused, as the library does: WARN on stderr, lines on stderr
ln -s "$T/target.log" "$T/link.log"
py link NCCLGUARD_LOG=info "NCCLGUARD_LOG_FILE=$T/link.log" -- "$PROG"
if [ ! -e "$T/target.log" ] && has "$T/link.err" 'WARN fn=log msg="cannot open NCCLGUARD_LOG_FILE' \
   && has "$T/link.err" 'decision=warmup'; then pass log_file_symlink_refused
else fail log_file_symlink_refused "$(cat "$T/link.err")"; fi

# 14. JSON lines: valid JSON, the library's fixed keys, numbers unquoted, pointers as strings
py js NCCLGUARD_LOG=trace NCCLGUARD_LOG_FORMAT=json -- "$PROG" --times 2
"$PY" - "$T/js.err" >"$T/js.chk" 2>&1 <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) >= 3, lines
for l in lines:
    o = json.loads(l)
    assert list(o)[:6] == ["ts", "host", "pid", "tid", "dev", "level"], list(o)
    assert list(o)[-1] == "msg" and o["fn"] == "pyhook.rendezvous", o
    assert isinstance(o["ts"], float) and isinstance(o["pid"], int) and isinstance(o["dev"], int)
w = [json.loads(l) for l in lines if '"warmup"' in l]
assert len(w) == 1, w
w = w[0]
assert w["level"] == "INFO" and w["reason"] == "lazy_comm" and w["comm"] == "0x0", w
assert isinstance(w["us"], float) and isinstance(w["rank"], int) and w["newcomm"].startswith("0x"), w
print("good")
EOF
if [ "$(rc js)" = 0 ] && [ "$(cat "$T/js.chk")" = good ]; then pass log_json_valid
else fail log_json_valid "$(tail -3 "$T/js.chk")"; fi

# 15. NCCLGUARD_LOG=off: silent, even the inactive warning; the warm-up still happens
py logoff NCCLGUARD_LOG=off FAKE_TORCH_NO_COMM_PTR=1 -- "$PROG" --init eager
py logoff2 NCCLGUARD_LOG=off -- "$PROG"
if [ ! -s "$T/logoff.err" ] && [ ! -s "$T/logoff2.err" ] && [ "$(rc logoff2)" = 0 ] && has "$T/logoff2.out" all_reduce; then
  pass log_off_silent
else fail log_off_silent "$(cat "$T/logoff.err" "$T/logoff2.out")"; fi

# 16. through the launcher: ncclguard-run puts the hook on PYTHONPATH; --no-pyhook leaves it off
lib=${SHIM:-$NG_ROOT/build/libncclguard.so}
# the variant's own launcher (its build holds the table of variables; the source copy reads the plain build's)
runl=$NG_ROOT/tools/ncclguard-run
[ -n "${B:-}" ] && [ -x "$B/ncclguard-run" ] && runl=$B/ncclguard-run
if [ -f "$lib" ] && [ -x "$runl" ]; then
  env -u NCCLGUARD_PYHOOK -u RANK PYTHONPATH="$STUB" PYTHONDONTWRITEBYTECODE=1 timeout -k 2 "$NG_TIMEOUT" \
    "$runl" --lib "$lib" -l info "$PY" "$PROG" >"$T/run.out" 2>&1
  r=$?
  if [ $r = 0 ] && has "$T/run.out" '^WRAPPED True$' && has "$T/run.out" 'decision=warmup reason=lazy_comm'; then
    pass launcher_puts_hook_on
  else fail launcher_puts_hook_on "exit $r: $(tail -3 "$T/run.out")"; fi
  env -u NCCLGUARD_PYHOOK -u RANK PYTHONPATH="$STUB" PYTHONDONTWRITEBYTECODE=1 timeout -k 2 "$NG_TIMEOUT" \
    "$runl" --lib "$lib" --no-pyhook "$PY" "$PROG" --init eager >"$T/run2.out" 2>&1
  r=$?
  if [ $r = 0 ] && has "$T/run2.out" '^WRAPPED False$'; then pass launcher_no_pyhook
  else fail launcher_no_pyhook "exit $r: $(tail -3 "$T/run2.out")"; fi
else
  fail launcher_puts_hook_on "no libncclguard.so ($lib)"
fi

# 17. in-process restart: destroy_process_group() then init_process_group() names the new default
#     group "0" again (and new_group "1" again) with a fresh lazy communicator; PyTorch 2.11 resets
#     its group counter on purpose (docs/PYTORCH.md §7). The hook once remembered warm-ups by name
#     and skipped the new group's warm-up: NCCL got a NULL communicator (the stub: SIGSEGV). Each
#     incarnation must get its own warm-up, and the second rendezvous must work.
for g in world sub sub-name world-name; do
  gname=1; case "$g" in world*) gname=0 ;; esac
  py "re_$g" RANK=1 NCCLGUARD_LOG=info -- "$PROG" --group "$g" --times 2 --incarnations 2
  one="\('all_reduce', '$gname', 1, 1\), \('comm_init', '$gname', 1\), \('rendezvous', '$gname', 1\), \('rendezvous', '$gname', 1\)"
  destroyed="\('destroy', '0'\), "; [ "$gname" = 1 ] && destroyed="\('destroy', '0'\), \('destroy', '1'\), "
  if [ "$(rc "re_$g")" != 0 ]; then fail "restart_warmup_$g" "exit $(rc "re_$g"): $(tail -3 "$T/re_$g.out")"
  elif ! has "$T/re_$g.out" '^ERROR None$'; then fail "restart_warmup_$g" "$(grep ERROR "$T/re_$g.out")"
  elif ! has "$T/re_$g.out" "^EVENTS \[$one, $destroyed$one\]$"; then
    fail "restart_warmup_$g" "events: $(grep EVENTS "$T/re_$g.out")"
  elif [ "$(count "$T/re_$g.err" "INFO fn=pyhook.rendezvous comm=0x0 .* group=$gname .*decision=warmup reason=lazy_comm")" != 2 ]; then
    fail "restart_warmup_$g" "not one warm-up per incarnation: $(cat "$T/re_$g.err")"
  else pass "restart_warmup_$g"; fi
done
# dead groups drop out of the hook's memory: three incarnations, one group remembered
py re3 RANK=1 NCCLGUARD_LOG=info -- "$PROG" --times 2 --incarnations 3
if [ "$(rc re3)" = 0 ] && has "$T/re3.out" '^ERROR None$' && has "$T/re3.out" '^HOOK_WARMED 1$' \
   && [ "$(count "$T/re3.err" 'decision=warmup reason=lazy_comm')" = 3 ]; then
  pass restart_dead_groups_forgotten
else fail restart_dead_groups_forgotten "exit $(rc re3): $(tail -3 "$T/re3.out")"; fi
# a group is warm only as the same live object whose communicator still reads what the warm-up
# left; an object that took a dead group's id() is not
env PYTHONPATH="$HOOK" PYTHONDONTWRITEBYTECODE=1 "$PY" - >"$T/ident.out" 2>&1 <<'PYEOF'
import gc, weakref
from ncclguard_hook import _symm as s
class G(object):
    pass
a, b = G(), G()
s._remember(a, 1, 0)
assert s._is_warmed(a, 1, 0) and not s._is_warmed(a, 0, 0), "same object, device"
assert not s._is_warmed(a, 1, 0x5500) and not s._is_warmed(b, 1, 0), "other comm, other object"
s._remember(a, 1, 0x5500)
assert not s._is_warmed(a, 1, 0), "warmed comm gone: not warm"
s._warmed[(id(b), 1)] = (weakref.ref(a, s._forget), 0)   # b as if it had a's recycled id()
assert not s._is_warmed(b, 1, 0) and (id(b), 1) not in s._warmed, "recycled id mistaken"
del a
gc.collect()
assert s._warmed == {}, s._warmed
print("good")
PYEOF
if [ "$(cat "$T/ident.out")" = good ]; then pass restart_group_identity
else fail restart_group_identity "$(tail -3 "$T/ident.out")"; fi
