# The behaviour reference is in the repository (docs/NCCL.md, docs/PYTORCH.md, with the GPU results
# files as evidence): no tracked file cites a file outside it, every "docs/X.md §N" citation names a
# section that exists, and every results file the docs name is there.
. "$NG_ROOT/tests/lib.sh"

if ! git -C "$NG_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "# skip docs: $NG_ROOT is not a git work tree (the checks read the tracked files)"
  exit 0
fi
cd "$NG_ROOT" || exit 1

# --- no citation of a file outside the repository -------------------------------------------
# Not yet covered (being edited elsewhere):
# remove an entry once its citations point into docs/.
pending=""
excl=""
for p in $pending; do excl="$excl :(exclude)$p"; done
# ../shared/..., shared/FACTS..., and the word FACTS on its own (not NG_VOTE_FACTS or a "FACTS" label)
pat='\.\./shared|shared/FACT''S|(^|[^A-Za-z0-9_+"])FACT''S([^A-Za-z0-9_"]|$)'
# shellcheck disable=SC2086
hits=$(git grep -nIE "$pat" -- . ':(exclude)tests/t_docs.sh' $excl)
[ -z "$hits" ] && pass no-citation-outside-repo \
  || fail no-citation-outside-repo "cite docs/NCCL.md or docs/PYTORCH.md instead: $(echo "$hits" | head -5)"

# the pattern itself: it catches the forms once used, and spares the identifiers and paths in use
printf '%s\n' 'see ../shared/FACTS.md' '(FACTS 2)' 'FACTS section 1' '| behaviour | FACTS |' 'not from FACTS, kept' \
  >"$T/bad"
printf '%s\n' 'NG_VOTE_FACTS,' 'vt.v[NG_VOTE_FACTS_FIRST_BAD]' '"SYM_NO+UNKNOWN+FACTS");' '"FACTS");' \
  '--log-dir /shared/logs/job42' >"$T/good"
nbad=$(grep -cE "$pat" "$T/bad"); ngood=$(grep -cE "$pat" "$T/good")
[ "$nbad" = 5 ] && [ "$ngood" = 0 ] && pass citation-pattern || fail citation-pattern "bad=$nbad/5 good=$ngood/0"

# --- every "docs/X.md §N" names a section that exists ---------------------------------------
# Sections are "## N. Title" lines. A bare "§N" inside docs/X.md refers to X itself; outside docs/
# a "§" must follow a document name.
sections() { sed -n 's/^## \([0-9][0-9]*\)\. .*/\1/p' "$1" 2>/dev/null; }
bad=""; n=0
git grep -nIoE '(docs/[A-Za-z0-9_]+\.md )?§[0-9]+(, §[0-9]+)*' -- . ':(exclude)tests/t_docs.sh' >"$T/cites"
while IFS= read -r line; do
  loc=${line%%:*}; rest=${line#*:}; lno=${rest%%:*}; cite=${rest#*:}
  case "$cite" in
    docs/*) doc=${cite%% *} ;;
    *) case "$loc" in docs/*.md) doc=$loc ;; *) bad="$bad $loc:$lno:'$cite'(no document)"; continue ;; esac ;;
  esac
  [ -f "$doc" ] || { bad="$bad $loc:$lno:$doc(missing)"; continue; }
  have=" $(sections "$doc" | tr '\n' ' ') "
  for s in $(echo "$cite" | grep -oE '§[0-9]+' | tr -d '§'); do
    n=$((n + 1))
    case "$have" in *" $s "*) ;; *) bad="$bad $loc:$lno:$doc§$s" ;; esac
  done
done <"$T/cites"
[ -z "$bad" ] && [ "$n" -gt 0 ] && pass docs-section-citations || fail docs-section-citations "n=$n;$bad"

# the docs' sections are numbered 1, 2, ... without gaps or repeats (numbers are never reused)
bad=""
for d in docs/NCCL.md docs/PYTORCH.md; do
  want=$(sections "$d" | awk '{print NR}' | tr '\n' ' '); got=$(sections "$d" | tr '\n' ' ')
  [ -n "$got" ] && [ "$want" = "$got" ] || bad="$bad $d:[$got]"
done
[ -z "$bad" ] && pass docs-sections-numbered || fail docs-sections-numbered "$bad"

# --- the evidence the docs name is in the repository ------------------------------------------
bad=""
for f in $(grep -ohE '20[0-9]{2}-[0-9]{2}-[0-9]{2}-[A-Za-z0-9_-]+\.md' docs/NCCL.md docs/PYTORCH.md | sort -u); do
  [ -f "tests/gpu/results/$f" ] || bad="$bad $f"
done
[ -z "$bad" ] && pass docs-results-files-exist || fail docs-results-files-exist "missing in tests/gpu/results:$bad"

# --- the manual: README.md is short, carries no history, and every link resolves ----------------
size=$(wc -c <README.md)
[ "$size" -lt 16384 ] && pass readme-size || fail readme-size "README.md is $size bytes (at most 16 KB: move details to docs/)"

# no commit hashes in the README (7 to 40 hex digits with a letter and a digit; the history lives in
# CHANGELOG.md and tests/gpu/results/README.md)
hexpat='(^|[^0-9A-Za-z_])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}($|[^0-9A-Za-z_])'
hits=$(grep -nP "$hexpat" README.md)
[ -z "$hits" ] && pass readme-no-commit-hashes || fail readme-no-commit-hashes "$(echo "$hits" | head -3)"
printf '%s\n' 'at 7b7f0a6 and 21b5f9e' '(e901eaf; it was x 1.44)' 'commit c47d153.' >"$T/bad"
printf '%s\n' 'NCCL 2.28.9' 'size=0x600000000' 'comm 9e3779b97f4a7c15x' 'defaced' '10000000' 'ncclguard-0.3.0' >"$T/good"
nbad=$(grep -cP "$hexpat" "$T/bad"); ngood=$(grep -cP "$hexpat" "$T/good")
[ "$nbad" = 3 ] && [ "$ngood" = 0 ] && pass commit-hash-pattern || fail commit-hash-pattern "bad=$nbad/3 good=$ngood/0"

# every relative link of the manual resolves: the file (or directory) exists, and an anchor names a
# heading of the target (GitHub's rule: lower case, punctuation dropped, blanks to '-'). Links in
# code blocks and inline code are not links.
if command -v python3 >/dev/null 2>&1; then
  out=$(python3 - README.md docs/*.md tests/README.md tests/gpu/results/README.md <<'PY'
import os, re, sys
def strip_code(text):
    text = re.sub(r"(?ms)^```.*?^```[^\n]*$", "", text)
    return re.sub(r"`[^`\n]*`", "", text)
def slugs(path):
    out, seen = set(), {}
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(s, 0); seen[s] = n + 1
        out.add(s if n == 0 else "%s-%d" % (s, n))
    return out
bad, n = [], 0
for src in sys.argv[1:]:
    if not os.path.isfile(src):
        continue
    for target in re.findall(r"\]\(([^)\s]+)\)", strip_code(open(src, encoding="utf-8").read())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:
        n += 1
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(src), path)) if path else src
        if not os.path.exists(full):
            bad.append("%s -> %s (no such file)" % (src, target)); continue
        if anchor and full.endswith(".md") and anchor not in slugs(full):
            bad.append("%s -> %s (no such heading)" % (src, target))
print("n=%d" % n)
for b in bad:
    print(b)
PY
)
  nl=$(echo "$out" | sed -n 's/^n=//p'); rest=$(echo "$out" | grep -v '^n=')
  [ -z "$rest" ] && [ "${nl:-0}" -gt 20 ] && pass docs-links-resolve || fail docs-links-resolve "n=$nl; $(echo "$rest" | head -5 | tr '\n' '|')"
else
  echo "# skip docs-links-resolve: no python3"
fi

# every figure "x N.NNN" the README states is in a results file linked from the same paragraph
bad=""; nfig=0
awk 'BEGIN{RS=""} {gsub(/\n/," "); print}' README.md >"$T/paras"
while IFS= read -r para; do
  figs=$(echo "$para" | grep -oE 'x [0-9]+\.[0-9]{2,}' | sed 's/^x //')
  [ -n "$figs" ] || continue
  files=$(echo "$para" | grep -oE 'tests/gpu/results/[A-Za-z0-9_.-]+\.md' | sort -u)
  for f in $figs; do
    nfig=$((nfig + 1))
    found=""
    for r in $files; do [ -f "$r" ] && grep -qF "$f" "$r" && found=1; done
    [ -n "$found" ] || bad="$bad $f"
  done
done <"$T/paras"
[ -z "$bad" ] && pass readme-figures-sourced || fail readme-figures-sourced "not in a results file the paragraph links:$bad (n=$nfig)"

# the results index lists every results file
bad=""
for f in tests/gpu/results/*.md; do
  b=${f##*/}; case "$b" in README.md|TEMPLATE.md) continue ;; esac
  grep -qF "]($b)" tests/gpu/results/README.md || bad="$bad $b"
done
[ -z "$bad" ] && pass results-index-complete || fail results-index-complete "not in tests/gpu/results/README.md:$bad"

# --- the user-facing docs speak of the product: no project issue references -------------------
# "issue 19", "(issue 23)", "issues 11, 12" retell how ncclguard was built; upstream reports keep
# their repository (NVIDIA/nccl#2331, pytorch#188567, .../issues/2331). The dated records
# (tests/gpu/results/, tests/mutate/RESULTS.md, tests/bench/RESULTS.md) may keep history; every
# other Markdown file of the tree is checked (tests/fake/README.md among them).
issuepat='(?<![A-Za-z0-9_/#.-])issues? [0-9]+'
hits=$(git grep -nIiP "$issuepat" -- '*.md' ':!tests/gpu/results/*' ':!tests/mutate/RESULTS.md' \
  ':!tests/bench/RESULTS.md')
[ -z "$hits" ] && pass docs-no-issue-refs \
  || fail docs-no-issue-refs "say what changed, not which issue: $(echo "$hits" | head -5 | cut -c1-160 | tr '\n' '|')"

# the mutation check's figures have one source, tests/mutate/RESULTS.md: a doc that gives the number
# of mutations or the run's time must give that file's (the rows of its result table, its Total)
res=tests/mutate/RESULTS.md
nmut=$(awk '/^\| mutation \| suites run/ {t=1; next} t && /^\| [a-z]/ {n++} t && !/^\|/ {t=0} END {print n+0}' "$res")
tmut=$(sed -n 's/.*Total: \([0-9]* min [0-9]* s\).*/\1/p' "$res" | head -1)
bad=$(git grep -nIiE '[0-9]+ mutations|mutation[^|]*[0-9]+ min' -- '*.md' ':!tests/gpu/results/*' ":!$res" \
  ':!tests/bench/RESULTS.md' | while IFS= read -r l; do
    for n in $(echo "$l" | grep -oiE '[0-9]+ mutations' | grep -oE '^[0-9]+'); do [ "$n" = "$nmut" ] || echo "$l"; done
    for m in $(echo "$l" | grep -oiE '[0-9]+ min( [0-9]+ s)?' | tr ' ' '_'); do [ "$(echo "$m" | tr '_' ' ')" = "$tmut" ] || echo "$l"; done
  done | sort -u)
[ "$nmut" -gt 0 ] && [ -n "$tmut" ] && [ -z "$bad" ] && pass "mutation-figures-sourced ($nmut mutations, $tmut)" \
  || fail mutation-figures-sourced "$res: $nmut mutations, '$tmut'; differs: $(echo "$bad" | head -3 | cut -c1-160 | tr '\n' '|')"
printf '%s\n' 'The invariant (issue 19): for' '- Mutation check (issue 23): x' 'Issue 22 (the Python' \
  'issues 11, 12' 'runs each fault of ISSUE 19' >"$T/bad"
printf '%s\n' 'pytorch#188567 (docs/PYTORCH.md)' '[NVIDIA/nccl#2331](https://github.com/NVIDIA/nccl/issues/2331)' \
  'the report in the PyTorch issue' 'issue text, maintainers replies' 'tissue 12' >"$T/good"
nbad=$(grep -ciP "$issuepat" "$T/bad"); ngood=$(grep -ciP "$issuepat" "$T/good")
[ "$nbad" = 5 ] && [ "$ngood" = 0 ] && pass issue-ref-pattern || fail issue-ref-pattern "bad=$nbad/5 good=$ngood/0"

# --- the catalogue of upstream reports (docs/NCCL.md §10) is tools/catalogue.def's ---------------
# The table between the markers is what tools/gentables.c makes of the catalogue now (make tables), the
# catalogue's rows are well formed (gentables checks: each link names its report, a range is a range,
# a verdict of guarded or made clear names its tests), there are at least 30, and every test a row
# names is a case of the script it names.
GEN="$B/gentables"
if [ -x "$GEN" ]; then
  if "$GEN" --nccl-doc docs/NCCL.md >"$T/NCCL.md" 2>"$T/gen.err" && diff -u docs/NCCL.md "$T/NCCL.md" >"$T/d"; then
    pass catalogue-doc-current
  else fail catalogue-doc-current "stale (run make tables): $(head -c 400 "$T/gen.err" "$T/d" | tr '\n' '|')"; fi
  nrows=$(sed -n '/^<!-- catalogue:begin/,/^<!-- catalogue:end/p' docs/NCCL.md | grep -c '^| \[')
  [ "$nrows" -ge 30 ] && pass catalogue-at-least-30 || fail catalogue-at-least-30 "$nrows rows"

  # Tests the library's branch adds with the catalogue rows that cite them; a name listed here may be
  # absent (a skip line says so) until its test exists. Remove it once it does.
  awaited=""
  if "$GEN" --catalogue-tests >"$T/tests" 2>"$T/gen.err"; then
    bad=""; waiting=""; n=0
    while read -r script name; do
      n=$((n + 1))
      if [ -f "tests/$script.sh" ] && grep -qE "(^|[^A-Za-z0-9_-])pass \"?$name([^A-Za-z0-9_.-]|\$)" "tests/$script.sh"; then continue; fi
      case " $(echo $awaited) " in *" $script:$name "*) waiting="$waiting $script:$name"; continue ;; esac
      bad="$bad $script:$name"
    done <"$T/tests"
    [ -z "$bad" ] && [ "$n" -gt 0 ] && pass catalogue-tests-exist || fail catalogue-tests-exist "not a case of its script:$bad"
    [ -z "$waiting" ] || echo "# skip catalogue-tests-awaited: not yet in their scripts:$waiting"
  else fail catalogue-tests-exist "gentables: $(head -c 300 "$T/gen.err")"; fi
else
  echo "# skip catalogue: no $GEN (make all builds it)"
fi

# --- the user docs speak of the product as it is: no development-log phrases ----------------------
# (the dated records, tests/gpu/results/ and the reference docs NCCL.md and PYTORCH.md, may keep them)
userdocs="README.md CHANGELOG.md docs/quickstart.md docs/install.md docs/troubleshooting.md docs/configuration.md
docs/behaviour.md docs/LOG.md tools/README.md tools/python/README.md"
devlog='not in a results file|seen once|reproduced since|older versions|a version without|not yet re-measured|not re-measured|known and not solved|not measured this session|before it stopped being lent|the 2-GPU kind'
# shellcheck disable=SC2086
hits=$(grep -niE "$devlog" $userdocs)
[ -z "$hits" ] && pass docs-no-devlog-phrases || fail docs-no-devlog-phrases "$(echo "$hits" | head -5 | cut -c1-160 | tr '\n' '|')"
printf '%s\n' 'measured 2026-12-01; not in a results file' 'seen once and not reproduced since' '(older versions; x)' \
  'Known and not solved: a restart' 'An install made by a version without make uninstall' >"$T/bad"
printf '%s\n' 'a results file holds it' 'the version without a revision' 'once per crossing' >"$T/good"
nbad=$(grep -ciE "$devlog" "$T/bad"); ngood=$(grep -ciE "$devlog" "$T/good")
[ "$nbad" = 5 ] && [ "$ngood" = 0 ] && pass devlog-pattern || fail devlog-pattern "bad=$nbad/5 good=$ngood/0"

# --- LOG.md's key table names every decision of shim/decisions.def ---------------------------------
row=$(grep '^| `decision` |' docs/LOG.md)
bad=""; n=0
for d in $(sed -n 's/^NG_DECISION([A-Z_]*, "\([a-z_]*\)".*/\1/p' shim/decisions.def); do
  n=$((n + 1)); echo "$row" | grep -qE "[ ,]$d[ ,;(]" || bad="$bad $d"
done
[ "$n" -ge 9 ] && [ -z "$bad" ] && pass "log-doc-decisions-listed ($n)" || fail log-doc-decisions-listed "not in the decision key's row of docs/LOG.md:$bad (n=$n)"

# --- jargon is defined where a reader first meets it -----------------------------------------------
# behaviour.md's Terms section defines each term; in every user doc the first line that uses one
# defines it there or links that section (behaviour.md itself: at or after its Terms heading)
bad=""
tline=$(grep -n '^## Terms$' docs/behaviour.md | cut -d: -f1)
for t in 'GIN' 'LSA' 'revok' 'agreement round'; do
  sed -n '/^## Terms$/,/^## /p' docs/behaviour.md | grep -q "^- \*\*[^*]*$t" || \
    sed -n '/^## Terms$/,/^## /p' docs/behaviour.md | grep -qi "^- \*\*$t" || bad="$bad behaviour.md:Terms-lacks-$t"
  for f in $userdocs; do
    [ "$f" = CHANGELOG.md ] && continue # release notes: one line each, read after the manual
    l=$(grep -niP -m1 "\\b$t" "$f") || continue
    n=${l%%:*}
    case "$f" in
      docs/behaviour.md) [ -n "$tline" ] && [ "$n" -gt "$tline" ] || bad="$bad $f:$n:$t" ;;
      # that line or the next two (a sentence that wraps)
      *) sed -n "${n},$((n + 2))p" "$f" | grep -qE 'behaviour\.md#terms' || bad="$bad $f:$n:$t" ;;
    esac
  done
done
[ -n "$tline" ] && [ -z "$bad" ] && pass docs-terms-defined-at-first-use || fail docs-terms-defined-at-first-use "first use without a definition or link to behaviour.md#terms:$bad"

# --- the docs agree: the README's promise names the one open case behaviour.md keeps ---------------
if grep -q '^### Known open case$' docs/behaviour.md; then
  grep -q 'behaviour\.md#known-open-case' README.md && pass docs-open-case-named-by-readme \
    || fail docs-open-case-named-by-readme "docs/behaviour.md keeps an open case; README.md's 'never worse' does not link it"
else
  grep -qi 'wrong data.*not found\|cause is not' docs/behaviour.md && fail docs-open-case-named-by-readme "an open case outside '### Known open case'" \
    || pass docs-open-case-named-by-readme
fi

# --- CHANGELOG.md is release notes: short, grouped, about the product ------------------------------
# under 120 lines; every entry under a "### " group; no paths into the sources or the tests, no
# test-suite words; before the first tagged release nothing is "fixed" (there is nothing to compare with)
cl=CHANGELOG.md
nlines=$(wc -l <"$cl")
internals=$(grep -nE '(^|[ (`])(shim|tests)/|failpoint|mutation|FAILPOINTS|t_[a-z_]+\.sh|\bfake\b' "$cl")
ungrouped=$(awk '/^## /{g=0} /^### /{g=1} /^- / && !g {print NR": "$0}' "$cl")
nrel=$(grep -c '^## ' "$cl")
fixed=""
[ "$nrel" = 1 ] && grep -q '^## .*(unreleased)' "$cl" && fixed=$(grep -nE '\b[Ff]ixed\b|\(was |no longer|\bBefore,|\bnow [a-z]+s\b' "$cl")
if [ "$nlines" -lt 120 ] && [ -z "$internals" ] && [ -z "$ungrouped" ] && [ -z "$fixed" ]; then pass "changelog-release-notes ($nlines lines)"
else fail changelog-release-notes "$nlines lines (under 120); internals: $(echo "$internals" | head -3 | tr '\n' '|'); ungrouped: $(echo "$ungrouped" | head -2 | tr '\n' '|'); relative to unreleased states: $(echo "$fixed" | head -3 | cut -c1-120 | tr '\n' '|')"; fi

# --- the README's first commands say what they cost: the full suite's time and download, and the
# quicker run (make test-quick exists in the Makefile) -----------------------------------------------
first=$(awk '/^```/{n++; next} n==1' README.md)
if echo "$first" | grep -E '^make test-deps test ' | grep -qE '[0-9]+ min' \
   && echo "$first" | grep -E '^make test-deps test ' | grep -qE '[0-9.]+ [GM]B' \
   && echo "$first" | grep -q '^make test-quick ' && grep -q '^test-quick:' Makefile; then pass readme-first-commands-costs
else fail readme-first-commands-costs "$(echo "$first" | tr '\n' '|')"; fi
