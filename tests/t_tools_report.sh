#!/bin/sh
# ncclguard-report's pictures and the tables behind the log (issues 13 and 14): the generated files
# are current, the sources write only keys and reasons of their tables, every key of the schema
# round-trips through both writers (C and Python, text and JSON) and the report, --trace and --html
# on a small divergent log, a JSON log with times and the 4,096-rank logs (tests/data/gen_logs.sh).
. "$(dirname "$0")/lib.sh"

REP="$B/ncclguard-report"
GEN="$B/gentables"
LOGS="$NG_ROOT/tests/data/logs"
H="$NG_ROOT/tests/report"
HOOK="$NG_ROOT/tools/python/ncclguard_hook"
PY=${NG_PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then echo "# skip tools-report: no $PY"; exit 0; fi

# ---------------------------------------------------------------- the tables
# docs/LOG.md and the Python hook's _schema.py are what tools/gentables.c makes of the tables now
"$GEN" --python >"$T/schema.py" 2>&1 && "$GEN" --doc >"$T/LOG.md" 2>&1
if diff -u "$HOOK/_schema.py" "$T/schema.py" >"$T/d1" && diff -u "$NG_ROOT/docs/LOG.md" "$T/LOG.md" >"$T/d2"; then
  pass tables-generated-files-current
else fail tables-generated-files-current "stale (run make tables): $(head -c 400 "$T/d1" "$T/d2" | tr '\n' '|')"; fi
# the hook's table of variables is committed too (the hook runs from a checkout nobody built: without
# it the hook would stay off): the committed copy is what genvars makes of shim/vars.def now
if git -C "$NG_ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  "$B/genvars" --py >"$T/vars.py" 2>&1
  if git -C "$NG_ROOT" show HEAD:tools/python/ncclguard_hook/_vars.py 2>/dev/null | diff -u - "$T/vars.py" >"$T/d3"; then
    pass tables-hook-vars-committed-current
  else fail tables-hook-vars-committed-current "commit the regenerated tools/python/ncclguard_hook/_vars.py: $(head -c 300 "$T/d3" | tr '\n' '|')"; fi
fi

out=$("$PY" "$H/sources.py" "$NG_ROOT" 2>&1)
case "$out" in good*) pass "tables-sources-use-only-table-keys-and-reasons $(echo "$out" | sed "s/^good //")" ;;
  *) fail tables-sources-use-only-table-keys-and-reasons "$(echo "$out" | tr '\n' '|')" ;; esac

# every reason's advice is the library's and the report's: one text (ncclguard-report's diagnosis)
out=$("$REP" "$LOGS/json" 2>&1)
adv=$("$PY" -c 'import re, sys
d = open(sys.argv[1]).read()
m = re.search(r"NG_REASON\(NOT_VMM, \"not_vmm\", WARN,((?:\s*\"[^\"]*\")+)\)", d)
print("".join(re.findall(r"\"([^\"]*)\"", m.group(1))))' "$NG_ROOT/shim/reasons.def" 2>&1)
if echo "$out" | grep -qF "diagnosis: $adv"; then pass reasons-advice-one-text
else fail reasons-advice-one-text "diagnosis: $(echo "$out" | grep diagnosis) want: $adv"; fi

# ---------------------------------------------------------------- round trip of every key
# the C writer is shim/log.c itself, built with -DNG_LOG_CHECK (a key not in the table aborts)
if ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -DNG_LOG_CHECK -I"$NG_ROOT/shim" -pthread -o "$T/logkeys" \
     "$H/logkeys.c" "$NG_ROOT/shim/log.c" >"$T/cc.out" 2>&1; then
  for w in c py; do
    for f in text json; do
      ext=log; [ $f = json ] && ext=jsonl
      log="$T/rt-$w.$ext"
      if [ $w = c ]; then "$T/logkeys" "$log" $f >"$T/w.out" 2>&1
      else env -u NCCLGUARD_LOG NCCLGUARD_LOG_FILE="$log" NCCLGUARD_LOG_FORMAT=$f PYTHONPATH="$NG_ROOT/tools/python" \
             PYTHONDONTWRITEBYTECODE=1 "$PY" "$H/pykeys.py" >"$T/w.out" 2>&1; fi
      "$REP" --json --trace "$T/rt-$w-$f.trace" "$log" >"$T/rt-$w-$f.rep" 2>"$T/rt.err"
      out=$("$PY" "$H/roundtrip.py" "$HOOK" "$T/rt-$w-$f.trace" "$T/rt-$w-$f.rep" $f $w 2>&1)
      [ "$out" = good ] && pass "log-keys-roundtrip-$w-$f" \
        || fail "log-keys-roundtrip-$w-$f" "$(cat "$T/w.out" "$T/rt.err") $(echo "$out" | tail -3 | tr '\n' '|')"
    done
  done
else fail log-keys-roundtrip "logkeys does not build: $(head -5 "$T/cc.out")"; fi

# a log of a newer schema: read, with one line saying so
printf 'h:1:1 [-1] NCCLGUARD INFO fn=log schema=99 msg="future"\nh:1:1 [0] NCCLGUARD INFO fn=ncclCommWindowRegister cid=0123456789abcdef rank=0 nranks=1 seq=0 result=ncclSuccess us=1.0 decision=register reason=ok newkey=1 msg="registered"\n' >"$T/future.log"
out=$("$REP" "$T/future.log" 2>&1); rc=$?
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'log schema 99, newer than')" = 1 ] && echo "$out" | grep -q '1 windows\?, 0 divergent'; then
  pass report-newer-schema-noted
else fail report-newer-schema-noted "rc=$rc $(echo "$out" | tr '\n' '|')"; fi

# ---------------------------------------------------------------- --trace and --html, small logs
"$REP" --trace "$T/div.trace" --html "$T/div.html" "$LOGS/divergent" >"$T/div.txt" 2>&1; rc=$?
"$REP" --json "$LOGS/divergent" >"$T/div.json" 2>/dev/null
out=$("$PY" "$H/trace.py" "$T/div.trace" '{"ranks":2,"per_rank":{"0":4,"1":3},
  "args":[[0,2,{"decision":"error","reason":"timeout","result":"ncclSystemError","cid":"9e3779b97f4a7c15","size":1048576,"nranks":2,"level":"WARN"}],
          [1,1,{"decision":"register","reason":"ok","buff":"0x7f1200010000","win":"0x4a2000d018","flags":1,"dev":1}]]}' 2>&1)
if [ $rc = 1 ] && "$PY" -m json.tool "$T/div.trace" >/dev/null 2>&1 && [ "$out" = "good 7" ] && grep -q 'seq 2: error 0 | missing 1' "$T/div.txt"; then
  pass report-trace-divergent
else fail report-trace-divergent "rc=$rc $out"; fi
out=$("$PY" "$H/grid.py" "$T/div.html" "$T/div.json" 2>&1)
if [ "$out" = "good 3 1" ] && grep -q '"cells":"EM"' "$T/div.html" && grep -q 'comm 9e3779b97f4a7c15 seq 2: error 0 | missing 1' "$T/div.html"; then
  pass report-html-divergent
else fail report-html-divergent "$out"; fi

# JSON lines have times: a slice starts at the line's time minus its duration
"$REP" --trace "$T/js.trace" --picture "$T/js.html" "$LOGS/json" >/dev/null 2>&1
"$REP" --json "$LOGS/json" >"$T/js.json" 2>/dev/null
out=$("$PY" "$H/trace.py" "$T/js.trace" '{"ranks":2,"per_rank":{"0":4,"1":3},"ts":[1,1,1764440000999995.0,205.0],
  "args":[[1,1,{"decision":"error","reason":"not_vmm","bad_rank":1,"win":null,"msg":"registration refused on every rank (not_vmm): the buffer is not from the CUDA VMM API (cudaMalloc?)\nallocate it with ncclMemAlloc"}]]}' 2>&1)
out2=$("$PY" "$H/grid.py" "$T/js.html" "$T/js.json" 2>&1)
if [ "$out" = "good 7" ] && [ "$out2" = "good 2 0" ]; then pass report-trace-html-jsonl-times
else fail report-trace-html-jsonl-times "$out | $out2"; fi

"$REP" --trace >/dev/null 2>&1; rc=$?
"$REP" --html "$T/no/such/dir/x.html" "$LOGS/clean" >/dev/null 2>&1; rc2=$?
if [ $rc = 2 ] && [ $rc2 = 2 ]; then pass report-trace-html-usage; else fail report-trace-html-usage "rc=$rc/$rc2"; fi

# ---------------------------------------------------------------- 4,096 ranks x 50 windows
for f in text json; do
  sh "$NG_ROOT/tests/data/gen_logs.sh" "$T/big-$f" 4096 50 $f
  t0=$(date +%s%N)
  "$REP" --trace "$T/big.trace" --html "$T/big.html" "$T/big-$f" >"$T/big.txt" 2>&1; rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  "$REP" --json "$T/big-$f" >"$T/big.json" 2>/dev/null
  exp='{"ranks":4096,"per_rank":{"1234":38,"*":51},
    "args":[[0,0,{"decision":"register","reason":"ok","seq":0,"size":1048576,"cid":"c0ffee0123456789","result":"ncclSuccess"}],
            [4095,49,{"decision":"register","reason":"ok","seq":49,"rank":4095,"nranks":4096,"dev":7}],
            [1234,36,{"decision":"register","reason":"ok","seq":36}]]'
  [ $f = json ] && exp="$exp"',"ts":[4095,49,1764440048983793.0,20302.0]'
  out=$("$PY" "$H/trace.py" "$T/big.trace" "$exp}" 2>&1)
  out2=$("$PY" "$H/grid.py" "$T/big.html" "$T/big.json" 1234 37 2>&1)
  if [ $rc = 1 ] && [ "$out" = "good 208883" ] && [ "$out2" = "good 50 13" ] && grep -q 'seq 37-49: register 0-1233,1235-4095 | missing 1234$' "$T/big.txt"; then
    pass "report-trace-html-4096-ranks-$f (${ms} ms, trace $(( $(stat -c %s "$T/big.trace") / 1048576 )) MB, picture $(( $(stat -c %s "$T/big.html") / 1024 )) kB)"
  else fail "report-trace-html-4096-ranks-$f" "rc=$rc ${ms} ms: $out | $out2"; fi
  rm -rf "$T/big-$f" "$T/big.trace"
done

# ---------------------------------------------------------------- the 4,096-rank grid as a browser shows it
# Headless Chromium at 1400x900 px, a screenshot: the rank that never reaches seq 37 is a column of the
# missing colour (#212121) over the 13 rows it misses (not averaged away by a down-scaled canvas), and
# the divergent bar left of those rows is several pixels wide (not a hairline); hovering that column
# names its ranks, rank 1234 and "missing". Chromium from Debian's chromium package (make test-deps, where packaged:
# the case skips without it).
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$CHROME" ]; then
  echo "# skip report-html-4096-screenshot: no chromium (Debian/Ubuntu: apt-get install chromium)"
else
  sh "$NG_ROOT/tests/data/gen_logs.sh" "$T/big" 4096 50 text
  "$REP" --html "$T/grid.html" "$T/big" >/dev/null 2>&1
  rm -rf "$T/big"
  shot() { # shot URL [chromium options]: headless, its own profile, 1400x900
    u=$1; shift
    HOME="$T" timeout -k 5 120 "$CHROME" --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir="$T/chrome" \
      --window-size=1400,900 "$@" "$u" 2>>"$T/chrome.log"
  }
  shot "file://$T/grid.html" --screenshot="$T/grid.png" >/dev/null
  out=$("$PY" "$H/png_columns.py" "$T/grid.png" 212121 d500f9 2>&1)
  miss=$(echo "$out" | sed -n 's/^212121 best=[0-9]*:\([0-9]*\) .*/\1/p')
  bar=$(echo "$out" | sed -n 's/^d500f9 .* wide=\([0-9]*\)$/\1/p')
  # the hover: a copy of the page with a script that moves the mouse over the first missing-coloured
  # pixel, one pixel into its column (the canvas may sit at a fractional page position, and a mouse
  # event's position is whole pixels)
  cp "$T/grid.html" "$T/hover.html"
  cat >>"$T/hover.html" <<'JS'
<script>
(function(){var cv=document.querySelector('canvas'),p=cv.getContext('2d').getImageData(0,0,cv.width,cv.height).data,res='none';
for(var i=0;i<p.length;i+=4)if(p[i]===33&&p[i+1]===33&&p[i+2]===33){var cx=(i/4)%cv.width,cy=Math.floor(i/4/cv.width),b=cv.getBoundingClientRect();
cv.dispatchEvent(new MouseEvent('mousemove',{clientX:b.left+cv.clientLeft+cx+1.5,clientY:b.top+cv.clientTop+cy+0.5,bubbles:true}));
res=document.getElementById('tip').textContent;break;}
var e=document.createElement('pre');e.id='hovertest';e.textContent=res;document.body.appendChild(e);})();
</script>
JS
  tipt=$(shot "file://$T/hover.html" --dump-dom | sed -n 's/.*<pre id="hovertest">\([^<]*\)<.*/\1/p')
  if [ ! -s "$T/grid.png" ]; then  # a chromium that cannot run here (a snap wrapper, no display libraries)
    echo "# skip report-html-4096-screenshot: $CHROME wrote no screenshot: $(tail -1 "$T/chrome.log")"
  elif [ -f "$T/grid.png" ] && [ "${miss:-0}" -ge 60 ] && [ "${bar:-0}" -ge 6 ] \
     && echo "$tipt" | grep -Eq '^ranks? [0-9-]+ +seq 3[7-9]|^ranks? [0-9-]+ +seq 4[0-9]' && echo "$tipt" | grep -q 'missing (rank 1234)'; then
    pass "report-html-4096-screenshot (missing column ${miss} px high, divergent bar ${bar} px wide; hover: $tipt)"
  else fail report-html-4096-screenshot "missing column ${miss:-?} px (want >= 60), divergent bar ${bar:-?} px (want >= 6), hover '$tipt': $out $(tail -2 "$T/chrome.log" | tr '\n' '|')"; fi
fi

# ---------------------------------------------------------------- the report's words
# A job as the demo's: a registration on a NULL communicator (the log's rank -1) and one communicator
# of 4 ranks whose one window is degraded on every rank.
W="$T/words"; mkdir -p "$W"
printf '%s\n' 'vm:100:100 [-1] NCCLGUARD WARN fn=ncclCommWindowRegister comm=0x0 buff=0x7f0000000000 size=2097152 flags=1 win=0x0 seq=-1 result=ncclInvalidArgument us=7.8 decision=error reason=null_comm msg="the communicator does not exist yet (PyTorch creates it lazily at the first collective). Fix: init_process_group(..., device_id=torch.device(\x27cuda\x27, local_rank)), or run one collective (e.g. dist.barrier(group)) on the group before symmetric-memory rendezvous; ncclguard-run\x27s Python hook does the latter for you"' >"$W/null.log"
for r in 0 1 2 3; do
  printf 'vm:20%d:20%d [%d] NCCLGUARD INFO fn=ncclCommInitRank comm=0x1 cid=00000000000000aa rank=%d nranks=4 result=ncclSuccess us=1.0 decision=pass reason=ok\n' $r $r $r $r
  printf 'vm:20%d:20%d [%d] NCCLGUARD WARN fn=ncclCommWindowRegister comm=0x1 cid=00000000000000aa rank=%d nranks=4 seq=0 result=ncclSuccess us=5.0 decision=degrade reason=not_vmm msg="the buffer is not a CUDA VMM allocation (e.g. cudaMalloc) and this communicator takes NCCL\x27s symmetric path, which fails on such a buffer on this rank alone (its peers would wait). Fix: allocate it with ncclMemAlloc (PyTorch: the symmetric-memory or NCCL mem-pool allocator). Every rank uses this buffer unregistered"\n' $r $r $r $r
done >"$W/comm.log"
out=$("$REP" "$W" 2>&1); js=$("$REP" --json "$W" 2>&1)
# rank -1 said in words; the summary counts the NULL-communicator registration; no diagnosis repeats the message
if echo "$out" | grep -q '^ncclguard-report: 2 files, .* 1 communicator, 1 window, 1 registration on a NULL communicator, 0 divergent, 0 stuck, 1 error line$' \
   && echo "$out" | grep -q '^first error: a registration on a NULL communicator, which has no rank ("rank -1" in the log; host vm, pid 100)$' \
   && echo "$out" | grep -q '^no communicator (a NULL one)  1 registration, without a rank' \
   && ! echo "$out" | grep -q 'diagnosis:' && echo "$js" | grep -q '"null_comm_registrations":1,'; then
  pass report-words-null-comm
else fail report-words-null-comm "$(echo "$out" | head -12 | tr '\n' '|')"; fi
# a message that is NCCL's own text still gets the diagnosis
sed 's/decision=error reason=null_comm msg="[^"]*"/decision=error reason=nccl_error msg="Cuda failure 1"/' "$W/null.log" >"$T/nccl.log"
out2=$("$REP" "$T/nccl.log" 2>&1)
echo "$out2" | grep -q '^  diagnosis: ' && pass report-diagnosis-when-new || fail report-diagnosis-when-new "$out2"
# every term the report prints is defined once in --help and in tools/README.md
help=$("$REP" --help 2>&1); bad=""
for term in 'rank -1' stuck missing divergent overdue 'layouts part' 'live windows'; do
  [ "$(echo "$help" | grep -c "^  $term  ")" = 1 ] || bad="$bad help:$term"
  grep -q "^| \`$term\` |" "$NG_ROOT/tools/README.md" || bad="$bad README:$term"
done
[ -z "$bad" ] && pass report-terms-defined || fail report-terms-defined "not defined once:$bad"

# the page: plurals, the alarm colour only for problems, the first error and every reason written out,
# host names and messages escaped (a log is input: markup in them must not become the page's)
"$REP" --html "$T/words.html" "$W" >/dev/null 2>&1
hdr=$(sed -n '/<h1>/,/<\/p>/p' "$T/words.html")
if echo "$hdr" | grep -q '2 files, ' && echo "$hdr" | grep -q ' 1 registration (windows)' && ! echo "$hdr" | grep -q '1 registrations\|1 ranks\|1 files' \
   && echo "$hdr" | grep -q ', 0 divergent, 0 stuck, ' && ! echo "$hdr" | grep -q 'class="div">0 ' \
   && grep -q '<pre class="first">first error: a registration on a NULL communicator' "$T/words.html" \
   && grep -q '<li><b>not_vmm</b>: degrade, 4 lines &mdash; the buffer is not a CUDA VMM' "$T/words.html" \
   && grep -q '<li><b>null_comm</b>: error, 1 line' "$T/words.html" && grep -q "function pl(k,w)" "$T/words.html"; then
  pass report-html-words
else fail report-html-words "$(echo "$hdr" | head -3 | cut -c1-300)"; fi
mkdir -p "$T/markup"
printf '{"ts":1.0,"host":"<script>document.title=\047pwned\047</script>n0","pid":7,"tid":7,"dev":-1,"level":"WARN","fn":"ncclCommWindowRegister","comm":"0x0","seq":-1,"result":"ncclInvalidArgument","us":1.0,"decision":"error","reason":"null_comm","msg":"<img src=x onerror=\047document.title=1\047><b>bold</b>"}\n' >"$T/markup/m.jsonl"
"$REP" --html "$T/markup.html" "$T/markup" >/dev/null 2>&1
if [ -s "$T/markup.html" ] && ! grep -q '<script>document.title\|<img src=x\|<b>bold' "$T/markup.html" \
   && grep -q "&lt;script&gt;document.title='pwned'&lt;/script&gt;n0" "$T/markup.html" && grep -q '&lt;img src=x' "$T/markup.html"; then
  pass report-html-escapes-log-input
else fail report-html-escapes-log-input "$(grep -o '.\{0,40\}pwned.\{0,40\}\|.\{0,20\}img src.\{0,40\}' "$T/markup.html" | head -3 | tr '\n' '|')"; fi

# '&' in log input is written as &amp; (a host or message holding "&lt;" must not read as "<" on the page)
mkdir -p "$T/amp"
printf '{"ts":1.0,"host":"a&b&lt;c","pid":7,"tid":7,"dev":-1,"level":"WARN","fn":"ncclCommWindowRegister","comm":"0x0","seq":-1,"result":"ncclInvalidArgument","us":1.0,"decision":"error","reason":"null_comm","msg":"x &amp; y"}\n' >"$T/amp/m.jsonl"
"$REP" --html "$T/amp.html" "$T/amp" >/dev/null 2>&1
if grep -q 'a&amp;b&amp;lt;c' "$T/amp.html" && grep -q 'x &amp;amp; y' "$T/amp.html" && ! grep -q 'a&b\|b&lt;c' "$T/amp.html"; then
  pass report-html-escapes-ampersand
else fail report-html-escapes-ampersand "$(grep -o '.\{0,20\}a&[^ ]*\|x &[^ ]* y' "$T/amp.html" | head -3 | tr '\n' '|')"; fi

# drawn by a browser: the rank and row labels of the 4-rank grid, the first error, and a page whose
# log input ran no script (its title unchanged)
if [ -n "$CHROME" ]; then
  dom=$(HOME="$T" timeout -k 5 120 "$CHROME" --headless --disable-gpu --no-sandbox --user-data-dir="$T/chrome2" \
        --window-size=1000,800 --dump-dom "file://$T/words.html" 2>>"$T/chrome.log")
  dom2=$(HOME="$T" timeout -k 5 120 "$CHROME" --headless --disable-gpu --no-sandbox --user-data-dir="$T/chrome3" \
         --window-size=1000,800 --dump-dom "file://$T/markup.html" 2>>"$T/chrome.log")
  ranks=$(echo "$dom" | grep -o '<div class="ranks"[^>]*>.*</div><canvas' | grep -o '>[0-9]*</span>' | tr -d '<>/span' | tr '\n' ' ')
  if [ -z "$dom" ]; then echo "# skip report-html-labels-drawn: $CHROME dumped no page: $(tail -1 "$T/chrome.log")"
  elif [ "$ranks" = "0 1 2 3 " ] && echo "$dom" | grep -q '<div class="rows"[^>]*><span[^>]*>seq 0</span>' \
     && echo "$dom" | grep -q 'columns: ranks 0-3, left to right; rows: registration seq 0, top to bottom' \
     && echo "$dom" | grep -q 'comm 00000000000000aa — 4 ranks x 1 registration, 0 divergent' \
     && echo "$dom" | grep -q '<pre class="first">first error: a registration on a NULL communicator' \
     && echo "$dom2" | grep -q '<title>ncclguard-report: outcome grid</title>' && ! echo "$dom2" | grep -q 'pwned</title>'; then
    pass "report-html-labels-drawn (ranks: $ranks)"
  else fail report-html-labels-drawn "ranks '$ranks'; $(echo "$dom" | grep -o '<h2>[^<]*</h2>\|columns: [^<]*' | head -3 | tr '\n' '|')"; fi
else echo "# skip report-html-labels-drawn: no chromium"; fi

# the page's colours are the grid's: the error count in the error colour (not the divergent one), the
# first error and the first degraded window keyed by their outcome's colour and placed (a NULL
# communicator: in no grid); a communicator without registrations gets a line, not an empty grid; a
# grid without a divergent row has no gutter for the divergent bar (4 ranks x 24 px, nothing left of them)
W2="$T/words2"; mkdir -p "$W2"; cp "$W"/*.log "$W2/"
for r in 0 1 2 3; do
  printf 'vm:20%d:20%d [%d] NCCLGUARD INFO fn=ncclCommInitRank comm=0x2 cid=00000000000000bb rank=%d nranks=4 result=ncclSuccess us=1.0 decision=pass reason=ok\n' $r $r $r $r
done >"$W2/idle.log"
"$REP" --html "$T/words2.html" "$W2" >/dev/null 2>&1
if grep -q ', <span class="err">1 error line</span>\.' "$T/words2.html" && ! grep -q 'class="div">[0-9]* error line' "$T/words2.html" \
   && grep -q '^<p class="key"><i class="sw" style="background:#c62828"></i>the first error: on no communicator' "$T/words2.html" \
   && grep -q '^<p class="key"><i class="sw" style="background:#f9a825"></i>the first degraded window: a degrade cell' "$T/words2.html" \
   && grep -q '"color":"#c62828"' "$T/words2.html" && grep -q '"color":"#f9a825"' "$T/words2.html"; then
  pass report-html-grid-colours
else fail report-html-grid-colours "$(grep -o 'error line[^.]*\|<p class="key">[^<]*<[^>]*>[^<]*' "$T/words2.html" | head -3 | tr '\n' '|')"; fi
if [ -n "$CHROME" ]; then
  dom=$(HOME="$T" timeout -k 5 120 "$CHROME" --headless --disable-gpu --no-sandbox --user-data-dir="$T/chrome4" \
        --window-size=1000,800 --dump-dom "file://$T/words2.html" 2>>"$T/chrome.log")
  if [ -z "$dom" ]; then echo "# skip report-html-no-empty-grid: $CHROME dumped no page: $(tail -1 "$T/chrome.log")"
  elif [ "$(echo "$dom" | grep -o '<canvas' | wc -l)" = 1 ] && echo "$dom" | grep -q '<canvas width="96"' \
     && echo "$dom" | grep -q 'comm 00000000000000bb — 4 ranks x 0 registrations, 0 divergent</h2><p class="axes">no window registrations: nothing to draw</p>'; then
    pass report-html-no-empty-grid
  else fail report-html-no-empty-grid "$(echo "$dom" | grep -o '<canvas[^>]*>\|<h2>comm[^<]*</h2><p[^>]*>[^<]*' | head -4 | tr '\n' '|')"; fi
else echo "# skip report-html-no-empty-grid: no chromium"; fi

# ---------------------------------------------------------------- layouts that part, overdue calls, registered memory
# Logs the library writes (the fake NCCL; tests/t_policy.sh and tests/t_faults.sh check the lines themselves),
# and hand-written lines in the same format where a case needs what no program makes.
lib_logs() { # lib_logs DIR [VAR=VALUE...] -- PROG ARGS...: the library's info-level logs of PROG into DIR
  d=$1; shift; mkdir -p "$d"
  while [ "$1" != -- ]; do export_list="${export_list:-} $1"; shift; done; shift
  env $export_list NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$d/%p.log" \
    LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$SHIM" timeout -k 2 60 "$@" >"$d.out" 2>&1
  export_list=""
}
jsq() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@" 2>&1; }

# 1. Layouts that part: sizes (2.28.9: refused, degraded on every rank), flags, and sizes that NCCL 2.30.7 takes
lib_logs "$T/lay" FAKE_NCCL_VERSION=22809 -- "$PROGS/faults" layout-sizes --timeout 20
lib_logs "$T/layf" FAKE_NCCL_VERSION=22809 -- "$PROGS/faults" layout-flags --timeout 20
lib_logs "$T/lay7" FAKE_NCCL_VERSION=23007 -- "$PROGS/faults" layout-sizes --timeout 20
out=$("$REP" -q "$T/lay" 2>&1); outf=$("$REP" "$T/layf" 2>&1); out7=$("$REP" "$T/lay7" 2>&1); outc=$("$REP" "$LOGS/clean" 2>&1)
"$REP" --json "$T/lay" >"$T/lay.json" 2>/dev/null; "$REP" --html "$T/lay.html" "$T/lay" >/dev/null 2>&1
want='layouts part at step 0: rank 0 2097152 B flags=1, rank 1 4194304 B flags=1 (reason layout_mismatch on ranks 0-1; outcome: degrade 0-1)'
j=$(jsq "$T/lay.json" '(d["layouts_parted"], d["comms"][0]["layout_part"]["seq"], d["comms"][0]["layout_part"]["groups"], d["comms"][0]["layout_part"]["layout_mismatch"], d["comms"][1:] == [] and d["comms"][0]["layout_part"]["text"] == sys.argv[3])' "$want")
if echo "$out" | grep -q "^  comm [0-9a-f]\{16\}: $want\$" \
   && echo "$outf" | grep -q ': layouts part at step 0: rank 0 2097152 B flags=1, rank 1 2097152 B flags=0 (reason layout_mismatch on ranks 0-1; outcome: degrade 0-1)$' \
   && ! echo "$out7" | grep -q 'layouts part' \
   && echo "$out7" | grep -q ': size arguments differ at step 0: rank 0 2097152 B flags=1, rank 1 4194304 B flags=1 (not a parting: .*; outcome: register 0-1)$' \
   && ! echo "$outc" | grep -q 'layouts part' \
   && [ "$j" = "(1, 0, [{'ranks': '0', 'size': 2097152, 'flags': 1}, {'ranks': '1', 'size': 4194304, 'flags': 1}], '0-1', True)" ] \
   && sed -n '/<pre class="layout">/,/<\/pre>/p' "$T/lay.html" | grep -q ": $want" \
   && [ "$(sed -n '/<script/,/<\/script>/p' "$T/lay.html" | grep -c 'layouts part')" = 0 ]; then
  pass report-layouts-part
else fail report-layouts-part "$(echo "$out" | grep 'layouts part') | $(echo "$outf$out7" | grep 'layouts part' | tr '\n' '|') | json $j | $(tail -2 "$T/lay.out")"; fi
# on 4 ranks, size arguments that differ where every rank registered without layout_mismatch: no parting (NCCL places
# the allocation; 2.30.7 takes unequal sizes: docs/NCCL.md §11), the first such step shown as information, grouped by
# size (step 0 alike, step 1 not on rank 2, step 2 not on rank 3); not with -q, nor counted in the JSON's layouts_parted
for r in 0 1 2 3; do
  for s in 0 1 2; do
    sz=1048576; [ $s = 1 ] && [ $r = 2 ] && sz=2097152; [ $s = 2 ] && [ $r = 3 ] && sz=4096
    printf 'h:%d:%d [%d] NCCLGUARD INFO fn=ncclCommWindowRegister comm=0x1 cid=00000000000000bb rank=%d nranks=4 buff=0x7f0000000000 size=%d flags=1 win=0x5 seq=%d result=ncclSuccess us=5.0 decision=register reason=ok comm_windows=%d comm_bytes=%d msg="registered"\n' \
      $r $r $r $r $sz $s $((s + 1)) $(( (s + 1) * 1048576 ))
  done
done >"$T/lay4.log"
out=$("$REP" "$T/lay4.log" 2>&1); outq=$("$REP" -q "$T/lay4.log" 2>&1)
j=$("$REP" --json "$T/lay4.log" 2>/dev/null | "$PY" -c 'import json, sys; d = json.load(sys.stdin); c = d["comms"][0]; print(d["layouts_parted"], d["sizes_differ"], c["layout_part"], c["sizes_differ"]["seq"])' 2>&1)
if echo "$out" | grep -q '^  comm 00000000000000bb: size arguments differ at step 1: ranks 0-1,3 1048576 B flags=1, rank 2 2097152 B flags=1 (not a parting: NCCL places each window.s allocation, not the size argument, .*; outcome: register 0-3)$' \
   && ! echo "$out" | grep -q 'layouts part' && [ "$(echo "$out" | grep -c 'size arguments differ')" = 1 ] \
   && ! echo "$outq" | grep -q 'size arguments' && [ "$j" = "0 1 None 1" ]; then pass report-size-arguments-differ-no-parting
else fail report-size-arguments-differ-no-parting "$(echo "$out" | grep -A2 'window' | tr '\n' '|') json $j"; fi
# flags that differ part the layouts even where no rank logged layout_mismatch (a log without the agreement)
sed 's/rank=1 nranks=4 buff=0x7f0000000000 size=1048576 flags=1 \(.*\)seq=2 /rank=1 nranks=4 buff=0x7f0000000000 size=1048576 flags=0 \1seq=2 /' "$T/lay4.log" >"$T/lay4f.log"
out=$("$REP" -q "$T/lay4f.log" 2>&1)
if echo "$out" | grep -q '^  comm 00000000000000bb: layouts part at step 2: ranks 0,2 1048576 B flags=1, rank 1 1048576 B flags=0, rank 3 4096 B flags=1 (outcome: register 0-3)$'; then
  pass report-layouts-part-flags-without-reason
else fail report-layouts-part-flags-without-reason "$(echo "$out" | grep -A2 'window' | tr '\n' '|')"; fi
# a first rank whose line has no flags (an older log) is no reference: the ranks after it are compared
sed -e 's/rank=0 nranks=4 buff=0x7f0000000000 size=1048576 flags=1 \(.*\)seq=2 /rank=0 nranks=4 buff=0x7f0000000000 size=1048576 \1seq=2 /' "$T/lay4f.log" >"$T/lay4n.log"
out=$("$REP" -q "$T/lay4n.log" 2>&1)
if echo "$out" | grep -q '^  comm 00000000000000bb: layouts part at step 2: '; then pass report-layouts-part-first-rank-without-flags
else fail report-layouts-part-first-rank-without-flags "$(echo "$out" | grep -A2 'window' | tr '\n' '|')"; fi

# 2. Calls overdue in NCCL (fn=stuck): a registration blocked inside NCCL on every rank, named by call, step and the
# longest wait; the window itself failed on every rank (an error, not "stuck": that word stays the window's cell with
# no outcome), and the first error says where the ranks waited instead of "some rank never reached it"; the watchdog fires at NCCLGUARD_TIMEOUT plus its grace (T=2: 3 s)
lib_logs "$T/stk" FAKE_NCCL_REG_STALL=1 FAKE_NCCL_VERSION=22907 NCCLGUARD_TIMEOUT=2 -- "$PROGS/ngtest" --expect-reg any --timeout 20
out=$("$REP" -q "$T/stk" 2>&1); rc=$?
"$REP" --json "$T/stk" >"$T/stk.json" 2>/dev/null; "$REP" --html "$T/stk.html" "$T/stk" >/dev/null 2>&1
j=$(jsq "$T/stk.json" '[(o["call"], o["seq"], o["ranks"], o["count"], o["nranks"], o["us_max"] >= 2e6) for o in d["overdue_calls"]] + [d["stuck"], d["status"]]')
if [ $rc = 1 ] && echo "$out" | grep -q '^calls overdue in NCCL (had not returned within NCCLGUARD_TIMEOUT' \
   && echo "$out" | grep -Eq '^  ncclCommWindowRegister, comm [0-9a-f]{16}, step 0: ranks 0-1 \(2 of 2\), longest 3\.[0-9]{2}s \(rank [01]\)$' \
   && echo "$out" | grep -q ', 0 divergent, 0 stuck, 2 error lines, 1 overdue call$' \
   && echo "$out" | grep -q 'the ranks named under "calls overdue in NCCL" waited inside NCCL there' && ! echo "$out" | grep -q 'never reached' \
   && [ "$j" = "[('ncclCommWindowRegister', 0, '0-1', 2, 2, True), 0, 'problems']" ] \
   && grep -Eq '^<pre class="overdue">ncclCommWindowRegister, comm [0-9a-f]{16}, step 0: ranks 0-1 \(2 of 2\)' "$T/stk.html"; then
  pass report-overdue-calls
else fail report-overdue-calls "rc=$rc $(echo "$out" | grep -A2 'overdue' | tr '\n' '|') json $j | $(tail -2 "$T/stk.out")"; fi
# hand-written: 4 ranks, two of them overdue in a registration that never returned (their cells stuck), an agreement
# round overdue on another, a call name with markup (log input: escaped in the page); exit status 1 from these alone
{
  for r in 0 1 2 3; do
    printf 'h:%d:%d [%d] NCCLGUARD INFO fn=ncclCommWindowRegister comm=0x1 cid=00000000000000cc rank=%d nranks=4 size=4096 flags=1 seq=0 result=ncclSuccess us=5.0 decision=register reason=ok\n' $r $r $r $r
  done
  printf 'h:0:9 [0] NCCLGUARD WARN fn=stuck comm=0x1 cid=00000000000000cc rank=0 nranks=4 seq=1 us=5000000.0 call=ncclCommWindowRegister msg="x"\n'
  printf 'h:2:9 [2] NCCLGUARD WARN fn=stuck comm=0x1 cid=00000000000000cc rank=2 nranks=4 seq=1 us=7000000.0 call=ncclCommWindowRegister msg="x"\n'
  printf 'h:0:9 [0] NCCLGUARD TRACE fn=agree comm=0x1 cid=00000000000000cc rank=0 nranks=4 seq=1 msg="vote"\n'
  printf 'h:2:9 [2] NCCLGUARD TRACE fn=agree comm=0x1 cid=00000000000000cc rank=2 nranks=4 seq=1 msg="vote"\n'
  printf 'h:1:9 [1] NCCLGUARD WARN fn=stuck comm=0x1 cid=00000000000000cc rank=1 nranks=4 seq=-1 us=3000000.0 call=<i>round msg="x"\n'
} >"$T/od.log"
out=$("$REP" "$T/od.log" 2>&1); rc=$?
"$REP" --html "$T/od.html" "$T/od.log" >/dev/null 2>&1
if [ $rc = 1 ] && echo "$out" | grep -q ', 0 error lines, 2 overdue calls$' && echo "$out" | grep -q '^  ncclCommWindowRegister, comm 00000000000000cc, step 1: ranks 0,2 (2 of 4), longest 7.00s (rank 2); not reported by ranks 1,3$' \
   && echo "$out" | grep -q '^  <i>round, comm 00000000000000cc: rank 1 (1 of 4), longest 3.00s (rank 1); not reported by ranks 0,2-3$' \
   && echo "$out" | grep -Eq '^ +1 +0 +0 +0 +0 +0 +2 +2 .*DIVERGENT$' \
   && grep -q '&lt;i&gt;round, comm 00000000000000cc: rank 1' "$T/od.html" && ! grep -q '<i>round' "$T/od.html"; then
  pass report-overdue-calls-by-call
else fail report-overdue-calls-by-call "rc=$rc $(echo "$out" | grep -A3 'overdue\|^ *1 ' | tr '\n' '|')"; fi

# 3. Registered memory: 8 windows of 64 KiB on one communicator past NCCLGUARD_WINDOW_BUDGET=200000 (a WARN per
# rank at the 4th), all deregistered at the end; the exit summaries of another job, one process holding 3 windows
lib_logs "$T/bud" FAKE_NCCL_VERSION=22809 NCCLGUARD_WINDOW_BUDGET=200000 -- "$PROGS/faults" many --windows 8 --timeout 20
lib_logs "$T/bud/ng" FAKE_NCCL_VERSION=22809 -- "$PROGS/ngtest" --timeout 20
printf 'vm:999:999 [-1] NCCLGUARD WARN fn=summary calls=9 comms=1 registered=3 degraded=0 retried=0 errors=0 noops=0 agreements=3 windows_live=3 window_bytes=6291456 window_bytes_peak=8388608 msg="ncclguard summary for this process"\n' >"$T/bud/leak.log"
out=$("$REP" "$T/bud" 2>&1); rc=$?
"$REP" --json "$T/bud" >"$T/bud.json" 2>/dev/null; "$REP" --html "$T/bud.html" "$T/bud" >/dev/null 2>&1
j=$(jsq "$T/bud.json" '[(m["end_windows"], m["end_bytes"], m["peak_windows"], m["peak_bytes"], m["peak_seq"], m["peak_ranks"], m["budget_warnings"], m["budget"]) for m in [c["memory"] for c in d["comms"]] if m] + [d["budget_warnings"], sorted((p["windows_live"], p["window_bytes"], p["window_bytes_peak"]) for p in d["processes"])]')
if [ $rc = 0 ] && echo "$out" | grep -q '^registered memory (live windows and their bytes per rank' \
   && echo "$out" | grep -Eq '^  comm [0-9a-f]{16}  last logged: 0 windows, 0 B on ranks 0-1; peak: 8 windows, 512.0 KiB \(524288 B\) at step 7 on ranks 0-1$' \
   && echo "$out" | grep -q '^    2 budget warnings: past NCCLGUARD_WINDOW_BUDGET=200000 bytes on ranks 0-1$' \
   && echo "$out" | grep -Eq '^  comm [0-9a-f]{16}  last logged: 0 windows, 0 B on ranks 0-1; peak: 1 window, 2.0 MiB \(2097152 B\) at step 0 on ranks 0-1$' \
   && echo "$out" | grep -q '^  processes (their exit summary, window_bytes and window_bytes_peak): 3; still registered at exit: 3 windows, 6.0 MiB in all; largest peak: 8.0 MiB (host vm, pid 999)$' \
   && echo "$out" | grep -q '^    host vm pid 999: 3 windows, 6.0 MiB still registered at exit (peak 8.0 MiB)$' \
   && [ "$j" = "[(0, 0, 8, 524288, 7, '0-1', 2, 200000), (0, 0, 1, 2097152, 0, '0-1', 0, None), 2, [(0, 0, 2097152), (0, 0, 2097152), (3, 6291456, 8388608)]]" ]; then
  pass report-registered-memory
else fail report-registered-memory "rc=$rc $(echo "$out" | sed -n '/^registered memory/,$p' | tr '\n' '|') json $j | $(tail -2 "$T/bud.out")"; fi
# the page: one plot per communicator, inline SVG with labelled axes, the budget drawn, the figures in words; the JSON
# log's times give the x axis in seconds
lib_logs "$T/budj" FAKE_NCCL_VERSION=22809 NCCLGUARD_WINDOW_BUDGET=200000 NCCLGUARD_LOG_FORMAT=json -- "$PROGS/faults" many --windows 8 --timeout 20
"$REP" --html "$T/budj.html" "$T/budj" >/dev/null 2>&1
out=$("$PY" - "$T/bud.html" "$T/budj.html" <<'PY' 2>&1
import re, sys
def plots(path):
    h = open(path).read()
    assert "http" not in h.replace("http-equiv", ""), "not self-contained"
    return h, re.findall(r'<svg class="mem".*?</svg>', h, re.S)
h, svgs = plots(sys.argv[1])
assert len(svgs) == 2, len(svgs)
s = svgs[0]
assert "registered bytes</text>" in s and "registrations and deregistrations of each rank, in order" in s, "axis labels"
assert ">512.0 KiB</text>" in s and ">0 B</text>" in s and ">1</text>" in s and ">16</text>" in s, "ticks"
assert "NCCLGUARD_WINDOW_BUDGET</text>" in s and "stroke-dasharray" in s, "budget line"
d = re.findall(r'<path fill="none" stroke="[^"]+" stroke-width="2" d="([^"]+)"', s)
assert len(d) == 1 and d[0].count("V") == 16 and d[0].count("H") == 16, d  # both ranks alike: one line; 16 changes, the last held to the end
assert 'ranks 0-1 (peak 512.0 KiB)' in h and '2 budget warnings: past NCCLGUARD_WINDOW_BUDGET=200000 bytes on ranks 0-1' in h
h2, svgs2 = plots(sys.argv[2])
assert len(svgs2) == 1 and "seconds since the communicator's first registration" in svgs2[0], "time axis"
print("good")
PY
)
[ "$out" = good ] && pass report-registered-memory-plot || fail report-registered-memory-plot "$(echo "$out" | tail -3 | tr '\n' '|')"
# drawn by a browser: the plot's line (its colour) is there, its last step down a stroke of the plot's height (170 px)
if [ -n "$CHROME" ]; then
  HOME="$T" timeout -k 5 120 "$CHROME" --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir="$T/chrome4" \
    --window-size=1200,3000 --screenshot="$T/bud.png" "file://$T/bud.html" >/dev/null 2>>"$T/chrome.log"
  px=$("$PY" "$H/png_columns.py" "$T/bud.png" 1565c0 2>&1 | sed -n 's/^1565c0 best=[0-9]*:\([0-9]*\) wide=\([0-9]*\)$/\1 \2/p')
  if [ ! -s "$T/bud.png" ]; then echo "# skip report-registered-memory-plot-drawn: no screenshot"
  elif [ "${px%% *}" -ge 150 ] 2>/dev/null; then pass "report-registered-memory-plot-drawn (a column of ${px%% *} px of the line's colour)"
  else fail report-registered-memory-plot-drawn "colour 1565c0: '$px'"; fi
else echo "# skip report-registered-memory-plot-drawn: no chromium"; fi

# a failed ncclMemAlloc (the library's own line under the fake, cudaMalloc path out of memory) is information, not an
# error of the run: the application's answer to it decides (a plain buffer instead, the fix users apply). The report
# names it with its own diagnosis, says "no errors" and exits 0; --json counts it apart
mkdir -p "$T/mem"
NCCL_CUMEM_ENABLE=0 FAKE_CUDA_OOM_BELOW=99999999 NCCLGUARD_LOG_FILE="$T/mem/r%p.log" fake_run "$PROGS/memalloc" 4194304 >/dev/null 2>&1
"$REP" "$T/mem" >"$T/mem.out" 2>&1; rc=$?
"$REP" --json "$T/mem" >"$T/mem.json" 2>/dev/null; rcj=$?
if [ $rc = 0 ] && [ $rcj = 0 ] && grep -q '^no errors$' "$T/mem.out" \
   && grep -q '^first failed ncclMemAlloc (1 in all; not an error of the run' "$T/mem.out" \
   && grep -q 'diagnosis: NCCL could not allocate the buffer' "$T/mem.out" && ! grep -q 'failed to register' "$T/mem.out" \
   && "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["status"]=="clean" and d["first_error"] is None and d["memalloc_failures"]==1 and d["first_memalloc_failure"]["fn"]=="ncclMemAlloc"' "$T/mem.json"; then
  pass report-memalloc-failure-not-an-error
else fail report-memalloc-failure-not-an-error "rc=$rc/$rcj $(head -c 600 "$T/mem.out" | tr '\n' ' ')"; fi

# a failed ncclDevCommCreate (NCCL 2.29+ refuse the requirements of 2.28's device API, as PyTorch 2.11 passes them:
# the fake models it) is the device communicator's failure: the diagnosis names that call, not a registration
mkdir -p "$T/dcm"
FAKE_NCCL_VERSION=23007 NCCLGUARD_LOG_FILE="$T/dcm/r%p.log" fake_run "$PROGS/ngtest" -n 2 -m proc --devcomm --no-allreduce >/dev/null 2>&1
"$REP" "$T/dcm" >"$T/dcm.out" 2>&1; rc=$?
"$REP" --json "$T/dcm" >"$T/dcm.json" 2>/dev/null
if [ $rc != 0 ] && grep -q 'fn=ncclDevCommCreate result=ncclInvalidUsage decision=pass reason=nccl_error' "$T/dcm.out" \
   && grep -q 'diagnosis: NCCL failed to create the device communicator (ncclDevCommCreate), not a window registration' "$T/dcm.out" \
   && ! grep -q 'failed to register' "$T/dcm.out" \
   && "$PY" -c 'import json,sys; f=json.load(open(sys.argv[1]))["first_error"]; assert f["fn"]=="ncclDevCommCreate" and f["diagnosis"].startswith("NCCL failed to create the device communicator"), f' "$T/dcm.json"; then
  pass report-devcomm-failure-diagnosis-names-devcomm
else fail report-devcomm-failure-diagnosis-names-devcomm "rc=$rc $(grep -A4 '^first error' "$T/dcm.out" | tr '\n' ' ' | head -c 700)"; fi
