/* ncclguard-report: reads the per-rank logs of one job (text or JSON lines, docs/DESIGN.md
 * "Log format") and prints, per communicator and window, what each rank did, the windows
 * where ranks decided differently (the signature of a hang), and the first error. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include "identity.h" /* NG_IDENTITY, for --version */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

static const char *usage_text =
    "Usage: ncclguard-report [options] [FILE|DIR|-]...\n"
    "\n"
    "Reads ncclguard logs (text or JSON lines, mixed freely; other lines are skipped) from\n"
    "files, directories (every *.log and *.jsonl below them) or standard input ('-', or no\n"
    "argument when the input is not a terminal), and prints per communicator (cid) and window (seq) how many ranks registered,\n"
    "retried, degraded, failed or have no line at all, with min/median/max duration; the\n"
    "windows where ranks decided differently or some ranks never arrived (the signature of\n"
    "a hang), with those ranks; and the first error with a diagnosis. Then, where the logs have\n"
    "them: per communicator the first step where a rank logged layout_mismatch or the ranks'\n"
    "flags differ (layouts that part); the calls into NCCL that had not returned within NCCLGUARD_TIMEOUT,\n"
    "by call (overdue); and the registered memory: live windows and bytes per rank, the last\n"
    "logged and the peak, budget warnings, and each process's exit summary.\n"
    "\n"
    "The logs must be written at NCCLGUARD_LOG=info or trace (ncclguard-run --log-dir does\n"
    "that): at the default level, warn, successful registrations are not logged.\n"
    "\n"
    "Options:\n"
    "  --json         one JSON document instead of text\n"
    "  -q, --quiet    only the summary line, the divergent windows, layouts that part, overdue\n"
    "                 calls and the first error\n"
    "  --trace FILE   also write a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev): one\n"
    "                 track per rank (process: host, thread: rank), one slice per intercepted call\n"
    "                 (its time and duration; text logs have no times: calls laid end to end),\n"
    "                 the line's keys (decision, reason, arguments) as its args\n"
    "  --html FILE    also write the outcome grid as a picture, one self-contained HTML file (no\n"
    "                 network): ranks x registrations, one colour per decision, divergent marked;\n"
    "                 the sections in words, and a plot of each communicator's registered bytes\n"
    "  --picture FILE the same as --html\n"
    "  --version      the version of ncclguard\n"
    "  -h, --help     this text\n"
    "\n"
    "Terms:\n"
    "  window         one registration (ncclCommWindowRegister) of a communicator (cid), numbered\n"
    "                 seq 0, 1, ... in the order every rank makes them\n"
    "  register, degrade, error, pass  a rank's outcome: registered; the buffer used unregistered\n"
    "                 on every rank (*win = NULL); an error returned; handed to NCCL unchanged\n"
    "  stuck          the rank logged the start of that registration but no outcome: blocked in\n"
    "                 NCCL or in the agreement, or killed (a window's cell, from its lines)\n"
    "  overdue        a call into NCCL that had not returned within NCCLGUARD_TIMEOUT, as\n"
    "                 ncclguard's watchdog logged it (fn=stuck lines): which call, which ranks,\n"
    "                 the step and the longest wait; the call may have returned later (then the\n"
    "                 window has an outcome, e.g. error) or never (then its cell is stuck too)\n"
    "  missing        the rank logged nothing for that registration: it never got there (an earlier\n"
    "                 failure, a crash, still computing); its peers wait for it\n"
    "  divergent      a window whose ranks do not all have the same outcome (stuck and missing\n"
    "                 included): the signature of a hang; a stuck window: every rank stuck\n"
    "  layouts part   at one step (seq) a rank logged reason=layout_mismatch (ncclguard found\n"
    "                 the allocations or flags apart) or the ranks' flags differ: the first such\n"
    "                 step per communicator, with each rank's size and flags; size arguments that\n"
    "                 differ alone are shown apart, as information (NCCL places the allocation)\n"
    "  live windows   a communicator's windows registered and not yet deregistered, and their\n"
    "                 bytes (comm_windows, comm_bytes), per rank: the last logged and the peak\n"
    "  rank -1        a line without a rank: a registration on a NULL communicator (PyTorch's lazy\n"
    "                 communicator), counted apart from the communicators\n"
    "\n"
    "Exit status: 0 nothing divergent, no error and no overdue call; 1 divergent windows,\n"
    "errors or overdue calls; 2 usage error, unreadable input, or no log in it (a directory\n"
    "without *.log or *.jsonl).\n"
    "\n"
    "Documentation: tools/README.md and docs/ of the source tree; installed with pip, the same\n"
    "paths under the folder that python -m ncclguard --docs prints.\n";

/* ---- decisions ---- */

enum { D_NONE, D_REGISTER, D_DEGRADE, D_ERROR, D_PASS, D_STUCK, D_MISSING, D_N };
static const char *dname[D_N] = {"none", "register", "degrade", "error", "pass", "stuck", "missing"};

/* ---- tables ---- */

typedef struct {
  uint8_t seen, dec, retried;
  uint8_t lay;   /* 1: a registration line with the window's size; 2: reason layout_mismatch logged */
  int32_t flags; /* the window's flags, -1 none logged */
  double us;
  int64_t size;  /* the window's size */
} rank_rec;

typedef struct {
  uint64_t cid;
  int64_t seq;
} wkey;

typedef struct window {
  wkey key;
  rank_rec *r;
  int cap; /* entries in r */
  UT_hash_handle hh;
} window;

typedef struct comm {
  uint64_t cid;
  int nranks;   /* largest nranks logged, 0 unknown */
  int max_rank; /* largest rank seen */
  uint8_t *seen; /* ranks with any line for this comm */
  int seen_cap;
  int order; /* first appearance */
  struct layout_part *part; /* the first step where the ranks' windows part, NULL none */
  struct layout_part *sizes; /* the first step where only the size arguments differ (information), NULL none */
  struct mrank *mr;          /* registered memory per rank (comm_windows/comm_bytes over the run) */
  int mr_cap, has_mem, all_ts;
  long budget_warns;         /* fn=budget WARNs on this communicator */
  uint8_t *budget_ranks;
  int budget_cap;
  double budget;             /* NCCLGUARD_WINDOW_BUDGET as those WARNs name it, 0 unknown */
  UT_hash_handle hh;
} comm;

static window *windows;
static comm *comms;
static int n_comms;

#define MAX_RANK (1 << 24)

static int grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap) return 1;
  int n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *q = realloc(*p, (size_t)n * elem);
  if (!q) return 0;
  memset((char *)q + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
  *p = q;
  *cap = n;
  return 1;
}

static comm *get_comm(uint64_t cid) {
  comm *c;
  HASH_FIND(hh, comms, &cid, sizeof cid, c);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c) { perror("ncclguard-report"); exit(2); }
    c->cid = cid;
    c->max_rank = -1;
    c->order = n_comms++;
    HASH_ADD(hh, comms, cid, sizeof c->cid, c);
  }
  return c;
}

static window *get_window(uint64_t cid, int64_t seq) {
  wkey k;
  memset(&k, 0, sizeof k);
  k.cid = cid;
  k.seq = seq;
  window *w;
  HASH_FIND(hh, windows, &k, sizeof k, w);
  if (!w) {
    w = calloc(1, sizeof *w);
    if (!w) { perror("ncclguard-report"); exit(2); }
    w->key = k;
    HASH_ADD(hh, windows, key, sizeof w->key, w);
  }
  return w;
}

/* ---- one parsed line ---- */

typedef struct {
  const char *p;
  int n;
} slice;

/* one key=value of a line, as written (for --trace, which shows them all) */
typedef struct {
  const char *k;
  int kn;
  int key;   /* the schema's row, -1 unknown */
  int kind;  /* V_BARE (text bare or JSON number/true/false), V_TEXTSTR (text quoted), V_JSONSTR, V_NULL */
  slice v;
} pair;
enum { V_BARE, V_TEXTSTR, V_JSONSTR, V_NULL };
#define MAX_PAIRS 64

typedef struct {
  slice host, level, fn, cid, result, decision, reason, msg, call, comm;
  int msg_json; /* msg is a JSON string body (escapes \n, \uXXXX) rather than a text one */
  long pid, tid, rank, nranks, attempt, bad_rank, schema;
  int64_t seq;
  double us, ts;
  int has_ts, has_us;
  long size, flags, comm_windows, comm_bytes, windows_live, window_bytes, window_bytes_peak; /* -1: not in the line */
  int npairs;
  pair pairs[MAX_PAIRS];
} event;

static int seq_eq(slice s, const char *lit) {
  size_t n = strlen(lit);
  return (size_t)s.n == n && memcmp(s.p, lit, n) == 0;
}

/* a decimal integer at the start of s (as strtol reads it: spaces, a sign, digits; what follows is
 * ignored); dflt when there is none or it has more than 18 digits. Every line has several: no copy. */
static long slice_long(slice s, long dflt) {
  int i = 0, neg = 0, digits = 0;
  while (i < s.n && (s.p[i] == ' ' || s.p[i] == '\t')) i++;
  if (i < s.n && (s.p[i] == '-' || s.p[i] == '+')) neg = s.p[i++] == '-';
  long v = 0;
  for (; i < s.n && s.p[i] >= '0' && s.p[i] <= '9'; i++, digits++) v = v * 10 + (s.p[i] - '0');
  if (!digits || digits > 18) return dflt;
  return neg ? -v : v;
}

static double slice_double(slice s, double dflt) {
  if (s.n <= 0 || s.n > 40) return dflt;
  char b[48];
  memcpy(b, s.p, (size_t)s.n);
  b[s.n] = 0;
  char *e;
  double v = strtod(b, &e);
  return e == b ? dflt : v;
}

static int slice_hex(slice s, uint64_t *out) {
  const char *p = s.p;
  int n = s.n;
  if (n > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2, n -= 2;
  if (n <= 0 || n > 16) return 0;
  uint64_t v = 0;
  for (int i = 0; i < n; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return 0;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return 1;
}

/* ---- the log schema (shim/logschema.def): every key the report reads is a row of it ---- */

enum {
#define NG_LOGKEY(name, type, writer, doc) K_##name,
#include "../shim/logschema.def"
#undef NG_LOGKEY
  K_N
};
enum { T_str, T_int, T_float, T_ptr, T_hex64, T_bool, T_any };
static const struct {
  const char *name;
  int type;
} schema_keys[K_N] = {
#define NG_LOGKEY(name, type, writer, doc) {#name, T_##type},
#include "../shim/logschema.def"
#undef NG_LOGKEY
};

/* key name -> row: an open-addressing table built once; NCCLGUARD_* keys map to the prefix row */
#define KH 256
static int16_t key_slot[KH];
static int key_len[K_N]; /* strlen of each name, once */
static unsigned key_hash(const char *k, int n) {
  unsigned h = 2166136261u;
  for (int i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
  return h;
}
static void keys_init(void) {
  for (int i = 0; i < KH; i++) key_slot[i] = -1;
  for (int r = 0; r < K_N; r++) {
    key_len[r] = (int)strlen(schema_keys[r].name);
    unsigned h = key_hash(schema_keys[r].name, key_len[r]) % KH;
    while (key_slot[h] >= 0) h = (h + 1) % KH;
    key_slot[h] = (int16_t)r;
  }
}
static int key_row(const char *k, int n) {
  for (unsigned h = key_hash(k, n) % KH; key_slot[h] >= 0; h = (h + 1) % KH) {
    if (key_len[key_slot[h]] == n && memcmp(schema_keys[key_slot[h]].name, k, (size_t)n) == 0) return key_slot[h];
  }
  if (n > 10 && memcmp(k, "NCCLGUARD_", 10) == 0) return K_NCCLGUARD_;
  return -1;
}

static int opt_trace_on; /* keep every pair of a line (--trace) */

static void set_field(event *e, const char *k, int kn, slice v, int kind) {
  int row = key_row(k, kn);
  if (opt_trace_on && e->npairs < MAX_PAIRS) e->pairs[e->npairs++] = (pair){k, kn, row, kind, v};
  if (kind == V_NULL) return;
  switch (row) {
    case K_fn: e->fn = v; break;
    case K_cid: e->cid = v; break;
    case K_rank: e->rank = slice_long(v, -1); break;
    case K_nranks: e->nranks = slice_long(v, -1); break;
    case K_seq: e->seq = slice_long(v, -1); break;
    case K_result: e->result = v; break;
    case K_us: e->us = slice_double(v, -1); e->has_us = e->us >= 0; break;
    case K_decision: e->decision = v; break;
    case K_reason: e->reason = v; break;
    case K_attempt: e->attempt = slice_long(v, 0); break;
    case K_bad_rank: e->bad_rank = slice_long(v, -1); break;
    case K_msg: e->msg = v; e->msg_json = kind == V_JSONSTR; break;
    case K_level: e->level = v; break;
    case K_host: e->host = v; break;
    case K_pid: e->pid = slice_long(v, -1); break;
    case K_tid: e->tid = slice_long(v, -1); break;
    case K_schema: e->schema = slice_long(v, -1); break;
    case K_ts: e->ts = slice_double(v, 0); e->has_ts = 1; break;
    case K_call: e->call = v; break;
    case K_comm: e->comm = v; break;
    case K_size: e->size = slice_long(v, -1); break;
    case K_flags: e->flags = slice_long(v, -1); break;
    case K_comm_windows: e->comm_windows = slice_long(v, -1); break;
    case K_comm_bytes: e->comm_bytes = slice_long(v, -1); break;
    case K_windows_live: e->windows_live = slice_long(v, -1); break;
    case K_window_bytes: e->window_bytes = slice_long(v, -1); break;
    case K_window_bytes_peak: e->window_bytes_peak = slice_long(v, -1); break;
    default: break; /* a key the report does not use, or one a newer schema added */
  }
}

static void event_init(event *e) {
  e->host = e->level = e->fn = e->cid = e->result = e->decision = e->reason = e->msg = e->call = e->comm = (slice){NULL, 0};
  e->size = e->flags = e->comm_windows = e->comm_bytes = e->windows_live = e->window_bytes = e->window_bytes_peak = -1;
  e->msg_json = e->has_ts = e->has_us = e->npairs = 0;
  e->attempt = 0;
  e->ts = 0;
  e->pid = e->tid = e->rank = e->nranks = e->bad_rank = e->schema = -1;
  e->seq = -1;
  e->us = -1;
}

/* host:pid:tid [dev] NCCLGUARD LEVEL key=value ... msg="..." */
static int parse_text(const char *s, const char *end, event *e) {
  const char *tag = memmem(s, (size_t)(end - s), " NCCLGUARD ", 11);
  if (!tag) return 0;
  /* host and pid from the prefix */
  const char *c1 = memchr(s, ':', (size_t)(tag - s));
#define PAIR(name, row, val) \
  if (opt_trace_on && e->npairs < MAX_PAIRS) e->pairs[e->npairs++] = (pair){name, (int)sizeof name - 1, row, V_BARE, val}
  if (c1) {
    e->host = (slice){s, (int)(c1 - s)};
    PAIR("host", K_host, e->host);
    const char *c2 = memchr(c1 + 1, ':', (size_t)(tag - c1 - 1));
    if (c2) {
      e->pid = slice_long((slice){c1 + 1, (int)(c2 - c1 - 1)}, -1);
      const char *sp = memchr(c2 + 1, ' ', (size_t)(tag - c2 - 1));
      e->tid = slice_long((slice){c2 + 1, (int)((sp ? sp : tag) - c2 - 1)}, -1);
      PAIR("pid", K_pid, ((slice){c1 + 1, (int)(c2 - c1 - 1)}));
      PAIR("tid", K_tid, ((slice){c2 + 1, (int)((sp ? sp : tag) - c2 - 1)}));
      const char *lb = sp ? memchr(sp, '[', (size_t)(tag - sp)) : NULL;
      const char *rb = lb ? memchr(lb, ']', (size_t)(tag - lb)) : NULL;
      if (rb) PAIR("dev", K_dev, ((slice){lb + 1, (int)(rb - lb - 1)}));
    }
  }
  const char *p = tag + 11;
  const char *l = p;
  while (p < end && *p != ' ') p++;
  e->level = (slice){l, (int)(p - l)};
  PAIR("level", K_level, e->level);
#undef PAIR
  while (p < end) {
    while (p < end && *p == ' ') p++;
    if (p >= end) break;
    const char *k = p;
    while (p < end && *p != '=' && *p != ' ') p++;
    if (p >= end || *p != '=') continue; /* a bare word: skip it */
    int kn = (int)(p - k);
    p++;
    slice v;
    int kind = V_BARE;
    if (p < end && *p == '"') {
      kind = V_TEXTSTR;
      const char *b = ++p;
      while (p < end && *p != '"') {
        if (*p == '\\' && p + 1 < end) p++;
        p++;
      }
      v = (slice){b, (int)(p - b)};
      if (p < end) p++;
    } else {
      const char *b = p;
      while (p < end && *p != ' ') p++;
      v = (slice){b, (int)(p - b)};
    }
    set_field(e, k, kn, v, kind);
  }
  return 1;
}

/* a flat JSON object; nested values are skipped */
static const char *json_skip_string(const char *p, const char *end) {
  /* p after the opening quote; returns the closing quote */
  while (p < end && *p != '"') {
    if (*p == '\\' && p + 1 < end) p++;
    p++;
  }
  return p;
}

static int parse_json(const char *s, const char *end, event *e) {
  const char *p = s;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  if (p >= end || *p != '{') return 0;
  p++;
  int any = 0;
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
    if (p >= end || *p == '}') break;
    if (*p != '"') return any;
    const char *k = p + 1;
    p = json_skip_string(k, end);
    if (p >= end) return any;
    int kn = (int)(p - k);
    p++;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end || *p != ':') return any;
    p++;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end) return any;
    slice v;
    int is_str = 0;
    if (*p == '"') {
      const char *b = p + 1;
      p = json_skip_string(b, end);
      v = (slice){b, (int)(p - b)};
      is_str = 1;
      if (p < end) p++;
    } else if (*p == '{' || *p == '[') {
      int depth = 0;
      while (p < end) {
        if (*p == '"') p = json_skip_string(p + 1, end);
        else if (*p == '{' || *p == '[') depth++;
        else if (*p == '}' || *p == ']') {
          if (--depth == 0) { p++; break; }
        }
        p++;
      }
      continue;
    } else {
      const char *b = p;
      while (p < end && *p != ',' && *p != '}' && *p != ' ') p++;
      v = (slice){b, (int)(p - b)};
      if (v.n == 4 && memcmp(v.p, "null", 4) == 0) {
        set_field(e, k, kn, v, V_NULL);
        continue;
      }
    }
    set_field(e, k, kn, v, is_str ? V_JSONSTR : V_BARE);
    any = 1;
  }
  return any;
}

/* ---- the first error ---- */

typedef struct {
  int set;
  int has_ts, peerish;
  double ts;
  int64_t seq;
  int file_idx;
  long line;
  char file[1024];
  char host[128], level[16], fn[64], cid[24], result[48], decision[24], reason[48], msg[1024];
  long pid, rank, bad_rank;
} first_error;

static first_error ferr, fdegrade;
/* failed ncclMemAlloc calls: information, not errors of the run (the application's answer to them decides; the
 * usual one is a plain buffer instead) */
static first_error fmemalloc;
static long n_memalloc_failed;
static long n_error_lines;

static void copy_slice(char *dst, size_t n, slice s) {
  size_t k = (size_t)s.n < n - 1 ? (size_t)s.n : n - 1;
  if (s.p) memcpy(dst, s.p, k);
  else k = 0;
  dst[k] = 0;
}

/* unescape a JSON or text string body into dst */
static void copy_unescaped(char *dst, size_t n, slice s) {
  size_t o = 0;
  for (int i = 0; i < s.n && o + 1 < n; i++) {
    char c = s.p[i];
    if (c == '\\' && i + 1 < s.n) {
      char d = s.p[++i];
      switch (d) {
        case 'n': c = ' '; break;
        case 't': c = ' '; break;
        case 'r': c = ' '; break;
        case 'x':
          if (i + 2 < s.n) {
            unsigned x = 0;
            sscanf(s.p + i + 1, "%2x", &x);
            i += 2;
          }
          c = ' ';
          break;
        case 'u':
          if (i + 4 < s.n) {
            unsigned x = 0;
            sscanf(s.p + i + 1, "%4x", &x);
            i += 4;
            c = x < 0x80 && x >= 0x20 ? (char)x : '?';
          } else c = '?';
          break;
        default: c = d;
      }
    }
    dst[o++] = c;
  }
  dst[o] = 0;
}

/* a before b? (see the README: the earliest by timestamp; without timestamps, a rank's own
 * failure before one reported by its peers or a timeout, then the lowest seq, then input order) */
static int earlier(const first_error *a, const first_error *b) {
  if (a->has_ts && b->has_ts && a->ts != b->ts) return a->ts < b->ts;
  if (a->peerish != b->peerish) return a->peerish < b->peerish;
  if (!(a->has_ts && b->has_ts) && a->seq != b->seq) return a->seq < b->seq;
  if (a->file_idx != b->file_idx) return a->file_idx < b->file_idx;
  return a->line < b->line;
}

static void consider(first_error *best, const event *e, const char *file, int file_idx, long line) {
  first_error c;
  memset(&c, 0, sizeof c);
  c.has_ts = e->has_ts;
  c.ts = e->ts;
  c.seq = e->seq;
  c.file_idx = file_idx;
  c.line = line;
  c.peerish = (e->reason.n >= 5 && memcmp(e->reason.p, "peer_", 5) == 0) || seq_eq(e->reason, "timeout");
  if (best->set && !earlier(&c, best)) return;
  snprintf(c.file, sizeof c.file, "%s", file);
  copy_slice(c.host, sizeof c.host, e->host);
  copy_slice(c.level, sizeof c.level, e->level);
  copy_slice(c.fn, sizeof c.fn, e->fn);
  copy_slice(c.cid, sizeof c.cid, e->cid);
  copy_slice(c.result, sizeof c.result, e->result);
  copy_slice(c.decision, sizeof c.decision, e->decision);
  copy_slice(c.reason, sizeof c.reason, e->reason);
  copy_unescaped(c.msg, sizeof c.msg, e->msg);
  c.pid = e->pid;
  c.rank = e->rank;
  c.bad_rank = e->bad_rank;
  c.set = 1;
  *best = c;
}

/* ---- feeding events into the tables ---- */

static long n_lines, n_events, n_files;

static int is_window_fn(slice fn) {
  if (fn.n == 0) return 0;
  if (seq_eq(fn, "agree") || seq_eq(fn, "warmup")) return 1;
  return memmem(fn.p, (size_t)fn.n, "WindowRegister", 14) && !memmem(fn.p, (size_t)fn.n, "Deregister", 10);
}

/* the library's decisions (shim/decisions.def), and the report's class of each */
static const char *const lib_decision[] = {
#define NG_DECISION(id, name, meaning) name,
#include "../shim/decisions.def"
#undef NG_DECISION
};
enum {
#define NG_DECISION(id, name, meaning) LIB_D_##id,
#include "../shim/decisions.def"
#undef NG_DECISION
  LIB_D_N
};
static int decision_of(slice d) {
  for (int i = 0; i < LIB_D_N; i++) {
    if (!seq_eq(d, lib_decision[i])) continue;
    switch (i) {
      case LIB_D_REGISTER: return D_REGISTER;
      case LIB_D_DEGRADE: return D_DEGRADE;
      case LIB_D_ERROR: return D_ERROR;
      case LIB_D_PASS: case LIB_D_NOOP: return D_PASS;
      default: return D_NONE; /* retry, deferred, internal */
    }
  }
  return D_NONE;
}

/* ---- --trace: a Chrome/Perfetto trace, one track per rank, one slice per intercepted call ---- */

/* a growing byte buffer */
typedef struct {
  char *p;
  size_t n, cap;
} sbuf;
static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap * 2 : 256;
    while (c < b->n + n + 1) c *= 2;
    char *q = realloc(b->p, c);
    if (!q) { perror("ncclguard-report"); exit(2); }
    b->p = q;
    b->cap = c;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_chr(sbuf *b, char c) { sb_put(b, &c, 1); }

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
static void utf8_put(sbuf *b, unsigned cp) {
  char u[4];
  if (cp < 0x80) sb_chr(b, (char)cp);
  else if (cp < 0x800) { u[0] = (char)(0xc0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3f)); sb_put(b, u, 2); }
  else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[2] = (char)(0x80 | (cp & 0x3f));
    sb_put(b, u, 3);
  } else {
    u[0] = (char)(0xf0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3f)); u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[3] = (char)(0x80 | (cp & 0x3f));
    sb_put(b, u, 4);
  }
}
/* a string value as the writer escaped it (text: \" \\ \n \xNN; JSON: its escapes) -> raw bytes */
static void unescape_into(sbuf *b, slice s, int json) {
  for (int i = 0; i < s.n; i++) {
    char c = s.p[i];
    if (c != '\\' || i + 1 >= s.n) { sb_chr(b, c); continue; }
    char d = s.p[++i];
    int h1, h2;
    switch (d) {
      case 'n': sb_chr(b, '\n'); break;
      case 't': sb_chr(b, '\t'); break;
      case 'r': sb_chr(b, '\r'); break;
      case 'b': sb_chr(b, '\b'); break;
      case 'f': sb_chr(b, '\f'); break;
      case 'x':
        if (!json && i + 2 < s.n && (h1 = hexval(s.p[i + 1])) >= 0 && (h2 = hexval(s.p[i + 2])) >= 0) {
          sb_chr(b, (char)(h1 * 16 + h2));
          i += 2;
        } else sb_chr(b, d);
        break;
      case 'u': {
        unsigned cp = 0;
        int ok = i + 4 < s.n;
        for (int j = 1; ok && j <= 4; j++) ok = hexval(s.p[i + j]) >= 0, cp = cp * 16 + (unsigned)(ok ? hexval(s.p[i + j]) : 0);
        if (!json || !ok) { sb_chr(b, d); break; }
        i += 4;
        if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < s.n && s.p[i + 1] == '\\' && s.p[i + 2] == 'u') {
          unsigned lo = 0;
          int ok2 = 1;
          for (int j = 3; ok2 && j <= 6; j++) ok2 = hexval(s.p[i + j]) >= 0, lo = lo * 16 + (unsigned)(ok2 ? hexval(s.p[i + j]) : 0);
          if (ok2 && lo >= 0xdc00 && lo < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            i += 6;
          }
        }
        utf8_put(b, cp >= 0xd800 && cp < 0xe000 ? 0xfffd : cp);
        break;
      }
      default: sb_chr(b, d); /* \" \\ \/ and anything else: the character itself */
    }
  }
}
/* raw bytes -> a JSON string (valid UTF-8: a malformed byte becomes U+FFFD; '<' escaped for HTML) */
static void json_quote(sbuf *o, const char *p, size_t n) {
  sb_chr(o, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    char e[8];
    if (c == '"' || c == '\\') { sb_chr(o, '\\'); sb_chr(o, (char)c); }
    else if (c == '\n') sb_puts(o, "\\n");
    else if (c < 0x20 || c == '<' || c == 0x7f) { snprintf(e, sizeof e, "\\u%04x", c); sb_puts(o, e); }
    else if (c < 0x80) sb_chr(o, (char)c);
    else {
      int len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      int ok = len > 0 && i + (size_t)len <= n;
      for (int j = 1; ok && j < len; j++) ok = ((unsigned char)p[i + (size_t)j] & 0xc0) == 0x80;
      if (ok) { sb_put(o, p + i, (size_t)len); i += (size_t)len - 1; }
      else sb_puts(o, "\\ufffd");
    }
  }
  sb_chr(o, '"');
}
/* a bare token that is a JSON number */
static int is_json_number(slice v) {
  int i = 0, digits = 0;
  if (i < v.n && v.p[i] == '-') i++;
  while (i < v.n && v.p[i] >= '0' && v.p[i] <= '9') i++, digits++;
  if (!digits || (v.p[v.p[0] == '-'] == '0' && digits > 1)) return 0;
  if (i < v.n && v.p[i] == '.') {
    int f = 0;
    for (i++; i < v.n && v.p[i] >= '0' && v.p[i] <= '9'; i++) f++;
    if (!f) return 0;
  }
  if (i < v.n && (v.p[i] == 'e' || v.p[i] == 'E')) {
    int f = 0;
    i++;
    if (i < v.n && (v.p[i] == '+' || v.p[i] == '-')) i++;
    for (; i < v.n && v.p[i] >= '0' && v.p[i] <= '9'; i++) f++;
    if (!f) return 0;
  }
  return i == v.n;
}
/* one value, typed by the schema: numbers for int/float, true for bool, null, else a string */
static void json_value(sbuf *o, const pair *q, sbuf *tmp) {
  int type = q->key >= 0 ? schema_keys[q->key].type : T_any;
  if (q->kind == V_NULL) { sb_puts(o, "null"); return; }
  if (q->kind == V_BARE) {
    if ((type == T_int || type == T_float || type == T_any) && is_json_number(q->v)) { sb_put(o, q->v.p, (size_t)q->v.n); return; }
    if (type == T_bool && (seq_eq(q->v, "1") || seq_eq(q->v, "true"))) { sb_puts(o, "true"); return; }
    if (type == T_bool && (seq_eq(q->v, "0") || seq_eq(q->v, "false"))) { sb_puts(o, "false"); return; }
  }
  tmp->n = 0;
  if (q->kind == V_BARE) sb_put(tmp, q->v.p, (size_t)q->v.n);
  else unescape_into(tmp, q->v, q->kind == V_JSONSTR);
  json_quote(o, tmp->p ? tmp->p : "", tmp->n);
}

/* the trace's pid (a host) and tid (a rank) of a track */
typedef struct lane {
  char key[160]; /* pid:tid */
  double cursor; /* end of its last slice without a time of its own */
  UT_hash_handle hh;
} lane;

typedef struct track {
  char *key; /* host:pid:tid */
  char *host;
  long pid, tid;
  long rank; /* its first rank seen, -1 none */
  int has_cid_rank; /* that rank came from a line with a communicator id */
  int tpid;          /* the trace's pid (its host) and tid (its rank), and its lane */
  long ttid;
  struct lane *lane;
  UT_hash_handle hh;
} track;

typedef struct {
  track *t;
  double ts, dur; /* microseconds; ts < 0: the line had no time (text logs) */
  char ph;        /* 'X' a call, 'i' an event without a duration */
  char *body;     /* "name":...,"cat":...,"args":{...} */
} tevent;

static track *tracks;
static tevent *tevs;
static int n_tevs, cap_tevs;
static sbuf tsb, ttmp;

static void trace_add(const event *e) {
  if (e->fn.n == 0) return;
  char key[256];
  snprintf(key, sizeof key, "%.*s:%ld:%ld", e->host.n > 128 ? 128 : e->host.n, e->host.p ? e->host.p : "", e->pid, e->tid);
  track *t;
  HASH_FIND_STR(tracks, key, t);
  if (!t) {
    t = calloc(1, sizeof *t);
    if (!t || !(t->key = strdup(key)) || !(t->host = strndup(e->host.p ? e->host.p : "", (size_t)e->host.n))) {
      perror("ncclguard-report");
      exit(2);
    }
    t->pid = e->pid;
    t->tid = e->tid;
    t->rank = -1;
    HASH_ADD_KEYPTR(hh, tracks, t->key, strlen(t->key), t);
  }
  int with_cid = e->cid.n > 0 && !seq_eq(e->cid, "0000000000000000");
  if (e->rank >= 0 && (t->rank < 0 || (with_cid && !t->has_cid_rank))) {
    t->rank = e->rank;
    t->has_cid_rank = with_cid;
  }
  tsb.n = 0;
  sb_puts(&tsb, "\"name\":");
  json_quote(&tsb, e->fn.p, (size_t)e->fn.n);
  sb_puts(&tsb, ",\"cat\":");
  if (e->decision.n) json_quote(&tsb, e->decision.p, (size_t)e->decision.n);
  else sb_puts(&tsb, "\"event\"");
  sb_puts(&tsb, ",\"args\":{");
  int first = 1;
  for (int i = 0; i < e->npairs; i++) {
    const pair *q = &e->pairs[i];
    /* ts and us are the slice's ts and dur, fn its name, host its process's name */
    if (q->key == K_ts || (q->key == K_us && e->has_us) || q->key == K_fn || q->key == K_host) continue;
    if (!first) sb_chr(&tsb, ',');
    first = 0;
    json_quote(&tsb, q->k, (size_t)q->kn);
    sb_chr(&tsb, ':');
    json_value(&tsb, q, &ttmp);
  }
  sb_puts(&tsb, "}");
  if (!grow((void **)&tevs, &cap_tevs, n_tevs + 1, sizeof *tevs)) { perror("ncclguard-report"); exit(2); }
  tevent *v = &tevs[n_tevs++];
  v->t = t;
  v->ph = e->has_us ? 'X' : 'i';
  v->dur = e->has_us ? e->us : 0;
  /* a JSON line's ts is when it was written: the end of the call */
  v->ts = e->has_ts ? e->ts * 1e6 - v->dur : -1;
  v->body = strdup(tsb.p);
  if (!v->body) { perror("ncclguard-report"); exit(2); }
}


static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int write_trace(const char *path) {
  FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
  if (!f) { fprintf(stderr, "ncclguard-report: --trace %s: %s\n", path, strerror(errno)); return 2; }
  /* hosts, sorted: the trace's processes 1..n */
  int nh = 0, caph = 0;
  char **hosts = NULL;
  for (track *t = tracks; t; t = t->hh.next) {
    int dup = 0;
    for (int i = 0; i < nh && !dup; i++) dup = !strcmp(hosts[i], t->host);
    if (dup) continue;
    if (!grow((void **)&hosts, &caph, nh + 1, sizeof *hosts)) { perror("ncclguard-report"); exit(2); }
    hosts[nh++] = t->host;
  }
  if (nh > 1) qsort(hosts, (size_t)nh, sizeof *hosts, cmp_cstr);
  /* a track without a rank of its own takes the rank of its process's other tracks */
  for (track *t = tracks; t; t = t->hh.next) {
    if (t->rank >= 0) continue;
    for (track *u = tracks; u; u = u->hh.next)
      if (u->rank >= 0 && u->pid == t->pid && !strcmp(u->host, t->host)) { t->rank = u->rank; break; }
  }
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"ncclguard-report %s\",\"schema\":%d,"
             "\"time\":\"ts in microseconds since the epoch where the log has times (JSON lines); a text log has none: "
             "its calls are laid end to end from 0 on each rank\"},\"traceEvents\":[\n", NG_VERSION, NG_LOG_SCHEMA);
  int first = 1;
  for (int i = 0; i < nh; i++) {
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", first ? "" : ",\n", i + 1);
    first = 0;
    ttmp.n = 0;
    sb_puts(&ttmp, "host ");
    sb_puts(&ttmp, hosts[i]);
    tsb.n = 0;
    json_quote(&tsb, ttmp.p, ttmp.n);
    fprintf(f, "%s}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", tsb.p, i + 1, i + 1);
  }
  lane *lanes = NULL;
  for (track *t = tracks; t; t = t->hh.next) { /* each track's lane, named once */
    int hp = 0;
    while (hp < nh && strcmp(hosts[hp], t->host)) hp++;
    t->tpid = hp + 1;
    t->ttid = t->rank >= 0 ? t->rank : 1000000L + (t->pid > 0 ? t->pid : 0);
    char k[160];
    snprintf(k, sizeof k, "%d:%ld", t->tpid, t->ttid);
    HASH_FIND_STR(lanes, k, t->lane);
    if (t->lane) continue;
    t->lane = calloc(1, sizeof *t->lane);
    if (!t->lane) { perror("ncclguard-report"); exit(2); }
    snprintf(t->lane->key, sizeof t->lane->key, "%s", k);
    HASH_ADD_STR(lanes, key, t->lane);
    if (t->rank >= 0)
      fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":\"rank %ld\"}}", t->tpid, t->ttid, t->rank);
    else
      fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":\"pid %ld (no rank)\"}}", t->tpid, t->ttid, t->pid);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%ld,\"args\":{\"sort_index\":%ld}}", t->tpid, t->ttid, t->ttid);
  }
  for (int i = 0; i < n_tevs; i++) {
    tevent *v = &tevs[i];
    track *t = v->t;
    lane *l = t->lane;
    int hp = t->tpid - 1;
    long tid = t->ttid;
    double ts = v->ts;
    if (ts < 0) ts = l->cursor; /* no time in the log: right after the lane's previous call */
    if (ts + v->dur > l->cursor) l->cursor = ts + v->dur;
    if (v->ph == 'X')
      fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,\"ts\":%.3f,\"dur\":%.3f,%s}", hp + 1, tid, ts, v->dur, v->body);
    else
      fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%ld,\"ts\":%.3f,%s}", hp + 1, tid, ts, v->body);
  }
  fprintf(f, "\n]}\n");
  lane *l, *lt;
  HASH_ITER(hh, lanes, l, lt) {
    HASH_DEL(lanes, l);
    free(l);
  }
  free(hosts);
  int bad = ferror(f);
  if (f != stdout) bad |= fclose(f) != 0;
  else bad |= fflush(f) != 0;
  if (bad) { fprintf(stderr, "ncclguard-report: --trace %s: write error\n", path); return 2; }
  return 0;
}

static int newer_schema;

/* registrations on a NULL communicator (no cid, no rank: "rank -1" in the log): outcome lines */
static long n_null_comm;

/* the reasons of the degrade and error outcomes, by reason and decision, with how many lines */
#define MAX_REASONS 32
typedef struct {
  char reason[48], decision[24];
  long n;
} reason_seen;
static reason_seen rseen[MAX_REASONS];
static int n_rseen;

static void count_reason(const event *e) {
  char r[48], d[24];
  copy_slice(r, sizeof r, e->reason);
  copy_slice(d, sizeof d, e->decision);
  if (!r[0]) snprintf(r, sizeof r, "-");
  for (int i = 0; i < n_rseen; i++)
    if (!strcmp(rseen[i].reason, r) && !strcmp(rseen[i].decision, d)) { rseen[i].n++; return; }
  if (n_rseen == MAX_REASONS) return;
  snprintf(rseen[n_rseen].reason, sizeof rseen[0].reason, "%s", r);
  snprintf(rseen[n_rseen].decision, sizeof rseen[0].decision, "%s", d);
  rseen[n_rseen++].n = 1;
}

/* ---- besides the windows: layouts that part, calls overdue in NCCL, registered memory ---- */

/* the first step (seq) where a communicator's ranks registered windows with different flags, or where a
 * rank logged reason=layout_mismatch; or (information) the first where only their size arguments differ:
 * its line in words and its JSON (built in main) */
struct layout_part {
  int64_t seq;
  char *text, *json;
};

/* fn=stuck lines (the library's watchdog: a call into NCCL that had not returned within
 * NCCLGUARD_TIMEOUT), by communicator, call and step: the report's "overdue" calls */
typedef struct {
  uint64_t cid;
  int64_t seq;
  char call[96];
  uint8_t *ranks;
  int cap, count, nranks;
  double us_max;
  long us_rank;
} overdue;
static overdue *ods;
static int n_ods, cap_ods;

/* registered memory of one rank of a communicator: comm_windows/comm_bytes after each registration and
 * deregistration that changed them, in the rank's order (t: the line's time, seconds, -1 none) */
typedef struct {
  double t;
  int64_t bytes;
  int32_t windows;
} mpt;
struct mrank {
  mpt *p;
  int n, cap;
  int64_t peak_bytes, peak_seq;
  int32_t peak_windows;
};

/* the exit summary of each process (fn=summary with window_bytes ...); -1: key not in the line */
typedef struct {
  char host[64];
  long pid, windows_live, window_bytes, window_bytes_peak;
} psum;
static psum *psums;
static int n_psums, cap_psums;

static long n_budget, n_budget_unknown; /* fn=budget WARNs; of which on a communicator not identified */

/* host:pid:comm pointer -> cid, from every line that has both (fn=budget names its communicator only by
 * pointer, in its message); the last one looked up is checked first (a file is mostly one communicator) */
typedef struct cptr {
  char *key;
  uint64_t cid;
  UT_hash_handle hh;
} cptr;
static cptr *cptrs;
static struct {
  long pid;
  char host[64], comm[32];
  int host_n, comm_n;
  uint64_t cid;
  int set;
} clast;

static void cptr_key(char *k, size_t n, slice host, long pid, const char *comm, int comm_n) {
  snprintf(k, n, "%.*s:%ld:%.*s", host.n > 60 ? 60 : host.n, host.p ? host.p : "", pid, comm_n > 30 ? 30 : comm_n, comm);
}

static void note_comm_ptr(const event *e, uint64_t cid) {
  if (clast.set && clast.pid == e->pid && clast.cid == cid && clast.comm_n == e->comm.n &&
      !memcmp(clast.comm, e->comm.p, (size_t)e->comm.n) && clast.host_n == e->host.n &&
      (!e->host.n || !memcmp(clast.host, e->host.p, (size_t)e->host.n)))
    return;
  if (e->comm.n >= (int)sizeof clast.comm || e->host.n >= (int)sizeof clast.host) return;
  clast.set = 1;
  clast.pid = e->pid;
  clast.cid = cid;
  copy_slice(clast.comm, sizeof clast.comm, e->comm);
  copy_slice(clast.host, sizeof clast.host, e->host);
  clast.comm_n = e->comm.n;
  clast.host_n = e->host.n;
  char k[128];
  cptr_key(k, sizeof k, e->host, e->pid, e->comm.p, e->comm.n);
  cptr *c;
  HASH_FIND_STR(cptrs, k, c);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c || !(c->key = strdup(k))) { perror("ncclguard-report"); exit(2); }
    HASH_ADD_KEYPTR(hh, cptrs, c->key, strlen(c->key), c);
  }
  c->cid = cid;
}

static void mark_rank(uint8_t **set, int *cap, long r) {
  if (r < 0 || r >= MAX_RANK) return;
  if (!grow((void **)set, cap, (int)r + 1, 1)) { perror("ncclguard-report"); exit(2); }
  (*set)[r] = 1;
}

/* fn=budget: "communicator 0x... (rank R): N live windows register B bytes, past NCCLGUARD_WINDOW_BUDGET=X ..." */
static void note_budget(const event *e) {
  n_budget++;
  char m[512];
  copy_slice(m, sizeof m, e->msg);
  const char *p = strstr(m, "communicator 0x");
  comm *c = NULL;
  if (p) {
    p += 13;
    int n = (int)strcspn(p, " ");
    char k[128];
    cptr_key(k, sizeof k, e->host, e->pid, p, n);
    cptr *cp;
    HASH_FIND_STR(cptrs, k, cp);
    if (cp) c = get_comm(cp->cid);
  }
  if (!c) { n_budget_unknown++; return; }
  c->budget_warns++;
  const char *r = strstr(m, "(rank ");
  if (r) mark_rank(&c->budget_ranks, &c->budget_cap, strtol(r + 6, NULL, 10));
  const char *b = strstr(m, "NCCLGUARD_WINDOW_BUDGET=");
  if (b) c->budget = strtod(b + 24, NULL);
}

static void note_summary(const event *e) {
  if (e->window_bytes < 0 && e->window_bytes_peak < 0 && e->windows_live < 0) return; /* an older library's */
  if (!grow((void **)&psums, &cap_psums, n_psums + 1, sizeof *psums)) { perror("ncclguard-report"); exit(2); }
  psum *s = &psums[n_psums++];
  copy_slice(s->host, sizeof s->host, e->host);
  s->pid = e->pid;
  s->windows_live = e->windows_live;
  s->window_bytes = e->window_bytes;
  s->window_bytes_peak = e->window_bytes_peak;
}

static void note_overdue(const event *e, uint64_t cid) {
  char call[96];
  copy_unescaped(call, sizeof call, e->call);
  if (!call[0]) snprintf(call, sizeof call, "a call into NCCL");
  overdue *o = NULL;
  for (int i = 0; i < n_ods && !o; i++)
    if (ods[i].cid == cid && ods[i].seq == e->seq && !strcmp(ods[i].call, call)) o = &ods[i];
  if (!o) {
    if (!grow((void **)&ods, &cap_ods, n_ods + 1, sizeof *ods)) { perror("ncclguard-report"); exit(2); }
    o = &ods[n_ods++];
    o->cid = cid;
    o->seq = e->seq;
    snprintf(o->call, sizeof o->call, "%s", call);
    o->us_max = -1;
    o->us_rank = -1;
    if (cid) get_comm(cid); /* its place among the communicators */
  }
  if (e->nranks > o->nranks && e->nranks <= MAX_RANK) o->nranks = (int)e->nranks;
  if (e->rank >= 0 && e->rank < MAX_RANK && !(e->rank < o->cap && o->ranks[e->rank])) {
    mark_rank(&o->ranks, &o->cap, e->rank);
    o->count++;
  }
  if (e->us > o->us_max) { o->us_max = e->us; o->us_rank = e->rank; }
}

static void note_mem(comm *c, int r, const event *e) {
  if (!grow((void **)&c->mr, &c->mr_cap, r + 1, sizeof *c->mr)) { perror("ncclguard-report"); exit(2); }
  if (!c->has_mem) c->all_ts = 1;
  c->has_mem = 1;
  c->all_ts &= e->has_ts;
  struct mrank *m = &c->mr[r];
  if (!grow((void **)&m->p, &m->cap, m->n + 1, sizeof *m->p)) { perror("ncclguard-report"); exit(2); }
  int64_t b = e->comm_bytes;
  int32_t w = e->comm_windows >= 0 ? (int32_t)e->comm_windows : 0;
  m->p[m->n++] = (mpt){e->has_ts ? e->ts : -1, b, w};
  if (m->n == 1 || b > m->peak_bytes) {
    m->peak_bytes = b;
    m->peak_windows = w;
    m->peak_seq = e->seq;
  }
}

static void feed(const event *e, const char *file, int file_idx, long line) {
  n_events++;
  if (e->schema > NG_LOG_SCHEMA && seq_eq(e->fn, "log") && !newer_schema++)
    fprintf(stderr, "ncclguard-report: %s was written with log schema %ld, newer than this report's (%d): keys it does "
            "not know are skipped\n", file, e->schema, NG_LOG_SCHEMA);
  if (opt_trace_on) trace_add(e);
  int bad_result = e->result.n > 0 && !seq_eq(e->result, "ncclSuccess");
  int warnish = seq_eq(e->level, "WARN") || seq_eq(e->level, "ERROR") || seq_eq(e->level, "warn") || seq_eq(e->level, "error");
  if (bad_result && seq_eq(e->fn, "ncclMemAlloc")) {
    n_memalloc_failed++;
    consider(&fmemalloc, e, file, file_idx, line);
  } else if ((warnish && bad_result) || seq_eq(e->decision, "error")) {
    n_error_lines++;
    consider(&ferr, e, file, file_idx, line);
  } else if (seq_eq(e->decision, lib_decision[LIB_D_DEGRADE])) {
    consider(&fdegrade, e, file, file_idx, line);
  }
  uint64_t cid = 0;
  int has_cid = e->cid.n > 0 && slice_hex(e->cid, &cid) && cid != 0; /* cid 0: no communicator (NULL comm) */
  if (has_cid && e->comm.n > 2) note_comm_ptr(e, cid);
  if (e->fn.n && e->fn.p[0] != 'n') { /* an event, not an NCCL function */
    if (seq_eq(e->fn, "summary")) { note_summary(e); return; }
    if (seq_eq(e->fn, "budget")) note_budget(e);
    else if (seq_eq(e->fn, "stuck")) note_overdue(e, cid);
  }
  if (e->comm_bytes >= 0 && has_cid && e->rank >= 0 && e->rank < MAX_RANK) note_mem(get_comm(cid), (int)e->rank, e);
  if (seq_eq(e->decision, "internal")) return; /* NCCL's own call */
  int outcome = decision_of(e->decision);
  int wfn = is_window_fn(e->fn);
  if ((outcome == D_DEGRADE || outcome == D_ERROR) && wfn) count_reason(e);
  if (!has_cid) {
    if (outcome != D_NONE && wfn) n_null_comm++;
    return;
  }
  comm *c = get_comm(cid);
  if (e->nranks > 0 && e->nranks <= MAX_RANK && e->nranks > c->nranks) c->nranks = (int)e->nranks;
  if (e->rank < 0 || e->rank >= MAX_RANK) return;
  int r = (int)e->rank;
  if (r > c->max_rank) c->max_rank = r;
  if (!grow((void **)&c->seen, &c->seen_cap, r + 1, 1)) { perror("ncclguard-report"); exit(2); }
  c->seen[r] = 1;
  if (e->seq < 0 || !wfn) return;
  window *w = get_window(cid, e->seq);
  if (!grow((void **)&w->r, &w->cap, r + 1, sizeof(rank_rec))) { perror("ncclguard-report"); exit(2); }
  rank_rec *rr = &w->r[r];
  if (!rr->seen) rr->us = -1;
  rr->seen = 1;
  if (seq_eq(e->decision, lib_decision[LIB_D_RETRY]) || e->attempt > 1) rr->retried = 1;
  if (e->size >= 0) { /* the window's layout (a registration line: agree and warmup have no size) */
    rr->lay |= 1;
    rr->size = e->size;
    rr->flags = e->flags >= 0 && e->flags <= INT32_MAX ? (int32_t)e->flags : -1;
  }
  if (e->reason.n >= 15 && !memcmp(e->reason.p + e->reason.n - 15, "layout_mismatch", 15)) rr->lay |= 2;
  int d = decision_of(e->decision);
  if (d != D_NONE) {
    rr->dec = (uint8_t)d;
    rr->us = e->us;
  } else if (rr->dec == D_NONE && e->us > rr->us) {
    rr->us = e->us;
  }
}

static void parse_buffer(char *buf, size_t len, const char *file, int file_idx) {
  char *p = buf, *end = buf + len;
  long line = 0;
  while (p < end) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    char *le = nl ? nl : end;
    line++;
    n_lines++;
    event e;
    event_init(&e);
    const char *q = p;
    while (q < le && (*q == ' ' || *q == '\t')) q++;
    int ok = (q < le && *q == '{') ? parse_json(q, le, &e) : parse_text(p, le, &e);
    if (ok) feed(&e, file, file_idx, line);
    p = nl ? nl + 1 : end;
  }
}

static char *rbuf;
static size_t rcap;

static int read_fd(int fd, size_t *len) {
  *len = 0;
  for (;;) {
    if (*len + 65536 > rcap) {
      size_t n = rcap ? rcap * 2 : 1 << 20;
      while (n < *len + 65536) n *= 2;
      char *q = realloc(rbuf, n);
      if (!q) return -1;
      rbuf = q;
      rcap = n;
    }
    ssize_t got = read(fd, rbuf + *len, rcap - *len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) return 0;
    *len += (size_t)got;
  }
}

static int read_errors;

static void read_file(const char *path) {
  int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "ncclguard-report: %s: %s\n", path, strerror(errno));
    read_errors++;
    return;
  }
  size_t len;
  if (read_fd(fd, &len) != 0) {
    fprintf(stderr, "ncclguard-report: %s: %s\n", path, strerror(errno));
    read_errors++;
  } else {
    parse_buffer(rbuf, len, strcmp(path, "-") == 0 ? "<stdin>" : path, (int)n_files);
    n_files++;
  }
  if (fd != 0) close(fd);
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* every *.log and *.jsonl below `path`; returns how many files it read */
static int read_dir(const char *path, int depth) {
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "ncclguard-report: %s: %s\n", path, strerror(errno));
    read_errors++;
    return 0;
  }
  int found = 0;
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    if (!grow((void **)&names, &cap, n + 1, sizeof *names)) break;
    names[n++] = strdup(de->d_name);
  }
  closedir(d);
  if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str); /* stable input order: stable "first" */
  for (int i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]);
    struct stat st;
    if (stat(full, &st) == 0) {
      if (S_ISDIR(st.st_mode) && depth < 16) found += read_dir(full, depth + 1);
      else if (S_ISREG(st.st_mode) && (has_suffix(names[i], ".log") || has_suffix(names[i], ".jsonl"))) {
        read_file(full);
        found++;
      }
    }
    free(names[i]);
  }
  free(names);
  return found;
}

/* ---- output ---- */

static int opt_json, opt_quiet;

/* rank list of the ranks r < n with cls[r] == want, as "0-3,7"; at most `max` characters */
static void rank_list(char *out, size_t max, const uint8_t *cls, int n, int want) {
  size_t o = 0;
  int count = 0, shown = 0;
  out[0] = 0;
  for (int r = 0; r < n; r++) {
    if (cls[r] != want) continue;
    int s = r;
    while (r + 1 < n && cls[r + 1] == want) r++;
    count += r - s + 1;
    char item[32];
    if (r == s) snprintf(item, sizeof item, "%d", s);
    else snprintf(item, sizeof item, "%d-%d", s, r);
    if (o + strlen(item) + 24 < max) {
      o += (size_t)snprintf(out + o, max - o, "%s%s", shown ? "," : "", item);
      shown += r - s + 1;
    }
  }
  if (shown < count) snprintf(out + o, max - o, ",... (%d ranks)", count);
}

typedef struct {
  window *w;
  comm *c;
  int n; /* ranks considered */
  int cnt[D_N];
  int retried;
  double mn, med, mx;
  int timed;
  int status; /* 0 ok, 1 divergent, 2 stuck */
  uint8_t *cls;
} wsum;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int cmp_wsum(const void *a, const void *b) {
  const wsum *x = a, *y = b;
  if (x->c->order != y->c->order) return x->c->order - y->c->order;
  return x->w->key.seq < y->w->key.seq ? -1 : x->w->key.seq > y->w->key.seq;
}

static void summarize(wsum *s, double *tmp) {
  window *w = s->w;
  comm *c = s->c;
  int n = c->nranks > 0 ? c->nranks : c->max_rank + 1;
  if (w->cap > n) {
    for (int r = n; r < w->cap; r++)
      if (w->r[r].seen) n = r + 1; /* a rank beyond nranks: count it anyway */
  }
  s->n = n;
  s->cls = calloc((size_t)n + 1, 1);
  if (!s->cls) { perror("ncclguard-report"); exit(2); }
  int nt = 0;
  for (int r = 0; r < n; r++) {
    rank_rec *rr = r < w->cap ? &w->r[r] : NULL;
    int k;
    if (!rr || !rr->seen) k = D_MISSING;
    else if (rr->dec == D_NONE) k = D_STUCK;
    else k = rr->dec;
    s->cls[r] = (uint8_t)k;
    s->cnt[k]++;
    if (rr && rr->retried) s->retried++;
    if (rr && rr->seen && rr->us >= 0) tmp[nt++] = rr->us;
  }
  s->timed = nt;
  if (nt) {
    qsort(tmp, (size_t)nt, sizeof *tmp, cmp_double);
    s->mn = tmp[0];
    s->mx = tmp[nt - 1];
    s->med = nt % 2 ? tmp[nt / 2] : (tmp[nt / 2 - 1] + tmp[nt / 2]) / 2;
  }
  int classes = 0;
  for (int k = 1; k < D_N; k++)
    if (s->cnt[k]) classes++;
  s->status = classes > 1 ? 1 : (s->cnt[D_STUCK] == n ? 2 : 0);
}

/* The reasons, with their level and advice: the library's own table (shim/reasons.def). */
static const struct {
  const char *name, *level, *advice;
} reasons[] = {
#define NG_REASON(id, name, level, advice) {name, #level, advice},
#define NG_HOOK_REASON(name, level, advice) {name, #level, advice},
#include "../shim/reasons.def"
#undef NG_REASON
#undef NG_HOOK_REASON
};

/* the table's row for a logged reason ("peer_" + name: the same reason, on another rank) */
static int reason_row(const char *reason) {
  const char *r = strncmp(reason, "peer_", 5) == 0 ? reason + 5 : reason;
  for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
    if (!strcmp(r, reasons[i].name)) return (int)i;
  return -1;
}

static const char *diagnosis(const char *reason, const char *result) {
  int row = reason_row(reason);
  if (row > 0 && reasons[row].advice[0]) return reasons[row].advice; /* row 0 is "ok": no advice */
  static const struct {
    const char *key, *text;
  } u[] = {
      {"ncclUnhandledCudaError", "a CUDA call inside NCCL failed: typically a non-VMM (cudaMalloc) buffer or registration during graph capture; NCCL_DEBUG=WARN shows which"},
      {"ncclSystemError", "a system call failed (shared memory, sockets, file descriptors): check /dev/shm size and ulimits"},
      {"ncclInternalError", "NCCL internal error: the communicator may be damaged by an earlier failure; look at the ranks' first errors"},
      {"ncclInvalidArgument", "NCCL rejected an argument: NULL communicator, buffer or window, or a misaligned buffer"},
      {"ncclInvalidUsage", "invalid usage: e.g. a non-blocking communicator still initialising, or a missing NCCL function"},
      {"ncclRemoteError", "a peer failed or disconnected: look at the other ranks' logs"},
      {"ncclInProgress", "a non-blocking operation had not completed"},
  };
  for (size_t i = 0; i < sizeof u / sizeof *u; i++)
    if (!strcmp(result, u[i].key)) return u[i].text;
  return "see msg; rerun with NCCLGUARD_LOG=trace and NCCL_DEBUG=WARN for details";
}

/* The diagnosis of a first error: the call's own where the reason's advice would speak of another call. A failed
 * ncclMemAlloc is an allocation; an ncclDevCommCreate that NCCL failed (reason nccl_error, whose advice speaks of a
 * registration) is the device communicator, not a window: NCCL 2.29+ refuse requirements without
 * NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER's magic (2.28's device API: PyTorch 2.11 on a newer NCCL), and NCCL 2.28
 * across nodes without GIN answers "GIN not supported." (docs/PYTORCH.md §5; tests/fake/README.md). */
static const char *first_diagnosis(const char *fn, const char *reason, const char *result) {
  if (!strcmp(fn, "ncclMemAlloc"))
    return "NCCL could not allocate the buffer (out of device memory, or no cuMem): the application allocates less or "
           "falls back to a plain buffer; the line says whether a CUDA error was left";
  const char *r = strncmp(reason, "peer_", 5) == 0 ? reason + 5 : reason;
  if (strcmp(fn, "ncclDevCommCreate") != 0 || strcmp(r, "nccl_error") != 0) return diagnosis(reason, result);
  static char b[1024];
  if (!strcmp(result, "ncclInvalidUsage"))
    snprintf(b, sizeof b, "NCCL failed to create the device communicator (ncclDevCommCreate), not a window registration: "
             "on NCCL 2.29+ the requirements lack NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER's magic (a program built "
             "against NCCL 2.28's device API, PyTorch 2.11 say: load the NCCL it was built with, or a build against this "
             "NCCL); on NCCL 2.28 with ranks on several nodes, \"GIN not supported.\" (no GIN plugin); NCCL_DEBUG=WARN "
             "says which");
  else
    snprintf(b, sizeof b, "NCCL failed to create the device communicator (ncclDevCommCreate), not a window registration: %s",
             diagnosis("", result));
  return b;
}

static void json_str(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') printf("\\%c", *p);
    else if (*p < 0x20) printf("\\u%04x", *p);
    else putchar(*p);
  }
  putchar('"');
}

static void fmt_us(char *b, size_t n, double v) {
  if (v >= 1e6) snprintf(b, n, "%.2fs", v / 1e6);
  else if (v >= 1e4) snprintf(b, n, "%.1fms", v / 1e3);
  else snprintf(b, n, "%.0fus", v);
}

/* the classes present in a window, largest first, "register 0,2-7 | missing 1" */
static void decision_lists(const wsum *s, char *out, size_t max, const char *sep) {
  int order[D_N], n = 0;
  for (int k = 1; k < D_N; k++)
    if (s->cnt[k]) order[n++] = k;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (s->cnt[order[j]] > s->cnt[order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < n && o < max; i++) {
    char l[512];
    rank_list(l, sizeof l, s->cls, s->n, order[i]);
    o += (size_t)snprintf(out + o, max - o, "%s%s %s", i ? sep : "", dname[order[i]], l);
  }
}

/* whether the advice `diag` already stands in `msg` (the library's message is built from the same
 * table): then it is not printed twice */
static int said_in(const char *msg, const char *diag) {
  char head[48];
  size_t k = strnlen(diag, sizeof head - 1); /* its first 47 characters */
  memcpy(head, diag, k);
  head[k] = 0;
  return msg[0] && strstr(msg, head) != NULL;
}

/* an overdue call (fn=stuck) on the first error's communicator, at its step */
static int overdue_at(const first_error *f) {
  uint64_t cid;
  if (!f->cid[0] || !slice_hex((slice){f->cid, (int)strlen(f->cid)}, &cid)) return 0;
  for (int i = 0; i < n_ods; i++)
    if (ods[i].cid == cid && (ods[i].seq == f->seq || ods[i].seq < 0)) return 1;
  return 0;
}

/* The first error (or degraded window) as text lines into out: who (a rank, or the NULL
 * communicator, which has none: "rank -1" in the log), what, the message, where, and the
 * diagnosis when the message does not already say it. */
static void first_text(char *out, size_t n, const char *title, const first_error *f) {
  size_t o = 0;
#define FT_ADD(...)                                                                        \
  do {                                                                                     \
    if (o < n) o += (size_t)snprintf(out + o, n - o, __VA_ARGS__);                         \
  } while (0)
  const char *host = f->host[0] ? f->host : "?";
  if (f->rank >= 0) FT_ADD("%s: rank %ld (host %s, pid %ld)", title, f->rank, host, f->pid);
  else if (!strcmp(f->reason, "null_comm") || (!f->cid[0] && strstr(f->fn, "WindowRegister")))
    FT_ADD("%s: a registration on a NULL communicator, which has no rank (\"rank -1\" in the log; host %s, pid %ld)",
           title, host, f->pid);
  else FT_ADD("%s: no rank known yet (\"rank -1\" in the log; host %s, pid %ld)", title, host, f->pid);
  if (f->cid[0]) FT_ADD(" comm %s", f->cid);
  if (f->seq >= 0) FT_ADD(" seq %lld", (long long)f->seq);
  FT_ADD("\n  fn=%s result=%s decision=%s reason=%s", f->fn[0] ? f->fn : "-", f->result[0] ? f->result : "-",
         f->decision[0] ? f->decision : "-", f->reason[0] ? f->reason : "-");
  if (f->bad_rank >= 0) FT_ADD(" bad_rank=%ld", f->bad_rank);
  const char *diag = first_diagnosis(f->fn, f->reason, f->result);
  FT_ADD("\n  msg: %s\n  at: %s:%ld\n", f->msg[0] ? f->msg : "-", f->file, f->line);
  if (!said_in(f->msg, diag)) FT_ADD("  diagnosis: %s\n", diag);
  if (f->bad_rank >= 0 && f->bad_rank != f->rank)
    FT_ADD("  the check failed on rank %ld first: read that rank's log\n", f->bad_rank);
  int row = reason_row(f->reason);
  if (row >= 0 && (!strcmp(reasons[row].name, "timeout") || !strcmp(reasons[row].name, "out_of_step"))) {
    if (overdue_at(f)) FT_ADD("  the ranks named under \"calls overdue in NCCL\" waited inside NCCL there\n");
    else FT_ADD("  some rank never reached this registration: the divergent windows above name it\n");
  }
#undef FT_ADD
}

static void print_first(const char *title, const first_error *f) {
  static char b[16384];
  first_text(b, sizeof b, title, f);
  printf("\n%s", b);
}

static void json_first(const first_error *f) {
  if (!f->set) { printf("null"); return; }
  printf("{\"file\":");
  json_str(f->file);
  printf(",\"line\":%ld,\"host\":", f->line);
  json_str(f->host);
  printf(",\"pid\":%ld,\"rank\":%ld,\"level\":", f->pid, f->rank);
  json_str(f->level);
  printf(",\"fn\":");
  json_str(f->fn);
  printf(",\"cid\":");
  json_str(f->cid);
  printf(",\"seq\":%lld,\"result\":", (long long)f->seq);
  json_str(f->result);
  printf(",\"decision\":");
  json_str(f->decision);
  printf(",\"reason\":");
  json_str(f->reason);
  printf(",\"bad_rank\":%ld,\"msg\":", f->bad_rank);
  json_str(f->msg);
  printf(",\"diagnosis\":");
  json_str(first_diagnosis(f->fn, f->reason, f->result));
  printf("}");
}

/* ---- layouts that part, overdue calls, registered memory: computed once, then written as text, JSON, HTML ---- */

static void fmt_bytes(char *b, size_t n, double v) {
  if (v >= 1024.0 * 1024 * 1024) snprintf(b, n, "%.1f GiB", v / (1024.0 * 1024 * 1024));
  else if (v >= 1024.0 * 1024) snprintf(b, n, "%.1f MiB", v / (1024.0 * 1024));
  else if (v >= 1024.0) snprintf(b, n, "%.1f KiB", v / 1024.0);
  else snprintf(b, n, "%.0f B", v);
}

/* "rank 3" or "ranks 0-2,5" */
static void ranks_words(char *out, size_t max, const uint8_t *cls, int n, int want) {
  int count = 0;
  for (int r = 0; r < n; r++) count += cls[r] == want;
  int o = snprintf(out, max, "%s ", count == 1 ? "rank" : "ranks");
  rank_list(out + o, max - (size_t)o, cls, n, want);
}

#define MAX_LGROUPS 16
static int n_parted, n_parted_mismatch, n_sizes_differ;

/* the window where the ranks' layouts part (info: where only their size arguments differ): groups of ranks
 * by (size, flags), in words and JSON */
static void build_part(const wsum *s, int info) {
  const window *w = s->w;
  int n = s->n;
  uint8_t *g = calloc((size_t)n + 1, 1), *mm = calloc((size_t)n + 1, 1);
  if (!g || !mm) { perror("ncclguard-report"); exit(2); }
  int64_t gsize[MAX_LGROUPS];
  int32_t gflags[MAX_LGROUPS];
  int ng = 0, other = 0, nosize = 0, nmm = 0;
  for (int r = 0; r < n; r++) {
    const rank_rec *rr = r < w->cap ? &w->r[r] : NULL;
    if (rr && rr->seen && (rr->lay & 2)) mm[r] = 1, nmm++;
    if (!rr || !rr->seen || !(rr->lay & 1)) { g[r] = 0; nosize++; continue; }
    int k = 0;
    while (k < ng && (gsize[k] != rr->size || gflags[k] != rr->flags)) k++;
    if (k == ng && ng < MAX_LGROUPS) { gsize[ng] = rr->size; gflags[ng] = rr->flags; ng++; }
    if (k < ng) g[r] = (uint8_t)(k + 1);
    else g[r] = MAX_LGROUPS + 1, other++;
  }
  sbuf t = {0}, j = {0};
  char b[640], l[600];
  snprintf(b, sizeof b, "%s at step %lld: ", info ? "size arguments differ" : "layouts part", (long long)w->key.seq);
  sb_puts(&t, b);
  snprintf(b, sizeof b, "{\"seq\":%lld,\"groups\":[", (long long)w->key.seq);
  sb_puts(&j, b);
  for (int k = 0; k < ng; k++) {
    ranks_words(l, 512, g, n, k + 1);
    if (gflags[k] >= 0) snprintf(b, sizeof b, "%s%s %lld B flags=%d", k ? ", " : "", l, (long long)gsize[k], gflags[k]);
    else snprintf(b, sizeof b, "%s%s %lld B", k ? ", " : "", l, (long long)gsize[k]);
    sb_puts(&t, b);
    rank_list(l, 512, g, n, k + 1);
    snprintf(b, sizeof b, "%s{\"ranks\":\"%s\",\"size\":%lld,\"flags\":", k ? "," : "", l, (long long)gsize[k]);
    sb_puts(&j, b);
    if (gflags[k] >= 0) snprintf(b, sizeof b, "%d}", gflags[k]);
    else snprintf(b, sizeof b, "null}");
    sb_puts(&j, b);
  }
  if (other) {
    ranks_words(l, 512, g, n, MAX_LGROUPS + 1);
    snprintf(b, sizeof b, "%s%s other sizes or flags", ng ? ", " : "", l);
    sb_puts(&t, b);
  }
  sb_puts(&j, "],\"no_size\":\"");
  if (nosize) {
    ranks_words(l, 512, g, n, 0);
    snprintf(b, sizeof b, "%s%s no size logged (no registration line)", ng || other ? ", " : "", l);
    sb_puts(&t, b);
    rank_list(l, 512, g, n, 0);
    sb_puts(&j, l);
  }
  sb_puts(&j, "\",\"layout_mismatch\":\"");
  sb_puts(&t, " (");
  if (nmm) {
    rank_list(l, 512, mm, n, 1);
    sb_puts(&j, l);
    snprintf(b, sizeof b, "reason layout_mismatch on %s %s; ", nmm == 1 ? "rank" : "ranks", l);
    sb_puts(&t, b);
  }
  static char dl[1 << 16];
  decision_lists(s, dl, sizeof dl, " | ");
  if (info)
    sb_puts(&t, "not a parting: NCCL places each window's allocation, not the size argument, and from 2.30.7 "
                "takes unequal sizes; ncclguard compares the allocations and logs reason=layout_mismatch where "
                "they part; ");
  sb_puts(&t, "outcome: ");
  sb_puts(&t, dl);
  sb_puts(&t, ")");
  sb_puts(&j, "\",\"text\":");
  json_quote(&j, t.p, t.n);
  sb_puts(&j, "}");
  struct layout_part *p = calloc(1, sizeof *p);
  if (!p) { perror("ncclguard-report"); exit(2); }
  p->seq = w->key.seq;
  p->text = t.p;
  p->json = j.p;
  if (info) {
    s->c->sizes = p;
    n_sizes_differ++;
  } else {
    s->c->part = p;
    n_parted++;
    n_parted_mismatch += nmm > 0;
  }
  free(g);
  free(mm);
}

/* per communicator, the first window (ws is sorted by communicator, then seq) where the layouts part: a rank
 * logged reason=layout_mismatch (ncclguard compared the allocations, or the flags, and refused, or NCCL
 * takes unequal sizes and the line says so at INFO without it), or the flags differ. A line's `size` is the
 * argument, which NCCL does not place (docs/NCCL.md §11): sizes that differ alone are shown apart, as
 * information, at the first such step before any parting. */
static void find_layout_parts(const wsum *ws, int nw) {
  for (int k = 0; k < nw; k++) {
    const wsum *s = &ws[k];
    if (s->c->part) continue;
    const window *w = s->w;
    int have = 0, parts = 0, sizes = 0;
    int64_t sz = 0;
    int32_t fl = 0;
    for (int r = 0; r < s->n && r < w->cap && !parts; r++) {
      const rank_rec *rr = &w->r[r];
      if (!rr->seen) continue;
      if (rr->lay & 2) parts = 1;
      else if (rr->lay & 1) {
        if (!have) have = 1, sz = rr->size, fl = rr->flags;
        else if (fl < 0) fl = rr->flags; /* the first rank whose flags are known is the reference */
        else if (rr->flags != fl && rr->flags >= 0) parts = 1;
        if (have && !parts) sizes |= rr->size != sz;
      }
    }
    if (parts) build_part(s, 0);
    else if (sizes && !s->c->sizes) build_part(s, 1);
  }
}

static int comm_order_of(uint64_t cid) {
  comm *c;
  HASH_FIND(hh, comms, &cid, sizeof cid, c);
  return c ? c->order : -1;
}
static int cmp_overdue(const void *a, const void *b) {
  const overdue *x = a, *y = b;
  int ox = comm_order_of(x->cid), oy = comm_order_of(y->cid);
  if (ox != oy) return ox - oy;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  return strcmp(x->call, y->call);
}

/* one overdue call in words (without the call's name, which is log input: the caller writes it) */
static void overdue_text(char *out, size_t max, const overdue *o) {
  char l[600], t[32];
  rank_list(l, 512, o->ranks, o->cap, 1);
  fmt_us(t, sizeof t, o->us_max);
  size_t k = (size_t)snprintf(out, max, ", comm %016llx", (unsigned long long)o->cid);
  if (o->seq >= 0) k += (size_t)snprintf(out + k, max - k, ", step %lld", (long long)o->seq);
  k += (size_t)snprintf(out + k, max - k, ": %s %s", o->count == 1 ? "rank" : "ranks", l);
  if (o->nranks > 0) k += (size_t)snprintf(out + k, max - k, " (%d of %d)", o->count, o->nranks);
  k += (size_t)snprintf(out + k, max - k, ", longest %s (rank %ld)", t, o->us_rank);
  if (o->nranks > o->count && k < max) {
    uint8_t *not = calloc((size_t)o->nranks + 1, 1);
    if (!not) { perror("ncclguard-report"); exit(2); }
    for (int r = 0; r < o->nranks; r++) not[r] = !(r < o->cap && o->ranks[r]);
    rank_list(l, 512, not, o->nranks, 1);
    snprintf(out + k, max - k, "; not reported by %s %s", o->nranks - o->count == 1 ? "rank" : "ranks", l);
    free(not);
  }
}

/* registered memory of a communicator, over its ranks */
typedef struct {
  int ranks;                     /* ranks with figures */
  int64_t end_max, end_min, peak;
  int32_t end_windows, peak_windows;
  int64_t peak_seq;
  uint8_t *cls;                  /* 1: has figures; 2: holds end_max; 4: reached the peak */
  int n;
} memsum;

static void mem_summary(const comm *c, memsum *m) {
  memset(m, 0, sizeof *m);
  m->n = c->mr_cap;
  m->cls = calloc((size_t)m->n + 1, 1);
  if (!m->cls) { perror("ncclguard-report"); exit(2); }
  for (int r = 0; r < c->mr_cap; r++) {
    const struct mrank *x = &c->mr[r];
    if (!x->n) continue;
    int64_t e = x->p[x->n - 1].bytes;
    if (!m->ranks || e > m->end_max) m->end_max = e, m->end_windows = x->p[x->n - 1].windows;
    if (!m->ranks || e < m->end_min) m->end_min = e;
    if (!m->ranks || x->peak_bytes > m->peak) m->peak = x->peak_bytes, m->peak_windows = x->peak_windows, m->peak_seq = x->peak_seq;
    m->ranks++;
  }
  for (int r = 0; r < c->mr_cap; r++) {
    const struct mrank *x = &c->mr[r];
    if (!x->n) continue;
    m->cls[r] = 1;
    if (x->p[x->n - 1].bytes == m->end_max) m->cls[r] |= 2;
    if (x->peak_bytes == m->peak) m->cls[r] |= 4;
  }
}

/* the ranks whose class has bit `bit`, as "ranks 0-3" */
static void mem_ranks(char *out, size_t max, const memsum *m, int bit) {
  uint8_t *t = calloc((size_t)m->n + 1, 1);
  if (!t) { perror("ncclguard-report"); exit(2); }
  int k = 0;
  for (int r = 0; r < m->n; r++) k += t[r] = (m->cls[r] & bit) != 0;
  ranks_words(out, max, t, m->n, 1);
  free(t);
}

/* one communicator's registered memory in words (two lines at most, no trailing newline) */
static void mem_text(char *out, size_t max, const comm *c, const memsum *m) {
  char a[32], b[32], p[32], ra[600], rp[600];
  fmt_bytes(a, sizeof a, (double)m->end_max);
  fmt_bytes(b, sizeof b, (double)m->end_min);
  fmt_bytes(p, sizeof p, (double)m->peak);
  mem_ranks(ra, 512, m, 2);
  mem_ranks(rp, 512, m, 4);
  size_t k = (size_t)snprintf(out, max, "comm %016llx  last logged: %d window%s, %s", (unsigned long long)c->cid, m->end_windows,
                              m->end_windows == 1 ? "" : "s", a);
  if (m->end_max >= 1024) k += (size_t)snprintf(out + k, max - k, " (%lld B)", (long long)m->end_max);
  if (k < max) k += (size_t)snprintf(out + k, max - k, " on %s", ra);
  if (m->end_min != m->end_max && k < max) k += (size_t)snprintf(out + k, max - k, " (least: %s)", b);
  if (k < max)
    k += (size_t)snprintf(out + k, max - k, "; peak: %d window%s, %s", m->peak_windows, m->peak_windows == 1 ? "" : "s", p);
  if (m->peak >= 1024 && k < max) k += (size_t)snprintf(out + k, max - k, " (%lld B)", (long long)m->peak);
  if (m->peak_seq >= 0 && k < max) k += (size_t)snprintf(out + k, max - k, " at step %lld", (long long)m->peak_seq);
  if (k < max) k += (size_t)snprintf(out + k, max - k, " on %s", rp);
  if (c->budget_warns && k < max) {
    uint8_t *t = c->budget_ranks;
    char rb[600] = "", bb[48] = "NCCLGUARD_WINDOW_BUDGET";
    if (t) ranks_words(rb, 512, t, c->budget_cap, 1);
    if (c->budget > 0) snprintf(bb, sizeof bb, "NCCLGUARD_WINDOW_BUDGET=%.0f", c->budget);
    snprintf(out + k, max - k, "\n    %ld budget warning%s: past %s bytes%s%s", c->budget_warns, c->budget_warns == 1 ? "" : "s",
             bb, rb[0] ? " on " : "", rb);
  }
}

static int mem_any(void) {
  if (n_psums || n_budget) return 1;
  for (comm *c = comms; c; c = c->hh.next)
    if (c->has_mem) return 1;
  return 0;
}

static int cmp_psum(const void *a, const void *b) {
  const psum *x = a, *y = b;
  if (x->window_bytes != y->window_bytes) return x->window_bytes > y->window_bytes ? -1 : 1;
  if (x->window_bytes_peak != y->window_bytes_peak) return x->window_bytes_peak > y->window_bytes_peak ? -1 : 1;
  return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* the processes' exit summaries in words: lines without a trailing newline, `ind` before each; host names
 * are log input: the HTML writer escapes the whole text */
static void procs_text(sbuf *o, const char *ind) {
  char b[512], x[32], y[32];
  if (n_psums) {
    qsort(psums, (size_t)n_psums, sizeof *psums, cmp_psum);
    long live = 0, wb = 0, unknown = 0;
    const psum *pk = NULL;
    for (int i = 0; i < n_psums; i++) {
      if (psums[i].windows_live > 0) live += psums[i].windows_live;
      if (psums[i].window_bytes > 0) wb += psums[i].window_bytes;
      if (psums[i].window_bytes < 0) unknown++;
      if (!pk || psums[i].window_bytes_peak > pk->window_bytes_peak) pk = &psums[i];
    }
    fmt_bytes(x, sizeof x, (double)wb);
    fmt_bytes(y, sizeof y, (double)(pk->window_bytes_peak > 0 ? pk->window_bytes_peak : 0));
    snprintf(b, sizeof b, "%sprocesses (their exit summary, window_bytes and window_bytes_peak): %d; still registered at exit: "
             "%ld window%s, %s in all; largest peak: %s (host %s, pid %ld)", ind, n_psums, live, live == 1 ? "" : "s", x, y,
             pk->host[0] ? pk->host : "?", pk->pid);
    sb_puts(o, b);
    int shown = 0;
    for (int i = 0; i < n_psums && psums[i].window_bytes > 0; i++) {
      if (shown++ == 8) {
        snprintf(b, sizeof b, "\n%s  ... more (see --json)", ind);
        sb_puts(o, b);
        break;
      }
      fmt_bytes(x, sizeof x, (double)psums[i].window_bytes);
      fmt_bytes(y, sizeof y, (double)psums[i].window_bytes_peak);
      snprintf(b, sizeof b, "\n%s  host %s pid %ld: %ld window%s, %s still registered at exit (peak %s)", ind,
               psums[i].host[0] ? psums[i].host : "?", psums[i].pid, psums[i].windows_live, psums[i].windows_live == 1 ? "" : "s", x, y);
      sb_puts(o, b);
    }
  }
  if (n_budget_unknown) {
    snprintf(b, sizeof b, "%s%s%ld budget warning%s on a communicator the logs do not name by cid (no INFO line of it)", o->n ? "\n" : "",
             ind, n_budget_unknown, n_budget_unknown == 1 ? "" : "s");
    sb_puts(o, b);
  }
}

static void json_ranks_or_null(const uint8_t *set, int cap) {
  if (!set) { printf("null"); return; }
  static char l[1 << 16];
  rank_list(l, sizeof l, set, cap, 1);
  json_str(l);
}

/* per communicator in --json: "layout_part" and "memory" */
static void json_comm_extras(const comm *c) {
  printf(",\"layout_part\":%s,\"sizes_differ\":%s,\"memory\":", c->part ? c->part->json : "null",
         c->sizes ? c->sizes->json : "null");
  if (!c->has_mem && !c->budget_warns) { printf("null"); return; }
  memsum m;
  mem_summary(c, &m);
  static char l[1 << 16];
  printf("{\"ranks\":%d", m.ranks);
  if (m.ranks) {
    uint8_t *t = calloc((size_t)m.n + 1, 1);
    if (!t) { perror("ncclguard-report"); exit(2); }
    for (int r = 0; r < m.n; r++) t[r] = (m.cls[r] & 2) != 0;
    rank_list(l, sizeof l, t, m.n, 1);
    printf(",\"end_windows\":%d,\"end_bytes\":%lld,\"end_bytes_min\":%lld,\"end_ranks\":", m.end_windows, (long long)m.end_max,
           (long long)m.end_min);
    json_str(l);
    for (int r = 0; r < m.n; r++) t[r] = (m.cls[r] & 4) != 0;
    rank_list(l, sizeof l, t, m.n, 1);
    printf(",\"peak_windows\":%d,\"peak_bytes\":%lld,\"peak_seq\":%lld,\"peak_ranks\":", m.peak_windows, (long long)m.peak,
           (long long)m.peak_seq);
    json_str(l);
    free(t);
  }
  printf(",\"budget_warnings\":%ld,\"budget_ranks\":", c->budget_warns);
  json_ranks_or_null(c->budget_ranks, c->budget_cap);
  if (c->budget > 0) printf(",\"budget\":%.0f}", c->budget);
  else printf(",\"budget\":null}");
  free(m.cls);
}

static void json_extras(void) {
  printf(",\"layouts_parted\":%d,\"sizes_differ\":%d,\"overdue_calls\":[", n_parted, n_sizes_differ);
  static char l[1 << 16];
  for (int i = 0; i < n_ods; i++) {
    const overdue *o = &ods[i];
    printf("%s{\"call\":", i ? "," : "");
    json_str(o->call);
    printf(",\"cid\":\"%016llx\",\"seq\":%lld,\"ranks\":", (unsigned long long)o->cid, (long long)o->seq);
    rank_list(l, sizeof l, o->ranks, o->cap, 1);
    json_str(l);
    printf(",\"count\":%d,\"nranks\":%d,\"us_max\":%.1f,\"longest_rank\":%ld}", o->count, o->nranks, o->us_max, o->us_rank);
  }
  printf("],\"budget_warnings\":%ld,\"budget_warnings_unnamed\":%ld,\"processes\":[", n_budget, n_budget_unknown);
  for (int i = 0; i < n_psums; i++) {
    printf("%s{\"host\":", i ? "," : "");
    json_str(psums[i].host);
    printf(",\"pid\":%ld", psums[i].pid);
#define PS_NUM(k) (psums[i].k >= 0 ? printf(",\"" #k "\":%ld", psums[i].k) : printf(",\"" #k "\":null"))
    PS_NUM(windows_live);
    PS_NUM(window_bytes);
    PS_NUM(window_bytes_peak);
#undef PS_NUM
    printf("}");
  }
  printf("]");
}

/* the text sections: layouts, overdue calls (problems, also with -q) and registered memory */
static void text_problems(comm **corder) {
  static char b[1 << 16];
  if (n_parted) {
    printf("\nwindow layouts that part (the first step where a rank logged reason=layout_mismatch or the ranks' "
           "flags differ):\n");
    for (int ci = 0; ci < n_comms; ci++)
      if (corder[ci]->part) printf("  comm %016llx: %s\n", (unsigned long long)corder[ci]->cid, corder[ci]->part->text);
  }
  if (n_sizes_differ && !opt_quiet) {
    printf("\nwindow size arguments that differ (information: the first step, where the layouts do not part):\n");
    for (int ci = 0; ci < n_comms; ci++)
      if (corder[ci]->sizes) printf("  comm %016llx: %s\n", (unsigned long long)corder[ci]->cid, corder[ci]->sizes->text);
  }
  if (n_ods) {
    printf("\ncalls overdue in NCCL (had not returned within NCCLGUARD_TIMEOUT: the log's fn=stuck lines), by call:\n");
    for (int i = 0; i < n_ods; i++) {
      overdue_text(b, sizeof b, &ods[i]);
      printf("  %s%s\n", ods[i].call, b);
    }
  }
}

static void text_memory(comm **corder) {
  if (!mem_any()) return;
  static char b[1 << 16];
  printf("\nregistered memory (live windows and their bytes per rank, from comm_windows and comm_bytes):\n");
  for (int ci = 0; ci < n_comms; ci++) {
    comm *c = corder[ci];
    if (!c->has_mem && !c->budget_warns) continue;
    memsum m;
    mem_summary(c, &m);
    mem_text(b, sizeof b, c, &m);
    printf("  %s\n", b);
    free(m.cls);
  }
  sbuf o = {0};
  procs_text(&o, "  ");
  if (o.n) printf("%s\n", o.p);
  free(o.p);
}

/* ---- --html: the outcome grid as a picture, one self-contained file (no network: inline canvas) ---- */

static const char dcode[D_N] = {'?', 'R', 'D', 'E', 'P', 'S', 'M'};
static const char *dcolor[D_N] = {"#ffffff", "#2e7d32", "#f9a825", "#c62828", "#78909c", "#6a1b9a", "#212121"};

static const char *html_head =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ncclguard-report: outcome grid</title>\n"
    "<style>\nbody{font:14px/1.4 system-ui,sans-serif;margin:1.2em;color:#222}h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.6em}\n"
    ".legend span{display:inline-block;margin-right:1.2em}.sw{display:inline-block;width:1em;height:1em;vertical-align:-0.15em;margin-right:.3em;border:1px solid #888}\n"
    ".grid{display:flex;align-items:flex-start}.rows{font:11px/12px monospace;text-align:right;position:relative;width:64px;flex:none}\n"
    ".rows span{position:absolute;right:4px;white-space:nowrap}.ranks{position:relative;height:16px;font:11px/14px monospace}\n"
    ".ranks span{position:absolute;top:0;white-space:nowrap}.axes{color:#555;margin:.2em 0}.first{background:#fff3f3;border-left:4px solid #c62828;padding:.4em .8em}\n"
    ".degr{background:#fffbea;border-left:4px solid #f9a825;padding:.4em .8em}\n"
    "canvas{image-rendering:pixelated;border:1px solid #bbb}#tip{position:fixed;background:#fff;border:1px solid #888;"
    "padding:2px 6px;font:12px monospace;pointer-events:none;display:none}.div{color:#d500f9;font-weight:bold}pre{white-space:pre-wrap}\n"
    ".err{color:#c62828;font-weight:bold}.key{margin:.8em 0 .2em}\n"
    "</style></head><body>\n";

/* The grid is drawn at the page's width, never scaled by the browser (scaling averages one odd column
 * away): with more ranks than pixel columns, each column is a block of B consecutive ranks coloured by
 * the WORST outcome among them (sev: missing > stuck > error > degrade > pass > register), at least 3
 * px wide, so one bad rank among thousands stays a full-colour column; the tooltip names the block's
 * ranks, its worst outcome and which ranks had it. Redrawn when the window is resized. */
static const char *html_script =
    "<div id=\"tip\"></div>\n<script>\n(function(){\n"
    "var d=JSON.parse(document.getElementById('ncclguard-grid').textContent),tip=document.getElementById('tip');\n"
    "var col={},name={},sev={'?':0,R:1,P:2,D:3,E:4,S:5,M:6};Object.keys(d.codes).forEach(function(k){col[k]=d.codes[k].color;name[k]=d.codes[k].decision;});\n"
    "var out=document.getElementById('grids'),MINW=3;\n"
    "function cell(w,r){return w.cells[r]||'M';}\n"
    "function rr(a,b){return a===b?'rank '+a:'ranks '+a+'-'+b;}\n"
    "function pl(k,w){return k+' '+w+(k===1?'':'s');}\n"
    "function draw(){\n"
    " out.textContent='';var avail=Math.max(200,out.clientWidth-4);\n"
    " d.comms.forEach(function(c){\n"
    "  var n=Math.max(1,c.ranks),W=c.windows.length;\n"
    "  var h=document.createElement('h2');h.textContent='comm '+c.cid+' \\u2014 '+pl(c.ranks,'rank')+' x '+pl(W,'registration')+', '+c.divergent+' divergent';out.appendChild(h);\n"
    "  if(!W){var nw=document.createElement('p');nw.className='axes';nw.textContent='no window registrations: nothing to draw';out.appendChild(nw);return;}\n"
    "  var G=c.windows.some(function(w){return w.status!=='ok';})?12:0;\n"
    "  var cols=Math.min(n,Math.floor((avail-G)/MINW)),B=Math.ceil(n/cols);cols=Math.ceil(n/B);\n"
    "  var cw=Math.max(MINW,Math.min(24,Math.floor((avail-G)/cols))),ch=Math.max(3,Math.min(14,Math.floor(Math.max(300,window.innerHeight-250)/Math.max(W,1))));\n"
    "  var cap=document.createElement('p');cap.className='axes';cap.textContent='columns: '+(n>1?'ranks 0-'+(n-1):'rank 0')+', left to right; rows: '"
    "+(W>1?'registrations seq '+c.windows[0].seq+'-'+c.windows[W-1].seq:W?'registration seq '+c.windows[0].seq:'none')+', top to bottom';out.appendChild(cap);\n"
    "  if(B>1){var p=document.createElement('p');p.textContent='Each column is a block of '+B+' ranks, coloured by the worst outcome among them '"
    "+'(missing > stuck > error > degrade > pass > register); hover it for its ranks.';out.appendChild(p);}\n"
    "  var cv=document.createElement('canvas');cv.width=G+cols*cw;cv.height=Math.max(1,W*ch);cv.style.width=cv.width+'px';cv.style.height=cv.height+'px';\n"
    "  var box=document.createElement('div'),rows=document.createElement('div'),right=document.createElement('div'),ax=document.createElement('div');\n"
    "  box.className='grid';rows.className='rows';ax.className='ranks';rows.style.height=cv.height+'px';rows.style.marginTop='16px';ax.style.width=cv.width+'px';\n"
    "  var lw=String(n-1).length*7+8,T=Math.max(1,Math.min(cols,Math.floor(cols*cw/(B===1?lw:lw*1.5)))),t,jj,lab,x0,last,lastx=G+cols*cw-lw;\n"
    "  for(t=0;t<T;t++){jj=T>1?Math.round(t*(cols-1)/(T-1)):0;last=T>1&&t===T-1;\n"
    "   x0=B===1?G+jj*cw+cw/2-lw/2:last?lastx:G+jj*cw;if(B>1&&!last&&T>1&&x0>lastx-lw)continue;\n"
    "   lab=document.createElement('span');lab.textContent=String(B===1?jj:last?n-1:jj*B);lab.style.left=x0+'px';lab.style.width=lw+'px';\n"
    "   lab.style.textAlign=B===1?'center':last?'right':'left';ax.appendChild(lab);}\n"
    "  var step=Math.max(1,Math.ceil(12/ch));for(t=0;t<W;t+=step){lab=document.createElement('span');lab.textContent='seq '+c.windows[t].seq;lab.style.top=(t*ch+Math.max(0,(ch-12)/2))+'px';rows.appendChild(lab);}\n"
    "  right.appendChild(ax);right.appendChild(cv);box.appendChild(rows);box.appendChild(right);out.appendChild(box);\n"
    "  var x=cv.getContext('2d'),majs=[];\n"
    "  c.windows.forEach(function(w,i){\n"
    "   var cnt={},maj=null,k,r,j;for(r=0;r<n;r++){k=cell(w,r);cnt[k]=(cnt[k]||0)+1;if(maj===null||cnt[k]>cnt[maj])maj=k;}majs.push(maj);\n"
    "   for(j=0;j<cols;j++){var worst=null,odd=false;for(r=j*B;r<Math.min(n,(j+1)*B);r++){k=cell(w,r);if(worst===null||sev[k]>sev[worst])worst=k;if(k!==maj)odd=true;}\n"
    "    x.fillStyle=col[worst];x.fillRect(G+j*cw,i*ch,cw-(cw>=6?1:0),ch);\n"
    "    if(odd&&w.status!=='ok'){x.fillStyle='#d500f9';x.fillRect(G+j*cw,i*ch,cw,Math.max(1,Math.floor(ch/4)));}}\n"
    "   if(w.status!=='ok'){x.fillStyle='#d500f9';x.fillRect(0,i*ch,G-3,ch);}\n"
    "  });\n"
    "  cv.addEventListener('mousemove',function(e){var b=cv.getBoundingClientRect(),sx=cv.width/cv.clientWidth,sy=cv.height/cv.clientHeight;\n"
    "   var j=Math.floor(((e.clientX-b.left-cv.clientLeft)*sx-G)/cw),i=Math.floor((e.clientY-b.top-cv.clientTop)*sy/ch),w=c.windows[i];\n"
    "   if(!w||j<0||j>=cols){tip.style.display='none';return;}\n"
    "   var r0=j*B,r1=Math.min(n,r0+B)-1,cnt={},worst=null,bad=[],k,r;\n"
    "   for(r=r0;r<=r1;r++){k=cell(w,r);cnt[k]=(cnt[k]||0)+1;if(worst===null||sev[k]>sev[worst])worst=k;}\n"
    "   for(r=r0;r<=r1&&bad.length<8;r++)if(cell(w,r)===worst)bad.push(r);\n"
    "   var t=rr(r0,r1)+'  seq '+w.seq+'  ';\n"
    "   if(r0===r1)t+=name[worst];else{t+='worst: '+name[worst]+(cnt[worst]<r1-r0+1?' ('+(cnt[worst]===1?'rank ':'ranks ')+bad.join(',')+(cnt[worst]>bad.length?',...':'')+')':' (all)');\n"
    "    t+='  ['+Object.keys(cnt).sort(function(a,b){return sev[b]-sev[a];}).map(function(k){return name[k]+' '+cnt[k];}).join(', ')+']';}\n"
    "   if(w.status!=='ok')t+='  ('+w.status+'; most ranks: '+name[majs[i]]+')';\n"
    "   tip.textContent=t;tip.style.display='block';tip.style.left=Math.max(0,Math.min(e.clientX+12,window.innerWidth-tip.offsetWidth-8))+'px';tip.style.top=(e.clientY+12)+'px';});\n"
    "  cv.addEventListener('mouseleave',function(){tip.style.display='none';});\n"
    " });\n"
    "}\n"
    "draw();var rt=null,lw=out.clientWidth;window.addEventListener('resize',function(){clearTimeout(rt);rt=setTimeout(function(){if(out.clientWidth!==lw){lw=out.clientWidth;draw();}},150);});\n"
    "})();\n</script>\n";

static void html_esc(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else fputc(*s, f);
  }
}


/* ---- --html: the sections in words, and each communicator's registered bytes over time as an inline SVG ---- */

/* each communicator's layout line (sizes: its size arguments' information line), then the end of the <pre> */
static void html_layout_lines(FILE *f, comm **corder, int sizes) {
  for (int ci = 0; ci < n_comms; ci++) {
    const struct layout_part *p = sizes ? corder[ci]->sizes : corder[ci]->part;
    if (!p) continue;
    fprintf(f, "comm %016llx: ", (unsigned long long)corder[ci]->cid);
    html_esc(f, p->text);
    fputc('\n', f);
  }
  fputs("</pre>\n", f);
}

static void html_problems(FILE *f, comm **corder) {
  static char b[1 << 16];
  if (n_parted) {
    fprintf(f, "<h2%s>window layouts that part</h2>\n<p>The first step", n_parted_mismatch ? " class=\"div\"" : "");
    fputs(" where a rank logged <code>layout_mismatch</code> or the ranks registered windows with different flags, "
          "per communicator:</p>\n<pre class=\"layout\">", f);
    html_layout_lines(f, corder, 0);
  }
  if (n_sizes_differ) {
    fputs("<h2>window size arguments that differ</h2>\n<p>Information: the first step where the ranks passed "
          "different sizes and the layouts do not part, per communicator:</p>\n<pre class=\"sizes\">", f);
    html_layout_lines(f, corder, 1);
  }
  if (n_ods) {
    fputs("<h2 class=\"div\">calls overdue in NCCL</h2>\n<p>Calls into NCCL that had not returned within "
          "<code>NCCLGUARD_TIMEOUT</code> (the log's <code>fn=stuck</code> lines), by call:</p>\n<pre class=\"overdue\">", f);
    for (int i = 0; i < n_ods; i++) {
      overdue_text(b, sizeof b, &ods[i]);
      html_esc(f, ods[i].call);
      html_esc(f, b);
      fputc('\n', f);
    }
    fputs("</pre>\n", f);
  }
}

/* ranks whose series of registered bytes are the same are one line of the plot */
#define MAX_MGROUPS 64
#define PLOT_LINES 6
static const char *plot_color[PLOT_LINES] = {"#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457"};

static int same_series(const struct mrank *a, const struct mrank *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; i++)
    if (a->p[i].bytes != b->p[i].bytes) return 0;
  return 1;
}

static void mem_svg(FILE *f, const comm *c) {
  const double W = 600, H = 170, L = 86, T = 12, Bm = 52, Rm = 16; /* plot area: x L..L+W, y T..T+H */
  int n = c->mr_cap;
  int *grp = malloc(sizeof(int) * ((size_t)n + 1));
  int rep[MAX_MGROUPS], cnt[MAX_MGROUPS], ng = 0, maxn = 0;
  if (!grp) { perror("ncclguard-report"); exit(2); }
  double t0 = 0, t1 = 0, ymax = c->budget > 0 ? c->budget : 0;
  int tset = 0;
  for (int r = 0; r < n; r++) {
    const struct mrank *x = &c->mr[r];
    grp[r] = -1;
    if (!x->n) continue;
    if (x->n > maxn) maxn = x->n;
    if ((double)x->peak_bytes > ymax) ymax = (double)x->peak_bytes;
    for (int i = 0; c->all_ts && i < x->n; i++) {
      if (!tset || x->p[i].t < t0) t0 = x->p[i].t;
      if (!tset || x->p[i].t > t1) t1 = x->p[i].t;
      tset = 1;
    }
    int k = 0;
    while (k < ng && !same_series(&c->mr[rep[k]], x)) k++;
    if (k == ng && ng < MAX_MGROUPS) rep[ng] = r, cnt[ng] = 0, ng++;
    if (k < ng) grp[r] = k, cnt[k]++;
    else grp[r] = MAX_MGROUPS;
  }
  int ts = c->all_ts && tset;
  /* text logs: the i-th change at x = i, each value held until the next, the last one half a step */
  double x0 = ts ? 0 : 0.5, x1 = ts ? t1 - t0 : maxn + 0.5;
  if (x1 <= x0) x1 = x0 + 1;
  if (ymax <= 0) ymax = 1;
  /* the lines drawn: the groups with the highest peaks */
  int order[MAX_MGROUPS];
  for (int k = 0; k < ng; k++) order[k] = k;
  for (int i = 0; i < ng; i++)
    for (int j = i + 1; j < ng; j++)
      if (c->mr[rep[order[j]]].peak_bytes > c->mr[rep[order[i]]].peak_bytes) { int t = order[i]; order[i] = order[j]; order[j] = t; }
  int drawn = ng < PLOT_LINES ? ng : PLOT_LINES;
  fprintf(f, "<svg class=\"mem\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
             "role=\"img\" font-family=\"monospace\" font-size=\"11\">\n<title>comm %016llx: registered bytes per rank over %s</title>\n",
          L + W + Rm, T + H + Bm, L + W + Rm, T + H + Bm, (unsigned long long)c->cid, ts ? "time" : "its registrations");
  /* axes, ticks, labels */
  fprintf(f, "<path d=\"M%.0f %.0f V%.0f H%.0f\" stroke=\"#444\" fill=\"none\"/>\n", L, T, T + H, L + W);
  char lab[48];
  for (int i = 0; i <= 2; i++) {
    double v = ymax * i / 2, y = T + H - H * i / 2;
    fmt_bytes(lab, sizeof lab, v);
    fprintf(f, "<path d=\"M%.0f %.1f H%.0f\" stroke=\"#ddd\"/><text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L, y,
            L + W, L - 5, y + 4, lab);
    double xv = ts ? x0 + (x1 - x0) * i / 2 : i == 0 ? 1 : i == 1 ? (maxn + 1) / 2 : maxn;
    double x = L + W * (xv - x0) / (x1 - x0);
    if (ts) snprintf(lab, sizeof lab, "%.3g s", xv);
    else snprintf(lab, sizeof lab, "%lld", (long long)xv);
    if (!ts && i == 1 && (maxn + 1) / 2 <= 1) continue; /* one tick per value */
    if (!ts && i == 2 && maxn <= 1) continue;
    fprintf(f, "<path d=\"M%.1f %.0f V%.0f\" stroke=\"#444\"/><text x=\"%.1f\" y=\"%.0f\" text-anchor=\"%s\">%s</text>\n", x, T + H,
            T + H + 4, x, T + H + 16, i == 0 ? "start" : i == 2 ? "end" : "middle", lab);
  }
  fprintf(f, "<text class=\"xlabel\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", L + W / 2, T + H + 36,
          ts ? "seconds since the communicator's first registration"
             : "registrations and deregistrations of each rank, in order (the logs have no times)");
  fprintf(f, "<text class=\"ylabel\" transform=\"translate(12 %.0f) rotate(-90)\" text-anchor=\"middle\">registered bytes</text>\n",
          T + H / 2);
  if (c->budget > 0) {
    double y = T + H - H * c->budget / ymax;
    fprintf(f, "<path d=\"M%.0f %.1f H%.0f\" stroke=\"#c62828\" stroke-dasharray=\"5 4\"/><text x=\"%.0f\" y=\"%.1f\" "
               "text-anchor=\"end\" fill=\"#c62828\">NCCLGUARD_WINDOW_BUDGET</text>\n", L, y, L + W, L + W - 4, y - 4);
  }
  /* one step line per group: the bytes hold until the next change; points within one pixel column are
   * drawn as that column's vertical span (so a long run stays a few kB) */
  for (int d = drawn - 1; d >= 0; d--) {
    const struct mrank *x = &c->mr[rep[order[d]]];
    fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\" d=\"", plot_color[d]);
    int col = -1;
    double lo = 0, hi = 0, last = 0;
    int pend = 0;
    for (int i = 0; i < x->n; i++) {
      double xv = ts ? x->p[i].t - t0 : i + 1;
      double px = L + W * (xv - x0) / (x1 - x0), py = T + H - H * (double)x->p[i].bytes / ymax;
      if (i == 0) { /* a communicator has no window before its first registration */
        fprintf(f, "M%.1f %.1fV%.1f", px, T + H, py);
        col = (int)px;
        continue;
      }
      if ((int)px == col) {
        if (!pend) lo = hi = py, pend = 1;
        if (py < lo) lo = py;
        if (py > hi) hi = py;
        last = py;
        continue;
      }
      if (pend) fprintf(f, "V%.1fV%.1fV%.1f", lo, hi, last), pend = 0;
      fprintf(f, "H%.1fV%.1f", px, py);
      col = (int)px;
    }
    if (pend) fprintf(f, "V%.1fV%.1fV%.1f", lo, hi, last);
    fprintf(f, "H%.1f\"/>\n", L + W); /* the last value logged holds to the end */
  }
  fputs("</svg>\n<p class=\"axes\">", f);
  static char l[1 << 16];
  uint8_t *t = calloc((size_t)n + 1, 1);
  if (!t) { perror("ncclguard-report"); exit(2); }
  for (int d = 0; d < drawn; d++) {
    for (int r = 0; r < n; r++) t[r] = grp[r] == order[d];
    ranks_words(l, 4096, t, n, 1);
    char pk[32];
    fmt_bytes(pk, sizeof pk, (double)c->mr[rep[order[d]]].peak_bytes);
    fprintf(f, "<span><i class=\"sw\" style=\"background:%s\"></i>%s (peak %s%s)</span> ", plot_color[d], l, pk,
            ts && cnt[order[d]] > 1 ? "; drawn at the first rank's times" : "");
  }
  int rest = 0;
  for (int r = 0; r < n; r++) {
    int shown = grp[r] < 0;
    for (int d = 0; d < drawn && !shown; d++) shown = grp[r] == order[d];
    rest += t[r] = !shown;
  }
  if (rest) {
    ranks_words(l, 4096, t, n, 1);
    fprintf(f, "<span>not drawn (other lines, lower peaks): %s</span>", l);
  }
  fputs("</p>\n", f);
  free(t);
  free(grp);
}

static void html_memory(FILE *f, comm **corder) {
  if (!mem_any()) return;
  static char b[1 << 16];
  fputs("<h2>registered memory</h2>\n<p>Live windows and their bytes per rank, from the <code>comm_windows</code> and "
        "<code>comm_bytes</code> of each registration and deregistration; the plot: each communicator's registered bytes "
        "over the run, one line per group of ranks whose figures are the same.</p>\n", f);
  for (int ci = 0; ci < n_comms; ci++) {
    comm *c = corder[ci];
    if (!c->has_mem && !c->budget_warns) continue;
    memsum m;
    mem_summary(c, &m);
    mem_text(b, sizeof b, c, &m);
    fputs("<pre class=\"mem\">", f);
    html_esc(f, b);
    fputs("</pre>\n", f);
    free(m.cls);
    if (c->has_mem) mem_svg(f, c);
  }
  sbuf o = {0};
  procs_text(&o, "");
  if (o.n) {
    fputs("<pre class=\"mem\">", f);
    html_esc(f, o.p);
    fputs("</pre>\n", f);
  }
  free(o.p);
}

static int write_html(const char *path, const wsum *ws, int nw, comm **corder, int n_div, int n_stuck) {
  FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
  if (!f) { fprintf(stderr, "ncclguard-report: --html %s: %s\n", path, strerror(errno)); return 2; }
  fputs(html_head, f);
  fprintf(f, "<h1>ncclguard-report: outcome grid</h1>\n<p>%ld file%s, %ld line%s, %d communicator%s, %d registration%s "
             "(windows)", n_files, n_files == 1 ? "" : "s", n_lines, n_lines == 1 ? "" : "s", n_comms,
          n_comms == 1 ? "" : "s", nw, nw == 1 ? "" : "s");
  if (n_null_comm)
    fprintf(f, ", %ld registration%s on a NULL communicator (no rank: &quot;rank -1&quot; in the log)", n_null_comm,
            n_null_comm == 1 ? "" : "s");
  /* the alarm colour for problems only */
  fprintf(f, ", %s%d divergent%s, %s%d stuck%s, %s%ld error line%s%s. One row per registration "
             "(communicator, <code>seq</code>), one column per rank, or per block of ranks coloured by the worst "
             "outcome among them where the job has more ranks than the page has pixel columns; hover a cell for "
             "its ranks and decisions.</p>\n",
          n_div ? "<span class=\"div\">" : "", n_div, n_div ? "</span>" : "", n_stuck ? "<span class=\"div\">" : "", n_stuck,
          n_stuck ? "</span>" : "", n_error_lines ? "<span class=\"err\">" : "", n_error_lines, n_error_lines == 1 ? "" : "s",
          n_error_lines ? "</span>" : "");
  if (n_ods) fprintf(f, "<p><span class=\"div\">%d overdue call%s</span> into NCCL: below.</p>\n", n_ods, n_ods == 1 ? "" : "s");
  /* the first error, the first degraded window and every reason, in words (escaped: a log is input) */
  static char txt[16384];
  if (ferr.set) {
    /* in the grid's colour of its outcome, and said where it is in the grid (a NULL communicator: nowhere) */
    fprintf(f, "<p class=\"key\"><i class=\"sw\" style=\"background:%s\"></i>%s</p>\n", dcolor[D_ERROR],
            ferr.cid[0] ? "the first error: an error cell of its communicator's grid below"
                        : "the first error: on no communicator (a NULL one has no ranks), so no grid below shows it");
    first_text(txt, sizeof txt, "first error", &ferr);
    fputs("<pre class=\"first\">", f);
    html_esc(f, txt);
    fputs("</pre>\n", f);
  } else fputs("<p>No errors.</p>\n", f);
  if (fdegrade.set) {
    fprintf(f, "<p class=\"key\"><i class=\"sw\" style=\"background:%s\"></i>the first degraded window: a degrade cell "
               "of its communicator's grid below</p>\n", dcolor[D_DEGRADE]);
    first_text(txt, sizeof txt, "first degraded window (not an error: the buffer is used unregistered)", &fdegrade);
    fputs("<pre class=\"degr\">", f);
    html_esc(f, txt);
    fputs("</pre>\n", f);
  }
  if (n_rseen) {
    fputs("<h2>reasons</h2>\n<ul class=\"reasons\">", f);
    for (int i = 0; i < n_rseen; i++) {
      int row = reason_row(rseen[i].reason);
      fputs("<li><b>", f);
      html_esc(f, rseen[i].reason);
      fputs("</b>: ", f);
      html_esc(f, rseen[i].decision);
      fprintf(f, ", %ld line%s", rseen[i].n, rseen[i].n == 1 ? "" : "s");
      int base_seen = 0; /* "peer_X": X on another rank; its advice stands once, under X */
      for (int j = 0; j < n_rseen && !strncmp(rseen[i].reason, "peer_", 5); j++)
        base_seen |= !strcmp(rseen[j].reason, rseen[i].reason + 5);
      if (base_seen) {
        fputs(" &mdash; another rank's ", f);
        html_esc(f, rseen[i].reason + 5);
        fputs(", above", f);
      } else if (row > 0 && reasons[row].advice[0]) {
        fputs(" &mdash; ", f);
        html_esc(f, reasons[row].advice);
      }
      fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
  }
  html_problems(f, corder);
  fputs("<p class=\"legend\">", f);
  static const char *dmeaning[D_N] = {"", "", " (the buffer used unregistered)", "", " (handed to NCCL unchanged)",
                                       " (started, no outcome logged: blocked or killed)",
                                       " (no line at all: never got there)"};
  for (int k = 1; k < D_N; k++)
    fprintf(f, "<span><i class=\"sw\" style=\"background:%s\"></i>%s%s</span>", dcolor[k], dname[k], dmeaning[k]);
  fputs("<span><i class=\"sw\" style=\"background:#d500f9\"></i>divergent: a bar left of the row (ranks decided "
        "differently or never arrived), a stripe over each cell that differs from most ranks</span></p>\n"
        "<noscript><p>The grid is drawn by the script in this file: enable JavaScript (nothing is loaded from the "
        "network). The data is in the JSON block <code>ncclguard-grid</code>.</p></noscript>\n<div id=\"grids\"></div>\n", f);
  /* the divergent windows as text, from the same data */
  if (n_div || n_stuck) {
    fputs("<h2 class=\"div\">divergent registrations</h2>\n<pre>", f);
    static char line[1 << 16];
    int shown = 0;
    for (int k = 0; k < nw && shown < 200; k++) {
      if (!ws[k].status) continue;
      decision_lists(&ws[k], line, sizeof line, " | ");
      fprintf(f, "comm %016llx seq %lld: ", (unsigned long long)ws[k].c->cid, (long long)ws[k].w->key.seq);
      html_esc(f, line);
      fputc('\n', f);
      shown++;
    }
    fputs("</pre>\n", f);
  }
  html_memory(f, corder);
  /* the cells: one letter per rank and registration */
  fputs("<script type=\"application/json\" id=\"ncclguard-grid\">{\"codes\":{", f);
  for (int k = 1; k < D_N; k++)
    fprintf(f, "%s\"%c\":{\"decision\":\"%s\",\"color\":\"%s\"}", k > 1 ? "," : "", dcode[k], dname[k], dcolor[k]);
  fprintf(f, "},\"divergent\":%d,\"stuck\":%d,\"comms\":[", n_div, n_stuck);
  int wi = 0;
  for (int ci = 0; ci < n_comms; ci++) {
    comm *c = corder[ci];
    int nr = c->nranks > 0 ? c->nranks : c->max_rank + 1, ndiv = 0;
    for (int k = wi; k < nw && ws[k].c == c; k++) {
      if (ws[k].n > nr) nr = ws[k].n;
      ndiv += ws[k].status != 0;
    }
    fprintf(f, "%s\n{\"cid\":\"%016llx\",\"nranks\":%d,\"ranks\":%d,\"divergent\":%d,\"windows\":[", ci ? "," : "",
            (unsigned long long)c->cid, c->nranks, nr, ndiv);
    int first = 1;
    while (wi < nw && ws[wi].c == c) {
      const wsum *s = &ws[wi++];
      fprintf(f, "%s\n{\"seq\":%lld,\"status\":\"%s\",\"retried\":%d,\"cells\":\"", first ? "" : ",", (long long)s->w->key.seq,
              s->status == 1 ? "divergent" : s->status == 2 ? "stuck" : "ok", s->retried);
      first = 0;
      for (int r = 0; r < s->n; r++) fputc(dcode[s->cls[r]], f);
      fputs("\"}", f);
    }
    fputs("]}", f);
  }
  fputs("]}</script>\n", f);
  fputs(html_script, f);
  fputs("</body></html>\n", f);
  int bad = ferror(f);
  if (f != stdout) bad |= fclose(f) != 0;
  else bad |= fflush(f) != 0;
  if (bad) { fprintf(stderr, "ncclguard-report: --html %s: write error\n", path); return 2; }
  return 0;
}

/* main's tables: global, so that they stay reachable until exit (no leak reports) */
static wsum *ws;
static double *tmp;
static comm **corder;

int main(int argc, char **argv) {
  int inputs = 0;
  const char *opt_trace = NULL, *opt_html = NULL;
  keys_init();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_text, stdout); return 0; }
    if (!strcmp(a, "--version")) { printf("%s %s\n", "ncclguard-report", NG_IDENTITY); return 0; }
    if (!strcmp(a, "--json")) opt_json = 1;
    else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) opt_quiet = 1;
    else if (!strcmp(a, "--trace") || !strcmp(a, "--html") || !strcmp(a, "--picture")) {
      if (i + 1 >= argc || !argv[i + 1][0]) {
        fprintf(stderr, "ncclguard-report: %s needs a file name (see --help)\n", a);
        return 2;
      }
      struct stat st;
      if (stat(argv[i + 1], &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ncclguard-report: %s %s: is a directory; give the name of the file to write (e.g. %s/report.%s)\n", a,
                argv[i + 1], argv[i + 1], a[2] == 't' ? "trace.json" : "html");
        return 2;
      }
      if (a[2] == 't') opt_trace = argv[++i];
      else opt_html = argv[++i];
      argv[i - 1] = argv[i] = NULL; /* not inputs */
    }
    else if (a[0] == '-' && a[1]) { fprintf(stderr, "ncclguard-report: unknown option '%s' (see --help)\n", a); return 2; }
  }
  opt_trace_on = opt_trace != NULL;
  int empty_dirs = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!a || (a[0] == '-' && a[1])) continue;
    inputs++;
    struct stat st;
    if (strcmp(a, "-") != 0 && stat(a, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (read_dir(a, 0) == 0) {
        fprintf(stderr, "ncclguard-report: no *.log or *.jsonl files in %s\n", a);
        empty_dirs++;
      }
    } else read_file(a);
  }
  if (!inputs) {
    /* no argument at a terminal: the user forgot the directory; do not wait for typed input */
    if (isatty(0)) {
      fputs(usage_text, stderr);
      return 2;
    }
    read_file("-");
  }
  if (read_errors && n_files == 0) return 2;
  if (n_events == 0 && n_files == 0 && empty_dirs) return 2; /* said above, directory by directory */
  if (n_events == 0) { /* nothing understood: an empty directory, a binary file, unreadable files */
    fprintf(stderr, "ncclguard-report: no ncclguard log line in the input (%ld file%s, %ld line%s read%s): nothing to "
            "report. Fix: point it at the files NCCLGUARD_LOG_FILE wrote (ncclguard-run --log-dir DIR), logged at "
            "info level\n", n_files, n_files == 1 ? "" : "s", n_lines, n_lines == 1 ? "" : "s",
            read_errors ? ", some could not be read" : "");
    return 2;
  }

  int nw = HASH_COUNT(windows);
  ws = calloc((size_t)nw + 1, sizeof *ws);
  int maxr = 1;
  for (comm *c = comms; c; c = c->hh.next) {
    int n = c->nranks > c->max_rank + 1 ? c->nranks : c->max_rank + 1;
    if (n > maxr) maxr = n;
  }
  for (window *w = windows; w; w = w->hh.next)
    if (w->cap > maxr) maxr = w->cap;
  tmp = malloc(sizeof(double) * (size_t)maxr);
  if (!ws || !tmp) { perror("ncclguard-report"); return 2; }
  int i = 0, n_div = 0, n_stuck = 0;
  for (window *w = windows; w; w = w->hh.next, i++) {
    ws[i].w = w;
    HASH_FIND(hh, comms, &w->key.cid, sizeof w->key.cid, ws[i].c);
    summarize(&ws[i], tmp);
    if (ws[i].status == 1) n_div++;
    if (ws[i].status == 2) n_stuck++;
  }
  qsort(ws, (size_t)nw, sizeof *ws, cmp_wsum);
  corder = calloc((size_t)n_comms + 1, sizeof *corder);
  for (comm *c = comms; c; c = c->hh.next) corder[c->order] = c;

  find_layout_parts(ws, nw);
  if (n_ods > 1) qsort(ods, (size_t)n_ods, sizeof *ods, cmp_overdue);
  int bad = n_div || n_stuck || ferr.set || n_ods;
  static char big[1 << 16];
  if (opt_trace && write_trace(opt_trace)) return 2;
  if (opt_html && write_html(opt_html, ws, nw, corder, n_div, n_stuck)) return 2;

  if (opt_json) {
    printf("{\"files\":%ld,\"lines\":%ld,\"events\":%ld,\"communicators\":%d,\"windows\":%d,\"null_comm_registrations\":%ld,\"divergent\":%d,\"stuck\":%d,\"error_lines\":%ld,\"comms\":[",
           n_files, n_lines, n_events, n_comms, nw, n_null_comm, n_div, n_stuck, n_error_lines);
    int wi = 0;
    for (int ci = 0; ci < n_comms; ci++) {
      comm *c = corder[ci];
      char cid[24];
      snprintf(cid, sizeof cid, "%016llx", (unsigned long long)c->cid);
      int ncl = c->nranks > 0 ? c->nranks : c->max_rank + 1;
      uint8_t *cls = calloc((size_t)ncl + 1, 1);
      for (int r = 0; r < ncl; r++) cls[r] = r < c->seen_cap && c->seen[r];
      rank_list(big, sizeof big, cls, ncl, 1);
      printf("%s{\"cid\":\"%s\",\"nranks\":%d,\"ranks_logged\":", ci ? "," : "", cid, c->nranks);
      json_str(big);
      free(cls);
      printf(",\"windows\":[");
      int first = 1;
      while (wi < nw && ws[wi].c == c) {
        wsum *s = &ws[wi++];
        printf("%s{\"seq\":%lld,\"ranks\":%d", first ? "" : ",", (long long)s->w->key.seq, s->n);
        first = 0;
        for (int k = 1; k < D_N; k++) printf(",\"%s\":%d", dname[k], s->cnt[k]);
        printf(",\"retried\":%d", s->retried);
        if (s->timed) printf(",\"us_min\":%.0f,\"us_median\":%.0f,\"us_max\":%.0f", s->mn, s->med, s->mx);
        else printf(",\"us_min\":null,\"us_median\":null,\"us_max\":null");
        printf(",\"status\":\"%s\"", s->status == 1 ? "divergent" : s->status == 2 ? "stuck" : "ok");
        if (s->status) {
          printf(",\"rank_decisions\":{");
          int f2 = 1;
          for (int k = 1; k < D_N; k++) {
            if (!s->cnt[k]) continue;
            rank_list(big, sizeof big, s->cls, s->n, k);
            printf("%s\"%s\":", f2 ? "" : ",", dname[k]);
            json_str(big);
            f2 = 0;
          }
          printf("}");
        }
        printf("}");
      }
      printf("]");
      json_comm_extras(c);
      printf("}");
    }
    printf("]");
    json_extras();
    printf(",\"first_error\":");
    json_first(&ferr);
    printf(",\"first_degrade\":");
    json_first(&fdegrade);
    printf(",\"memalloc_failures\":%ld,\"first_memalloc_failure\":", n_memalloc_failed);
    json_first(&fmemalloc);
    printf(",\"status\":\"%s\"}\n", bad ? "problems" : "clean");
    return bad ? 1 : 0;
  }

  char nulls[96] = "";
  if (n_null_comm)
    snprintf(nulls, sizeof nulls, ", %ld registration%s on a NULL communicator", n_null_comm, n_null_comm == 1 ? "" : "s");
  char overdues[64] = ""; /* only where there are some: the line reads as before otherwise */
  if (n_ods) snprintf(overdues, sizeof overdues, ", %d overdue call%s", n_ods, n_ods == 1 ? "" : "s");
  printf("ncclguard-report: %ld file%s, %ld lines, %d communicator%s, %d window%s%s, %d divergent, %d stuck, %ld error line%s%s\n",
         n_files, n_files == 1 ? "" : "s", n_lines, n_comms, n_comms == 1 ? "" : "s", nw, nw == 1 ? "" : "s", nulls, n_div,
         n_stuck, n_error_lines, n_error_lines == 1 ? "" : "s", overdues);
  if (n_events == 0)
    printf("no ncclguard lines found: were the logs written with NCCLGUARD_LOG=info (ncclguard-run --log-dir DIR)?\n");

  if (!opt_quiet) {
    int wi = 0;
    for (int ci = 0; ci < n_comms; ci++) {
      comm *c = corder[ci];
      int ncl = c->nranks > 0 ? c->nranks : c->max_rank + 1;
      uint8_t *cls = calloc((size_t)ncl + 1, 1);
      int logged = 0;
      for (int r = 0; r < ncl; r++) logged += cls[r] = r < c->seen_cap && c->seen[r];
      rank_list(big, 200, cls, ncl, 1);
      free(cls);
      printf("\ncomm %016llx  nranks %s%d  ranks logged %d (%s)\n", (unsigned long long)c->cid, c->nranks > 0 ? "" : "~", ncl, logged, big);
      if (wi >= nw || ws[wi].c != c) {
        printf("  no window registrations\n");
        continue;
      }
      printf("  %5s %8s %7s %7s %6s %5s %5s %7s  %-28s %s\n", "seq", "register", "retried", "degrade", "error", "pass", "stuck", "missing",
             "time min / median / max", "status");
      while (wi < nw && ws[wi].c == c) {
        wsum *s = &ws[wi++];
        char t[64] = "-", a[16], b[16], d[16];
        if (s->timed) {
          fmt_us(a, sizeof a, s->mn);
          fmt_us(b, sizeof b, s->med);
          fmt_us(d, sizeof d, s->mx);
          snprintf(t, sizeof t, "%s / %s / %s", a, b, d);
        }
        printf("  %5lld %8d %7d %7d %6d %5d %5d %7d  %-28s %s\n", (long long)s->w->key.seq, s->cnt[D_REGISTER], s->retried,
               s->cnt[D_DEGRADE], s->cnt[D_ERROR], s->cnt[D_PASS], s->cnt[D_STUCK], s->cnt[D_MISSING], t,
               s->status == 1 ? "DIVERGENT" : s->status == 2 ? "STUCK" : s->cnt[D_ERROR] ? "failed (all ranks)"
               : s->cnt[D_DEGRADE] ? "degraded (all ranks)" : "ok");
      }
    }
    if (n_null_comm)
      printf("\nno communicator (a NULL one)  %ld registration%s, without a rank (\"rank -1\" in the log)\n",
             n_null_comm, n_null_comm == 1 ? "" : "s");
  }

  if (n_div || n_stuck) {
    printf("\ndivergent windows (ranks that decided differently or never arrived: the signature of a hang):\n");
    /* consecutive windows of a communicator with the same per-rank picture are shown as one range */
    static char prev[1 << 16];
    int shown = 0, any_missing = 0, any_stuck = 0;
    for (int k = 0; k < nw; k++) {
      wsum *s = &ws[k];
      if (!s->status) continue;
      any_missing |= s->cnt[D_MISSING] > 0;
      any_stuck |= s->cnt[D_STUCK] > 0;
      decision_lists(s, big, sizeof big, " | ");
      int64_t last = s->w->key.seq;
      while (k + 1 < nw && ws[k + 1].status && ws[k + 1].c == s->c) {
        decision_lists(&ws[k + 1], prev, sizeof prev, " | ");
        if (strcmp(prev, big) != 0) break;
        last = ws[++k].w->key.seq;
      }
      if (shown++ >= 50) {
        printf("  ... more (see --json)\n");
        break;
      }
      if (last != s->w->key.seq)
        printf("  comm %016llx seq %lld-%lld: %s\n", (unsigned long long)s->c->cid, (long long)s->w->key.seq, (long long)last, big);
      else
        printf("  comm %016llx seq %lld: %s\n", (unsigned long long)s->c->cid, (long long)s->w->key.seq, big);
    }
    if (any_missing)
      printf("  missing: no line for that window - those ranks never got there (an earlier failure, a crash, still computing)\n"
             "           or are stuck before it; the other ranks wait for them in NCCL\n");
    if (any_stuck)
      printf("  stuck: started the registration but logged no outcome - blocked in NCCL or the agreement, or killed\n");
  }

  text_problems(corder);
  if (ferr.set) print_first("first error", &ferr);
  else printf("\nno errors\n");
  if (fdegrade.set) print_first("first degraded window (not an error: the buffer is used unregistered)", &fdegrade);
  if (fmemalloc.set) {
    char t[160];
    snprintf(t, sizeof t, "first failed ncclMemAlloc (%ld in all; not an error of the run: what the application did "
             "next decides)", n_memalloc_failed);
    print_first(t, &fmemalloc);
  }
  if (!opt_quiet) text_memory(corder);
  return bad ? 1 : 0;
}
