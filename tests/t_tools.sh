#!/bin/sh
# The user tools: ncclguard-run, ncclguard-doctor, ncclguard-report (tools/README.md).
. "$(dirname "$0")/lib.sh"

RUN="$B/ncclguard-run"
DOC="$B/ncclguard-doctor"
REP="$B/ncclguard-report"
LOGS="$NG_ROOT/tests/data/logs"
LIBX=$SHIM
# A sanitizer build of the library cannot be preloaded into sh (its runtime must come first): the
# launcher cases then preload an empty stand-in, with a copy of build/ncclguard-run next to it.
if [ -n "$(env -i PATH="$PATH" LD_PRELOAD="$SHIM" sh -c true 2>&1)" ]; then
  mkdir -p "$T/sb"
  printf 'int ncclguard_standin;\n' > "$T/sb/standin.c"
  ${CC:-cc} -shared -fPIC -o "$T/sb/libncclguard.so" "$T/sb/standin.c"
  cp "$RUN" "$T/sb/ncclguard-run"
  RUN="$T/sb/ncclguard-run"
  LIBX="$T/sb/libncclguard.so"
fi
shim_real=$(cd "$(dirname "$LIBX")" && pwd -P)/$(basename "$LIBX")

# clean_env CMD...: CMD with no NCCL*/NCCLGUARD*/launcher variables from the caller's environment
clean_env() {
  env -i PATH="$PATH" HOME="$T/home" ${PYTHON:+PYTHON="$PYTHON"} "$@"
}
mkdir -p "$T/home" "$T/empty"

# ---------------------------------------------------------------- ncclguard-run
out=$("$RUN" --help 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '^Usage: ncclguard-run' && echo "$out" | grep -q -- '--log-dir'; then pass run-help
else fail run-help "rc=$rc"; fi

out=$(clean_env "$RUN" sh -c 'echo "$LD_PRELOAD"' 2>&1)
if [ "$out" = "$shim_real" ]; then pass run-preload; else fail run-preload "got '$out', want '$shim_real'"; fi

out=$(clean_env LD_PRELOAD=libm.so.6 "$RUN" sh -c 'echo "$LD_PRELOAD"' 2>&1)
if [ "$out" = "$shim_real:libm.so.6" ]; then pass run-preload-kept; else fail run-preload-kept "got '$out'"; fi

out=$(clean_env "$RUN" "$RUN" sh -c 'echo "$LD_PRELOAD"' 2>&1)
if [ "$out" = "$shim_real" ]; then pass run-nested-once; else fail run-nested-once "got '$out'"; fi

out=$(clean_env "$RUN" --log-level trace -- sh -c 'echo "$NCCLGUARD_LOG"' 2>&1)
out2=$(clean_env "$RUN" --log-level=trace sh -c 'echo "$NCCLGUARD_LOG"' 2>&1)
if [ "$out" = trace ] && [ "$out2" = trace ]; then pass run-dashdash-forms; else fail run-dashdash-forms "got '$out' / '$out2'"; fi

# a command whose own options look like ours: everything after COMMAND is COMMAND's
out=$(clean_env "$RUN" sh -c 'echo "$0 $1"' --log-level x 2>&1)
if [ "$out" = "--log-level x" ]; then pass run-command-args; else fail run-command-args "got '$out'"; fi

out=$(clean_env "$RUN" --json --on-failure error --warmup never --retries 5 --timeout 30 --no-agree \
  --null-window error --stats --dump-config --disable --nccl-lib /x/libnccl.so.2 --cuda-lib /x/libcuda.so.1 \
  --log-file /tmp/x.%r.log --no-pyhook -- sh -c 'env | grep ^NCCLGUARD_ | sort' 2>&1)
want="NCCLGUARD_AGREE=0
NCCLGUARD_CUDA_LIB=/x/libcuda.so.1
NCCLGUARD_DISABLE=1
NCCLGUARD_DUMP_CONFIG=1
NCCLGUARD_LOG_FILE=/tmp/x.%r.log
NCCLGUARD_LOG_FORMAT=json
NCCLGUARD_NCCL_LIB=/x/libnccl.so.2
NCCLGUARD_NULL_WINDOW=error
NCCLGUARD_ON_FAILURE=error
NCCLGUARD_PYHOOK=0
NCCLGUARD_RETRIES=5
NCCLGUARD_STATS=1
NCCLGUARD_TIMEOUT=30
NCCLGUARD_WARMUP=never"
if [ "$out" = "$want" ]; then pass run-option-mapping; else fail run-option-mapping "got: $(echo "$out" | tr '\n' ' ')"; fi

out=$(clean_env "$RUN" --log-dir "$T/logs/a" sh -c 'echo "$NCCLGUARD_LOG $NCCLGUARD_LOG_FILE"' 2>&1)
out2=$(clean_env "$RUN" --log-dir "$T/logs/b" -l warn sh -c 'echo "$NCCLGUARD_LOG"' 2>&1)
la=$(cd "$T/logs/a" 2>/dev/null && pwd -P)
if [ -d "$T/logs/a" ] && [ "$out" = "info $la/ncclguard.%h.%p.%r.log" ] && [ "$out2" = warn ]; then pass run-log-dir
else fail run-log-dir "got '$out' / '$out2'"; fi
# a log file whose directory does not exist is refused (one line, status 2, nothing run), as a log
# directory that cannot be made is (one line of the launcher's, mkdir's own message not before it);
# a directory known only in each process (%h, %p, %r) and --print-env are not checked
rm -f "$T/ran"
out=$(clean_env "$RUN" --log-file "$T/none/dir/x.log" touch "$T/ran" 2>&1); rc=$?
out2=$(clean_env NCCLGUARD_LOG_FILE="$T/none/d2/x.log" "$RUN" touch "$T/ran" 2>&1); rc2=$?
touch "$T/plainfile"
out3=$(clean_env "$RUN" --log-dir "$T/plainfile/sub" touch "$T/ran" 2>&1); rc3=$?
out4=$(clean_env "$RUN" --log-file "$T/none/%h/x.log" true 2>&1); rc4=$?
out5=$(clean_env "$RUN" --print-env --log-file "$T/none/dir/x.log" 2>&1); rc5=$?
out6=$(clean_env "$RUN" --log-file "$T/x.%p.log" true 2>&1); rc6=$?
if [ $rc = 2 ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] && [ ! -e "$T/ran" ] \
   && [ "$out" = "ncclguard-run: log file $T/none/dir/x.log: directory $T/none/dir does not exist (create it, or use --log-dir DIR, which does)" ] \
   && [ "$out2" = "ncclguard-run: log file $T/none/d2/x.log: directory $T/none/d2 does not exist (create it, or use --log-dir DIR, which does)" ] \
   && [ "$out3" = "ncclguard-run: cannot create log directory $T/plainfile/sub: Not a directory" ] \
   && [ $rc4 = 0 ] && [ -z "$out4" ] && [ $rc5 = 0 ] && [ $rc6 = 0 ] && [ -z "$out6" ]; then pass run-log-file-missing-dir-refused
else fail run-log-file-missing-dir-refused "rc=$rc/$rc2/$rc3/$rc4/$rc5/$rc6: '$out' '$out2' '$out3' '$out4'"; fi

# a log place the library could not write is refused as a missing directory is: a kernel file system, a
# directory given as the file, and (as a user other than root, where setpriv can make one) a directory or a
# file that user cannot write; --log-dir too
out=$(clean_env "$RUN" --log-file /proc/x.log true 2>&1); rc=$?
out2=$(clean_env "$RUN" --log-dir /proc true 2>&1); rc2=$?
out3=$(clean_env "$RUN" --log-file "$T" true 2>&1); rc3=$?
if [ $rc = 2 ] && [ "$out" = "ncclguard-run: log file /proc/x.log: /proc is a kernel file system, where no log file can be created (name a directory of yours)" ] \
   && [ $rc2 = 2 ] && [ "$out2" = "ncclguard-run: log directory /proc: /proc is a kernel file system, where no log file can be created (name a directory of yours)" ] \
   && [ $rc3 = 2 ] && [ "$out3" = "ncclguard-run: log file $T is a directory (name a file in it, or use --log-dir DIR)" ]; then
  pass run-log-place-unwritable-refused
else fail run-log-place-unwritable-refused "rc=$rc/$rc2/$rc3: '$out' '$out2' '$out3'"; fi
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  mkdir -p "$T/rootonly" && chmod 755 "$T/rootonly" && touch "$T/rootonly/f.log" && chmod 644 "$T/rootonly/f.log"
  chmod 755 "$T"
  asuser() { setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH="$PATH" sh "$RUN" "$@" 2>&1; }
  out=$(asuser --log-file "$T/rootonly/x.log" true); rc=$?
  out2=$(asuser --log-file "$T/rootonly/f.log" true); rc2=$?
  out3=$(asuser --log-dir "$T/rootonly" true); rc3=$?
  if [ $rc = 2 ] && [ "$out" = "ncclguard-run: log file $T/rootonly/x.log: directory $T/rootonly is not writable by this user (name a writable one)" ] \
     && [ $rc2 = 2 ] && [ "$out2" = "ncclguard-run: log file $T/rootonly/f.log is not writable by this user (name another)" ] \
     && [ $rc3 = 2 ] && [ "$out3" = "ncclguard-run: log directory $T/rootonly is not writable by this user (name a writable one)" ]; then
    pass run-log-place-not-writable-refused
  else fail run-log-place-not-writable-refused "rc=$rc/$rc2/$rc3: '$out' '$out2' '$out3'"; fi
else echo "# skip run-log-place-not-writable-refused: needs root and setpriv"; fi

out=$(clean_env "$RUN" true 2>&1); rc=$?
out2=$(clean_env "$RUN" -- sh -c 'exit 7' 2>&1); rc2=$?
if [ $rc -eq 0 ] && [ -z "$out" ] && [ $rc2 -eq 7 ] && [ -z "$out2" ]; then pass run-silent-and-status
else fail run-silent-and-status "rc=$rc rc2=$rc2 output '$out$out2'"; fi

# children inherit it (what torchrun/srun/mpirun rely on)
out=$(clean_env "$RUN" --log-level info sh -c 'sh -c "echo \$LD_PRELOAD \$NCCLGUARD_LOG"' 2>&1)
if [ "$out" = "$shim_real info" ]; then pass run-children-inherit; else fail run-children-inherit "got '$out'"; fi

out=$(clean_env NCCLGUARD_LIB=/nonexistent/libncclguard.so "$RUN" touch "$T/ran1" 2>&1); rc=$?
mkdir -p "$T/lonely"; cp "$NG_ROOT/tools/ncclguard-run" "$T/lonely/"
out2=$(clean_env "$T/lonely/ncclguard-run" touch "$T/ran2" 2>&1); rc2=$?
if [ $rc -eq 127 ] && [ $rc2 -eq 127 ] && [ ! -e "$T/ran1" ] && [ ! -e "$T/ran2" ] \
   && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out2" | grep -q 'libncclguard.so not found'; then pass run-missing-lib
else fail run-missing-lib "rc=$rc/$rc2 out='$out' / '$out2'"; fi

# the library found in each layout: repo (tools/ -> ../build), install (bin/ -> ../lib), a symlink, NCCLGUARD_LIB
mkdir -p "$T/repo/tools" "$T/repo/build" "$T/pfx/bin" "$T/pfx/lib" "$T/links" "$T/own"
cp "$NG_ROOT/tools/ncclguard-run" "$T/repo/tools/"; cp "$LIBX" "$T/repo/build/libncclguard.so"
cp "$NG_ROOT/tools/ncclguard-run" "$T/pfx/bin/"; cp "$LIBX" "$T/pfx/lib/libncclguard.so"
ln -sf "$T/pfx/bin/ncclguard-run" "$T/links/ncclguard-run"
cp "$LIBX" "$T/own/libncclguard.so"
p=$(cd "$T" && pwd -P)
o1=$(clean_env "$T/repo/tools/ncclguard-run" sh -c 'echo "$LD_PRELOAD"' 2>&1)
o2=$(clean_env "$T/pfx/bin/ncclguard-run" sh -c 'echo "$LD_PRELOAD"' 2>&1)
o3=$(clean_env "$T/links/ncclguard-run" sh -c 'echo "$LD_PRELOAD"' 2>&1)
o4=$(cd "$T/own" && clean_env NCCLGUARD_LIB=libncclguard.so "$T/pfx/bin/ncclguard-run" sh -c 'cd /; echo "$LD_PRELOAD"' 2>&1)
o5=$(cd "$T/pfx/bin" && PATH="$T/pfx/bin:$PATH" clean_env ncclguard-run sh -c 'echo "$LD_PRELOAD"' 2>&1)
if [ "$o1" = "$p/repo/build/libncclguard.so" ] && [ "$o2" = "$p/pfx/lib/libncclguard.so" ] \
   && [ "$o3" = "$p/pfx/lib/libncclguard.so" ] && [ "$o4" = "$p/own/libncclguard.so" ] && [ "$o5" = "$p/pfx/lib/libncclguard.so" ]; then
  pass run-lib-layouts
else fail run-lib-layouts "repo '$o1' install '$o2' symlink '$o3' env '$o4' PATH '$o5'"; fi

out=$(clean_env "$RUN" --log-level loud true 2>&1); rc=$?
out2=$(clean_env "$RUN" --frobnicate true 2>&1); rc2=$?
out3=$(clean_env "$RUN" 2>&1); rc3=$?
if [ $rc -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 2 ] && echo "$out" | grep -q 'off|warn|info|trace'; then pass run-usage-errors
else fail run-usage-errors "rc=$rc/$rc2/$rc3 '$out'"; fi

out=$(clean_env "$RUN" --print-env --log-level info 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -qx 'NCCLGUARD_LOG=info' && echo "$out" | grep -qx "LD_PRELOAD=$shim_real"; then pass run-print-env
else fail run-print-env "rc=$rc '$out'"; fi

# issue 21: --print-env creates nothing (the directory of -d is printed, made by the real run)
out=$(cd "$T" && clean_env "$RUN" --print-env -d "$T/pe/logs" 2>&1); rc=$?
out2=$(cd "$T" && clean_env "$RUN" --print-env -d pe-rel/logs 2>&1); rc2=$?
p=$(cd "$T" && pwd -P)
if [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ ! -e "$T/pe" ] && [ ! -e "$T/pe-rel" ] \
   && echo "$out" | grep -qx "NCCLGUARD_LOG_FILE=$T/pe/logs/ncclguard.%h.%p.%r.log" \
   && echo "$out2" | grep -qx "NCCLGUARD_LOG_FILE=$p/pe-rel/logs/ncclguard.%h.%p.%r.log"; then pass run-print-env-creates-nothing
else fail run-print-env-creates-nothing "rc=$rc/$rc2 $(ls -d "$T/pe" "$T/pe-rel" 2>/dev/null) '$out'"; fi

# issue 21: a command that cannot run is one line of ours, without the shell's line number
printf 'echo hi\n' >"$T/text.sh"; chmod 0644 "$T/text.sh"
out=$(clean_env "$RUN" -- "$T/text.sh" 2>&1); rc=$?
out2=$(clean_env "$RUN" -- "$T" 2>&1); rc2=$?
out3=$(clean_env "$RUN" -- "$T/none/cmd" 2>&1); rc3=$?
out4=$(clean_env "$RUN" no-such-command-ng 2>&1); rc4=$?
if [ $rc -eq 126 ] && [ "$out" = "ncclguard-run: cannot execute $T/text.sh: Permission denied" ] \
   && [ $rc2 -eq 126 ] && [ "$out2" = "ncclguard-run: cannot execute $T: Is a directory" ] \
   && [ $rc3 -eq 127 ] && [ "$out3" = "ncclguard-run: command not found: $T/none/cmd (No such file or directory)" ] \
   && [ $rc4 -eq 127 ] && [ "$out4" = "ncclguard-run: command not found: no-such-command-ng" ]; then pass run-exec-errors-one-line
else fail run-exec-errors-one-line "rc=$rc/$rc2/$rc3/$rc4: '$out' / '$out2' / '$out3' / '$out4'"; fi

# issue 21: --help shows real defaults, not "(default (auto))"
out=$("$RUN" --help 2>&1)
if ! echo "$out" | grep -q '(default (' && echo "$out" | grep -q 'NCCLGUARD_NCCL_LIB: path (default: the libnccl the process loads)$' \
   && echo "$out" | grep -q 'NCCLGUARD_TIMEOUT: number 0.001..10000000 (default 600)$'; then pass run-help-real-defaults
else fail run-help-real-defaults "$(echo "$out" | grep 'default' | grep -v 'default [a-z0-9]' | tr '\n' '|')"; fi

# --help read only in part (| head): no "cat: write error: Broken pipe", also where SIGPIPE is
# ignored (as some CI shells and process managers leave it)
out=$( (trap '' PIPE; "$RUN" --help | head -1) 2>&1)
if [ "$out" = "Usage: ncclguard-run [options] [--] COMMAND [ARGS...]" ]; then pass run-help-head
else fail run-help-head "$(echo "$out" | tr '\n' '|')"; fi

# the repo's tools/ncclguard-run finds the hook next to it (tools/python)
RRUN="$NG_ROOT/tools/ncclguard-run"
out=$(clean_env NCCLGUARD_LIB="$LIBX" "$RRUN" sh -c 'echo "${PYTHONPATH:-}"' 2>&1)
out2=$(clean_env NCCLGUARD_LIB="$LIBX" "$RRUN" --no-pyhook sh -c 'echo "${PYTHONPATH:-}"' 2>&1)
out3=$(clean_env NCCLGUARD_LIB="$LIBX" PYTHONPATH=/keep "$RRUN" sh -c 'echo "${PYTHONPATH:-}"' 2>&1)
hook=$(cd "$NG_ROOT/tools/python" 2>/dev/null && pwd -P)
if [ ! -f "$NG_ROOT/build/ncclguard-vars.sh" ]; then
  echo "# skip run-pyhook: the repo's tools/ncclguard-run reads the plain build's table of variables (build/), not built here"
elif [ -z "$hook" ]; then
  if [ -z "$out" ] && [ -z "$out2" ]; then pass run-pyhook; else fail run-pyhook "no tools/python but PYTHONPATH='$out'"; fi
elif [ "$out" = "$hook" ] && [ -z "$out2" ] && [ "$out3" = "$hook:/keep" ]; then pass run-pyhook
else fail run-pyhook "got '$out' / '$out2' / '$out3', hook dir $hook"; fi

# ---------------------------------------------------------------- ncclguard-doctor
out=$("$DOC" --help 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '^Usage: ncclguard-doctor'; then pass doctor-help; else fail doctor-help "rc=$rc"; fi

# --vars: the defaults as --help shows them, not "(default (auto))"
out=$("$DOC" --vars 2>&1)
if ! echo "$out" | grep -q '(default (' && echo "$out" | grep -Eq '^NCCLGUARD_NCCL_LIB +path \(default: the libnccl the process loads\)$' \
   && echo "$out" | grep -Eq '^NCCLGUARD_TIMEOUT +number 0.001..10000000 \(default 600\)$'; then pass doctor-vars-defaults
else fail doctor-vars-defaults "$(echo "$out" | grep 'default' | grep -v 'default [a-z0-9]' | tr '\n' '|')"; fi

no_needed() {
  for f in "$DOC" "$REP"; do
    if command -v readelf >/dev/null 2>&1; then d=$(readelf -d "$f"); else d=$(objdump -p "$f"); fi
    echo "$d" | grep -E 'NEEDED.*(libcuda|libnccl|libcudart)' && return 1
  done
  return 0
}
check doctor-no-needed no_needed

if [ -e "$FAKE/libcuda.so.1" ] && [ -e "$FAKE/libnccl.so.2" ]; then
  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_CUDA_DEVICES=2 timeout 60 "$DOC" --no-python 2>&1); rc=$?
  if [ $rc -eq 0 ] && echo "$out" | grep -Eq '^OK +nccl\.lib +'"$FAKE" && echo "$out" | grep -Eq '^OK +nccl\.version +NCCL 2\.28\.9' \
     && echo "$out" | grep -Eq '^WARN +nccl\.null-comm' && echo "$out" | grep -Eq '^OK +cuda\.devices +2 devices' \
     && echo "$out" | grep -Eq '^OK +gpu\.1 ' && ! echo "$out" | grep -Eq '^OK +gpu\.2 ' && echo "$out" | grep -Eq '^(OK|WARN) +gpu\.p2p'; then
    pass doctor-fake
  else fail doctor-fake "rc=$rc: $(echo "$out" | head -20 | tr '\n' '|')"; fi

  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --no-python 2>&1); rc=$?
  if [ $rc -eq 0 ] && echo "$out" | grep -Eq '^WARN +nccl\.null-comm .*symm_mem\.rendezvous on a lazy communicator fails .*fix: run the job under ncclguard-run or NCCLGUARD=1' \
     && echo "$out" | grep -Eq '^OK +nccl\.graph-capture' \
     && echo "$out" | grep -Eq '^OK +cuda\.devices +8 devices'; then pass doctor-fake-version
  else fail doctor-fake-version "rc=$rc: $(echo "$out" | head -8 | tr '\n' '|')"; fi

  # the known registration bugs of the NCCL found (docs/NCCL.md §10, the catalogue tools/catalogue.def):
  # INFO lines with the issue link, the verdict and what ncclguard does; never in the exit status
  # (--strict included). Each version gets the rows of its range and not the others'.
  named() { echo "$1" | grep -Eq "^INFO +nccl\.known-bug +NCCL [0-9.]+( on SM [0-9.]+)?: $2 "; }
  rows_ok() { # OUTPUT "ID..." "ID..." : the first list named, the second not
    for id in $2; do named "$1" "$id" || { echo "missing $id"; return 1; }; done
    for id in $3; do ! named "$1" "$id" || { echo "unexpected $id"; return 1; }; done
  }
  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --no-python --strict 2>&1); rc=$?
  o27=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=22707 timeout 60 "$DOC" --no-python 2>&1); r27=$?
  o28=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --no-python 2>&1); r28=$?
  o29=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=22907 timeout 60 "$DOC" --no-python 2>&1); r29=$?
  why=$(rows_ok "$out" "NVIDIA/nccl#2331 NVIDIA/nccl#2332 NVIDIA/nccl#2198 NVIDIA/nccl#2241 NVIDIA/nccl#1963" \
          "vllm-project/vllm#54626 NVIDIA/nccl#2058 sgl-project/sglang#36943 NVIDIA/TensorRT-LLM#15559" \
        && rows_ok "$o27" "NVIDIA/nccl#1828 NVIDIA/nccl#1735" \
          "openxla/xla#47406 NVIDIA/nccl#1963 NVIDIA/nccl#2331 NVIDIA/nccl#2058" \
        && rows_ok "$o28" "openxla/xla#47406" \
          "NVIDIA/nccl#1828 NVIDIA/nccl#1735 NVIDIA/nccl#1963 NVIDIA/nccl#2241 NVIDIA/nccl#2058 sgl-project/sglang#36943" \
        && rows_ok "$o29" "NVIDIA/nccl#1963 NVIDIA/nccl#2241 sgl-project/sglang#36943 NVIDIA/nccl#2058" \
          "NVIDIA/nccl#2331 NVIDIA/nccl#2198 NVIDIA/nccl#1828")
  # (--strict's status 1 comes from the one WARN row, the lazy communicator unguarded: nccl.null-comm)
  if [ $rc -eq 1 ] && [ -z "$why" ] && [ $r27 -eq 0 ] && [ $r28 -eq 0 ] && [ $r29 -eq 0 ] \
     && [ "$(echo "$out" | grep -E '^WARN ' | awk '{print $2}')" = nccl.null-comm ] \
     && echo "$out" | grep -Eq '^INFO +nccl\.known-bug +NCCL 2\.30\.7: NVIDIA/nccl#2331 .*ncclguard guards it: .*https://github\.com/NVIDIA/nccl/issues/2331 +fix: ' \
     && echo "$o29" | grep -Eq '^INFO +nccl\.known-bug +NCCL 2\.29\.7: sgl-project/sglang#36943 .*ncclguard makes it clear: ' \
     && echo "$out" | grep -Eq '^ncclguard-doctor: [0-9]+ OK, [0-9]+ INFO, 1 WARN, 0 FAIL$' \
     && ! echo "$out$o27$o28$o29" | grep 'known-bug' | grep -q '`'; then pass doctor-known-bugs-by-version
  else fail doctor-known-bugs-by-version "rc=$rc/$r27/$r28/$r29 $why: $(echo "$out" | grep -E 'known-bug|^ncclguard-doctor' | cut -c1-90 | tr '\n' '|')"; fi

  # one bug, one line: the NULL-communicator and graph-capture rows name their reports, which get no
  # known-bug line of their own (bare and under the launcher, where the row reads guarded); a known-bug
  # line is short (the report's gist, the verdict, the link: under 400 characters, no nested parentheses)
  # (the rows under the launcher: the plain variant only; the launcher preloads the library alone, and a
  # sanitizer runtime would have to come first, so the other variants check the bare rows alone)
  g28="" g_ok=1
  if [ "${NG_VARIANT:-plain}" = plain ]; then
    g28=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=22809 timeout 60 "$RUN" "$DOC" --no-python 2>&1)
    echo "$g28" | grep -Eq '^OK +nccl\.null-comm .*pytorch/pytorch#188567.*guarded' \
      && echo "$g28" | grep -Eq '^OK +nccl\.graph-capture .*vllm-project/vllm#54626.*guarded' \
      && echo "$g28" | grep -Eq '^INFO +nccl\.known-bug +NCCL 2\.28\.9: openxla/xla#47406 - ' \
      && echo "$g28" | grep -Eq '^OK +launcher\.env +no rendezvous variables .*not started by torchrun, srun or mpirun' \
      && ! echo "$g28" | grep -q 'not under a launcher' || g_ok=0
  fi
  long=$(printf '%s\n' "$out" "$o27" "$o28" "$o29" | grep 'known-bug' | sed 's/  fix: .*//' | awk 'length($0) >= 400 || /\([^()]*\(/')
  if echo "$o28" | grep -Eq '^WARN +nccl\.null-comm .*\(pytorch/pytorch#188567\)' \
     && echo "$o28" | grep -Eq '^WARN +nccl\.graph-capture .*vllm-project/vllm#54626\)' \
     && echo "$o29" | grep -Eq '^WARN +nccl\.null-comm .*invalid argument.*\(pytorch/pytorch#188567\)' \
     && ! printf '%s\n' "$o27" "$o28" "$o29" "$g28" | grep 'known-bug' | grep -Eq 'pytorch/pytorch#188567|vllm-project/vllm#54626' \
     && [ -z "$long" ] && [ $g_ok = 1 ]; then
    pass doctor-known-bugs-one-line-each
  else fail doctor-known-bugs-one-line-each "long: $(echo "$long" | head -2 | cut -c1-200 | tr '\n' '|') / $(echo "$g28" | grep -E 'null-comm|capture|known' | cut -c1-120 | tr '\n' '|')"; fi

  # a row of one GPU architecture (GB10, SM 12.1, before NCCL 2.30.4) is named only where such a GPU is
  # visible: a libcuda that is the fake's but for the compute capability it reports (built here: the
  # fake's own is 9.0), found first by the doctor's dlsym on it
  cat >"$T/cc.c" <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
int cuDeviceGetAttribute(int *pi, int attrib, int dev) {
  int (*next)(int *, int, int) = (int (*)(int *, int, int))dlsym(RTLD_NEXT, "cuDeviceGetAttribute");
  int r = next ? next(pi, attrib, dev) : 1;
  if (!r && attrib == 75) *pi = 12; /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  if (!r && attrib == 76) *pi = 1;  /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
  return r;
}
CEOF
  if ${CC:-cc} -shared -fPIC -o "$T/libcuda-sm121.so" "$T/cc.c" -Wl,--no-as-needed "$FAKE/libcuda.so.1" -ldl 2>"$T/cc.err"; then
    a=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23003 timeout 60 "$DOC" --no-python --cuda-lib "$T/libcuda-sm121.so" 2>&1); ra=$?
    b=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23003 timeout 60 "$DOC" --no-python 2>&1); rb=$?
    c=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --no-python --cuda-lib "$T/libcuda-sm121.so" 2>&1); rc3=$?
    if [ $ra -eq 0 ] && echo "$a" | grep -Eq '^OK +gpu\.0 .*compute capability 12\.1' \
       && echo "$a" | grep -Eq '^INFO +nccl\.known-bug +NCCL 2\.30\.3 on SM 12\.1: NVIDIA/TensorRT-LLM#15559 .*out of reach for ncclguard: ' \
       && [ $rb -eq 0 ] && echo "$b" | grep -Eq '^OK +gpu\.0 .*compute capability 9\.0' && ! echo "$b" | grep -q 'TensorRT-LLM#15559' \
       && [ $rc3 -eq 0 ] && echo "$c" | grep -Eq 'compute capability 12\.1' && ! echo "$c" | grep -q 'TensorRT-LLM#15559'; then
      pass doctor-known-bugs-architecture
    else fail doctor-known-bugs-architecture "rc=$ra/$rb/$rc3: $(echo "$a" | grep -E 'gpu\.0|15559|cuda' | cut -c1-100 | tr '\n' '|')"; fi
  else fail doctor-known-bugs-architecture "cannot build the stand-in libcuda: $(head -c 300 "$T/cc.err")"; fi

  # configuration: NCCL_NVLS_ENABLE=0 avoids #2241 (named as not applying); NCCL_WIN_STRIDE is shown with #2331;
  # -q leaves INFO out; JSON lines stay valid
  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23007 NCCL_NVLS_ENABLE=0 NCCL_WIN_STRIDE=0x4000000000 timeout 60 "$DOC" --no-python 2>&1); rc=$?
  out2=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --no-python -q 2>&1); rc2=$?
  out3=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --no-python --json 2>&1); rc3=$?
  if [ $rc -eq 0 ] && echo "$out" | grep -Eq '^OK +nccl\.known-bug +NCCL 2\.30\.7: NVIDIA/nccl#2241 does not apply here: NCCL_NVLS_ENABLE=0' \
     && ! echo "$out" | grep -Eq '^INFO .*NVIDIA/nccl#2241' \
     && echo "$out" | grep -Eq '^INFO +nccl\.known-bug .*NVIDIA/nccl#2331 .*\[NCCL_WIN_STRIDE=0x4000000000 \(environment\) here\]' \
     && [ $rc2 -eq 0 ] && ! echo "$out2" | grep -q '^INFO' && [ $rc3 -eq 0 ] \
     && echo "$out3" | grep -q '^{"status":"INFO","check":"nccl.known-bug","detail":"NCCL 2.30.7: NVIDIA/nccl#2331 ' \
     && echo "$out3" | python3 -m json.tool --json-lines >/dev/null 2>&1; then pass doctor-known-bugs-config
  else fail doctor-known-bugs-config "rc=$rc/$rc2/$rc3: $(echo "$out" | grep -E 'known-bug' | cut -c1-100 | tr '\n' '|')"; fi

  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=22603 timeout 60 "$DOC" --no-python 2>&1); rc=$?
  if [ $rc -eq 1 ] && echo "$out" | grep -Eq '^FAIL +nccl\.version .*2\.27'; then pass doctor-old-nccl
  else fail doctor-old-nccl "rc=$rc: $(echo "$out" | head -4 | tr '\n' '|')"; fi

  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_CUDA_DEVICES=2 timeout 60 "$DOC" --json 2>&1); rc=$?
  if [ $rc -eq 0 ] && echo "$out" | python3 -m json.tool --json-lines >/dev/null 2>&1 \
     && [ "$(echo "$out" | grep -c '^{"status":"\(OK\|WARN\|FAIL\|INFO\)","check":')" -eq "$(echo "$out" | wc -l)" ]; then pass doctor-json
  else fail doctor-json "rc=$rc: $(echo "$out" | head -3)"; fi

  out=$(clean_env LD_LIBRARY_PATH="$FAKE" NCCL_WIN_ENABLE=0 NCCL_P2P_DISABLE=1 timeout 60 "$DOC" --no-python 2>&1); rc=$?
  out2=$(clean_env LD_LIBRARY_PATH="$FAKE" NCCL_P2P_DISABLE=1 timeout 60 "$DOC" --no-python 2>&1); rc2=$?
  out3=$(clean_env LD_LIBRARY_PATH="$FAKE" NCCL_P2P_DISABLE=1 timeout 60 "$DOC" --no-python --strict -q 2>&1); rc3=$?
  printf 'NCCL_CUMEM_ENABLE=0\n' > "$T/home/.nccl.conf"
  out4=$(clean_env LD_LIBRARY_PATH="$FAKE" timeout 60 "$DOC" --no-python 2>&1); rc4=$?
  rm -f "$T/home/.nccl.conf"
  # a configuration FAIL (or WARN with --strict) is status 2, not 1 (issue 21)
  if [ $rc -eq 2 ] && echo "$out" | grep -Eq '^FAIL +env\.NCCL_WIN_ENABLE' && echo "$out" | grep -Eq '^WARN +env\.NCCL_P2P_DISABLE' \
     && [ $rc2 -eq 0 ] && [ $rc3 -eq 2 ] && ! echo "$out3" | grep -q '^OK ' \
     && [ $rc4 -eq 2 ] && echo "$out4" | grep -Eq '^FAIL +env\.NCCL_CUMEM_ENABLE .*\.nccl\.conf'; then pass doctor-nccl-vars-and-exit
  else fail doctor-nccl-vars-and-exit "rc=$rc/$rc2/$rc3/$rc4"; fi

  out=$(clean_env LD_LIBRARY_PATH="$FAKE" FAKE_CUDA_DEVICES=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 RANK=3 WORLD_SIZE=2 LOCAL_RANK=5 \
        timeout 60 "$DOC" --no-python 2>&1); rc=$?
  if [ $rc -eq 1 ] && echo "$out" | grep -Eq '^FAIL +launcher\.env .*RANK=3 is not below WORLD_SIZE=2' \
     && echo "$out" | grep -Eq '^WARN +launcher\.gpu .*LOCAL_RANK=5' && echo "$out" | grep -Eq '^WARN +launcher\.master .*nothing listens'; then
    pass doctor-rendezvous-bad
  else fail doctor-rendezvous-bad "rc=$rc: $(echo "$out" | grep launcher | tr '\n' '|')"; fi

  out=$(clean_env LD_LIBRARY_PATH="$FAKE" MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=0 timeout 60 "$DOC" --no-python 2>&1); rc=$?
  if [ $rc -eq 1 ] && echo "$out" | grep -Eq '^FAIL +launcher\.env +missing: WORLD_SIZE,LOCAL_RANK'; then pass doctor-rendezvous-missing
  else fail doctor-rendezvous-missing "rc=$rc: $(echo "$out" | grep launcher)"; fi

  # a listener on a free port: the master port check passes
  if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(20)' "$T/port" &
    lp=$!
    i=0; while [ ! -s "$T/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    port=$(cat "$T/port" 2>/dev/null)
    out=$(clean_env LD_LIBRARY_PATH="$FAKE" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 \
          FAKE_CUDA_DEVICES=2 timeout 60 "$DOC" --no-python 2>&1); rc=$?
    kill "$lp" 2>/dev/null; wait "$lp" 2>/dev/null
    if [ $rc -eq 0 ] && echo "$out" | grep -Eq '^OK +launcher\.env' && echo "$out" | grep -Eq '^OK +launcher\.master .*accepts'; then pass doctor-rendezvous-ok
    else fail doctor-rendezvous-ok "rc=$rc port=$port: $(echo "$out" | grep launcher | tr '\n' '|')"; fi
  fi
else
  fail doctor-fake "no fake libcuda.so.1/libnccl.so.2 in $FAKE (make testbins)"
fi

# no driver, no NCCL: says so, exits cleanly (status 1 = some FAIL, no crash)
out=$(clean_env LD_LIBRARY_PATH="$T/empty" PYTHON="$T/empty/nopython" timeout 60 "$DOC" --nccl-lib "$T/empty/libnccl.so.2" --cuda-lib "$T/empty/libcuda.so.1" 2>&1); rc=$?
out2=$(clean_env LD_LIBRARY_PATH="$T/empty" timeout 60 "$DOC" --json 2>&1); rc2=$?
if [ $rc -eq 1 ] && echo "$out" | grep -Eq '^FAIL +nccl\.lib .*cannot be loaded' && echo "$out" | grep -Eq '^FAIL +cuda\.driver .*no NVIDIA driver' \
   && echo "$out" | grep -Eq '^OK +python\.torch .*no Python interpreter' && echo "$out" | grep -q '^ncclguard-doctor: .* FAIL$' \
   && [ $rc2 -le 1 ] && echo "$out2" | python3 -m json.tool --json-lines >/dev/null 2>&1; then pass doctor-no-libs
else fail doctor-no-libs "rc=$rc rc2=$rc2: $(echo "$out" | head -5 | tr '\n' '|')"; fi

clean_env "$DOC" --bogus >/dev/null 2>&1; rc=$?
clean_env "$DOC" --connect-timeout x >/dev/null 2>&1; rc2=$?
if [ $rc -eq 2 ] && [ $rc2 -eq 2 ]; then pass doctor-usage-error; else fail doctor-usage-error "rc=$rc/$rc2"; fi

out=$(clean_env LD_LIBRARY_PATH="$T/empty" NCCLGUARD_LOG=loud NCCLGUARD_RETRYS=3 NCCLGUARD_AGREE=maybe timeout 60 "$DOC" --no-python 2>&1)
if echo "$out" | grep -Eq '^FAIL +env\.NCCLGUARD_LOG .*not valid \(expected off\|warn' && echo "$out" | grep -Eq '^FAIL +env\.NCCLGUARD_RETRYS +NCCLGUARD_RETRYS=3: unknown ncclguard variable \(did you mean NCCLGUARD_RETRIES\?\)' \
   && echo "$out" | grep -Eq '^FAIL +env\.NCCLGUARD_AGREE .*not valid \(expected 1/0, true/false'; then pass doctor-ncclguard-vars
else fail doctor-ncclguard-vars "$(echo "$out" | grep NCCLGUARD | tr '\n' '|')"; fi

# issue 21: an invalid NCCLGUARD_* value is status 2, a host problem (no driver, no NCCL) 1
out=$(clean_env LD_LIBRARY_PATH="$T/empty" NCCLGUARD_TIMEOUT=abc timeout 60 "$DOC" --no-python 2>&1); rc=$?
clean_env LD_LIBRARY_PATH="$T/empty" timeout 60 "$DOC" --no-python >/dev/null 2>&1; rc2=$?
if [ $rc -eq 2 ] && [ $rc2 -eq 1 ] && echo "$out" | grep -Eq '^FAIL +env\.NCCLGUARD_TIMEOUT +NCCLGUARD_TIMEOUT=abc: not valid'; then
  pass doctor-invalid-config-exit-2
else fail doctor-invalid-config-exit-2 "rc=$rc (want 2) / no variable rc=$rc2 (want 1): $(echo "$out" | grep TIMEOUT)"; fi

# issue 21: --config-only checks the variables alone (a login node: no driver, no NCCL, no Python)
out=$(clean_env LD_LIBRARY_PATH="$T/empty" timeout 60 "$DOC" --config-only 2>&1); rc=$?
out2=$(clean_env LD_LIBRARY_PATH="$T/empty" NCCLGUARD_TIMEOUT=abc timeout 60 "$DOC" --config-only 2>&1); rc2=$?
out3=$(clean_env LD_LIBRARY_PATH="$T/empty" NCCL_WIN_ENABLE=0 timeout 60 "$DOC" --config-only --json 2>&1); rc3=$?
out4=$(clean_env LD_LIBRARY_PATH="$T/empty" NCCLGUARD_STRICT=0 NCCLGUARD_RETRYS=3 timeout 60 "$DOC" --config-only --strict -q 2>&1); rc4=$?
if [ $rc -eq 0 ] && echo "$out" | grep -Eq '^OK +env\.ncclguard ' && echo "$out" | grep -Eq '^OK +env\.nccl ' \
   && ! echo "$out" | grep -Eq '^[A-Z]+ +(nccl|cuda|gpu|python|launcher|ncclguard)\.' && echo "$out" | grep -q '^ncclguard-doctor: 2 OK, 0 WARN, 0 FAIL$' \
   && [ $rc2 -eq 2 ] && echo "$out2" | grep -Eq '^FAIL +env\.NCCLGUARD_TIMEOUT ' \
   && [ $rc3 -eq 2 ] && echo "$out3" | grep -q '^{"status":"FAIL","check":"env.NCCL_WIN_ENABLE"' \
   && [ $rc4 -eq 2 ] && [ "$out4" = "$(echo "$out4" | grep '^WARN  env.NCCLGUARD_RETRYS ')" ]; then pass doctor-config-only
else fail doctor-config-only "rc=$rc/$rc2/$rc3/$rc4 (want 0/2/2/2): $(echo "$out" "$out4" | tr '\n' '|')"; fi

# the doctor's rows wrap at the terminal's width (the fix on a line of its own), and stay one line per
# check in a pipe (above); a terminal of 80 columns made with script(1), a libcuda that cannot load
# (a FAIL with a fix on every host)
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1; then
  out=$(clean_env LD_LIBRARY_PATH="$T/empty" DOC="$DOC" script -qec 'stty cols 80 2>/dev/null; "$DOC" --no-python --cuda-lib /nonexistent/libcuda.so.1' /dev/null 2>&1 | tr -d '\r')
  long=$(echo "$out" | awk 'length > 80' | head -2)
  if [ -z "$long" ] && echo "$out" | grep -q '^FAIL  cuda\.driver  ' && echo "$out" | grep -Eq '^ {30}fix: ' \
     && [ "$(echo "$out" | wc -l)" -gt "$(clean_env LD_LIBRARY_PATH="$T/empty" "$DOC" --no-python --cuda-lib /nonexistent/libcuda.so.1 2>&1 | wc -l)" ]; then
    pass doctor-wraps-at-terminal-width
  else fail doctor-wraps-at-terminal-width "long: $long; $(echo "$out" | head -4 | tr '\n' '|')"; fi
else echo "# skip doctor-wraps-at-terminal-width: no script(1) to make a terminal"; fi

# issue 21: an explicit --python that does not exist is an error naming it; a missing option value is said so
out=$(clean_env LD_LIBRARY_PATH="$T/empty" timeout 60 "$DOC" --python "$T/empty/nopython" 2>&1); rc=$?
out2=$(clean_env timeout 60 "$DOC" --nccl-lib 2>&1); rc2=$?
out3=$(clean_env "$RUN" --lib 2>&1)
if [ $rc -eq 2 ] && [ "$out" = "ncclguard-doctor: --python $T/empty/nopython: No such file or directory" ] \
   && [ $rc2 -eq 2 ] && [ "$out2" = "ncclguard-doctor: option --nccl-lib needs an argument (see --help)" ] \
   && [ "$out3" = "ncclguard-run: option --lib needs an argument (see --help)" ]; then pass doctor-python-and-option-value-errors
else fail doctor-python-and-option-value-errors "rc=$rc/$rc2: '$out' / '$out2' / '$out3'"; fi

# ---------------------------------------------------------------- ncclguard-report
out=$("$REP" --help 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '^Usage: ncclguard-report'; then pass report-help; else fail report-help "rc=$rc"; fi

out=$("$REP" "$LOGS/clean" 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '2 files, .* 1 communicator, 3 windows, 0 divergent, 0 stuck, 0 error lines' \
   && echo "$out" | grep -Eq '^ +1 +2 +0 +0 +0 +0 +0 +0 +17\.0ms / 17\.2ms / 17\.5ms +ok$' && echo "$out" | grep -q '^no errors'; then pass report-clean
else fail report-clean "rc=$rc: $(echo "$out" | tr '\n' '|')"; fi

out=$("$REP" "$LOGS/divergent" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q '1 divergent' && echo "$out" | grep -q 'seq 2: error 0 | missing 1$' \
   && echo "$out" | grep -q '^first error: rank 0 .* seq 2' && echo "$out" | grep -q 'reason=timeout' \
   && echo "$out" | grep -q 'msg: registration refused on every rank (timeout)'; then pass report-divergent
else fail report-divergent "rc=$rc: $(echo "$out" | tr '\n' '|')"; fi

# JSON lines: the retry counted, the rank whose own check failed named first (not its peer), msg unescaped
out=$("$REP" "$LOGS/json" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -Eq '^ +0 +2 +1 +0 +0 ' && echo "$out" | grep -Eq '^ +1 +0 +0 +0 +2 .*failed \(all ranks\)' \
   && echo "$out" | grep -q '^first error: rank 1 ' && echo "$out" | grep -q 'reason=not_vmm' \
   && echo "$out" | grep -q 'msg: .*(cudaMalloc?) allocate it with ncclMemAlloc' && echo "$out" | grep -q 'diagnosis: .*VMM'; then pass report-jsonl
else fail report-jsonl "rc=$rc: $(echo "$out" | tr '\n' '|')"; fi

ok=1
for d in clean divergent json; do
  "$REP" --json "$LOGS/$d" > "$T/rep.json" 2>&1
  python3 -m json.tool "$T/rep.json" >/dev/null 2>&1 || { ok=0; fail report-json-output "$d: $(head -c 300 "$T/rep.json")"; }
done
if [ $ok = 1 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
w = d["comms"][0]["windows"][2]
assert d["divergent"] == 1 and w["status"] == "divergent" and w["rank_decisions"] == {"error": "0", "missing": "1"}, d
assert d["first_error"]["reason"] == "timeout" and d["status"] == "problems"
' "$("$REP" --json "$LOGS/divergent" > "$T/div.json"; echo "$T/div.json")" 2>"$T/py.err"; then pass report-json-output
elif [ $ok = 1 ]; then fail report-json-output "$(cat "$T/py.err" | tail -2)"; fi

out=$(cat "$LOGS"/divergent/*.log | "$REP" -q 2>&1); rc=$?
out2=$(cat "$LOGS"/clean/*.log | "$REP" -q - 2>&1); rc2=$?
out3=$("$REP" -q - < "$LOGS/clean/ncclguard.node0.4242.0.log" 2>&1); rc3=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q 'seq 2: error 0 | missing 1' && ! echo "$out" | grep -q '^comm ' && [ $rc2 -eq 0 ] \
   && [ $rc3 -eq 1 ] && echo "$out3" | grep -q 'seq 0-2: register 0 | missing 1$'; then pass report-stdin
else fail report-stdin "rc=$rc rc2=$rc2: $(echo "$out" | tr '\n' '|')"; fi

# issue 21: no argument at a terminal: the usage, not a silent wait on the keyboard; a directory
# without logs is named; --html/--trace DIR is refused, not taken as the output file
if command -v script >/dev/null 2>&1; then
  out=$(timeout 10 script -qec "$REP" /dev/null </dev/null 2>&1); rc=$?
  if [ $rc -eq 2 ] && echo "$out" | grep -q '^Usage: ncclguard-report'; then pass report-tty-usage
  else fail report-tty-usage "rc=$rc (124: it waited for input): $(echo "$out" | head -2 | tr '\n' '|')"; fi
else echo "# skip report-tty-usage: no script(1) (util-linux) to give it a terminal"; fi
mkdir -p "$T/nologs/sub"; printf 'x\n' >"$T/nologs/sub/notes.txt"
out=$("$REP" "$T/nologs" 2>&1); rc=$?
out2=$("$REP" --html "$T/nologs" "$LOGS/clean" </dev/null 2>&1); rc2=$?
out3=$("$REP" --trace "$T/nologs" "$LOGS/clean" </dev/null 2>&1); rc3=$?
if [ $rc -eq 2 ] && [ "$out" = "ncclguard-report: no *.log or *.jsonl files in $T/nologs" ] \
   && [ $rc2 -eq 2 ] && [ "$(echo "$out2" | wc -l)" -eq 1 ] && echo "$out2" | grep -q "^ncclguard-report: --html $T/nologs: is a directory" \
   && [ $rc3 -eq 2 ] && echo "$out3" | grep -q "^ncclguard-report: --trace $T/nologs: is a directory"; then pass report-empty-dir-and-html-dir
else fail report-empty-dir-and-html-dir "rc=$rc/$rc2/$rc3: '$out' / '$out2' / '$out3'"; fi

"$REP" --frob "$LOGS/clean" >/dev/null 2>&1; rc=$?
"$REP" "$T/no-such-dir" >/dev/null 2>&1; rc2=$?
if [ $rc -eq 2 ] && [ $rc2 -eq 2 ]; then pass report-usage-error; else fail report-usage-error "rc=$rc/$rc2"; fi

# 4096 ranks x 50 windows, rank 1234 never reaches seq 37: found, named, in a few seconds
sh "$NG_ROOT/tests/data/gen_logs.sh" "$T/big" 4096 50
t0=$(date +%s%N)
out=$("$REP" "$T/big" 2>&1); rc=$?
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
if [ $rc -eq 1 ] && echo "$out" | grep -q '^ncclguard-report: 4096 files, .* 50 windows, 13 divergent' \
   && echo "$out" | grep -q 'seq 37-49: register 0-1233,1235-4095 | missing 1234$' && [ "$ms" -lt 10000 ]; then
  pass "report-4096-ranks (${ms} ms)"
else fail report-4096-ranks "rc=$rc ${ms} ms: $(echo "$out" | head -3 | tr '\n' '|')"; fi

# the doctor names a PyTorch that loads another NCCL minor version than the one its package pins
# (PyTorch 2.11 pins 2.28.9; with 2.30.7 its device communicators fail: tests/gpu/results)
mkdir -p "$T/ft/torch/cuda" "$T/ft/torch-2.11.0.dist-info"
printf '__version__ = "2.11.0"\nclass version: cuda = "13.0"\nfrom . import cuda\n' >"$T/ft/torch/__init__.py"
printf 'class nccl:\n    @staticmethod\n    def version(): return (2, %s, 7)\n' 30 >"$T/ft/torch/cuda/__init__.py"
printf 'Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\nRequires-Dist: nvidia-nccl-cu13==2.28.9\n' >"$T/ft/torch-2.11.0.dist-info/METADATA"
out=$(PYTHONPATH="$T/ft" "$DOC" 2>&1)
echo "$out" | grep -Eq '^WARN +python\.nccl-pin +PyTorch 2\.11\.0 pins NCCL 2\.28\.9, but loads NCCL 2\.30\.7' \
  && pass doctor-torch-nccl-pin-mismatch || fail doctor-torch-nccl-pin-mismatch "$(echo "$out" | grep python)"
printf 'class nccl:\n    @staticmethod\n    def version(): return (2, 28, 3)\n' >"$T/ft/torch/cuda/__init__.py"
out=$(PYTHONPATH="$T/ft" "$DOC" 2>&1)
echo "$out" | grep -Eq '^OK +python\.nccl-pin ' && pass doctor-torch-nccl-pin-same-minor || fail doctor-torch-nccl-pin-same-minor "$(echo "$out" | grep python)"

# where ncclguard is on (ncclguard-run's LD_PRELOAD, or NCCLGUARD=1 for the Python package), the rows
# whose problem it answers (a NULL communicator, registration under graph capture, PyTorch's lazy
# communicators) are OK "guarded", not WARN: -q --strict passes on a host with no other problem;
# without it (or with NCCLGUARD_DISABLE=1) the same host keeps its WARN lines and their fix
if [ "${NG_VARIANT:-plain}" != plain ]; then echo "# skip doctor-guarded-*: the plain variant runs them (the launcher preloads the library alone; a sanitizer runtime would have to come first)"
elif [ -e "$FAKE/libcuda.so.1" ] && [ -e "$FAKE/libnccl.so.2" ]; then
  printf 'class nccl:\n    @staticmethod\n    def version(): return (2, 28, 9)\n' >"$T/ft/torch/cuda/__init__.py"
  dg() { clean_env PYTHONPATH="$T/ft" LD_LIBRARY_PATH="$FAKE" FAKE_NCCL_VERSION=22809 FAKE_CUDA_DEVICES=2 "$@"; }
  rows='(nccl\.null-comm|nccl\.graph-capture|python\.nccl\.null-comm|python\.nccl\.graph-capture|python\.lazy-comm)'
  q=$(dg "$RUN" "$DOC" -q --strict 2>&1); rq=$?
  full=$(dg "$RUN" "$DOC" 2>&1); rf=$?
  u=$(dg "$DOC" -q --strict 2>&1); ru=$?
  ug=$(printf '%s\n' "$u" | grep -Ec "^WARN +$rows ")
  if [ $rq -eq 0 ] && [ -z "$q" ] && [ $rf -eq 0 ] \
     && [ "$(printf '%s\n' "$full" | grep -Ec "^OK +$rows .*; guarded: ncclguard is on \(libncclguard\.so preloaded\)")" -eq 5 ] \
     && ! printf '%s\n' "$full" | grep -Eq '^WARN ' && printf '%s\n' "$full" | grep -q '^ncclguard-doctor: [0-9]* OK, [0-9]* INFO, 0 WARN, 0 FAIL$' \
     && [ $ru -eq 1 ] && [ "$ug" -eq 5 ] && [ "$(printf '%s\n' "$u" | wc -l)" -eq 5 ] \
     && printf '%s\n' "$u" | grep -Eq '^WARN +nccl\.null-comm .*fix: run the job under ncclguard-run or NCCLGUARD=1'; then pass doctor-guarded-under-ncclguard-run
  else fail doctor-guarded-under-ncclguard-run "guarded -q rc=$rq '$(echo "$q" | tr '\n' '|')' full rc=$rf / unguarded rc=$ru $ug WARN: $(echo "$full" "$u" | grep -E "$rows" | tr '\n' '|')"; fi

  p=$(dg NCCLGUARD=1 "$DOC" -q --strict 2>&1); rp=$?
  pf=$(dg NCCLGUARD=1 "$DOC" 2>&1)
  d=$(dg NCCLGUARD_DISABLE=1 "$RUN" "$DOC" -q --strict 2>&1); rd=$?
  if [ $rp -eq 0 ] && [ -z "$p" ] && [ "$(printf '%s\n' "$pf" | grep -Ec "^OK +$rows .*; guarded: ncclguard is on \(NCCLGUARD=1: the Python package\)")" -eq 5 ] \
     && [ $rd -eq 1 ] && [ "$(printf '%s\n' "$d" | grep -Ec "^WARN +$rows ")" -eq 5 ]; then pass doctor-guarded-python-package-and-disable
  else fail doctor-guarded-python-package-and-disable "NCCLGUARD=1 rc=$rp '$(echo "$p" | tr '\n' '|')' / NCCLGUARD_DISABLE=1 rc=$rd: $(echo "$d" | tr '\n' '|')"; fi
else echo "# skip doctor-guarded-*: no fake libcuda/libnccl in $FAKE"; fi

# every tool names its version (VERSION and the git revision)
want="$(cat "$NG_ROOT/VERSION")"
v1=$("$B/ncclguard-run" --version); v2=$("$B/ncclguard-doctor" --version); v3=$("$B/ncclguard-report" --version)
case "$v1|$v2|$v3" in
  "ncclguard-run $want ("*")|ncclguard-doctor $want ("*")|ncclguard-report $want ("*")") pass "tools-version ($v3)" ;;
  *) fail tools-version "$v1 | $v2 | $v3 (VERSION $want)" ;;
esac

# the revision is the project's own, never that of a checkout the tree was exported into: a copy of
# the tree (git ls-files) inside another git repository names no revision ("ncclguard VERSION"), or
# the one in REVISION at its top (an sdist's). Once (plain): the build system is the same in every variant.
ident_of() { tr -c '[:print:]' '\n' <"$1" | grep '^ncclguard [0-9]' | head -1; }
if [ "${NG_VARIANT:-plain}" != plain ]; then echo "# skip revision-not-from-enclosing-checkout: the plain variant runs it"
elif ! command -v git >/dev/null 2>&1 || ! git -C "$NG_ROOT" ls-files VERSION 2>/dev/null | grep -q .; then
  echo "# skip revision-not-from-enclosing-checkout: no git, or $NG_ROOT is not a checkout"
else
  ex="$T/outer/vendor/ncclguard"; mkdir -p "$ex"
  outer=$(cd "$T/outer" && unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE && git init -q . && echo x >f && git add f \
    && git -c user.name=t -c user.email=t@example.com commit -qm outer && git rev-parse --short HEAD)
  (cd "$NG_ROOT" && git ls-files -z | tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$ex"
  # the library and the tools that print the identity; the second build (a REVISION added, nothing
  # else changed) must rebuild every one of them: none keeps the identity of the first
  mkx() { (unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE NG_REVISION; make -C "$ex" -s --no-print-directory BUILD="$T/exb" \
           lib "$T/exb/ncclguard-report" "$T/exb/ncclguard-doctor" "$T/exb/ncclguard-run" 2>&1); }
  tids() { echo "$("$T/exb/ncclguard-report" --version 2>&1)|$("$T/exb/ncclguard-doctor" --version 2>&1)|$("$T/exb/ncclguard-run" --version 2>&1)"; }
  o1=$(mkx); r1=$?; id1=$(ident_of "$T/exb/libncclguard.so"); t1=$(tids)
  echo 'abc1234' >"$ex/REVISION"
  o2=$(mkx); r2=$?; id2=$(ident_of "$T/exb/libncclguard.so"); t2=$(tids)
  v=$(cat "$NG_ROOT/VERSION"); want="ncclguard $v"
  if [ -n "$outer" ] && [ $r1 = 0 ] && [ "$id1" = "$want" ] && [ $r2 = 0 ] && [ "$id2" = "$want (abc1234)" ]; then
    pass "revision-not-from-enclosing-checkout ($id1 / $id2)"
  else fail revision-not-from-enclosing-checkout "outer commit '$outer': rc=$r1 '$id1' (want '$want') / REVISION: rc=$r2 '$id2': $(echo "$o1 $o2" | tail -5 | tr '\n' '|')"; fi
  if [ "$t1" = "ncclguard-report $v|ncclguard-doctor $v|ncclguard-run $v" ] \
     && [ "$t2" = "ncclguard-report $v (abc1234)|ncclguard-doctor $v (abc1234)|ncclguard-run $v (abc1234)" ]; then
    pass tools-rebuilt-on-new-revision
  else fail tools-rebuilt-on-new-revision "first build: $t1 / after REVISION: $t2 (a tool kept a stale identity)"; fi
fi

# the report reads nothing it understands: status 2 and one line naming the cause (README)
mkdir -p "$T/emptydir"; printf 'plain text\n' >"$T/text.log"; chmod 000 "$T/text.log" 2>/dev/null
for input in "$T/emptydir" /bin/true; do
  out=$("$B/ncclguard-report" "$input" 2>&1); rc=$?
  case "$input" in "$T/emptydir") want="no \*\.log or \*\.jsonl files in $T/emptydir" ;; *) want='no ncclguard log line in the input' ;; esac
  [ $rc = 2 ] && echo "$out" | grep -q "$want" && pass "report-nothing-understood-exit-2 ($(basename "$input"))" \
    || fail "report-nothing-understood-exit-2 ($(basename "$input"))" "rc=$rc $out"
done

# ---------------------------------------------------------------- make install / make uninstall
# make help reads as text (no make syntax) and names uninstall
out=$(make -C "$NG_ROOT" -s --no-print-directory help PREFIX=/opt/ng 2>&1)
if ! echo "$out" | grep -q '\$' && echo "$out" | grep -q '^  make install  *into /opt/ng: ' && echo "$out" | grep -q '^  make uninstall '; then
  pass make-help
else fail make-help "$(echo "$out" | grep -e install -e '\$' | tr '\n' '|')"; fi

# the paths the tools' --help names (tools/README.md, docs/NCCL.md, ...) are documentation the Python
# package installs (setup.py's DOCS, into the folder python -m ncclguard --docs prints); the package
# index's long description has no relative link (the project has no public URL)
if command -v python3 >/dev/null 2>&1; then
  helps=$("$B/ncclguard-run" --help 2>&1; "$B/ncclguard-doctor" --help 2>&1; "$B/ncclguard-report" --help 2>&1
          cd "$T" && PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" python3 -m ncclguard --help 2>&1)
  printf '%s\n' "$helps" >"$T/helps.txt"
  out=$(python3 - "$NG_ROOT" "$T/helps.txt" <<'EOF'
import ast, fnmatch, os, re, sys
root = sys.argv[1]
src = open(os.path.join(root, "setup.py")).read()
mod = ast.parse(src)
want = {"DOCS", "DOCS_NOTE", "long_description", "HERE"}
nodes = [n for n in mod.body if (isinstance(n, ast.FunctionDef) and n.name in want)
         or (isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") in want)]
g = {"__file__": os.path.join(root, "setup.py"), "os": os, "re": re}
exec(compile(ast.Module(body=nodes, type_ignores=[]), "setup.py", "exec"), g)
named = sorted(set(re.findall(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b", open(sys.argv[2]).read())))
bad = [p for p in named if not os.path.isfile(os.path.join(root, p))
       or not any(fnmatch.fnmatch(p, d) for d in g["DOCS"])]
rel = [t for t in re.findall(r"\]\(([^)\s]+)\)", g["long_description"]())
       if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]
print("named=%s" % " ".join(named))
for p in bad:
    print("not shipped: %s" % p)
for t in rel:
    print("relative link: %s" % t)
EOF
)
  named=$(echo "$out" | sed -n 's/^named=//p'); rest=$(echo "$out" | grep -v '^named=')
  if [ -n "$named" ] && [ -z "$rest" ] && printf '%s\n' "$helps" | grep -q 'python -m ncclguard --docs'; then
    pass "help-docs-shipped-with-package ($named)"
  else fail help-docs-shipped-with-package "$(echo "$out" | head -5 | tr '\n' '|')"; fi
else echo "# skip help-docs-shipped-with-package: no python3"; fi

# make deps installs what the build and the demo need, a C compiler and uthash, nothing of the tests;
# make test-deps adds the tests' packages, and CI (.ci/run) installs those; the demo says what it
# builds before its quiet build (dry runs: nothing is installed or built)
pk() { make -C "$NG_ROOT" -n --no-print-directory NCCL_INCLUDE="$T" CUDA_INCLUDE="$T" BUILD="$T/nb" "$@" 2>&1 \
  | sed -n 's/.*for p in \([^;]*\);.*/\1/p' | tr ' ' '\n' | grep . | sort -u | tr '\n' ' '; }
d=$(pk deps); td=$(pk test-deps)
demo=$(make -C "$NG_ROOT" -n --no-print-directory BUILD="$T/nb" demo 2>&1 | head -3)
if [ "$d" = "build-essential uthash-dev " ] \
   && (for p in build-essential uthash-dev valgrind clang python3-venv python3-pip patchelf chromium; do
         case " $td" in *" $p "*) ;; *) exit 1 ;; esac; done) \
   && grep -q '^make test-deps' "$NG_ROOT/.ci/run" && ! grep -q '^make deps' "$NG_ROOT/.ci/run" \
   && echo "$demo" | head -1 | grep -q '^echo "building the library, the tools and the fake NCCL into '; then
  pass "make-deps-build-only (deps: $d; test-deps: $td)"
else fail make-deps-build-only "deps: '$d' / test-deps: '$td' / demo starts: $(echo "$demo" | head -1)"; fi

# an nccl.h older than 2.28.7 (a GPU host's system NCCL 2.28.3) cannot build the fakes: one line saying so and
# what to set, before any compiler error
hdr=$(printf 'ng-print-nccl-include:\n\t@echo $(NCCL_INCLUDE)\n' | make -s -C "$NG_ROOT" -f Makefile -f - ng-print-nccl-include 2>/dev/null)
if [ -n "$hdr" ] && [ -f "$hdr/nccl.h" ]; then
  mkdir -p "$T/oldh"; sed 's/^#define NCCL_MINOR .*/#define NCCL_MINOR 28/; s/^#define NCCL_PATCH .*/#define NCCL_PATCH 3/' "$hdr/nccl.h" >"$T/oldh/nccl.h"
  msg=$(make -s -C "$NG_ROOT" check-nccl-header NCCL_INCLUDE="$T/oldh" 2>&1); rc=$?
  [ $rc != 0 ] && echo "$msg" | grep -q 'need an nccl.h of 2.28.7 or newer; .*/oldh/nccl.h is 2.28.3: set NCCL_INCLUDE' \
    && pass nccl-header-too-old-named || fail nccl-header-too-old-named "rc=$rc $msg"
else echo "# skip nccl-header-too-old-named: no nccl.h found ($hdr)"; fi

# uninstall removes exactly what install wrote: the files, then the directories install created
# (installing twice changes nothing); a tree with files and directories of its own keeps them. Once
# (plain): the build system is the same in every variant.
if [ "${NG_VARIANT:-plain}" = plain ]; then
  mk() { make -C "$NG_ROOT" -s --no-print-directory BUILD="$B" PREFIX=/opt/ng "$@" 2>&1; }
  mkdir -p "$T/dest" "$T/pre/opt/ng/lib" "$T/pre/opt/ng/bin" "$T/pre/opt/ng/share"
  printf 'x\n' >"$T/pre/opt/ng/lib/other.so"
  o1=$(mk install DESTDIR="$T/dest"); r1=$?
  i="$T/dest/opt/ng" got=0
  [ -x "$i/lib/libncclguard.so" ] && [ -x "$i/bin/ncclguard-run" ] && [ -x "$i/bin/ncclguard-doctor" ] \
    && [ -x "$i/bin/ncclguard-report" ] && [ -f "$i/share/ncclguard/python/ncclguard_hook/_vars.py" ] && got=1
  o2=$(env -i PATH="$PATH" "$i/bin/ncclguard-run" --print-env 2>&1)
  o3=$(mk install DESTDIR="$T/dest"); r3=$?
  o4=$(mk uninstall DESTDIR="$T/dest"); r4=$?
  left=$(cd "$T/dest" && find . -mindepth 1 | tr '\n' ' ')
  mk install DESTDIR="$T/pre" >/dev/null; mk uninstall DESTDIR="$T/pre" >/dev/null
  kept=$(cd "$T/pre" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')
  o5=$(mk uninstall DESTDIR="$T/dest"); r5=$?
  if [ $r1 = 0 ] && [ $got = 1 ] && [ "$o2" = "LD_PRELOAD=$i/lib/libncclguard.so
PYTHONPATH=$i/share/ncclguard/python" ] && [ $r3 = 0 ] && [ $r4 = 0 ] && [ -z "$left" ] \
     && [ "$kept" = "./opt ./opt/ng ./opt/ng/bin ./opt/ng/lib ./opt/ng/lib/other.so ./opt/ng/share " ] \
     && [ $r5 != 0 ] && echo "$o5" | grep -q 'nothing to uninstall'; then pass make-install-uninstall
  else fail make-install-uninstall "rc=$r1/$r3/$r4/$r5 installed $got left '$left' kept '$kept': $(echo "$o1 $o2 $o4 $o5" | tr '\n' '|')"; fi
else echo "# skip make-install-uninstall: the plain variant runs it"; fi

# ---------------------------------------------------------------- the build
# a second `make` rebuilds and relinks nothing (the identity is compiled in only when it changes, so
# a `sudo make install` after `make` writes nothing into build/), and says nothing; a build step is
# one short line, not the compiler's command line; `make help` gives a user's targets, then a
# maintainer's (plain variant: its build is build/)
if [ "$B" = "$NG_ROOT/build" ] && command -v make >/dev/null 2>&1; then
  make -s -C "$NG_ROOT" all >/dev/null 2>&1
  before=$(cd "$B" && ls -l --time-style=+%s.%N libncclguard.so ncclguard-doctor ncclguard-report ncclguard-run shim/version.o 2>&1)
  out=$(make -C "$NG_ROOT" --no-print-directory all 2>&1); rc=$?
  after=$(cd "$B" && ls -l --time-style=+%s.%N libncclguard.so ncclguard-doctor ncclguard-report ncclguard-run shim/version.o 2>&1)
  out2=$(make -C "$NG_ROOT" --no-print-directory BUILD="$T/b2" "$T/b2/shim/vars.o" 2>&1); rc2=$?
  help=$(make -C "$NG_ROOT" --no-print-directory help 2>&1)
  users=$(echo "$help" | sed -n '/^Using ncclguard:/,/^Developing ncclguard:/p'); devs=$(echo "$help" | sed -n '/^Developing ncclguard:/,$p')
  if [ $rc = 0 ] && [ -z "$out" ] && [ "$before" = "$after" ] && [ $rc2 = 0 ] && [ "$out2" = "  CC   shim/vars.c" ] \
     && echo "$users" | grep -q 'make demo' && echo "$users" | grep -q 'make install' && ! echo "$users" | grep -qE 'make (test|fuzz|tables)' \
     && echo "$devs" | grep -q 'make test ' && echo "$devs" | grep -q 'make test-quick' && echo "$devs" | grep -q 'make tables'; then
    pass make-second-run-idle
  else fail make-second-run-idle "rc=$rc/$rc2 out='$(echo "$out" | head -3 | tr '\n' '|')' step='$out2' changed: $([ "$before" = "$after" ] || echo yes) help: $(echo "$help" | head -2 | tr '\n' '|')"; fi
else echo "# skip make-second-run-idle: the plain variant runs it"; fi
