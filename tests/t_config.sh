#!/bin/sh
# The table of NCCLGUARD_* variables (shim/vars.def) and its readers: the library, ncclguard-doctor,
# ncclguard-run and the Python hook accept and refuse the same values; docs/configuration.md's tables
# are the table's; the examples of issue 13.
. "$(dirname "$0")/lib.sh"

RUN="$B/ncclguard-run"
DOC="$B/ncclguard-doctor"; export DOC
PY=${NG_PYTHON:-python3}
clean_env() { env -i PATH="$PATH" HOME="$T" "$@"; }
# doc ENV...: the doctor's lines about NCCLGUARD_* variables (no GPU, no NCCL, no Python needed)
doc() { clean_env LD_LIBRARY_PATH="$T/none" "$@" timeout 60 "$DOC" --no-python 2>&1 | grep -E '^(OK|WARN|FAIL) +env\.(NCCLGUARD_|ncclguard)'; }

# ---- docs/configuration.md's two tables are generated from the table (make docs) ----
CONF="$NG_ROOT/docs/configuration.md"
if "$B/genvars" --readme "$CONF" >"$T/configuration.md" && cmp -s "$T/configuration.md" "$CONF"; then
  pass config-doc-tables
else fail config-doc-tables "docs/configuration.md differs from the table: run 'make docs' ($(diff "$CONF" "$T/configuration.md" | head -4 | tr '\n' '|'))"; fi

# ---- issue 13: variables the library honours are known to the doctor, with the library's verdict ----
for v in NCCLGUARD_PREFLIGHT=0 NCCLGUARD_CAPTURE=degrade NCCLGUARD_LOG_MAX_MB=10 NCCLGUARD_TIMEOUT=0.5; do
  out=$(doc "$v")
  if echo "$out" | grep -Eq '^OK +env\.ncclguard +1 NCCLGUARD_\* variable set, all valid$'; then pass "config-doctor-accepts ($v)"
  else fail "config-doctor-accepts ($v)" "$out"; fi
done
for v in NCCLGUARD_TIMEOUT=0 NCCLGUARD_RETRIES=101; do
  out=$(doc "$v")
  if echo "$out" | grep -Eq "^FAIL +env\.${v%%=*} +$v: not valid \\(expected "; then pass "config-doctor-refuses ($v)"
  else fail "config-doctor-refuses ($v)" "$out"; fi
done
# the fix text names what really lists the variables, and that list is the library's
out=$(doc NCCLGUARD_RETRYS=3)
lib=$(env LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_DUMP_CONFIG=1 /bin/true 2>&1 | grep -o 'NCCLGUARD_[A-Z_]*=' | tr -d = | sort)
listed=$("$DOC" --vars | grep -o '^NCCLGUARD_[A-Z_]*' | sort)
missing=$(printf '%s\n' "$lib" | while read -r n; do printf '%s\n' "$listed" | grep -qx "$n" || echo "$n"; done)
if echo "$out" | grep -q 'fix: check the spelling (ncclguard-doctor --vars lists the variables)' && [ -n "$lib" ] && [ -z "$missing" ]; then
  pass config-doctor-vars-list
else fail config-doctor-vars-list "fix: $(echo "$out" | grep -o 'fix: .*') / not in --vars: $missing"; fi

# ---- issue 13: the launcher refuses a bad value with status 2 and one line, before running anything ----
out=$(clean_env "$RUN" --timeout 0 -- touch "$T/ran" 2>&1); rc=$?
if [ $rc = 2 ] && [ ! -e "$T/ran" ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "^ncclguard-run: option --timeout: '0' is not valid"; then
  pass config-run-timeout-0
else fail config-run-timeout-0 "rc=$rc: $out"; fi
out=$(clean_env "$RUN" --json=yes true 2>&1); rc=$?
out2=$(clean_env "$RUN" --timeout 2>&1); rc2=$?
if [ $rc = 2 ] && [ $rc2 = 2 ] && echo "$out" | grep -q 'takes no value' && echo "$out2" | grep -q 'needs an argument'; then pass config-run-usage
else fail config-run-usage "rc=$rc/$rc2: $out / $out2"; fi
# the launcher checks the ncclguard variables of its environment as it checks its options: a value
# that is not valid is refused before anything runs (--print-env too), status 2 and one line naming
# the variable, the value and what is accepted
bools='1/0, true/false, yes/no or on/off'
for c in "NCCLGUARD_ON_FAILURE=eror|degrade|error" "NCCLGUARD_TIMEOUT=abc|a number in [0.001, 10000000]" \
         "NCCLGUARD_LOG=verbose|off|warn|info|trace" "NCCLGUARD_PYHOOK=zzz|$bools" "NCCLGUARD=maybe|$bools"; do
  v=${c%%|*} n=${c%%=*}; val=${v#*=}
  rm -f "$T/ran"
  out=$(clean_env "$v" "$RUN" touch "$T/ran" 2>&1); rc=$?
  out2=$(clean_env "$v" "$RUN" --print-env 2>&1); rc2=$?
  want="ncclguard-run: environment: $n='$val' is not valid (expected ${c#*|}); not run (NCCLGUARD_STRICT=0: warn and run)"
  if [ $rc = 2 ] && [ ! -e "$T/ran" ] && [ "$out" = "$want" ] && [ $rc2 = 2 ] && [ "$out2" = "$want" ]; then pass "config-run-env-refused ($v)"
  else fail "config-run-env-refused ($v)" "rc=$rc/$rc2 (want 2/2): '$out' / '$out2'"; fi
done
# (these two run a program under the launcher, which preloads the library alone: under a sanitizer variant
# its runtime would have to come first, so the plain variant runs them)
if [ "${NG_VARIANT:-plain}" = plain ]; then
# a variable an option sets is not checked (the option's value replaces it); valid ones pass silently
out=$(clean_env NCCLGUARD_LOG=verbose "$RUN" -l info sh -c 'echo "$NCCLGUARD_LOG"' 2>&1); rc=$?
out2=$(clean_env NCCLGUARD_LOG=INFO NCCLGUARD_TIMEOUT=1e3 NCCLGUARD=yes NCCLGUARD_PYHOOK=Off "$RUN" true 2>&1); rc2=$?
if [ $rc = 0 ] && [ "$out" = info ] && [ $rc2 = 0 ] && [ -z "$out2" ]; then pass config-run-env-valid-and-overridden
else fail config-run-env-valid-and-overridden "rc=$rc/$rc2: '$out' / '$out2'"; fi
# an unknown NCCLGUARD_* name (a typo) is refused under NCCLGUARD_STRICT (the default): one line naming
# the closest variable, status 2, nothing run; NCCLGUARD_STRICT=0 or --no-strict: a warning, and it runs
ok=1 msg=""
for c in NCCLGUARD_TIMOUT=NCCLGUARD_TIMEOUT NCCLGUARD_TIMEOT=NCCLGUARD_TIMEOUT NCCLGUARD_ONFAILURE=NCCLGUARD_ON_FAILURE NCCLGUARD_pyhook=NCCLGUARD_PYHOOK; do
  n=${c%%=*}
  rm -f "$T/ran"
  out=$(clean_env "$n=5" "$RUN" touch "$T/ran" 2>&1); rc=$?
  want="ncclguard-run: environment: $n is not an ncclguard variable (did you mean ${c#*=}?); not run (NCCLGUARD_STRICT=0: warn and run)"
  [ $rc = 2 ] && [ ! -e "$T/ran" ] && [ "$out" = "$want" ] || { ok=0; msg="$msg strict: rc=$rc '$out'"; }
  for how in "NCCLGUARD_STRICT=0 $RUN" "NCCLGUARD_STRICT=off $RUN" "$RUN --no-strict"; do
    rm -f "$T/ran"
    # shellcheck disable=SC2086
    out=$(clean_env "$n=5" $how sh -c 'touch "$0"; env | grep -c "^NCCLGUARD_[A-Za-z]*=5"' "$T/ran" 2>&1); rc=$?
    want="ncclguard-run: warning: environment: $n is not an ncclguard variable (did you mean ${c#*=}?), ignored
0"
    [ -e "$T/ran" ] && [ "$out" = "$want" ] || { ok=0; msg="$msg $how: rc=$rc '$out'"; }
  done
done
if [ $ok = 1 ]; then pass config-run-env-unknown-refused; else fail config-run-env-unknown-refused "$msg"; fi
# not strict, a bad value is a warning and passed on: the library says it and uses the default
out=$(clean_env NCCLGUARD_STRICT=0 NCCLGUARD_TIMEOUT=abc "$RUN" sh -c 'echo "ran $NCCLGUARD_TIMEOUT"' 2>&1); rc=$?
if [ $rc = 0 ] && echo "$out" | grep -qx "ncclguard-run: warning: environment: NCCLGUARD_TIMEOUT='abc' is not valid (expected a number in \[0.001, 10000000\]); passed on (the library warns and uses the default)" \
   && echo "$out" | grep -qx 'ran abc'; then pass config-run-not-strict-bad-value-warns
else fail config-run-not-strict-bad-value-warns "rc=$rc: $(echo "$out" | tr '\n' '|')"; fi
# NCCLGUARD_STRICT itself not valid: refused (strict stays on)
out=$(clean_env NCCLGUARD_STRICT=maybe NCCLGUARD_TIMOUT=1 "$RUN" true 2>&1); rc=$?
if [ $rc = 2 ] && echo "$out" | grep -qx "ncclguard-run: environment: NCCLGUARD_STRICT='maybe' is not valid (expected 1/0, true/false, yes/no or on/off); not run (NCCLGUARD_STRICT=0: warn and run)" \
   && echo "$out" | grep -q 'NCCLGUARD_TIMOUT is not an ncclguard variable (did you mean NCCLGUARD_TIMEOUT?); not run'; then pass config-run-strict-bad-is-strict
else fail config-run-strict-bad-is-strict "rc=$rc: $(echo "$out" | tr '\n' '|')"; fi
else echo "# skip config-run-env-valid-and-overridden, config-run-env-unknown-refused, config-run-not-strict-bad-value-warns, config-run-strict-bad-is-strict: the plain variant runs them"; fi

# NCCLGUARD (the Python package's switch) is a variable of the table: the doctor checks it (status 2
# when not valid, even with --config-only), --vars lists it, docs/configuration.md's table has it
out=$(clean_env LD_LIBRARY_PATH="$T/none" NCCLGUARD=maybe timeout 60 "$DOC" --config-only 2>&1); rc=$?
out2=$(clean_env LD_LIBRARY_PATH="$T/none" NCCLGUARD=1 timeout 60 "$DOC" --config-only 2>&1); rc2=$?
if [ $rc = 2 ] && echo "$out" | grep -Eq "^FAIL +env\.NCCLGUARD +NCCLGUARD=maybe: not valid \(expected 1/0, true/false" \
   && [ $rc2 = 0 ] && echo "$out2" | grep -Eq '^OK +env\.ncclguard +1 NCCLGUARD_\* variable set, all valid$' \
   && "$DOC" --vars | grep -Eq '^NCCLGUARD +1/0, true/false, yes/no or on/off \(default: off; import ncclguard turns it on\) \[Python package\]$' \
   && grep -q '^| `NCCLGUARD` | boolean | off; import ncclguard turns it on | python | ' "$CONF"; then pass config-ncclguard-switch
else fail config-ncclguard-switch "rc=$rc/$rc2 (want 2/0): $(echo "$out" "$out2" | grep env | tr '\n' '|')"; fi

# every variable with an option is in --help with its values and default
help=$("$RUN" --help 2>&1)
bad=""
for n in $("$DOC" --vars | grep -o '^NCCLGUARD_[A-Z_]*'); do echo "$help" | grep -q "$n" || bad="$bad $n"; done
if [ -z "$bad" ] && echo "$help" | grep -q 'NCCLGUARD_TIMEOUT: number 0.001..10000000 (default 600)'; then pass config-run-help
else fail config-run-help "not in --help:$bad"; fi

# ---- one verdict per value, whoever reads it: library, doctor, launcher, Python hook ----
# Values tried on every variable that is not a path; each reader writes "NAME<TAB>VALUE<TAB>ok|bad".
vals='0
1
-1
+1
 1
1 
007
1.5
.5
5.
1e3
1E-2
0x10
inf
nan
100
101
0.001
0.0009
10000000
10000001
99999999999999999999
1073741824
1073741825
yes
OFF
True
maybe
warn
INFO
trace
Degrade
relaxed
json
auto
never
error
'
# names: every variable that is not a path; nonlib: those of them the library does not read
# (ncclguard-run's, the Python package's NCCLGUARD), which the doctor judges with the library's reader
"$DOC" --vars --json | "$PY" -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l)
    if d["values"] != "path" and d["name"] != "NCCLGUARD_DUMP_CONFIG": print(d["name"], d["reader"])' >"$T/names"
names=$(cut -d' ' -f1 "$T/names" | tr '\n' ' ')
nonlib=$(awk '$2 != "lib" { print $1 }' "$T/names" | tr '\n' ' ')
tab=$(printf '\t')
: >"$T/lib.v"; : >"$T/doc.v"; : >"$T/run.v"; : >"$T/env.v"
printf '%s' "$vals" >"$T/vals"
while IFS= read -r val; do
  # the library: at most 8 warnings a process, so the variables in groups of 6; NCCLGUARD_LOG alone
  # (a valid "off" silences the warnings about the others)
  set -- NCCLGUARD_LOG $(printf '%s\n' $names | grep -vx NCCLGUARD_LOG)
  while [ $# -gt 0 ]; do
    grp=""; i=0
    while [ $# -gt 0 ] && [ $i -lt 6 ]; do
      [ "$1" = NCCLGUARD_LOG ] && [ $i -gt 0 ] && break
      grp="$grp $1"; shift; i=$((i + 1))
      [ "${grp# }" = NCCLGUARD_LOG ] && break
    done
    # shellcheck disable=SC2086
    out=$(for n in $grp; do printf '%s=%s\0' "$n" "$val"; done | \
      xargs -0 sh -c 'exec env LD_PRELOAD="$0" NCCLGUARD_DUMP_CONFIG=1 NCCLGUARD_LOG_FILE= "$@" /bin/true' "${NG_PRELOAD_PREFIX:-}$SHIM" 2>&1)
    for n in $grp; do
      case " $nonlib " in *" $n "*) continue ;; esac # not the library's
      if printf '%s\n' "$out" | grep -qF "$n=$val is not valid"; then v=bad; else v=ok; fi
      printf '%s\t%s\t%s\n' "$n" "$val" "$v" >>"$T/lib.v"
    done
  done
  # the doctor, all variables at once
  out=$(for n in $names; do printf '%s=%s\0' "$n" "$val"; done | \
    xargs -0 sh -c 'exec env -i PATH="$PATH" HOME="$0" LD_LIBRARY_PATH="$0/none" "$@" timeout 60 "$DOC" --no-python' "$T" 2>&1)
  for n in $names; do
    if printf '%s\n' "$out" | grep -Eq "^(WARN|FAIL) +env\.$n +"; then v=bad; else v=ok; fi
    printf '%s\t%s\t%s\n' "$n" "$val" "$v" >>"$T/doc.v"
  done
  # the launcher, through each option that takes a value
  for opt in $("$RUN" --help | sed -n 's/^ *\(-., \)\{0,1\}\(--[a-z-]*\) [A-Z]*  *\(NCCLGUARD_[A-Z_]*\): .*/\2=\3/p'); do
    n=${opt#*=}; o=${opt%%=*}
    case " $names " in *" $n "*) ;; *) continue ;; esac
    if clean_env "$RUN" --lib "$SHIM" "$o" "$val" --print-env >/dev/null 2>&1; then v=ok; else v=bad; fi
    printf '%s\t%s\t%s\n' "$n" "$val" "$v" >>"$T/run.v"
  done
  # the launcher, through its environment: every variable at once, one refusal line each
  out=$(for n in $names; do printf '%s=%s\0' "$n" "$val"; done | \
    xargs -0 sh -c 'r=$1 l=$2; shift 2; exec env -i PATH="$PATH" HOME="$0" "$@" "$r" --lib "$l" --print-env' "$T" "$RUN" "$SHIM" 2>&1 >/dev/null)
  for n in $names; do
    if printf '%s\n' "$out" | grep -Eq "^ncclguard-run: (warning: )?environment: $n='"; then v=bad; else v=ok; fi
    printf '%s\t%s\t%s\n' "$n" "$val" "$v" >>"$T/env.v"
  done
done <"$T/vals"
# the Python hook's reader
PYTHONPATH="$NG_ROOT/tools/python" "$PY" - "$T/vals" $names >"$T/py.v" 2>&1 <<'EOF'
import sys
from ncclguard_hook import _config
vals = open(sys.argv[1]).read().split("\n")[:-1]
for v in vals:
    for n in sys.argv[2:]:
        print("%s\t%s\t%s" % (n, v, "bad" if _config.get(n, {n: v})[1] else "ok"))
EOF
# compare each reader with the library (the launcher's options on the variables they set); on the
# variables the library does not read, with the doctor's verdict (the library's reader, vars.c)
awk -F'\t' -v nonlib=" $nonlib " 'index(nonlib, " " $1 " ")' "$T/doc.v" | cat "$T/lib.v" - | sort >"$T/ref.s"
ok=1
for r in doc run env py; do
  sort "$T/$r.v" >"$T/$r.s"
  case $r in
    run) awk -F'\t' 'NR == FNR { seen[$1] = 1; next } ($1 in seen)' "$T/run.s" "$T/ref.s" | sort >"$T/libr.s" ;;
    *) cp "$T/ref.s" "$T/libr.s" ;;
  esac
  if ! cmp -s "$T/libr.s" "$T/$r.s"; then ok=0; echo "# $r differs from the library: $(diff "$T/libr.s" "$T/$r.s" | grep '^[<>]' | head -6 | tr '\n' '|')"; fi
done
nlib=$(wc -l <"$T/lib.v"); nrun=$(wc -l <"$T/run.v"); nenv=$(wc -l <"$T/env.v"); nbad=$(grep -c 'bad$' "$T/lib.v")
if [ $ok = 1 ] && [ "$nlib" -gt 300 ] && [ "$nrun" -gt 100 ] && [ "$nbad" -gt 100 ] && [ "$nenv" -gt "$nlib" ] \
   && grep -q "^NCCLGUARD${tab}maybe${tab}bad$" "$T/env.v" && grep -q "^NCCLGUARD_PYHOOK${tab}OFF${tab}ok$" "$T/env.v"; then
  pass "config-one-verdict ($nlib library verdicts, $nbad refusals; doctor, launcher (options $nrun, environment $nenv), Python agree)"
else fail config-one-verdict "lib $nlib run $nrun env $nenv bad $nbad; not the library's: $nonlib"; fi

# the Python hook's booleans: the table's words in any case, and a bad value warns with the library's text
out=$(PYTHONPATH="$NG_ROOT/tools/python" "$PY" -c 'from ncclguard_hook import _config as c
print(c.get("NCCLGUARD_PYHOOK", {"NCCLGUARD_PYHOOK": "oFf"}), c.get("NCCLGUARD_PYHOOK", {"NCCLGUARD_PYHOOK": " 0"}))' 2>&1)
if [ "$out" = "(False, None) (True, 'NCCLGUARD_PYHOOK= 0 is not valid (expected 1/0, true/false, yes/no or on/off); using the default 1')" ]; then
  pass config-python-bool
else fail config-python-bool "$out"; fi

# the Python package's switch (NCCLGUARD=1 at start through ncclguard.pth, import ncclguard) judges
# each value as the launcher does: a valid true value turns it on, a valid false one off, any other
# is one warning and off; the .pth line imports the package for every value but the false ones, so
# that the package gives that verdict (nothing stripped, any case)
printf '%s\n' '' ' 1' '1 ' 'TRUE' 'On' 'nO' '2' >>"$T/vals"
out=$(NCCLGUARD=0 PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" "$PY" - "$T/vals" "$NG_ROOT/setup.py" <<'EOF' 2>&1
import ast, os, sys
from ncclguard import _boot
pth = [n.value.value for n in ast.parse(open(sys.argv[2]).read()).body
       if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "PTH"][0]
for v in open(sys.argv[1]).read().split("\n")[:-1]:
    on, bad = _boot.switch({"NCCLGUARD": v})
    os.environ["NCCLGUARD"] = v
    imported = []
    exec(pth, {"__builtins__": {"__import__": lambda name, *a: os if name == "os" else imported.append(name) or True}})
    if bad is None:
        ok = on is not None and on == bool(imported)
    else:
        ok = on is False and bool(imported)
    print("%s\t%s\t%s" % (v, "bad" if bad else "ok", "consistent" if ok else "INCONSISTENT pth=%s on=%s" % (imported, on)))
EOF
)
runv=$(i=1; n=$(wc -l <"$T/vals"); while [ $i -le $n ]; do
  val=$(sed -n "${i}p" "$T/vals"); i=$((i + 1))
  if clean_env NCCLGUARD="$val" "$RUN" --lib "$SHIM" --print-env >/dev/null 2>&1; then echo ok; else echo bad; fi
done)
pyv=$(printf '%s\n' "$out" | cut -f2)
if [ "$pyv" = "$runv" ] && ! printf '%s\n' "$out" | grep -q INCONSISTENT && printf '%s\n' "$out" | grep -q "^maybe${tab}bad" \
   && printf '%s\n' "$out" | grep -q "^ 1${tab}bad"; then
  pass "config-python-switch-one-verdict ($(echo "$runv" | grep -c bad) of $(echo "$runv" | wc -l) values refused by both)"
else fail config-python-switch-one-verdict "python: $(printf '%s\n' "$out" | grep -v consistent$ | head -3 | tr '\n' '|') verdicts: $(printf '%s\n' "$pyv" | tr '\n' ' ') / launcher: $(printf '%s\n' "$runv" | tr '\n' ' ')"; fi

# python -m ncclguard answers whether ncclguard is on in its interpreter, and why, also under
# NCCLGUARD=1 (which turns it on for the environment's other Python programs, never for itself)
pm() { (cd "$T" && env PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" "$@" "$PY" -m ncclguard 2>&1); }
o1=$(pm NCCLGUARD=1); o2=$(pm NCCLGUARD=maybe); o3=$(pm LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM")
if echo "$o1" | grep -q '^on here: \+no: python -m ncclguard does not turn it on in its own interpreter$' \
   && echo "$o1" | grep -q '^NCCLGUARD: NCCLGUARD=1' \
   && echo "$o2" | grep -q '^NCCLGUARD: NCCLGUARD=maybe is not valid (expected 1/0, true/false, yes/no or on/off)' \
   && echo "$o3" | grep -q "^on here: \+yes: .*libncclguard.so is preloaded"; then pass python-m-ncclguard-on-here
else fail python-m-ncclguard-on-here "$(printf '%s\n--\n%s\n--\n%s' "$o1" "$o2" "$o3" | head -12 | tr '\n' '|')"; fi

# the Python route, import ncclguard (or NCCLGUARD=1): under NCCLGUARD_STRICT (the default) a bad value or
# an unknown name stops the program before the library is loaded: one line each on stderr, status 2 (also
# NCCLGUARD=maybe, which must not run unguarded unnoticed); NCCLGUARD_STRICT=0: the library, loaded, says
# each at once, before any NCCL call (plain variant: a sanitizer build needs its runtime first)
if [ "${NG_VARIANT:-plain}" = plain ]; then
  pyrun() { (cd "$T" && clean_env NCCLGUARD_LIB="$SHIM" PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" "$@" \
           "$PY" -c 'import ncclguard, sys; sys.stderr.write("state=%s\n" % ncclguard.state())' 2>&1); }
  out=$(pyrun NCCLGUARD_ON_FAILURE=eror NCCLGUARD_TIMEOT=3); rc=$?
  out2=$(pyrun NCCLGUARD=maybe); rc2=$?
  out3=$(pyrun NCCLGUARD=1 NCCLGUARD_TIMOUT=5); rc3=$?
  want='ncclguard: NCCLGUARD_ON_FAILURE=eror is not valid (expected degrade|error)
ncclguard: NCCLGUARD_TIMEOT is not an ncclguard variable (did you mean NCCLGUARD_TIMEOUT?); not started (NCCLGUARD_STRICT=0: warn and run)'
  if [ $rc = 2 ] && [ "$out" = "$want" ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] \
     && [ "$out2" = 'ncclguard: NCCLGUARD=maybe is not valid (expected 1/0, true/false, yes/no or on/off); not started (NCCLGUARD_STRICT=0: warn and run without ncclguard)' ] \
     && [ "$out3" = 'ncclguard: NCCLGUARD_TIMOUT is not an ncclguard variable (did you mean NCCLGUARD_TIMEOUT?); not started (NCCLGUARD_STRICT=0: warn and run)' ]; then
    pass config-python-import-refuses
  else fail config-python-import-refuses "rc=$rc/$rc2/$rc3 (want 2): $(printf '%s|%s|%s' "$out" "$out2" "$out3" | tr '\n' '|')"; fi
  # a source checkout used without installing (PYTHONPATH=python alone, no tools/python): the package
  # finds the table beside it and refuses the same
  out=$(cd "$T" && clean_env NCCLGUARD_LIB="$SHIM" PYTHONPATH="$NG_ROOT/python" NCCLGUARD_TIMEOUT=abc "$PY" -c 'import ncclguard' 2>&1); rc=$?
  if [ $rc = 2 ] && [ "$out" = 'ncclguard: NCCLGUARD_TIMEOUT=abc is not valid (expected a number in [0.001, 10000000]); not started (NCCLGUARD_STRICT=0: warn and run)' ]; then
    pass config-python-checkout-refuses
  else fail config-python-checkout-refuses "rc=$rc (want 2): $(echo "$out" | tr '\n' '|')"; fi
  # a log file the library could not write (it would fall back to stderr in every process) is refused as the
  # launcher refuses it: a missing directory, a kernel file system
  out=$(pyrun NCCLGUARD_LOG_FILE="$T/none/x.log"); rc=$?
  out2=$(pyrun NCCLGUARD_LOG_FILE=/proc/x.log); rc2=$?
  out3=$(pyrun NCCLGUARD_LOG_FILE="$T/x.%p.log"); rc3=$?
  if [ $rc = 2 ] && [ "$out" = "ncclguard: NCCLGUARD_LOG_FILE=$T/none/x.log: directory $T/none does not exist (create it, or use ncclguard-run --log-dir DIR, which does); not started (NCCLGUARD_STRICT=0: warn and run)" ] \
     && [ $rc2 = 2 ] && echo "$out2" | grep -q '^ncclguard: NCCLGUARD_LOG_FILE=/proc/x.log: /proc is a kernel file system' \
     && [ $rc3 = 0 ]; then
    pass config-python-log-place-refused
  else fail config-python-log-place-refused "rc=$rc/$rc2/$rc3: $(printf '%s|%s|%s' "$out" "$out2" "$out3" | tr '\n' '|')"; fi
  out=$(pyrun NCCLGUARD_STRICT=0 NCCLGUARD_ON_FAILURE=eror NCCLGUARD_TIMEOT=3)
  out2=$(pyrun NCCLGUARD_STRICT=0 NCCLGUARD=maybe); rc2=$?
  if echo "$out" | grep -q 'msg="NCCLGUARD_ON_FAILURE=eror is not valid (expected degrade|error); using the default degrade"' \
     && echo "$out" | grep -q 'msg="NCCLGUARD_TIMEOT is not an ncclguard variable, ignored (did you mean NCCLGUARD_TIMEOUT?)"' \
     && echo "$out" | grep -q '^state=loaded$' && [ "$(echo "$out" | wc -l)" = 3 ] \
     && [ $rc2 = 0 ] && echo "$out2" | grep -q '^state=off$' && echo "$out2" | grep -q 'msg="NCCLGUARD=maybe is not valid'; then
    pass config-python-not-strict-warns-at-once
  else fail config-python-not-strict-warns-at-once "$(printf '%s|%s' "$out" "$out2" | tr '\n' '|')"; fi
  # NCCLGUARD=0 turns the package off: nothing checked, the program runs
  out=$(pyrun NCCLGUARD=0 NCCLGUARD_TIMOUT=5); rc=$?
  if [ $rc = 0 ] && [ "$out" = state=off ]; then pass config-python-off-unchecked
  else fail config-python-off-unchecked "rc=$rc: $out"; fi
else echo "# skip config-python-import-refuses, config-python-not-strict-warns-at-once, config-python-off-unchecked: the plain variant runs them"; fi

# the library preloaded alone cannot refuse: it says a typo at load whatever NCCLGUARD_LOG says (off too)
out=$(env -i PATH="$PATH" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_LOG=off NCCLGUARD_TIMOUT=5 NCCLGUARD_RETRIES=x /bin/true 2>&1); rc=$?
if [ $rc = 0 ] && echo "$out" | grep -q 'WARN fn=config msg="NCCLGUARD_TIMOUT is not an ncclguard variable, ignored (did you mean NCCLGUARD_TIMEOUT?)"' \
   && echo "$out" | grep -q 'WARN fn=config msg="NCCLGUARD_RETRIES=x is not valid' && [ "$(echo "$out" | wc -l)" = 2 ]; then
  pass config-lib-says-typo-at-log-off
else fail config-lib-says-typo-at-log-off "rc=$rc: $(echo "$out" | tr '\n' '|')"; fi

# an unknown name alone (every value valid) is said at load too, before any NCCL call (one line; the
# constructor looks for unknown names, not only for bad values)
out=$(env -i PATH="$PATH" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_TIMOUT=5 /bin/true 2>&1); rc=$?
out2=$(env -i PATH="$PATH" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" NCCLGUARD_TIMEOUT=5 /bin/true 2>&1)
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c .)" = 1 ] && [ -z "$out2" ] \
   && echo "$out" | grep -q 'WARN fn=config msg="NCCLGUARD_TIMOUT is not an ncclguard variable, ignored (did you mean NCCLGUARD_TIMEOUT?)"'; then
  pass config-lib-unknown-name-alone-at-load
else fail config-lib-unknown-name-alone-at-load "rc=$rc: '$out' / valid: '$out2'"; fi

# the doctor: an unknown name is a FAIL row with the closest name (WARN under NCCLGUARD_STRICT=0)
out=$(doc NCCLGUARD_TIMOUT=5); out2=$(doc NCCLGUARD_STRICT=0 NCCLGUARD_TIMOUT=5)
if echo "$out" | grep -Eq '^FAIL +env\.NCCLGUARD_TIMOUT +NCCLGUARD_TIMOUT=5: unknown ncclguard variable \(did you mean NCCLGUARD_TIMEOUT\?\)' \
   && echo "$out2" | grep -Eq '^WARN +env\.NCCLGUARD_TIMOUT +NCCLGUARD_TIMOUT=5: unknown ncclguard variable \(did you mean NCCLGUARD_TIMEOUT\?\)'; then
  pass config-doctor-unknown-did-you-mean
else fail config-doctor-unknown-did-you-mean "$(printf '%s|%s' "$out" "$out2" | tr '\n' '|')"; fi
# the doctor: a bad value is a FAIL row either way, its fix says what the entry routes do under the rule in force
out=$(doc NCCLGUARD_TIMEOUT=abc); out2=$(doc NCCLGUARD_STRICT=0 NCCLGUARD_TIMEOUT=abc)
if echo "$out" | grep -Eq '^FAIL +env\.NCCLGUARD_TIMEOUT .*fix: fix the value or unset it \(ncclguard-run and the Python package refuse it; the library alone warns' \
   && echo "$out2" | grep -Eq '^FAIL +env\.NCCLGUARD_TIMEOUT .*fix: fix the value or unset it \(under NCCLGUARD_STRICT=0 ncclguard-run and the Python package warn and run; the library warns'; then
  pass config-doctor-bad-value-fix-follows-strict
else fail config-doctor-bad-value-fix-follows-strict "$(printf '%s|%s' "$out" "$out2" | grep env.NCCLGUARD_TIMEOUT | tr '\n' '|')"; fi
