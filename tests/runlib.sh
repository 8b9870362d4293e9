# Sourced by tests/run (and tests/t_fake.sh, which tests it): running one test script.
#
# run_script VARIANT SCRIPT: runs SCRIPT with sh, its stdout and stderr together on stdout as they come,
# "ok"/"FAIL"/"# skip" lines tagged with [VARIANT]. FAKE_NCCL_MISMATCH_FILE points at a fresh file for
# the script (the fake NCCL's collective-matching checker, tests/fake/README.md), so that every
# command of the script that runs against the fake records its mismatches there. Afterwards:
#   a non-zero exit status   -> "FAIL [VARIANT] SCRIPT: exited with status N"
#   a non-empty mismatch file -> "FAIL [VARIANT] SCRIPT: collective mismatch: <its first line>"
# pass/fail (tests/lib.sh) follow a case's result line with "# mismatch NAME: <first new line>" when
# the file grew since the previous result (the case's commands recorded it), shown here as
#   "# mismatch [VARIANT] SCRIPT case NAME: <line>" (informational).
# A script that produces a mismatch on purpose points FAKE_NCCL_MISMATCH_FILE at a file of its own
# for that command. Returns 0 when neither happened.
run_script() {
  rs_san=$1; rs_t=$2; rs_name=$(basename "$rs_t")
  rs_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ngrun.XXXXXX") || return 2
  : >"$rs_tmp/mismatch"
  { FAKE_NCCL_MISMATCH_FILE="$rs_tmp/mismatch" sh "$rs_t" 2>&1; echo $? >"$rs_tmp/rc"; } \
    | sed "s/^\(ok\|FAIL\) /\1 [$rs_san] /; s/^# skip /# skip [$rs_san] /; s/^# mismatch /# mismatch [$rs_san] $rs_name case /"
  rs_rc=$(cat "$rs_tmp/rc" 2>/dev/null || echo "?")
  rs_bad=0
  if [ "$rs_rc" != 0 ]; then echo "FAIL [$rs_san] $rs_name: exited with status $rs_rc"; rs_bad=1; fi
  if [ -s "$rs_tmp/mismatch" ]; then
    echo "FAIL [$rs_san] $rs_name: collective mismatch: $(head -n 1 "$rs_tmp/mismatch")"; rs_bad=1
  fi
  rm -rf "$rs_tmp"
  return $rs_bad
}
