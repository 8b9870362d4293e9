/* Fake NCCL: environment, trace, last error, registry of communicators and windows,
 * shared-memory segments (one per communicator) and the bootstrap exchange. */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

__thread int fn_depth;
__thread int fn_caller;
__thread int fn_reg_jobs;

/* Who issued a collective (the checker's "caller"): the object holding the return address of the
 * outermost fake entry; "guard" when its file name (not its directory) contains "ncclguard". */
int fn_caller_of(const void *ret)
{
  Dl_info info;
  if (!ret || !dladdr(ret, &info) || !info.dli_fname) return FN_CALLER_APP;
  const char *b = strrchr(info.dli_fname, '/');
  b = b ? b + 1 : info.dli_fname;
  return strstr(b, "ncclguard") ? FN_CALLER_GUARD : FN_CALLER_APP;
}

/* NCCL reads its environment once per process and caches it (docs/NCCL.md §1, §6). */
int fn_env_int(const char *name, int dflt)
{
  const char *e = getenv(name);
  return e && *e ? atoi(e) : dflt;
}

long long fn_param(const char *name, long long dflt)
{
  static struct { char name[48]; long long v; } cache[32];
  static int n;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n; i++)
    if (!strcmp(cache[i].name, name)) { long long v = cache[i].v; pthread_mutex_unlock(&mu); return v; }
  const char *e = getenv(name);
  long long v = dflt;
  if (e && *e) {
    char *end;
    errno = 0;
    long long x = strtoll(e, &end, 0);
    if (!errno && end != e) v = x;
  }
  if (n < 32) { snprintf(cache[n].name, sizeof cache[n].name, "%s", name); cache[n++].v = v; }
  pthread_mutex_unlock(&mu);
  return v;
}

/* The fake of one release (tests/fake/release.c, linked into $(BUILD)/fake-rel/CODE/) defines it: that
 * release's code, and FAKE_NCCL_VERSION is not read */
__attribute__((weak)) int fake_release; /* not const: the compiler must not fold the weak value */

int fn_version(void)
{
  static int v;
  if (!v) v = fake_release ? fake_release : fn_env_int("FAKE_NCCL_VERSION", NCCL_VERSION_CODE);
  return v;
}

static int trace_on(void)
{
  static int t = -1;
  if (t < 0) t = fn_env_int("FAKE_NCCL_TRACE", 0);
  return t;
}

static const char *res_name(ncclResult_t r)
{
  static const char *n[] = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                            "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"};
  return (unsigned)r < sizeof n / sizeof n[0] ? n[r] : "ncclUnknown";
}

/* One line per API call, written when it returns; "internal" marks a call NCCL made itself. */
void fn_trace(const char *fn, ncclResult_t r, const char *fmt, ...)
{
  if (!trace_on()) return;
  char args[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  char line[512];
  int n = snprintf(line, sizeof line, "fake-nccl %d:%ld %s(%s) -> %s%s\n", (int)getpid(), (long)syscall(SYS_gettid),
                   fn, args, res_name(r), fn_depth > 0 ? " internal" : "");
  if (n > 0) { ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1); (void)w; }
}

/* A WARN line on stderr, "fake-nccl PID WARN ...", with one write(2): the ranks of one job often share
 * stderr, and stdio is free to write a long line to an unbuffered stream in several writes, which then
 * interleave with a peer's (glibc 2.36 here writes it whole; a test counting such lines failed elsewhere). */
void fn_warn(const char *fmt, ...)
{
  char msg[400], line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int n = snprintf(line, sizeof line, "fake-nccl %d WARN %s\n", (int)getpid(), msg);
  if (n > 0) { ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1); (void)w; }
}

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512];

void fn_set_error(const char *fmt, ...)
{
  pthread_mutex_lock(&err_lock);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&err_lock);
}

const char *pncclGetLastError(ncclComm_t comm)
{
  (void)comm;
  return last_error;
}
FN_ALIAS(ncclGetLastError);

const char *pncclGetErrorString(ncclResult_t r)
{
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}
FN_ALIAS(ncclGetErrorString);

ncclResult_t pncclGetVersion(int *version)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (!version) r = ncclInvalidArgument; else *version = fn_version();
  return LEAVE("ncclGetVersion", r, "%d", version ? *version : 0);
}
FN_ALIAS(ncclGetVersion);

/* ---- registry ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *all_comms;
static struct ncclWindow_vidmem *all_wins;

void fn_lock(void) { pthread_mutex_lock(&reg_lock); }
void fn_unlock(void) { pthread_mutex_unlock(&reg_lock); }

static void core_atfork_child(void)
{
  pthread_mutex_init(&reg_lock, NULL);
  pthread_mutex_init(&err_lock, NULL);
}
__attribute__((constructor)) static void core_init(void) { pthread_atfork(NULL, NULL, core_atfork_child); }

/* FAKE_NCCL_REUSE_COMM_ADDR=1 (read when a communicator is created, in the caller's thread): the memory of a
 * destroyed or aborted communicator whose work has ended goes to the next communicator created, at the same
 * address, as glibc's malloc hands a freed chunk to the next request of its size (NCCL allocates its ncclComm
 * with calloc and frees it at the end of ncclCommDestroy/ncclCommAbort; tests/fake/README.md). Otherwise a
 * destroyed communicator stays a tombstone at its address for the life of the process. */
static struct ncclComm *take_freed(void)
{
  struct ncclComm *c, *tmp, *hit = NULL;
  fn_lock();
  HASH_ITER(hh, all_comms, c, tmp) {
    if (!__atomic_load_n(&c->freed, __ATOMIC_ACQUIRE)) continue;
    pthread_mutex_lock(&c->lk);
    int quiet = c->inflight == 0 && __atomic_load_n(&c->ops, __ATOMIC_ACQUIRE) == 0;
    pthread_mutex_unlock(&c->lk);
    if (quiet) { hit = c; break; }
  }
  if (hit) {
    UT_hash_handle hh = hit->hh;
    pthread_mutex_destroy(&hit->lk);
    pthread_cond_destroy(&hit->cv);
    memset(hit, 0, sizeof *hit);
    hit->hh = hh; /* stays in the table under the same key */
    hit->self = hit;
    /* usable at once (a late call on the old handle finds a lock and no magic), before fn_lock is let go */
    pthread_mutex_init(&hit->lk, NULL);
    pthread_cond_init(&hit->cv, NULL);
  }
  fn_unlock();
  return hit;
}

void fn_comm_free(struct ncclComm *c)
{
  __atomic_store_n(&c->freed, 1, __ATOMIC_RELEASE);
}

/* NCCL's host identity (src/misc/utils.cc getHostHashOnce at v2.27.7-1, v2.28.3-1, v2.28.9-1, v2.29.7-1,
 * v2.30.7-1): NCCL_HOSTID, when set at all (an empty value too: ncclGetEnv returns it and NCCL hashes the empty
 * string), replaces the whole string, cut at 1023 bytes (strncpy into char[1024]); the hash is taken once per
 * process. Without it NCCL hashes the host name followed by the boot id (the fake: the host name alone, one
 * machine either way). Ranks with different host hashes are on different nodes to NCCL (nNodes > 1): ranks
 * that share one GPU as hosts of their own (tests/gpu/README.md "ranks as hosts", tests/gpu/hostid.c). */
static uint64_t host_hash;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static void host_hash_once(void)
{
  char name[1024] = "";
  const char *id = getenv("NCCL_HOSTID");
  if (id) snprintf(name, sizeof name, "%s", id);
  else if (gethostname(name, sizeof name - 1) != 0) snprintf(name, sizeof name, "unknown");
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ULL;
  host_hash = h ? h : 1;
}
uint64_t fn_host_hash(void)
{
  pthread_once(&host_once, host_hash_once);
  return host_hash;
}

struct ncclComm *fn_comm_new(void)
{
  struct ncclComm *c = fn_env_int("FAKE_NCCL_REUSE_COMM_ADDR", 0) == 1 ? take_freed() : NULL;
  int reused = c != NULL;
  if (!c) c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = 0xc0115eed;
  c->state = ST_INIT;
  c->sym = -1;
  c->nnodes = 1;
  c->host = fn_host_hash(); /* in the creating thread (a getenv in NCCL's init thread would race with setenv) */
  c->async = ncclSuccess;
  c->init_delay_ms = fn_env_int("FAKE_NCCL_INIT_DELAY_MS", 400);
  c->share_root = c;
  c->tk_next = c->tk_done = 0;
  if (reused) return c; /* (its lock and condition made by take_freed) */
  pthread_mutex_init(&c->lk, NULL);
  pthread_cond_init(&c->cv, NULL);
  fn_lock();
  c->self = c;
  HASH_ADD_PTR(all_comms, self, c);
  fn_unlock();
  return c;
}

/* config.splitShare where the caller's config holds it (NCCL copies min(config->size, its own) bytes:
 * parseCommConfig, src/init.cc at v2.30.7-1, lines 2262-2263; unset is NCCL_CONFIG_UNDEF_INT), default 0
 * (init.cc 2409-2432); NCCL_COMM_SPLIT_SHARE_RESOURCES, when set, overrides it (init.cc 2131-2137). Read in
 * the creating thread. */
int fn_split_share_of(const ncclConfig_t *config)
{
  const char *e = getenv("NCCL_COMM_SPLIT_SHARE_RESOURCES");
  if (e && *e) return (int)strtol(e, NULL, 0) != 0;
  size_t need = offsetof(ncclConfig_t, splitShare) + sizeof config->splitShare;
  if (config && config->size >= need && config->splitShare != NCCL_CONFIG_UNDEF_INT) return config->splitShare != 0;
  return 0;
}

int fn_comm_known(struct ncclComm *c)
{
  struct ncclComm *f = NULL;
  void *key = c;
  fn_lock();
  HASH_FIND_PTR(all_comms, &key, f);
  fn_unlock();
  return f != NULL;
}

void fn_win_add(struct ncclWindow_vidmem *w)
{
  fn_lock();
  w->self = w;
  HASH_ADD_PTR(all_wins, self, w);
  fn_unlock();
}

int fn_win_known(struct ncclWindow_vidmem *w)
{
  struct ncclWindow_vidmem *f = NULL;
  void *key = w;
  fn_lock();
  HASH_FIND_PTR(all_wins, &key, f);
  fn_unlock();
  return f != NULL;
}

/* Call-time check of a communicator (docs/NCCL.md §7: a nonblocking comm in progress answers
 * ncclInvalidArgument "Attempt to use communicator before the previous operation returned
 * ncclSuccess"). Destroyed/aborted comms are kept as tombstones so this is defined. */
ncclResult_t fn_check_comm(struct ncclComm *c, int allow_revoked)
{
  if (!c) { fn_set_error("comm argument is NULL"); return ncclInvalidArgument; }
  if (!fn_comm_known(c)) { fn_set_error("invalid communicator %p", (void *)c); return ncclInvalidArgument; }
  int st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
  ncclResult_t as = __atomic_load_n(&c->async, __ATOMIC_ACQUIRE);
  if (st == ST_DESTROYED || st == ST_ABORTED) { fn_set_error("communicator %p was destroyed", (void *)c); return ncclInvalidArgument; }
  if (as == ncclInProgress) {
    fn_set_error("Attempt to use communicator before the previous operation returned ncclSuccess");
    return ncclInvalidArgument;
  }
  if (st == ST_FAILED) { fn_set_error("communicator initialization failed"); return ncclInvalidUsage; }
  if (st == ST_REVOKED && !allow_revoked) { fn_set_error("communicator %p was revoked", (void *)c); return ncclInvalidUsage; }
  if (st == ST_FINALIZED) { fn_set_error("communicator %p was finalized", (void *)c); return ncclInvalidUsage; }
  return ncclSuccess;
}

/* ---- names ---- */

void fn_name_from_id(const ncclUniqueId *id, char *name, size_t len)
{
  size_t n = strnlen(id->internal + 8, NCCL_UNIQUE_ID_BYTES - 8);
  if (n >= len) n = len - 1;
  memcpy(name, id->internal + 8, n);
  name[n] = 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
  return h;
}

/* name of a derived communicator's segment; identical on every rank that derives it */
void fn_derive_name(char *out, size_t len, const char *parent, const char *what, uint64_t a, uint64_t b)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  h = fnv(h, parent, strlen(parent));
  h = fnv(h, what, strlen(what));
  h = fnv(h, &a, sizeof a);
  h = fnv(h, &b, sizeof b);
  snprintf(out, len, "/fakenccl-d-%016llx", (unsigned long long)h);
}

ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (!id) {
    r = ncclInvalidArgument;
  } else {
    static unsigned counter;
    unsigned long long rnd = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) { ssize_t k = read(fd, &rnd, sizeof rnd); (void)k; close(fd); }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rnd ^= (unsigned long long)ts.tv_nsec;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, FN_IDMAGIC, 8);
    snprintf(id->internal + 8, NCCL_UNIQUE_ID_BYTES - 8, "/fakenccl-%d-%u-%016llx", (int)getpid(),
             __sync_fetch_and_add(&counter, 1), rnd);
  }
  return LEAVE("ncclGetUniqueId", r, "id=%p", (void *)id);
}
FN_ALIAS(ncclGetUniqueId);

/* ---- shared memory ---- */

static size_t seg_size(int nranks, size_t *coll_off, size_t *mbox_off)
{
  size_t h = (sizeof(struct fn_shm) + 4095) & ~(size_t)4095;
  *coll_off = h;
  *mbox_off = h + (size_t)nranks * FN_COLL_CAP;
  return *mbox_off + (size_t)nranks * (size_t)nranks * sizeof(struct fn_mbox);
}

void fn_shm_lock(struct fn_shm *s)
{
  int e = pthread_mutex_lock(&s->mu);
  if (e == EOWNERDEAD) pthread_mutex_consistent(&s->mu); /* a rank died inside; carry on */
}
void fn_shm_unlock(struct fn_shm *s) { pthread_mutex_unlock(&s->mu); }
/* Wake-ups across processes on a futex of the segment (caller holds mu): a rank that dies while
 * waiting leaves nothing behind that could block the others (it would with a process-shared
 * condition variable). */
void fn_shm_wake(struct fn_shm *s)
{
  __atomic_add_fetch(&s->wake_seq, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &s->wake_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* wait (caller holds mu; released while asleep) with a periodic wake-up so that abort/revoke flags
 * are noticed */
void fn_shm_wait(struct fn_shm *s)
{
  uint32_t seq = __atomic_load_n(&s->wake_seq, __ATOMIC_ACQUIRE);
  fn_shm_unlock(s);
  struct timespec ts = {0, 50 * 1000 * 1000};
  syscall(SYS_futex, &s->wake_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
  fn_shm_lock(s);
}

/* Create or open the segment of a communicator. The creator (O_EXCL winner) initialises it;
 * the others wait for it to be ready. The last rank to attach unlinks the name. */
ncclResult_t fn_shm_attach(struct ncclComm *c, const char *name, int nranks)
{
  size_t coll_off, mbox_off, total = seg_size(nranks, &coll_off, &mbox_off);
  if (name != c->name) snprintf(c->name, sizeof c->name, "%s", name);
  int creator = 1;
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    creator = 0;
    fd = shm_open(name, O_RDWR, 0600);
  }
  if (fd < 0) { fn_set_error("shm_open %s: %s", name, strerror(errno)); return ncclSystemError; }
  if (creator && ftruncate(fd, (off_t)total) != 0) {
    fn_set_error("ftruncate %s: %s", name, strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  for (int i = 0; !creator; i++) { /* wait for the creator's ftruncate */
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= total) break;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (size_t)st.st_size != total) {
      fn_set_error("rank %d: nranks %d differs from the other ranks'", c->rank, nranks);
      close(fd);
      return ncclInvalidArgument;
    }
    usleep(1000);
  }
  struct fn_shm *s = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (s == MAP_FAILED) { fn_set_error("mmap %s: %s", name, strerror(errno)); return ncclSystemError; }
  if (creator) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < FN_XSLOTS; i++) s->x[i].gen = (uint64_t)i;
    s->nranks = nranks;
    s->coll_off = coll_off; s->mbox_off = mbox_off; s->total = total;
    s->magic = 0xfa4e5e6;
    __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE)) usleep(1000);
  }
  c->shm = s;
  fn_shm_lock(s);
  if (++s->attached == nranks) shm_unlink(name);
  fn_shm_unlock(s);
  return ncclSuccess;
}

/* Bootstrap exchange, two-phase: post this rank's record for generation gen, then complete
 * (wait for every rank's record). No timeout, like NCCL's bootstrap (docs/NCCL.md §4, §7). Up to
 * FN_XSLOTS generations may be outstanding, so one thread can drive several exchanges. */
ncclResult_t fn_xpost(struct ncclComm *c, uint64_t gen, const void *rec, size_t len)
{
  struct fn_shm *s = c->shm;
  struct fn_xslot *x = &s->x[gen % FN_XSLOTS];
  int e0 = FN_LOAD(c->revoke_epoch);
  fn_shm_lock(s);
  while (x->gen != gen && !FN_LOAD(c->aborted) && FN_LOAD(c->revoke_epoch) == e0) fn_shm_wait(s);
  if (FN_LOAD(c->aborted) || FN_LOAD(c->revoke_epoch) != e0) { /* abort flag seen: NCCL's bootstrap returns an internal error */
    fn_shm_unlock(s);
    fn_set_error("bootstrap wait interrupted: communicator aborted or revoked");
    return ncclInternalError;
  }
  memset(x->rec[c->rank], 0, FN_XREC);
  memcpy(x->rec[c->rank], rec, len < FN_XREC ? len : FN_XREC);
  x->arrived++;
  fn_shm_wake(s);
  fn_shm_unlock(s);
  return ncclSuccess;
}

ncclResult_t fn_xcomplete(struct ncclComm *c, uint64_t gen, unsigned char (*out)[FN_XREC])
{
  struct fn_shm *s = c->shm;
  struct fn_xslot *x = &s->x[gen % FN_XSLOTS];
  int e0 = FN_LOAD(c->revoke_epoch);
  fn_shm_lock(s);
  while (x->gen == gen && x->arrived < c->nranks && !FN_LOAD(c->aborted) && FN_LOAD(c->revoke_epoch) == e0) fn_shm_wait(s);
  if (FN_LOAD(c->aborted) || FN_LOAD(c->revoke_epoch) != e0) {
    fn_shm_unlock(s);
    fn_set_error("bootstrap wait interrupted: communicator aborted or revoked");
    return ncclInternalError;
  }
  if (out) memcpy(out, x->rec, (size_t)c->nranks * FN_XREC);
  if (++x->departed == c->nranks) {
    x->arrived = x->departed = 0;
    x->gen += FN_XSLOTS;
    fn_shm_wake(s);
  }
  fn_shm_unlock(s);
  return ncclSuccess;
}

void fn_switch_dev(int dev, CUcontext *saved)
{
  CUcontext c = NULL;
  cuCtxGetCurrent(saved);
  if (cuDevicePrimaryCtxRetain(&c, dev) == CUDA_SUCCESS) cuCtxSetCurrent(c);
}
void fn_restore_dev(CUcontext saved) { cuCtxSetCurrent(saved); }
