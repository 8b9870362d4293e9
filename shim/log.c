/* Log lines in NCCL's style (host:pid:tid [dev] NCCLGUARD LEVEL ...) or JSON lines; one write(2)
 * per line so threads never interleave; the file is opened at the first line (a process that never
 * logs creates nothing), without following a symbolic link, mode 0644. Also the exit summary. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"

/* The log schema (shim/logschema.def): its version, written in every log file's header line; built
 * with -DNG_LOG_CHECK (tests/t_tools_report.sh), every key written is checked against the table. */
enum { NG_T_str, NG_T_int, NG_T_float, NG_T_ptr, NG_T_hex64, NG_T_bool, NG_T_any };
#ifdef NG_LOG_CHECK
static const struct {
  const char* name;
  int type;
} schema_keys[] = {
#define NG_LOGKEY(name, type, writer, doc) {#name, NG_T_##type},
#include "logschema.def"
#undef NG_LOGKEY
};
static void check_key(const char* k, int type) {
  for (size_t i = 0; i < sizeof schema_keys / sizeof *schema_keys; i++) {
    const char* n = schema_keys[i].name;
    size_t len = strlen(n);
    int match = n[len - 1] == '_' ? !strncmp(k, n, len) : !strcmp(k, n); /* NCCLGUARD_: a prefix */
    if (match && (schema_keys[i].type == type || schema_keys[i].type == NG_T_any ||
                  (type == NG_T_str && (schema_keys[i].type == NG_T_ptr || schema_keys[i].type == NG_T_hex64))))
      return;
    if (match) break;
  }
  fprintf(stderr, "ncclguard: log key %s (type %d) is not in shim/logschema.def with that type\n", k, type);
  abort();
}
#else
#define NG_LOGKEY(name, type, writer, doc)
#include "logschema.def"
#undef NG_LOGKEY
#define check_key(k, type) ((void)0)
#endif

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1; /* -1: not opened yet */
static int log_rank = -1;
static long long log_bytes;  /* size of the log file, counted from its size at open */
static int log_capped;       /* NCCLGUARD_LOG_MAX_MB reached: only WARN lines are kept */
static atomic_long log_dropped;
static char host[64];

static atomic_long stats[NG_NSTATS];

void ng_stat_add(enum ng_stat s, long n) { atomic_fetch_add(&stats[s], n); }
void ng_stat_window_bytes(long delta) {
  long now = atomic_fetch_add(&stats[NG_ST_WINDOW_BYTES], delta) + delta;
  long peak = atomic_load(&stats[NG_ST_WINDOW_BYTES_PEAK]);
  while (now > peak && !atomic_compare_exchange_weak(&stats[NG_ST_WINDOW_BYTES_PEAK], &peak, now)) {
  }
}
static void stats_reset(void) {
  for (int i = 0; i < NG_NSTATS; i++) atomic_store(&stats[i], 0);
}

double ng_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int ng_log_on(int level) { return level <= ng_cfg.log_level && ng_cfg.log_level != NG_LOG_OFF; }

void ng_log_set_rank(int rank) {
  int unset = -1; /* threads of one process may create their communicators at once */
  __atomic_compare_exchange_n(&log_rank, &unset, rank, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* The rank of this process for %r: launcher variables first, then the first communicator. */
static int env_rank(void) {
  static const char* vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
                               "MV2_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char* v = secure_getenv(vars[i]);
    if (v && *v) {
      char* end;
      long r = strtol(v, &end, 10);
      if (!*end && r >= 0 && r < (1L << 30)) return (int)r;
    }
  }
  return __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
}

static void read_hostname(void) {
  if (gethostname(host, sizeof host - 1)) strcpy(host, "unknown");
  char* dot = strchr(host, '.');
  if (dot) *dot = 0;
}

static const char* hostname(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, read_hostname);
  return host;
}

/* Expand %h %p %r %% in pattern; 0 on success. */
int ng_expand_path(const char* pat, char* out, size_t cap) {
  size_t o = 0;
  if (!cap) return -1; /* not even room for the NUL */
  for (const char* p = pat; *p; p++) {
    char tmp[80];
    const char* add = tmp;
    if (*p == '%' && p[1]) {
      p++;
      switch (*p) {
        case 'h': add = hostname(); break;
        case 'p': snprintf(tmp, sizeof tmp, "%d", (int)getpid()); break;
        case 'r': {
          int r = env_rank();
          if (r >= 0) snprintf(tmp, sizeof tmp, "%d", r);
          else snprintf(tmp, sizeof tmp, "p%d", (int)getpid());
          break;
        }
        case '%': add = "%"; break;
        default: tmp[0] = '%'; tmp[1] = *p; tmp[2] = 0; break;
      }
    } else {
      tmp[0] = *p;
      tmp[1] = 0;
    }
    size_t n = strlen(add);
    if (o + n + 1 > cap) return -1;
    memcpy(out + o, add, n);
    o += n;
  }
  out[o] = 0;
  return 0;
}

static void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void write_header(int fd);
static void key(struct ng_line* l, const char* k);
static void puts_(struct ng_line* l, const char* s);
static void put_escaped(struct ng_line* l, const char* s, int json);

static int get_fd(void) {
  int fd = __atomic_load_n(&log_fd, __ATOMIC_ACQUIRE);
  if (fd >= 0) return fd;
  pthread_mutex_lock(&open_lock);
  if (log_fd < 0) {
    fd = 2;
    if (ng_cfg.log_file[0]) {
      char path[PATH_MAX];
      int opened = -1;
      if (ng_expand_path(ng_cfg.log_file, path, sizeof path) == 0)
        opened = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0644);
      /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking the job forever;
       * writes are blocking again once it is open. */
      if (opened >= 0) fcntl(opened, F_SETFL, fcntl(opened, F_GETFL) & ~O_NONBLOCK);
      if (opened >= 0) {
        fd = opened;
        struct stat st;
        if (!fstat(fd, &st)) log_bytes = st.st_size;
        if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size == 0) write_header(fd);
      } else {
        int err = errno;
        /* O_NOFOLLOW answers a symbolic link with ELOOP; a missing directory is ENOENT */
        const char* why = err == ELOOP ? " (a symbolic link is refused)"
                          : err == ENOENT ? " (its directory does not exist: create it, or use ncclguard-run "
                                            "--log-dir DIR, which does)"
                                          : "";
        /* one line as every other (the format asked for, the path escaped: it is the user's text) */
        char msg[PATH_MAX + 300];
        snprintf(msg, sizeof msg, "cannot open NCCLGUARD_LOG_FILE %s: %s%s; logging to stderr", ng_cfg.log_file,
                 strerror(err), why);
        struct ng_line l;
        ng_line_begin(&l, NG_LOG_WARN, -1);
        ng_kv_str(&l, "fn", "log");
        key(&l, "msg");
        puts_(&l, "\"");
        put_escaped(&l, msg, l.json);
        puts_(&l, "\"");
        if (l.json) l.buf[l.len++] = '}';
        l.buf[l.len++] = '\n';
        write_all(2, l.buf, (size_t)l.len);
      }
    }
    __atomic_store_n(&log_fd, fd, __ATOMIC_RELEASE);
  }
  fd = log_fd;
  pthread_mutex_unlock(&open_lock);
  return fd;
}

/* fork(): the log file's lock is taken before and released after, in both processes; the child's
 * statistics start at zero (its exit summary counts its own calls). */
static void fork_prepare(void) { pthread_mutex_lock(&open_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&open_lock); }
static void fork_child(void) {
  pthread_mutex_unlock(&open_lock);
  pthread_mutex_init(&open_lock, NULL);
  stats_reset();
  /* A path with %p names a file per process: the child opens its own at its first line. */
  if (log_fd > 2 && strstr(ng_cfg.log_file, "%p")) {
    close(log_fd);
    log_fd = -1;
    log_bytes = 0;
    log_capped = 0;
  }
  atomic_store(&log_dropped, 0);
}

/* Room kept at the end of every line: the truncation mark, '}' and the newline. */
#define NG_TAIL 24
static void put(struct ng_line* l, const char* s, size_t n) {
  if (l->dropped || l->len + n + NG_TAIL >= sizeof l->buf) {
    l->dropped = 1;
    return;
  }
  memcpy(l->buf + l->len, s, n);
  l->len += (int)n;
}
/* A key=value pair is complete: a line that overflows later is cut back to here (never mid-value). */
static void done(struct ng_line* l) {
  if (!l->dropped) l->safe = l->len;
}
static void puts_(struct ng_line* l, const char* s) { put(l, s, strlen(s)); }

/* Escaped; a value that does not fit is cut, marked "...", and still closed by its caller's quote
 * (`budget`: bytes kept free after it, for the closing quote). */
static void put_escaped_budget(struct ng_line* l, const char* s, int json, size_t budget) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[8];
    size_t n;
    if (c == '"' || c == '\\') e[0] = '\\', e[1] = (char)c, n = 2;
    else if (c == '\n') e[0] = '\\', e[1] = 'n', n = 2;
    else if (c < 0x20) n = (size_t)snprintf(e, sizeof e, json ? "\\u%04x" : "\\x%02x", c);
    else e[0] = (char)c, n = 1;
    if (l->len + n + 3 + budget + NG_TAIL >= sizeof l->buf) {
      put(l, "...", 3);
      return;
    }
    put(l, e, n);
  }
}
static void put_escaped(struct ng_line* l, const char* s, int json) { put_escaped_budget(l, s, json, 1); }

static const char* level_name(int level) {
  switch (level) {
    case NG_LOG_WARN: return "WARN";
    case NG_LOG_INFO: return "INFO";
    default: return "TRACE";
  }
}

void ng_line_begin(struct ng_line* l, int level, int dev) {
  l->len = 0;
  l->level = level;
  l->json = ng_cfg.log_json;
  l->dropped = 0;
  l->safe = 0;
  char pre[200];
  if (l->json) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(pre, sizeof pre, "{\"ts\":%lld.%06ld,\"host\":\"", (long long)ts.tv_sec, ts.tv_nsec / 1000);
    puts_(l, pre);
    put_escaped(l, hostname(), 1);
    snprintf(pre, sizeof pre, "\",\"pid\":%d,\"tid\":%ld,\"dev\":%d,\"level\":\"%s\"", (int)getpid(),
             (long)syscall(SYS_gettid), dev, level_name(level));
  } else {
    snprintf(pre, sizeof pre, "%s:%d:%ld [%d] NCCLGUARD %s", hostname(), (int)getpid(),
             (long)syscall(SYS_gettid), dev, level_name(level));
  }
  puts_(l, pre);
  done(l);
}

static void key(struct ng_line* l, const char* k) {
  if (l->json) { puts_(l, ",\""); puts_(l, k); puts_(l, "\":"); }
  else { puts_(l, " "); puts_(l, k); puts_(l, "="); }
}

static void kv_str(struct ng_line* l, const char* k, const char* v) {
  key(l, k);
  if (!v) v = "";
  int quote = l->json || strpbrk(v, " \t\"=") || !*v;
  if (quote) puts_(l, "\"");
  put_escaped(l, v, l->json);
  if (quote) puts_(l, "\"");
  done(l);
}

void ng_kv_str(struct ng_line* l, const char* k, const char* v) {
  check_key(k, NG_T_str);
  kv_str(l, k, v);
}

void ng_kv_int(struct ng_line* l, const char* k, long long v) {
  check_key(k, NG_T_int);
  char s[32];
  snprintf(s, sizeof s, "%lld", v);
  key(l, k);
  puts_(l, s);
  done(l);
}

void ng_kv_uint(struct ng_line* l, const char* k, unsigned long long v) {
  check_key(k, NG_T_int);
  char s[32];
  snprintf(s, sizeof s, "%llu", v);
  key(l, k);
  puts_(l, s);
  done(l);
}

void ng_kv_u64hex(struct ng_line* l, const char* k, uint64_t v) {
  char s[24];
  check_key(k, NG_T_hex64);
  snprintf(s, sizeof s, "%016llx", (unsigned long long)v);
  kv_str(l, k, s);
}

void ng_kv_ptr(struct ng_line* l, const char* k, const void* p) {
  char s[24];
  snprintf(s, sizeof s, "%p", p);
  check_key(k, NG_T_ptr);
  if (!p) strcpy(s, "0x0");
  kv_str(l, k, s);
}

void ng_kv_dbl(struct ng_line* l, const char* k, double v) {
  check_key(k, NG_T_float);
  char s[40];
  snprintf(s, sizeof s, "%.1f", v);
  key(l, k);
  puts_(l, s);
  done(l);
}

/* The header line of a log file, written by whoever creates it (the library or the Python hook):
 * the schema's version (shim/logschema.def, docs/LOG.md), so that a reader knows the keys. */
static void write_header(int fd) {
  struct ng_line l;
  ng_line_begin(&l, NG_LOG_INFO, -1);
  ng_kv_str(&l, "fn", "log");
  ng_kv_int(&l, "schema", NG_LOG_SCHEMA);
  key(&l, "msg");
  char msg[160];
  snprintf(msg, sizeof msg, "%s log, schema %d: keys and types in docs/LOG.md", ng_version(), NG_LOG_SCHEMA);
  puts_(&l, "\"");
  put_escaped(&l, msg, l.json);
  puts_(&l, "\"");
  if (l.json) l.buf[l.len++] = '}';
  l.buf[l.len++] = '\n';
  write_all(fd, l.buf, (size_t)l.len);
  log_bytes += l.len;
}

void ng_line_end(struct ng_line* l, const char* fmt, ...) {
  if (!ng_log_on(l->level)) return;
  if (fmt) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    key(l, "msg");
    puts_(l, "\"");
    put_escaped(l, msg, l->json);
    puts_(l, "\"");
    done(l);
  }
  /* a line that did not fit ends after its last complete pair, marked; put() always left room */
  if (l->dropped) {
    l->len = l->safe;
    const char* mark = l->json ? ",\"truncated\":true" : " truncated=1";
    memcpy(l->buf + l->len, mark, strlen(mark));
    l->len += (int)strlen(mark);
  }
  if (l->json) l->buf[l->len++] = '}';
  l->buf[l->len++] = '\n';
  int fd = get_fd();
  if (fd > 2 && ng_cfg.log_max_mb > 0) {
    /* A size bound per file: past NCCLGUARD_LOG_MAX_MB only WARN lines are written (one notice
     * first); the exit summary counts what was dropped. No rotation: ranks may share a path. */
    long long max = ng_cfg.log_max_mb * 1024LL * 1024LL;
    long long now = __atomic_add_fetch(&log_bytes, l->len, __ATOMIC_RELAXED);
    if (now > max && l->level > NG_LOG_WARN) {
      atomic_fetch_add(&log_dropped, 1);
      if (!__atomic_exchange_n(&log_capped, 1, __ATOMIC_RELAXED)) {
        char note[256];
        int n = snprintf(note, sizeof note,
                         "%s:%d:%ld [-1] NCCLGUARD WARN fn=log msg=\"log file reached NCCLGUARD_LOG_MAX_MB=%ld: "
                         "from here on only WARN lines are written\"\n",
                         hostname(), (int)getpid(), (long)syscall(SYS_gettid), ng_cfg.log_max_mb);
        if (n > 0) write_all(fd, note, (size_t)n < sizeof note ? (size_t)n : sizeof note - 1);
      }
      return;
    }
  }
  write_all(fd, l->buf, (size_t)l->len);
}

void ng_log_msg(int level, int dev, const char* fn, const char* fmt, ...) {
  if (!ng_log_on(level)) return;
  struct ng_line l;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ng_line_begin(&l, level, dev);
  ng_kv_str(&l, "fn", fn);
  ng_line_end(&l, "%s", msg);
}

/* One line per process at exit: always with NCCLGUARD_STATS=1 or at info level; at warn level
 * only when something went wrong. Nothing at all in a process that never called NCCL. */
__attribute__((destructor)) static void ng_summary(void) {
  long calls = atomic_load(&stats[NG_ST_CALLS]);
  if (calls == 0) return;
  int trouble = atomic_load(&stats[NG_ST_DEGRADED]) || atomic_load(&stats[NG_ST_ERRORS]);
  if (!(ng_cfg.stats || ng_cfg.log_level >= NG_LOG_INFO || (trouble && ng_cfg.log_level >= NG_LOG_WARN)))
    return;
  int saved = ng_cfg.log_level;
  /* (NCCLGUARD_STATS=1 writes it at any level; a WARN only where something went wrong: alerts keyed on WARN
   * stay quiet on a healthy run) */
  if (ng_cfg.stats && ng_cfg.log_level < NG_LOG_INFO) ng_cfg.log_level = NG_LOG_INFO;
  struct ng_line l;
  long dropped = atomic_load(&log_dropped);
  ng_line_begin(&l, trouble || dropped ? NG_LOG_WARN : NG_LOG_INFO, -1);
  ng_kv_str(&l, "fn", "summary");
  ng_kv_int(&l, "calls", calls);
  ng_kv_int(&l, "comms", atomic_load(&stats[NG_ST_COMMS]));
  ng_kv_int(&l, "registered", atomic_load(&stats[NG_ST_REGISTERED]));
  ng_kv_int(&l, "degraded", atomic_load(&stats[NG_ST_DEGRADED]));
  ng_kv_int(&l, "retried", atomic_load(&stats[NG_ST_RETRIED]));
  ng_kv_int(&l, "errors", atomic_load(&stats[NG_ST_ERRORS]));
  ng_kv_int(&l, "noops", atomic_load(&stats[NG_ST_NOOPS]));
  ng_kv_int(&l, "agreements", atomic_load(&stats[NG_ST_AGREE]));
  ng_kv_int(&l, "windows_live", atomic_load(&stats[NG_ST_WINDOWS_LIVE]));
  ng_kv_int(&l, "window_bytes", atomic_load(&stats[NG_ST_WINDOW_BYTES]));
  ng_kv_int(&l, "window_bytes_peak", atomic_load(&stats[NG_ST_WINDOW_BYTES_PEAK]));
  if (dropped) ng_kv_int(&l, "log_dropped", dropped);
  ng_line_end(&l, "ncclguard summary for this process");
  ng_cfg.log_level = saved;
}

NG_ON_FORK(NG_FORK_LOG, fork_prepare, fork_parent, fork_child)
