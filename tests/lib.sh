# Sourced by every tests/t_*.sh. Each case prints exactly one line: "ok NAME" or "FAIL NAME: why".
# Variables set by tests/run: NG_ROOT (repo), B (build dir), SHIM (libncclguard.so),
# FAKE (dir holding the fake libcuda.so.1, libcudart.so.13, libnccl.so.2), PROGS (consumer programs),
# T (a scratch dir private to this script), NG_TIMEOUT (seconds before a case counts as a hang).
set -u
: "${NG_TIMEOUT:=30}"
T=$(mktemp -d "${TMPDIR:-/tmp}/ngt.XXXXXX")
trap 'rm -rf "$T"' EXIT

pass() { echo "ok $1"; mm_note "$1"; }
fail() { n=$1; shift; echo "FAIL $n: $*"; mm_note "$n"; }
# mm_note NAME: after a case's result, "# mismatch NAME: <line>" for the first line the fake NCCL's
# collective-matching checker added to FAKE_NCCL_MISMATCH_FILE since the previous result (tests/run
# sets the file per script and fails the script when it is not empty; tests/runlib.sh)
NG_MM_SEEN=0
mm_note() {
  [ -n "${FAKE_NCCL_MISMATCH_FILE:-}" ] && [ -s "$FAKE_NCCL_MISMATCH_FILE" ] || return 0
  mm_n=$(wc -l <"$FAKE_NCCL_MISMATCH_FILE")
  [ "$mm_n" -gt "$NG_MM_SEEN" ] || return 0
  echo "# mismatch $1: $(sed -n "$((NG_MM_SEEN + 1))p" "$FAKE_NCCL_MISMATCH_FILE")"
  NG_MM_SEEN=$mm_n
}

# check NAME CMD...: passes when CMD exits 0; on failure shows the tail of $T/last.log if any
check() {
  n=$1; shift
  if "$@"; then pass "$n"; else fail "$n" "command failed: $*"; fi
}

# fake_run CMD...: run CMD against the fake CUDA/NCCL with ncclguard preloaded, bounded by NG_TIMEOUT.
# Output goes to stdout/stderr; the exit status is CMD's (124 = hang).
fake_run() {
  env LD_LIBRARY_PATH="$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" \
    timeout -k 2 "$NG_TIMEOUT" "$@"
}
# bare_run CMD...: the same without ncclguard (what NCCL alone does).
bare_run() {
  env LD_LIBRARY_PATH="$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout -k 2 "$NG_TIMEOUT" "$@"
}
# crashed RC: the exit status of a process killed by a signal; under a sanitizer build the
# sanitizer catches the fault first and exits 99 (ASan) or 98 (UBSan) instead (tests/run).
crashed() {
  [ "$1" -ge 128 ] && return 0
  case "${NG_VARIANT:-plain}:$1" in asan:99|ubsan:98) return 0 ;; esac
  return 1
}
# has FILE PATTERN: grep -E quietly
has() { grep -Eq -- "$2" "$1"; }
