#!/bin/sh
# The Python package (pyproject.toml, setup.py, python/): python/build-dist builds the sdist and the
# manylinux wheel; each is pip-installed into a fresh virtual environment, where the console
# scripts run the demo, NCCLGUARD=1 (ncclguard.pth) and `import ncclguard` turn ncclguard on for a
# library loaded RTLD_LOCAL the way PyTorch loads NCCL, NCCL already loaded is one line, children
# inherit it, and pip uninstall leaves nothing behind. Also: the build's one-line errors for a
# missing compiler or uthash, and `auditwheel show` on the wheel. Plain variant only; needs python3
# with venv and PyPI (build, auditwheel, ziglang, setuptools for the sdist's build).
. "$(dirname "$0")/lib.sh"

if [ "${NG_VARIANT:-plain}" != plain ]; then
  echo "# skip package: the Python package is tested in the plain variant only"
  exit 0
fi
PY=${NG_PYTHON:-python3}
VERSION=$(cat "$NG_ROOT/VERSION")
# Python and pip as a user runs them: no inherited ncclguard, preload or bytecode setting.
clean() {
  env -u NCCLGUARD -u NCCLGUARD_LIB -u NCCLGUARD_LOG -u NCCLGUARD_LOG_FILE -u NCCLGUARD_PYHOOK \
    -u NCCLGUARD_DISABLE -u LD_PRELOAD -u PYTHONPATH -u PYTHONDONTWRITEBYTECODE -u RANK "$@"
}
if ! clean "$PY" -m venv "$T/probe" >"$T/probe.log" 2>&1; then
  echo "# skip package: $PY -m venv does not work (make test-deps installs python3-venv): $(tail -1 "$T/probe.log")"
  exit 0
fi

# ------------------------------------------------------------------ build: sdist and wheel
clean NG_DIST_TOOLS="$T/tools" PYTHON="$PY" timeout -k 5 900 "$NG_ROOT/python/build-dist" "$T/dist" \
  >"$T/dist.out" 2>"$T/dist.err"
rc=$?
if [ $rc = 3 ]; then
  echo "# skip package: $(grep 'build-dist:' "$T/dist.err" | tail -1) (PyPI not reachable?)"
  exit 0
fi
SDIST="$T/dist/ncclguard-$VERSION.tar.gz"
WHEEL=$(tail -1 "$T/dist.out")
if [ $rc = 0 ] && [ -f "$SDIST" ] && [ -f "$WHEEL" ]; then pass dist-sdist-and-wheel
else
  fail dist-sdist-and-wheel "rc=$rc: $(tail -5 "$T/dist.err")"
  exit 0
fi

# A second run downloads nothing (the tools' environment is kept: pip may not reach any index) and
# says so; auditwheel's "you would need to recompile ... on a system with earlier versions" note, which
# follows even the oldest tag, is replaced by one line naming the tag (python/build-dist).
clean NG_DIST_TOOLS="$T/tools" PYTHON="$PY" PIP_NO_INDEX=1 PIP_INDEX_URL=http://127.0.0.1:9/ \
  timeout -k 5 900 "$NG_ROOT/python/build-dist" "$T/dist2" >"$T/dist2.out" 2>"$T/dist2.err"
rc=$?
if [ $rc = 0 ] && [ -f "$(tail -1 "$T/dist2.out")" ] && grep -q 'installing the build tools' "$T/dist.err" \
   && ! grep -q 'installing' "$T/dist2.err" && ! grep -qi 'recompile' "$T/dist.err" "$T/dist2.err" \
   && { grep -q 'auditwheel: platform tag manylinux_2_17_' "$T/dist.err" || ! grep -q 'compiling with zig' "$T/dist.err"; }; then
  pass dist-second-run-offline-and-quiet
else fail dist-second-run-offline-and-quiet "rc=$rc: $(tr '\n' '|' <"$T/dist2.err" | tail -c 600) / first: $(tr '\n' '|' <"$T/dist.err" | tail -c 400)"; fi
rm -rf "$T/dist2"

# The wheel's tag, checked by auditwheel: manylinux, glibc 2.28 or older.
"$T/tools/bin/auditwheel" show "$WHEEL" >"$T/aw.out" 2>&1
tag=$(tr '\n' ' ' <"$T/aw.out" | grep -o 'platform tag: *"manylinux_2_[0-9]*_[a-z0-9_]*"' | grep -o 'manylinux_2_[0-9]*' | head -1)
glibc_minor=${tag#manylinux_2_}
if [ -n "$tag" ] && [ "$glibc_minor" -le 28 ] && echo "$WHEEL" | grep -q "manylinux"; then
  pass "auditwheel-show-$tag"
else fail auditwheel-show "tag '$tag' (want manylinux_2_28 or older): $(cat "$T/aw.out")"; fi

# What is inside: the library, the tools, the start-up file, the hook, the version from VERSION;
# no test file; the binaries executable.
# names, and for each its Unix mode in octal (python's zipfile: no unzip needed)
"$PY" -c 'import sys, zipfile
for i in zipfile.ZipFile(sys.argv[1]).infolist(): print(i.filename, oct(i.external_attr >> 16))' "$WHEEL" >"$T/whl.modes"
cut -d' ' -f1 "$T/whl.modes" >"$T/whl.list"
miss=""
for f in ncclguard.pth ncclguard/__init__.py ncclguard/_boot.py ncclguard/_version.py ncclguard/lib/libncclguard.so \
  ncclguard/bin/ncclguard-run ncclguard/bin/ncclguard-doctor ncclguard/bin/ncclguard-report \
  ncclguard/bin/python/sitecustomize.py ncclguard/bin/python/ncclguard_hook/__init__.py \
  ncclguard/libexec/ncclguard/ngtest ncclguard/libexec/ncclguard/repeat ncclguard/libexec/ncclguard/faults \
  ncclguard/libexec/ncclguard/torch_symm.py \
  ncclguard_hook/__init__.py ncclguard_hook/_vars.py; do
  grep -qx "$f" "$T/whl.list" || miss="$miss $f"
done
"$PY" -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("ncclguard/_version.py").decode())' \
  "$WHEEL" >"$T/ver.py" 2>/dev/null
noexec=$(grep -E '^ncclguard/(bin/ncclguard-[a-z]+|lib/libncclguard.so|libexec/ncclguard/[a-z]+) ' "$T/whl.modes" | grep -vc ' 0o100755$')
if [ -z "$miss" ] && has "$T/ver.py" "^__version__ = '$VERSION'$" && ! grep -q '^tests/' "$T/whl.list" \
   && [ "$noexec" = 0 ]; then
  pass wheel-contents
else fail wheel-contents "missing:$miss; version: $(cat "$T/ver.py"); not executable: $noexec"; fi
tar -tzf "$SDIST" >"$T/sdist.list"
if grep -q "^ncclguard-$VERSION/shim/wrap_reg.c$" "$T/sdist.list" && grep -q "^ncclguard-$VERSION/VERSION$" "$T/sdist.list" \
   && grep -q "^ncclguard-$VERSION/LICENSE$" "$T/sdist.list" && grep -q "^ncclguard-$VERSION/CHANGELOG.md$" "$T/sdist.list" \
   && ! grep -qE '\.(o|so)$|__pycache__|/tests/t_' "$T/sdist.list"; then
  pass sdist-contents
else fail sdist-contents "$(head -50 "$T/sdist.list" | tr '\n' ' ')"; fi

# ------------------------------------------------------------------ programs run in the venvs
# consumer.py LIB [consumer args]: loads LIB (build/progs/libconsumer.so, linked against libnccl.so.2
# like libtorch_cuda.so) with RTLD_LOCAL, as Python loads PyTorch, and runs it.
cat >"$T/consumer.py" <<'EOF'
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_LOCAL)
args = [a.encode() for a in sys.argv[2:]]
argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
rc = lib.consumer_run(len(args), argv)
maps = open("/proc/self/maps").read()
print("GUARD_MAPPED", "libncclguard" in maps)
print("NCCL_MAPPED", "libnccl.so" in maps)
print("MODULE", "ncclguard" in sys.modules)
sys.stdout.flush()
sys.exit(rc)
EOF
# the same, turned on by its first line
{ echo "import ncclguard"; cat "$T/consumer.py"; } >"$T/first_line.py"
# NCCL loaded first, then import ncclguard
cat >"$T/late.py" <<'EOF'
import ctypes, os, sys
ctypes.CDLL("libnccl.so.2")
before = os.environ.get("LD_PRELOAD")
import ncclguard
print("STATE", ncclguard.state())
print("GUARD_MAPPED", "libncclguard" in open("/proc/self/maps").read())
print("ENV_UNCHANGED", os.environ.get("LD_PRELOAD") == before and "NCCLGUARD" not in os.environ)
EOF
# children: a shell (non-Python) and a multiprocessing 'spawn' child of a process turned on by import
cat >"$T/children.py" <<'EOF'
import ncclguard
import multiprocessing as mp, subprocess, sys

def child(q):
    import ncclguard, ncclguard_hook
    paths = set(l.split()[-1] for l in open("/proc/self/maps") if "libncclguard" in l)
    q.put((ncclguard.state(), ncclguard_hook._installed, len(paths)))

if __name__ == "__main__":
    sh = subprocess.run(["sh", "-c", "grep -c libncclguard /proc/$$/maps"], capture_output=True, text=True)
    print("SH_MAPPED", sh.stdout.strip() not in ("", "0"))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    print("SPAWN", q.get(timeout=20))
    p.join()
    print("PARENT", ncclguard.state())
EOF

# vrun VENV OUT ENV... -- CMD...: CMD with the venv's bin first on PATH and the fakes on
# LD_LIBRARY_PATH; stdout in $T/OUT.std, stderr in $T/OUT.err, both in $T/OUT.out, status $T/OUT.rc
vrun() {
  v=$1 o=$2; shift 2
  envs=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  # shellcheck disable=SC2086
  clean PATH="$v/bin:$PATH" LD_LIBRARY_PATH="$FAKE" $envs timeout -k 2 "$NG_TIMEOUT" "$@" \
    >"$T/$o.std" 2>"$T/$o.err"
  echo $? >"$T/$o.rc"
  cat "$T/$o.std" "$T/$o.err" >"$T/$o.out"
}
rc_of() { cat "$T/$1.rc"; }
count() { grep -Ec -- "$2" "$1" || true; }

# check_venv KIND ARTIFACT: install ARTIFACT into a fresh venv and run every case there
check_venv() {
  k=$1 art=$2 v="$T/venv-$1"
  clean "$PY" -m venv "$v" >/dev/null 2>&1 && clean "$v/bin/pip" --version >/dev/null 2>&1
  (cd "$v" && find . | sort) >"$T/$k.before"
  if clean timeout -k 5 600 "$v/bin/pip" install "$art" >"$T/$k.install" 2>&1 \
     && [ -x "$v/bin/ncclguard-run" ] && [ -x "$v/bin/ncclguard-doctor" ] && [ -x "$v/bin/ncclguard-report" ]; then
    pass "install-$k"
  else
    fail "install-$k" "$(tail -5 "$T/$k.install")"
    return
  fi
  site=$(clean "$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  lib="$site/ncclguard/lib/libncclguard.so"

  # version and paths: from VERSION; library_path() is the packaged library
  vrun "$v" ver NCCLGUARD=0 -- python -c 'import ncclguard; print(ncclguard.__version__); print(ncclguard.library_path())'
  vrun "$v" runver -- ncclguard-run --version
  if [ "$(sed -n 1p "$T/ver.std")" = "$VERSION" ] && [ "$(sed -n 2p "$T/ver.std")" = "$lib" ] && [ -f "$lib" ] \
     && has "$T/runver.std" "^ncclguard-run $VERSION "; then
    pass "version-and-library-path-$k"
  else fail "version-and-library-path-$k" "$(cat "$T/ver.out" "$T/runver.out")"; fi

  # the demo (tools/demo.sh, make demo) through the installed ncclguard-run
  mkdir -p "$T/demo-$k"
  ln -sfn "$FAKE" "$T/demo-$k/fake"; ln -sfn "$PROGS" "$T/demo-$k/progs"; ln -sfn "$v/bin/ncclguard-run" "$T/demo-$k/ncclguard-run"
  # (and its closing ncclguard-report, the console script, on the logs it wrote)
  clean PATH="$v/bin:$PATH" timeout -k 2 120 "$NG_ROOT/tools/demo.sh" "$T/demo-$k" >"$T/demo-$k.out" 2>&1
  rc=$?
  if [ $rc = 0 ] && has "$T/demo-$k.out" 'died with signal 11' \
     && has "$T/demo-$k.out" 'NCCLGUARD WARN fn=ncclCommWindowRegister comm=0x0 .*reason=null_comm' \
     && has "$T/demo-$k.out" 'hang: killed by timeout' \
     && [ "$(count "$T/demo-$k.out" 'NCCLGUARD WARN fn=ncclCommWindowRegister decision=degrade reason=(peer_)?not_vmm')" = 2 ] \
     && has "$T/demo-$k.out" '^ncclguard-report: 3 files, ' && has "$T/demo-$k.out" 'degraded \(all ranks\)' \
     && [ "$(count "$T/demo-$k.out" 'rank [01]/2: RESULT ok reg=ncclSuccess win=null ar=ok')" = 2 ]; then
    pass "demo-console-scripts-$k"
  else fail "demo-console-scripts-$k" "rc=$rc: $(tail -12 "$T/demo-$k.out")"; fi

  # the other two console scripts find the packaged files; a console script does not turn
  # ncclguard on in its own process (NCCLGUARD=1: no preload for the doctor, no configuration dump)
  vrun "$v" doc NCCLGUARD=1 -- ncclguard-doctor --json
  vrun "$v" rep NCCLGUARD=1 NCCLGUARD_DUMP_CONFIG=1 -- ncclguard-report -q "$NG_ROOT/tests/data/logs"
  if has "$T/doc.std" "\"check\": *\"ncclguard.lib\"" && grep '"ncclguard.lib"' "$T/doc.std" | grep -q "$site/ncclguard/lib/libncclguard.so (not preloaded here" \
     && has "$T/rep.std" '^ncclguard-report: [0-9]+ files' && [ "$(rc_of rep)" = 1 ] && ! has "$T/rep.out" 'effective configuration'; then
    pass "doctor-report-console-scripts-$k"
  else fail "doctor-report-console-scripts-$k" "$(grep ncclguard.lib "$T/doc.std"; head -3 "$T/rep.out")"; fi

  # NCCLGUARD=1: ncclguard.pth loads the library before the program; the library loaded RTLD_LOCAL
  # later binds its NCCL calls to ncclguard (info lines); exports for children
  vrun "$v" pth NCCLGUARD=1 NCCLGUARD_LOG=info -- python "$T/consumer.py" "$PROGS/libconsumer.so"
  if [ "$(rc_of pth)" = 0 ] && has "$T/pth.std" '^GUARD_MAPPED True$' && has "$T/pth.std" '^MODULE True$' \
     && has "$T/pth.out" 'NCCLGUARD INFO fn=ncclCommWindowRegister .*decision=register reason=ok' \
     && has "$T/pth.out" 'NCCLGUARD INFO fn=ncclCommDestroy ' && has "$T/pth.std" 'consumer: RESULT ok'; then
    pass "pth-activation-rtld-local-$k"
  else fail "pth-activation-rtld-local-$k" "rc=$(rc_of pth) $(tail -8 "$T/pth.out")"; fi

  # NCCLGUARD=1 and a ctypes binding in vLLM's legacy style (ctypes.CDLL(libnccl), attribute look-ups):
  # the package's ctypes hook gives it ncclguard's functions (no LD_PRELOAD); NCCLGUARD=0: NCCL's own (SIGSEGV)
  vrun "$v" ctyp NCCLGUARD=1 NCCLGUARD_LOG=info FAKE_NCCL_VERSION=22809 -- python "$NG_ROOT/tests/progs/pynccl_like.py" "$FAKE/libnccl.so.2" null
  vrun "$v" ctyp0 NCCLGUARD=0 FAKE_NCCL_VERSION=22809 -- python "$NG_ROOT/tests/progs/pynccl_like.py" "$FAKE/libnccl.so.2" null
  if [ "$(rc_of ctyp)" = 0 ] && has "$T/ctyp.std" '^RESULT null=4$' \
     && has "$T/ctyp.err" 'NCCLGUARD WARN fn=ncclCommWindowRegister comm=0x0 .*reason=null_comm' && crashed "$(rc_of ctyp0)"; then
    pass "pth-ctypes-binding-reached-$k"
  else fail "pth-ctypes-binding-reached-$k" "rc=$(rc_of ctyp) rc0=$(rc_of ctyp0) $(tail -4 "$T/ctyp.out")"; fi

  # without NCCLGUARD (and with NCCLGUARD=0): nothing loaded, nothing imported, NCCL's own calls
  ok=1
  for e in NCCLGUARD_PYHOOK=1 NCCLGUARD=0 NCCLGUARD=off; do
    vrun "$v" off NCCLGUARD_LOG=info "$e" -- python "$T/consumer.py" "$PROGS/libconsumer.so"
    if [ "$(rc_of off)" != 0 ] || ! has "$T/off.std" '^GUARD_MAPPED False$' || ! has "$T/off.std" '^MODULE False$' \
       || has "$T/off.out" 'NCCLGUARD' || ! has "$T/off.std" 'consumer: RESULT ok'; then
      ok=0; fail "pth-inactive-$k" "$e: $(tail -5 "$T/off.out")"
    fi
  done
  [ $ok = 1 ] && pass "pth-inactive-$k"
  # a setting that is wrong at interpreter start (NCCLGUARD_STRICT, the default; NCCLGUARD=maybe too: never
  # unguarded unnoticed) stops no program: one line each on stderr, and the program runs; the NCCL job it
  # would guard is refused at its communicator (ncclInvalidUsage, reason=config_refused, the line named), a
  # program without NCCL ends as without ncclguard; `import ncclguard` still refuses to start (status 2)
  ok=1
  for c in "NCCLGUARD=maybe|NCCLGUARD=maybe is not valid" "NCCLGUARD=1 NCCLGUARD_TIMOUT=5|NCCLGUARD_TIMOUT is not an ncclguard variable (did you mean NCCLGUARD_TIMEOUT?)" \
           "NCCLGUARD=1 NCCLGUARD_TIMEOUT=abc|NCCLGUARD_TIMEOUT=abc is not valid"; do
    # shellcheck disable=SC2086
    vrun "$v" bad ${c%%|*} -- python "$T/consumer.py" "$PROGS/libconsumer.so"
    # shellcheck disable=SC2086
    vrun "$v" nonccl ${c%%|*} -- python -c 'print("hello")'
    if [ "$(rc_of bad)" = 0 ] || [ "$(rc_of bad)" = 2 ] || ! has "$T/bad.std" '^GUARD_MAPPED True$' \
       || ! grep -qF "ncclguard: ${c#*|}" "$T/bad.err" \
       || ! has "$T/bad.err" 'this program runs, its NCCL communicators are refused \(NCCLGUARD_STRICT=0: warn and run\)$' \
       || ! has "$T/bad.err" 'NCCLGUARD WARN fn=ncclCommInit[A-Za-z]* .*result=ncclInvalidUsage .*reason=config_refused' \
       || ! grep 'reason=config_refused' "$T/bad.err" | grep -qF "${c#*|}" \
       || [ "$(rc_of nonccl)" != 0 ] || [ "$(cat "$T/nonccl.std")" != hello ] || [ "$(grep -c '^ncclguard: ' "$T/nonccl.err")" != 1 ]; then
      ok=0; fail "pth-bad-setting-refuses-communicators-$k" "${c%%|*}: rc=$(rc_of bad)/$(rc_of nonccl) $(cat "$T/bad.std" "$T/bad.err" "$T/nonccl.err" | head -8)"
    fi
  done
  [ $ok = 1 ] && pass "pth-bad-setting-refuses-communicators-$k"
  vrun "$v" imp NCCLGUARD_TIMEOUT=abc -- python -c 'import ncclguard; print("started")'
  if [ "$(rc_of imp)" = 2 ] && [ ! -s "$T/imp.std" ] && has "$T/imp.err" '^ncclguard: NCCLGUARD_TIMEOUT=abc is not valid.*not started'; then
    pass "import-bad-setting-refused-$k"
  else fail "import-bad-setting-refused-$k" "rc=$(rc_of imp) $(cat "$T/imp.std" "$T/imp.err" | head -3)"; fi
  vrun "$v" bad NCCLGUARD_STRICT=0 NCCLGUARD=maybe -- python "$T/consumer.py" "$PROGS/libconsumer.so"
  if [ "$(rc_of bad)" = 0 ] && has "$T/bad.std" '^GUARD_MAPPED False$' && [ "$(wc -l <"$T/bad.err")" = 1 ] \
     && has "$T/bad.err" 'NCCLGUARD WARN fn=python.activate msg="NCCLGUARD=maybe is not valid'; then
    pass "pth-bad-value-not-strict-warns-$k"
  else fail "pth-bad-value-not-strict-warns-$k" "$(cat "$T/bad.err")"; fi

  # import ncclguard as the first line of the script
  vrun "$v" first NCCLGUARD_LOG=info -- python "$T/first_line.py" "$PROGS/libconsumer.so"
  if [ "$(rc_of first)" = 0 ] && has "$T/first.std" '^GUARD_MAPPED True$' \
     && has "$T/first.out" 'NCCLGUARD INFO fn=ncclCommWindowRegister .*decision=register reason=ok'; then
    pass "import-first-line-$k"
  else fail "import-first-line-$k" "rc=$(rc_of first) $(tail -6 "$T/first.out")"; fi

  # NCCL already loaded: one line, nothing loaded, nothing exported
  vrun "$v" late -- python "$T/late.py"
  if [ "$(rc_of late)" = 0 ] && [ "$(wc -l <"$T/late.err")" = 1 ] \
     && has "$T/late.err" 'NCCLGUARD WARN fn=python.activate msg="not turned on: NCCL is already loaded in this process \(.*libnccl.so.2\)' \
     && has "$T/late.std" '^STATE nccl_already_loaded$' && has "$T/late.std" '^GUARD_MAPPED False$' \
     && has "$T/late.std" '^ENV_UNCHANGED True$'; then
    pass "nccl-already-loaded-one-line-$k"
  else fail "nccl-already-loaded-one-line-$k" "rc=$(rc_of late) $(cat "$T/late.out")"; fi

  # children of a process turned on by import: a shell has it preloaded; a spawned Python child has
  # it once (preloaded, not loaded again) and the PyTorch hook installed
  vrun "$v" kids -- python "$T/children.py"
  if [ "$(rc_of kids)" = 0 ] && has "$T/kids.std" '^SH_MAPPED True$' && has "$T/kids.std" "^SPAWN \('preloaded', True, 1\)$" \
     && has "$T/kids.std" '^PARENT loaded$'; then
    pass "children-inherit-$k"
  else fail "children-inherit-$k" "rc=$(rc_of kids) $(tail -5 "$T/kids.out")"; fi

  # the launcher from the package: the packaged library and hook directory; python -m ncclguard
  vrun "$v" penv -- ncclguard-run --print-env
  vrun "$v" hook -- ncclguard-run python -c 'import ncclguard_hook, sitecustomize; print(ncclguard_hook._installed, sitecustomize.__file__)'
  vrun "$v" pm -- python -m ncclguard sh -c 'echo "$LD_PRELOAD"'
  vrun "$v" pinfo -- python -m ncclguard
  vrun "$v" pinfo1 NCCLGUARD=1 -- python -m ncclguard
  if [ "$(cat "$T/penv.std")" = "LD_PRELOAD=$lib
PYTHONPATH=$site/ncclguard/bin/python" ] && has "$T/hook.std" "^True $site/ncclguard/bin/python/sitecustomize.py$" \
     && [ "$(cat "$T/pm.std")" = "$lib" ] && has "$T/pinfo.std" "^ncclguard $VERSION " && has "$T/pinfo.std" "^library: +$lib$" \
     && has "$T/pinfo.std" '^on here: +no: python -m ncclguard does not turn it on in its own interpreter$' \
     && has "$T/pinfo1.std" '^on here: +no: ' \
     && has "$T/pinfo1.std" "^NCCLGUARD: NCCLGUARD=1: every other Python program of this environment starts with ncclguard on \\($site/ncclguard.pth\\)$"; then
    pass "launcher-and-python-m-$k"
  else fail "launcher-and-python-m-$k" "$(cat "$T/penv.out" "$T/hook.out" "$T/pm.out" "$T/pinfo.out" "$T/pinfo1.std")"; fi

  # the documentation the tools' --help names is installed (python -m ncclguard --docs), and the
  # metadata's description has no relative link (the package index could not follow one)
  vrun "$v" pdocs -- python -m ncclguard --docs
  d=$(cat "$T/pdocs.std")
  meta=$(ls -d "$site"/ncclguard-*.dist-info 2>/dev/null | head -1)/METADATA
  rel=$(sed -n '/^$/,$p' "$meta" 2>/dev/null | grep -oE '\]\([^)[:space:]]+\)' | grep -vE '^\]\((https?:|mailto:|#)' | head -3)
  if [ "$d" = "$site/ncclguard/docs" ] && [ -f "$d/tools/README.md" ] && [ -f "$d/docs/NCCL.md" ] \
     && [ -f "$d/docs/DESIGN.md" ] && [ -f "$d/tools/python/README.md" ] && [ -f "$d/README.md" ] \
     && [ -f "$meta" ] && grep -q 'python -m ncclguard --docs' "$meta" && [ -z "$rel" ]; then
    pass "docs-installed-$k"
  else fail "docs-installed-$k" "docs '$d': $(ls "$d" 2>&1 | tr '\n' ' '); metadata $meta; relative links: $rel"; fi

  # every relative link of an installed page resolves inside the installed documentation (the wheel
  # ships what its pages link: the GPU results, the test suite's overview)
  links=$("$PY" - "$d" <<'PY'
import os, re, sys
root = os.path.realpath(sys.argv[1])
def strip_code(text):
    text = re.sub(r"(?ms)^```.*?^```[^\n]*$", "", text)
    return re.sub(r"`[^`\n]*`", "", text)
n, bad = 0, []
for top, _, files in os.walk(root):
    for f in files:
        if not f.endswith(".md"):
            continue
        src = os.path.join(top, f)
        for t in re.findall(r"\]\(([^)\s]+)\)", strip_code(open(src, encoding="utf-8").read())):
            if re.match(r"[a-z][a-z0-9+.-]*:", t) or t.startswith("#"):
                continue
            n += 1
            full = os.path.realpath(os.path.join(top, t.partition("#")[0]))
            if not (full == root or full.startswith(root + os.sep)) or not os.path.exists(full):
                bad.append("%s -> %s" % (os.path.relpath(src, root), t))
print("n=%d" % n)
print("\n".join(bad[:5]))
PY
)
  nlinks=$(echo "$links" | sed -n 's/^n=//p'); badlinks=$(echo "$links" | grep -v '^n=' | grep .)
  if [ "${nlinks:-0}" -gt 50 ] && [ -z "$badlinks" ]; then pass "docs-links-inside-package-$k ($nlinks links)"
  else fail "docs-links-inside-package-$k" "n=$nlinks; not in the package: $(echo "$badlinks" | tr '\n' '|')"; fi

  # issue 21: python -m ncclguard --help shows its own options (--library-path), then the launcher's
  vrun "$v" phelp -- python -m ncclguard --help
  if [ "$(rc_of phelp)" = 0 ] && has "$T/phelp.std" '^Usage: python -m ncclguard ' && has "$T/phelp.std" '^ +--library-path ' \
     && has "$T/phelp.std" '^Usage: ncclguard-run ' && has "$T/phelp.std" '^ +-d, --log-dir DIR ' && [ ! -s "$T/phelp.err" ]; then
    pass "python-m-help-$k"
  else fail "python-m-help-$k" "rc=$(rc_of phelp) $(head -5 "$T/phelp.out" | tr '\n' '|')"; fi

  # pip uninstall leaves nothing behind
  clean "$v/bin/pip" uninstall -y ncclguard >"$T/$k.uninstall" 2>&1
  (cd "$v" && find . | sort) >"$T/$k.after"
  if diff "$T/$k.before" "$T/$k.after" >"$T/$k.diff"; then pass "uninstall-clean-$k"
  else fail "uninstall-clean-$k" "left behind: $(grep '^>' "$T/$k.diff" | head -5 | tr '\n' ' ')"; fi
}

check_venv wheel "$WHEEL"
check_venv sdist "$SDIST"   # built at install time with the system C compiler

# ------------------------------------------------------------------ the build's one-line errors
clean "$PY" -m venv "$T/venv-err" >/dev/null 2>&1
clean CC=/nonexistent/cc timeout -k 5 300 "$T/venv-err/bin/pip" install "$SDIST" >"$T/nocc.out" 2>&1; rc1=$?
clean CC="cc -nostdinc" timeout -k 5 300 "$T/venv-err/bin/pip" install "$SDIST" >"$T/nout.out" 2>&1; rc2=$?
if [ $rc1 != 0 ] && [ "$(count "$T/nocc.out" 'ncclguard:')" = 1 ] \
   && has "$T/nocc.out" 'error: ncclguard: no C compiler \(/nonexistent/cc\) found: .*apt-get install build-essential'; then
  pass build-error-no-compiler
else fail build-error-no-compiler "rc=$rc1 $(grep -E 'ncclguard|error' "$T/nocc.out" | head -5)"; fi
if [ $rc2 != 0 ] && [ "$(count "$T/nout.out" 'ncclguard:')" = 1 ] \
   && has "$T/nout.out" 'error: ncclguard: uthash.h not found: .*apt-get install uthash-dev'; then
  pass build-error-no-uthash
else fail build-error-no-uthash "rc=$rc2 $(grep -E 'ncclguard|error' "$T/nout.out" | head -5)"; fi
