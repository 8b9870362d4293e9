# Core interposer: exports, dependencies, inertness, configuration, logging, and resolution of a
# REAL libnccl (no GPU needed) loaded the way PyTorch loads it.
. "$NG_ROOT/tests/lib.sh"

# --- the library's shape ------------------------------------------------------------------
want="ncclCommAbort ncclCommDeregister ncclCommDestroy ncclCommFinalize ncclCommGrow ncclCommInitAll
ncclCommInitRank ncclCommInitRankConfig ncclCommInitRankScalable ncclCommRegister ncclCommResume ncclCommRevoke
ncclCommShrink ncclCommSplit ncclCommSuspend ncclCommWindowDeregister ncclCommWindowRegister ncclDevCommCreate
ncclDevCommDestroy ncclGroupEnd ncclGroupSimulateEnd ncclGroupStart ncclMemAlloc ncclguard_handle_sym ncclguard_refuse_communicators
pncclGroupStart pncclGroupEnd"
# and dlsym/dlvsym, on x86_64 (shim/dlsym.c: lookups on a libnccl's handle; tests/t_dlsym.sh)
[ "$(uname -m)" = x86_64 ] && want="$want dlsym dlvsym"
got=$(nm -D --defined-only "$SHIM" | awk '$2 ~ /^[TWi]$/ {print $3}' | grep -v '^_' | sort | tr '\n' ' ')
exp=$(echo $want | tr ' ' '\n' | sort | tr '\n' ' ')
[ "$got" = "$exp" ] && pass exports-exactly-wrapped || fail exports-exactly-wrapped "exported: $got"
nm -D --defined-only "$SHIM" | grep -Eq ' (ncclAllReduce|ncclSend|ncclRecv|ncclBroadcast)$' \
  && fail no-collectives-wrapped "a collective is exported" || pass no-collectives-wrapped
needed=$(readelf -d "$SHIM" | awk '/NEEDED/ {print $5}' | tr -d '[]' | tr '\n' ' ')
case "$needed" in *nccl*|*cuda*) fail no-needed-nccl-cuda "NEEDED: $needed" ;; *) pass no-needed-nccl-cuda ;; esac

# --- inert where there is no NCCL -----------------------------------------------------------
out=$(cd "$T" && env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=trace NCCLGUARD_STATS=1 \
      NCCLGUARD_LOG_FILE="$T/inert.%p.log" /bin/true 2>&1)
[ -z "$out" ] && [ -z "$(ls "$T" | grep inert)" ] && pass inert-true || fail inert-true "output '$out' or a log file"
out=$(env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=trace sh -c 'echo hello; ls / >/dev/null' 2>&1)
[ "$out" = hello ] && pass inert-shell || fail inert-shell "output: $out"
# NCCLGUARD_STATS=1 on a healthy job: the summary line at any level (also NCCLGUARD_LOG=off), as INFO (alerting keyed
# on WARN stays quiet); a job where something failed: WARN
out=$(NCCLGUARD_STATS=1 NCCLGUARD_LOG=off fake_run "$PROGS/ngtest" -n 2 -m proc 2>&1)
out2=$(NCCLGUARD_STATS=1 fake_run "$PROGS/ngtest" -n 2 -m proc --alloc cuda0 --expect-win null 2>&1)
if [ "$(echo "$out" | grep -c 'NCCLGUARD INFO fn=summary calls=[0-9]* .*errors=0 ')" = 2 ] && ! echo "$out" | grep -q 'WARN' \
   && [ "$(echo "$out2" | grep -c 'NCCLGUARD WARN fn=summary .*degraded=1 ')" = 2 ]; then
  pass stats-summary-info-when-healthy
else fail stats-summary-info-when-healthy "$(echo "$out" "$out2" | grep -E 'summary|RESULT' | cut -c1-160 | tr '\n' '|')"; fi

# --- configuration --------------------------------------------------------------------------
out=$(env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_DUMP_CONFIG=1 NCCLGUARD_LOG=off /bin/true 2>&1)
echo "$out" | grep -q 'fn=config .*NCCLGUARD_ON_FAILURE=degrade .*NCCLGUARD_WARMUP=auto' \
  && pass dump-config || fail dump-config "$out"
out=$(env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_DUMP_CONFIG=yes NCCLGUARD_RETRIES=lots \
      NCCLGUARD_ON_FAILURE=explode NCCLGUARD_TIMEOUT=-3 NCCLGUARD_AGREE=maybe /bin/true 2>&1)
echo "$out" | grep -q 'NCCLGUARD_RETRIES=lots is not valid' && echo "$out" | grep -q 'NCCLGUARD_ON_FAILURE=explode is not valid' \
  && echo "$out" | grep -q 'NCCLGUARD_TIMEOUT=-3 is not valid' && echo "$out" | grep -q 'NCCLGUARD_AGREE=maybe is not valid' \
  && echo "$out" | grep -q 'NCCLGUARD_RETRIES=3 ' && echo "$out" | grep -q 'NCCLGUARD_ON_FAILURE=degrade' \
  && pass bad-config-falls-back || fail bad-config-falls-back "$out"

# a value that is not valid, or an NCCLGUARD_* name that is no variable, is said at load (one line
# each: the variable, what is wrong, the default used), before any NCCL call: by /bin/true and a shell
# too, which stay silent when every variable is right (inert-true, inert-shell); NCCLGUARD_DISABLE=1
# keeps them silent
ld() { env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" "$@" 2>&1; }
out=$(ld NCCLGUARD_ON_FAILURE=eror /bin/true)
[ "$(echo "$out" | grep -c .)" = 1 ] && echo "$out" | grep -q 'NCCLGUARD WARN fn=config msg="NCCLGUARD_ON_FAILURE=eror is not valid (expected degrade|error); using the default degrade"' \
  && pass bad-value-warned-at-load || fail bad-value-warned-at-load "$out"
out=$(ld NCCLGUARD_RETRYS=3 NCCLGUARD_TIMEOUT=abc sh -c 'echo hello')
[ "$(echo "$out" | grep -c .)" = 3 ] && echo "$out" | grep -qx hello \
  && echo "$out" | grep -q 'msg="NCCLGUARD_RETRYS is not an ncclguard variable, ignored (did you mean NCCLGUARD_RETRIES?)"' \
  && echo "$out" | grep -q 'msg="NCCLGUARD_TIMEOUT=abc is not valid (expected a number in \[0.001, 10000000\]); using the default 600"' \
  && pass unknown-name-warned-at-load || fail unknown-name-warned-at-load "$out"
out=$(ld NCCLGUARD_DISABLE=1 NCCLGUARD_TIMEOUT=abc NCCLGUARD_RETRYS=3 /bin/true)
[ -z "$out" ] && pass disable-silences-load-warnings || fail disable-silences-load-warnings "$out"
# once per process: the first NCCL call does not say it again
timeout 60 env NCCLGUARD_TIMEOUT=abc LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" "$PROGS/ngtest" -n 1 \
  -m thread --no-allreduce >"$T/once.out" 2>&1; rc=$?
n=$(grep -c 'NCCLGUARD_TIMEOUT=abc is not valid' "$T/once.out")
[ $rc = 0 ] && [ "$n" = 1 ] && pass bad-value-warned-once || fail bad-value-warned-once "rc=$rc, $n lines: $(head -5 "$T/once.out")"

# a log file whose directory does not exist is named as such (not as a refused symbolic link)
timeout 60 env NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/nodir/x.log" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" \
  "$PROGS/ngtest" -n 1 -m thread --no-allreduce >"$T/nodir.out" 2>&1
if grep -q "cannot open NCCLGUARD_LOG_FILE $T/nodir/x.log: No such file or directory (its directory does not exist: create it" "$T/nodir.out" \
   && ! grep -q 'symbolic link' "$T/nodir.out"; then pass log-file-missing-dir-named
else fail log-file-missing-dir-named "$(grep 'cannot open' "$T/nodir.out")"; fi

# ... and its path, the user's text, is escaped as every logged value is: a quote in it does not end the
# message, and in NCCLGUARD_LOG_FORMAT=json the line is JSON that names the path exactly
bad="$T/no\"such\\dir/x.log"
timeout 60 env NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$bad" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" \
  "$PROGS/ngtest" -n 1 -m thread --no-allreduce >"$T/esc.out" 2>&1
timeout 60 env NCCLGUARD_LOG=info NCCLGUARD_LOG_FORMAT=json NCCLGUARD_LOG_FILE="$bad" LD_LIBRARY_PATH="$FAKE" \
  LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" "$PROGS/ngtest" -n 1 -m thread --no-allreduce >"$T/escj.out" 2>&1
if grep -qF "msg=\"cannot open NCCLGUARD_LOG_FILE $T/no\\\"such\\\\dir/x.log: No such file" "$T/esc.out" \
   && grep 'cannot open' "$T/escj.out" | python3 -c 'import json, sys; d = json.loads(sys.stdin.readline()); assert d["fn"] == "log" and sys.argv[1] + ":" in d["msg"], d' "$bad"; then
  pass log-file-unopenable-path-escaped
else fail log-file-unopenable-path-escaped "$(grep 'cannot open' "$T/esc.out" "$T/escj.out")"; fi

# --- a REAL libnccl, loaded RTLD_LOCAL (docs/PYTORCH.md §2) -------------------------------------
REALNCCL=""
for d in ${NCCL_REAL_LIB:-} /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -f "$d/libnccl.so.2" ] && { REALNCCL=$d; break; }
done
# The bare run is NCCL's own answers. Where a GPU is present, NCCL 2.27/2.28 end it with a SIGSEGV at
# the registration on a NULL communicator (docs/NCCL.md §3): the program writes each answer as it
# comes, so the cases below compare the answers before that call there, and every answer on a CPU
# machine. The fake NCCL (2.28.9, "a GPU present") crashes the same way: the bare run must still
# give NCCL's answers before the crash, and ncclguard's run all of them.
if [ -x "$B/real/main_local" ] && [ -f "$FAKE/libnccl.so.2" ]; then
  R="$B/real"
  fb=$(LD_LIBRARY_PATH="$R:$FAKE" FAKE_NCCL_VERSION=22809 timeout 60 "$R/main_local" "$R/libnccluser.so" 2>/dev/null); frc=$?
  fg=$(LD_LIBRARY_PATH="$R:$FAKE" FAKE_NCCL_VERSION=22809 LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" \
       timeout 60 "$R/main_local" "$R/libnccluser.so" 2>/dev/null); fgrc=$?
  fbi=$(echo "$fb" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p'); fgi=$(echo "$fg" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p')
  [ $frc -ne 0 ] && [ -n "$fbi" ] && [ "$fbi" = "$fgi" ] && [ $fgrc = 0 ] && echo "$fg" | grep -q 'register_null_comm=4' \
    && pass "bare-run-answers-before-nccl-crash (bare rc=$frc: $fb)" \
    || fail bare-run-answers-before-nccl-crash "bare rc=$frc '$fb' / with ncclguard rc=$fgrc '$fg'"
else echo "# skip bare-run-answers-before-nccl-crash: no $B/real/main_local or fake libnccl (make testbins)"
fi
if [ -x "$B/real/main_local" ] && [ -n "$REALNCCL" ]; then
  R="$B/real"
  bare=$(LD_LIBRARY_PATH="$R:$REALNCCL" timeout 60 "$R/main_local" "$R/libnccluser.so" 2>/dev/null)
  withg=$(LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=info \
          timeout 60 "$R/main_local" "$R/libnccluser.so" 2>"$T/local.log")
  b_init=$(echo "$bare" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p'); g_init=$(echo "$withg" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p')
  # the real NCCL answered (same result as without ncclguard), found although RTLD_NEXT misses
  [ -n "$b_init" ] && [ "$b_init" = "$g_init" ] && has "$T/local.log" 'found via loaded libnccl \(RTLD_NOLOAD\)' \
    && pass real-nccl-rtld-local || fail real-nccl-rtld-local "bare='$bare' with='$withg' $(head -3 "$T/local.log")"
  echo "$withg" | grep -q 'register_null_comm=4' && has "$T/local.log" 'reason=null_comm .*init_process_group' \
    && pass real-nccl-null-comm-clean-error || fail real-nccl-null-comm-clean-error "$withg"
  withg=$(LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=info \
          timeout 60 "$R/main_linked" 2>"$T/linked.log")
  g_init=$(echo "$withg" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p')
  [ "$b_init" = "$g_init" ] && has "$T/linked.log" 'found via RTLD_NEXT' \
    && pass real-nccl-linked || fail real-nccl-linked "$withg $(head -3 "$T/linked.log")"
  # NCCLGUARD_NCCL_LIB names the library explicitly
  withg=$(LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=info \
          NCCLGUARD_NCCL_LIB="$REALNCCL/libnccl.so.2" timeout 60 "$R/main_local" "$R/libnccluser.so" 2>"$T/lib.log")
  g_init=$(echo "$withg" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p')
  [ "$b_init" = "$g_init" ] && has "$T/lib.log" 'found via NCCLGUARD_NCCL_LIB' \
    && pass real-nccl-explicit-lib || fail real-nccl-explicit-lib "$withg $(head -3 "$T/lib.log")"
  # a bad NCCLGUARD_NCCL_LIB: a clear warning, then the process's own libnccl is used
  withg=$(LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" \
          NCCLGUARD_NCCL_LIB=/nonexistent/libnccl.so.2 timeout 60 "$R/main_local" "$R/libnccluser.so" 2>"$T/bad.log")
  rc=$?
  g_init=$(echo "$withg" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p')
  [ $rc = 0 ] && [ "$b_init" = "$g_init" ] && has "$T/bad.log" 'NCCLGUARD_NCCL_LIB=/nonexistent/libnccl.so.2 cannot be loaded' \
    && pass bad-nccl-lib-falls-back || fail bad-nccl-lib-falls-back "rc=$rc $withg $(cat "$T/bad.log")"
  # the log file: %h %p %r expanded, JSON lines valid; made under umask 000, so that its mode is the
  # one ncclguard asks open() for (0644), which no umask masks
  (umask 000
   LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=info RANK=7 \
     NCCLGUARD_LOG_FORMAT=json NCCLGUARD_LOG_FILE="$T/ng.%h.%p.%r.jsonl" timeout 60 "$R/main_local" "$R/libnccluser.so" >/dev/null 2>&1)
  f=$(ls "$T"/ng.*.7.jsonl 2>/dev/null | head -1)
  host=$(hostname | cut -d. -f1)
  if [ -n "$f" ] && case "$f" in *"ng.$host."*".7.jsonl") true ;; *) false ;; esac \
     && python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]; d=[json.loads(l) for l in open(sys.argv[1])]; assert any(x.get("reason")=="null_comm" for x in d)' "$f"; then
    pass log-file-json-expanded
  else fail log-file-json-expanded "file '$f': $(cat "$f" 2>/dev/null | head -2)"; fi
  perm=$(stat -c %a "$f" 2>/dev/null)
  if [ -n "$f" ] && [ -f "$f" ] && [ "$perm" = 644 ]; then pass log-file-not-world-writable
  else fail log-file-not-world-writable "file '$f' mode '${perm:-none}' under umask 000 (want 644)"; fi
  # a symbolic link as log file is refused (stderr instead), the link target untouched
  ln -s "$T/target" "$T/link.log"
  LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG_FILE="$T/link.log" \
    timeout 60 "$R/main_local" "$R/libnccluser.so" >/dev/null 2>"$T/link.err"
  [ ! -e "$T/target" ] && has "$T/link.err" 'symbolic link is refused' && has "$T/link.err" 'reason=null_comm' \
    && pass log-file-no-symlink || fail log-file-no-symlink "$(cat "$T/link.err")"
  # NCCLGUARD_DISABLE=1: pure pass-through (the NULL comm reaches NCCL: 2.28.9 on a CPU machine fails in
  # cudaGetDevice first; with a GPU, 2.27/2.28 crash there, with and without ncclguard alike)
  withg=$(LD_LIBRARY_PATH="$R:$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_DISABLE=1 NCCLGUARD_LOG=trace \
          timeout 60 "$R/main_local" "$R/libnccluser.so" 2>"$T/dis.log")
  [ "$withg" = "$bare" ] && [ ! -s "$T/dis.log" ] && pass disable-pass-through || fail disable-pass-through "$withg / $bare $(cat "$T/dis.log")"
  # feature detection against this real libnccl (tests/progs/featroutes.c): each wrapped name the library has
  # (bare, RTLD_GLOBAL) is ncclguard's by dlsym(RTLD_DEFAULT), dlsym(RTLD_NEXT) and dlsym(handle), the library
  # loaded RTLD_GLOBAL or RTLD_LOCAL; each it lacks (2.28.9: ncclCommGrow, ncclCommSuspend, ncclCommResume)
  # is NULL by every route, also when asked before the library is loaded, as without ncclguard
  has=$(LD_LIBRARY_PATH="$REALNCCL" timeout 60 "$PROGS/featroutes" global "$REALNCCL/libnccl.so.2" 2>&1 | sed -n 's/^ROUTE default //p')
  wrapped=$(sed -n '/global:/,/local:/p' "$NG_ROOT/shim/ncclguard.map" | grep -o 'nccl[A-Z][A-Za-z]*' | tr '\n' ' ')
  bad=""
  for m in before global local; do
    got=$(LD_LIBRARY_PATH="$REALNCCL" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" timeout 60 "$PROGS/featroutes" $m "$REALNCCL/libnccl.so.2" 2>&1)
    bad="$bad$(echo "$got" | awk -v m=$m -v has="$has" -v wrapped="$wrapped" '
      BEGIN { n = split(has, h, " "); for (i = 1; i <= n; i++) { split(h[i], kv, "="); nccl[kv[1]] = kv[2] == "nccl" }
              n = split(wrapped, w, " "); for (i = 1; i <= n; i++) isw[w[i]] = 1 }
      $1 == "ROUTE" && $2 !~ /^v/ { split($3, kv, "="); if (!isw[kv[1]]) next; seen++
        want = nccl[kv[1]] ? "guard" : "absent"
        if (m == "before" && $2 != "default_after" && kv[1] !~ /^ncclComm(InitRank|InitRankConfig|InitAll|Split|Finalize|Destroy|Abort|Register|Deregister)$|^ncclGroup(Start|End)$|^ncclMemAlloc$/) want = "absent"
        if (m == "before" && $2 != "default_after" && want == "absent") { if (kv[2] != "absent") print m ":" $0 " "; next }
        if (kv[2] != want) print m ":" $0 " (want " want ") " }
      END { if (seen < 20) print m ": only " seen " answers " }')"
  done
  sus=$(echo "$has" | tr ' ' '\n' | grep '^ncclCommSuspend=')
  [ -n "$has" ] && [ -z "$bad" ] && pass "real-nccl-feature-detection-every-route ($sus)" \
    || fail real-nccl-feature-detection-every-route "bare: $has | $bad"
else
  fail real-nccl-rtld-local "no real libnccl.so.2 found (CUDA toolkit) - cannot test resolution"
fi

# --- no libnccl in the process at all: clean errors, no crash; the names only some NCCL versions have are
# not found (-1), as without ncclguard ------------------------------------------------------------------------
out=$(env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" timeout 30 "$B/real/no_nccl" 2>"$T/nonccl.log"); rc=$?
[ $rc = 0 ] && [ "$out" = "init=5 register=-1 deregister=-1 destroy=5 groupstart=5 groupend=5" ] \
  && has "$T/nonccl.log" 'cannot find the real ncclCommInitRank.*NCCLGUARD_NCCL_LIB' \
  && pass missing-nccl-clean-error || fail missing-nccl-clean-error "rc=$rc out=$out $(head -3 "$T/nonccl.log")"

# --- the real libnccl of one release per minor version, 2.27 - 2.32 (PyPI wheels, as PyTorch ships NCCL;
# cached in build/wheels): resolution under RTLD_LOCAL, the version in the log, NCCL's own answers
# unchanged, and feature detection with dlsym(RTLD_DEFAULT) that sees what that NCCL has ----------------
. "$NG_ROOT/tests/nccl_wheels.sh"
if [ -x "$B/real/main_local" ]; then
  R="$B/real"
  for v in $NG_NCCL_RELEASES; do
    W=$(ng_nccl_release "$v") || { echo "# skip real-nccl-$v: nvidia-nccl-cu13==$v not reachable on PyPI"; continue; }
    L="$W/lib"
    bare=$(LD_LIBRARY_PATH="$R:$L" timeout 60 "$R/main_local" "$R/libnccluser.so" 2>/dev/null)
    withg=$(LD_LIBRARY_PATH="$R:$L" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=info \
            timeout 60 "$R/main_local" "$R/libnccluser.so" 2>"$T/wheel-$v.log")
    b_init=$(echo "$bare" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p'); g_init=$(echo "$withg" | sed -n 's/.*initrank=\([0-9]*\).*/\1/p')
    code=$(echo "$bare" | sed -n 's/^version=\([0-9]*\).*/\1/p')
    [ -n "$b_init" ] && [ "$b_init" = "$g_init" ] && has "$T/wheel-$v.log" "found via loaded libnccl \(RTLD_NOLOAD\)\): NCCL $code " \
      && has "$T/wheel-$v.log" "$L/libnccl.so.2" && echo "$withg" | grep -q 'register_null_comm=4' \
      && pass "real-nccl-$v-rtld-local (NCCL $code: init $b_init both ways)" \
      || fail "real-nccl-$v-rtld-local" "bare='$bare' with='$withg' $(head -3 "$T/wheel-$v.log")"
    pb=$(LD_LIBRARY_PATH="$L" timeout 60 "$R/probe" 2>/dev/null)
    pg=$(LD_LIBRARY_PATH="$L" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" timeout 60 "$R/probe" 2>/dev/null)
    [ -n "$pb" ] && [ "$pb" = "$pg" ] && pass "feature-detection-$v ($(echo "$pb" | grep -o '[A-Za-z]*=absent' | sed 's/=absent//' | tr '\n' ' ' | sed 's/ $//;s/^$/all found/;s/^\([^a]\)/absent: \1/'))" \
      || fail "feature-detection-$v" "without: $pb | with: $pg"
  done
else echo "# skip real-nccl-*-rtld-local, feature-detection-*: no $B/real/main_local (make testbins)"
fi

# --- a log line longer than its buffer stays valid: the value is cut and marked, JSON still parses ------
long=$(python3 -c 'print("\x01" * 900)')
NCCLGUARD_LOG=info NCCLGUARD_LOG_FORMAT=json NCCLGUARD_NCCL_LIB="/x/$long" NCCLGUARD_LOG_FILE="$T/long.jsonl" \
  LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" timeout 60 "$PROGS/ngtest" -n 1 -m thread --no-allreduce >/dev/null 2>&1
if python3 - "$T/long.jsonl" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
objs = [json.loads(l) for l in lines]                   # every line parses
assert any(len(l) > 2000 and o.get("msg", "").endswith("...") for l, o in zip(lines, objs)), "no long line"
PY
then pass log-json-long-value-valid; else fail log-json-long-value-valid "$(head -c 300 "$T/long.jsonl")"; fi
