# Unit tests of the registration policy's phases (shim/policy.c) with a stubbed agreement:
# tests/unit/policy_test.c, which prints one "ok"/"FAIL" line per case. It runs without ncclguard
# preloaded (the library's objects are linked into it) against the fake NCCL and runtime.
. "$NG_ROOT/tests/lib.sh"
U=$B/unit/policy_test
if [ ! -x "$U" ]; then
  fail policy-unit-build "$U is missing (make testbins builds it)"
  exit 0
fi
out=$(bare_run "$U" "$T" 2>"$T/stderr"); rc=$?
echo "$out" | grep -E '^(ok|FAIL) '
# a crash or a sanitizer report outside any case's line, or a case that printed no line
if [ $rc != 0 ] && ! echo "$out" | grep -q '^FAIL '; then
  fail policy-unit-run "exit $rc: $(tail -5 "$T/stderr" | tr '\n' ' ')"
fi
if grep -Eq 'ERROR: (Address|Undefined)Sanitizer|runtime error:' "$T/stderr"; then
  fail policy-unit-sanitizer "$(grep -E -m3 'ERROR:|runtime error:' "$T/stderr" | tr '\n' ' ')"
fi
