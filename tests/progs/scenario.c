/* ngtest's scenario: the steps each rank goes through, in order:
 *   setup (device, stream) -> init (communicator) -> alloc + fill -> register (window)
 *   -> devcomm (--devcomm) -> all-reduce + check -> split child (--split: register, all-reduce,
 *   tear down) -> teardown (deregister, destroy, free).
 * Every step takes the ranks this thread drives: one (proc, thread modes) or all (group mode,
 * where collective steps are wrapped in ncclGroupStart/End). Every NCCL call is logged with its
 * result and duration. A rank fails when a call that must succeed does not, when the all-reduce
 * result is wrong, when the capture was invalidated, or when --expect-win/--expect-reg do not hold. */
#define _GNU_SOURCE
#include "ngtest.h"
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ng_step(struct ng_rank* r, const char* what) {
  snprintf(r->sh->step[r->rank], sizeof r->sh->step[0], "%s", what);
}

static void fail(struct ng_rank* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct ng_rank* r, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  size_t l = strlen(r->why);
  if (l + 3 < sizeof r->why) snprintf(r->why + l, sizeof r->why - l, "%s%s", l ? "; " : "", buf);
  r->failed = 1;
}

/* "rank R/N" for one rank, "ranks 0-K/N" for a call the group-mode driver makes for all */
static const char* who(const struct ng_rank* r, int n, char* buf, size_t len) {
  if (n == 1) snprintf(buf, len, "rank %d/%d", r->rank, r->nranks);
  else snprintf(buf, len, "ranks %d-%d/%d", r[0].rank, r[n - 1].rank, r->nranks);
  return buf;
}

static void logrc(const struct ng_rank* r, int n, ncclResult_t rc, double us, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void logrc(const struct ng_rank* r, int n, ncclResult_t rc, double us, const char* fmt, ...) {
  char call[512], w[48];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(call, sizeof call, fmt, ap);
  va_end(ap);
  if (rc == ncclSuccess || rc == ncclInProgress)
    ng_say("%s: %s -> %s \"%s\" %.0f us", who(r, n, w, sizeof w), call, ng_rc_name(rc), ncclGetErrorString(rc), us);
  else
    ng_say("%s: %s -> %s \"%s\" %.0f us last=\"%s\"", who(r, n, w, sizeof w), call, ng_rc_name(rc),
           ncclGetErrorString(rc), us, ng_last_error(NULL));
}

/* NCALL(ranks, n, rc, call, "format", ...): make the call, time it, log it */
#define NCALL(r, n, rc, expr, ...) do {                 \
    double t0_ = ng_now_us();                            \
    (rc) = (expr);                                       \
    logrc((r), (n), (rc), ng_now_us() - t0_, __VA_ARGS__); \
  } while (0)

static int cu(struct ng_rank* r, cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    ng_say("rank %d/%d: %s -> cuda error %d \"%s\"", r->rank, r->nranks, what, (int)e, cudaGetErrorString(e));
    fail(r, "%s: %s", what, cudaGetErrorString(e));
    return -1;
  }
  if (opt.verbose) ng_say("rank %d/%d: %s -> cudaSuccess", r->rank, r->nranks, what);
  return 0;
}

static int is_err(ncclResult_t rc) { return rc != ncclSuccess && rc != ncclInProgress; }

static ncclResult_t group_start(struct ng_rank* r, int n, int on) {
  ncclResult_t rc = ncclSuccess;
  if (on) NCALL(r, n, rc, ncclGroupStart(), "ncclGroupStart()");
  return rc;
}

static ncclResult_t group_end(struct ng_rank* r, int n, int on, const char* what) {
  ncclResult_t rc = ncclSuccess;
  if (on) NCALL(r, n, rc, ncclGroupEnd(), "ncclGroupEnd() [%s]", what);
  return rc;
}

/* nonblocking communicators: poll ncclCommGetAsyncError until the pending operation is done */
static ncclResult_t wait_comm(struct ng_rank* r, ncclComm_t c, const char* what) {
  ncclResult_t st = ncclInProgress, rc = ncclSuccess;
  double t0 = ng_now_us();
  int polls = 0;
  while (ng_now_us() - t0 < 120e6) {
    rc = ncclCommGetAsyncError(c, &st);
    polls++;
    if (rc != ncclSuccess || st != ncclInProgress) break;
    usleep(100);
  }
  ncclResult_t res = rc != ncclSuccess ? rc : st;
  logrc(r, 1, res, ng_now_us() - t0, "ncclCommGetAsyncError(comm=%p) polled %d times until %s done",
        (void*)c, polls, what);
  return res;
}

static int skip_tgt(const struct ng_rank* q, const struct ng_tgt* t) { return q->fatal || !t->comm || !t->base; }

/* ---- setup and init ---- */
static void phase_setup(struct ng_rank* r, int n) {
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    ng_step(q, "cudaGetDeviceCount");
    int count = 0;
    if (cu(q, cudaGetDeviceCount(&count), "cudaGetDeviceCount") || count < 1) {
      if (count < 1 && !q->failed) fail(q, "no CUDA device");
      q->fatal = 1;
      continue;
    }
    q->dev = q->rank % count;
    ng_step(q, "cudaSetDevice");
    if (cu(q, cudaSetDevice(q->dev), "cudaSetDevice") ||
        cu(q, cudaStreamCreate(&q->stream), "cudaStreamCreate")) { q->fatal = 1; continue; }
    if (q->rank == 0) {
      int v = 0;
      ncclResult_t rc = ncclGetVersion(&v);
      ng_say("rank 0/%d: loaded NCCL version %d (%s), %d CUDA device(s)", q->nranks, v, ng_rc_name(rc), count);
    }
  }
}

static int get_id(struct ng_rank* r, int n, ncclUniqueId* id) {
  struct ng_shared* sh = r->sh;
  if (n == 1 && r->rank != 0) {
    ng_step(r, "waiting for the unique id");
    double t0 = ng_now_us();
    int ready;
    while ((ready = __atomic_load_n(&sh->id_ready, __ATOMIC_ACQUIRE)) == 0 && ng_now_us() - t0 < 120e6)
      usleep(1000);
    if (ready != 1) { fail(r, "no unique id from rank 0"); return -1; }
    *id = sh->id;
    return 0;
  }
  ncclResult_t rc;
  ng_step(r, "ncclGetUniqueId");
  NCALL(r, 1, rc, ncclGetUniqueId(id), "ncclGetUniqueId()");
  if (n == 1) {
    sh->id = *id;
    __atomic_store_n(&sh->id_ready, rc == ncclSuccess ? 1 : -1, __ATOMIC_RELEASE);
  }
  if (rc != ncclSuccess) { for (int i = 0; i < n; i++) fail(&r[i], "ncclGetUniqueId: %s", ng_rc_name(rc)); return -1; }
  return 0;
}

static void phase_init(struct ng_rank* r, int n) {
  ncclUniqueId id;
  int need = 0;
  for (int i = 0; i < n; i++) need |= !r[i].fatal;
  if (!need) return;
  if (get_id(r, n, &id)) { for (int i = 0; i < n; i++) r[i].fatal = 1; return; }
  group_start(r, n, n > 1);
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[0];
    if (q->fatal) continue;
    ng_step(q, "ncclCommInitRank");
    cudaSetDevice(q->dev);
    ncclResult_t rc;
    if (opt.nonblocking || opt.config) {
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.blocking = opt.nonblocking ? 0 : 1;
      NCALL(q, 1, rc, ncclCommInitRankConfig(&t->comm, q->nranks, id, q->rank, &cfg),
            "ncclCommInitRankConfig(nranks=%d, rank=%d, dev=%d, blocking=%d)", q->nranks, q->rank, q->dev, cfg.blocking);
    } else {
      NCALL(q, 1, rc, ncclCommInitRank(&t->comm, q->nranks, id, q->rank),
            "ncclCommInitRank(nranks=%d, rank=%d, dev=%d)", q->nranks, q->rank, q->dev);
    }
    if (is_err(rc)) { fail(q, "init: %s", ng_rc_name(rc)); q->fatal = 1; }
  }
  ncclResult_t ge = group_end(r, n, n > 1, "init");
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[0];
    if (q->fatal) continue;
    if (is_err(ge)) { fail(q, "init group end: %s", ng_rc_name(ge)); q->fatal = 1; continue; }
    ng_say("rank %d/%d: comm=%p", q->rank, q->nranks, (void*)t->comm);
    if (!t->comm) { fail(q, "init returned no communicator"); q->fatal = 1; continue; }
    if (opt.nonblocking && opt.wait_ready) {
      ng_step(q, "waiting for nonblocking init");
      ncclResult_t rc = wait_comm(q, t->comm, "init");
      if (rc != ncclSuccess) { fail(q, "init (async): %s", ng_rc_name(rc)); q->fatal = 1; }
    }
    t->group_size = q->nranks;
    t->group_rank = q->rank;
  }
}

/* ---- buffers ---- */
static int alloc_buf(struct ng_rank* q, struct ng_tgt* t, int use_nccl, size_t bytes) {
  ncclResult_t rc;
  t->alloc_size = bytes;
  t->alloc_nccl = use_nccl;
  cudaSetDevice(q->dev);
  ng_step(q, use_nccl == 2 ? "cuMemMap" : use_nccl ? "ncclMemAlloc" : "cudaMalloc");
  if (use_nccl == 2) { /* --alloc small: `bytes` mapped from a larger handle (libcuda.so.1's VMM API) */
    void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    typedef int (*create_t)(unsigned long long*, size_t, const void*, unsigned long long);
    typedef int (*reserve_t)(unsigned long long*, size_t, size_t, unsigned long long, unsigned long long);
    typedef int (*map_t)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
    create_t create = cu ? (create_t)dlsym(cu, "cuMemCreate") : NULL;
    reserve_t reserve = cu ? (reserve_t)dlsym(cu, "cuMemAddressReserve") : NULL;
    map_t map = cu ? (map_t)dlsym(cu, "cuMemMap") : NULL;
    /* CUmemAllocationProp: type PINNED (1), location DEVICE (1) q->dev; the rest zero */
    struct { int type, handle_types, loc_type, loc_id; char rest[64]; } prop = {1, 0, 1, q->dev, {0}};
    size_t hsize = (bytes / (2u << 20) + 1) * (2u << 20);
    unsigned long long h = 0, va = 0;
    if (!create || !reserve || !map || create(&h, hsize, &prop, 0) || reserve(&va, hsize, 0, 0, 0) ||
        map(va, bytes, 0, h, 0)) {
      fail(q, "cuMemCreate/cuMemAddressReserve/cuMemMap of %zu bytes failed", bytes);
      t->base = NULL;
      return -1;
    }
    t->base = (void*)(uintptr_t)va; /* never unmapped: the process ends */
  } else if (use_nccl) {
    NCALL(q, 1, rc, ncclMemAlloc(&t->base, bytes), "ncclMemAlloc(size=%zu)", bytes);
    if (rc != ncclSuccess) { fail(q, "ncclMemAlloc: %s", ng_rc_name(rc)); t->base = NULL; return -1; }
  } else if (cu(q, cudaMalloc(&t->base, bytes), "cudaMalloc")) {
    t->base = NULL;
    return -1;
  }
  ng_say("rank %d/%d: buffer %p (%s, %zu bytes), registered part %p + %zu bytes", q->rank, q->nranks, t->base,
         use_nccl == 2 ? "cuMemMap" : use_nccl ? "ncclMemAlloc" : "cudaMalloc", bytes, (void*)((char*)t->base + t->off), opt.size);
  return 0;
}

static void phase_alloc(struct ng_rank* r, int n) {
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    if (q->fatal) continue;
    int use_nccl = opt.alloc == ALLOC_SMALL ? 2 : opt.alloc == ALLOC_NCCL || (opt.alloc == ALLOC_CUDA0 && q->rank != 0);
    q->tgt[0].off = opt.offset;
    alloc_buf(q, &q->tgt[0], use_nccl, opt.size + opt.offset);
  }
}

static int fill(struct ng_rank* q, struct ng_tgt* t, float* host, size_t count) {
  for (size_t j = 0; j < count; j++) host[j] = (float)(t->group_rank + 1);
  return cu(q, cudaMemcpy((char*)t->base + t->off, host, count * sizeof(float), cudaMemcpyHostToDevice),
            "cudaMemcpy(fill)");
}

/* ---- registration ---- */
static const char* capture_status_name(enum cudaStreamCaptureStatus s) {
  switch (s) {
  case cudaStreamCaptureStatusNone: return "none";
  case cudaStreamCaptureStatusActive: return "active";
  case cudaStreamCaptureStatusInvalidated: return "invalidated";
  default: return "?";
  }
}

static void phase_register(struct ng_rank* r, int n, int k) {
  int bad = k == 0;                        /* bad-argument flags and capture apply to the main comm */
  int capture = opt.capture && k == 0;
  int grp = n > 1 || opt.reg_in_group;
  int expect_reg = k == 1 && opt.expect_reg == EXPECT_ERROR ? EXPECT_OK : opt.expect_reg;
  cudaStream_t cs[NG_MAXRANKS] = {0};
  int any = 0;
  for (int i = 0; i < n; i++) any |= !skip_tgt(&r[i], &r[i].tgt[k]);
  if (!any) return;

  if (capture) {
    for (int i = 0; i < n; i++) {
      struct ng_rank* q = &r[i];
      if (skip_tgt(q, &q->tgt[k])) continue;
      cudaSetDevice(q->dev);
      if (cu(q, cudaStreamCreate(&cs[i]), "cudaStreamCreate(capture)") ||
          cu(q, cudaStreamBeginCapture(cs[i], cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture(global)"))
        cs[i] = NULL;
      else
        ng_say("rank %d/%d: capture begun on stream %p (global mode)", q->rank, q->nranks, (void*)cs[i]);
    }
  }
  group_start(r, n, grp);
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[k];
    if (skip_tgt(q, t)) continue;
    ng_step(q, k ? "ncclCommWindowRegister(child)" : "ncclCommWindowRegister");
    cudaSetDevice(q->dev);
    ncclComm_t c = bad && opt.null_comm ? NULL : t->comm;
    void* b = bad && opt.null_buff ? NULL : (char*)t->base + t->off;
    size_t sz = bad && opt.zero_size ? 0 : opt.size;
    if (bad && opt.wrap_size && b) sz = (size_t)(UINTPTR_MAX - (uintptr_t)b) + 1 + opt.size; /* b + sz wraps */
    /* NGTEST_REG_SIZE=BYTES: this process registers that size of its --size allocation (one rank alone:
     * NGTEST_ENV_RANK1=NGTEST_REG_SIZE=...; window sizes that differ where the allocations do not) */
    const char* rs = getenv("NGTEST_REG_SIZE");
    if (rs && *rs && k == 0 && !opt.zero_size && !opt.wrap_size) sz = (size_t)strtoull(rs, NULL, 0);
    ncclWindow_t* wp = bad && opt.null_win ? NULL : &t->win;
    ncclResult_t rc;
    NCALL(q, 1, rc, ncclCommWindowRegister(c, b, sz, wp, opt.flags),
          "ncclCommWindowRegister(comm=%p, buff=%p, size=%zu, win=%p, flags=%d)%s", (void*)c, b, sz, (void*)wp,
          opt.flags, k ? " [child]" : "");
    t->reg_rc = rc;
    t->registered = 1;
    if (opt.twice) {
      ncclWindow_t* wp2 = bad && opt.null_win ? NULL : &t->win2;
      /* NGTEST_SECOND_FLAGS=N: the second registration's flags (a repeat of the buffer and size, other flags) */
      const char* sf = getenv("NGTEST_SECOND_FLAGS");
      int f2 = sf && *sf ? (int)strtol(sf, NULL, 0) : opt.flags;
      NCALL(q, 1, rc, ncclCommWindowRegister(c, b, sz, wp2, f2),
            "ncclCommWindowRegister(comm=%p, buff=%p, size=%zu, win=%p, flags=%d) [second]", (void*)c, b, sz,
            (void*)wp2, f2);
      if (!is_err(t->reg_rc)) t->reg_rc = rc;
    }
  }
  ncclResult_t ge = group_end(r, n, grp, "registration");
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[k];
    if (skip_tgt(q, t)) continue;
    if (is_err(ge) && !is_err(t->reg_rc)) t->reg_rc = ge;
    if (opt.nonblocking) {
      /* complete the registration, and the init when --wait-ready was not given */
      ng_step(q, "waiting for the nonblocking comm after registration");
      ncclResult_t rc = wait_comm(q, t->comm, "registration");
      if (!is_err(t->reg_rc)) t->reg_rc = rc;
      if (rc != ncclSuccess && !t->win) ng_say("rank %d/%d: comm reports %s after registration", q->rank, q->nranks, ng_rc_name(rc));
    } else if (t->reg_rc == ncclInProgress) {
      t->reg_rc = ncclSuccess; /* cannot happen on a blocking comm; be lenient */
    }
  }
  if (capture) {
    for (int i = 0; i < n; i++) {
      struct ng_rank* q = &r[i];
      if (!cs[i]) continue;
      cudaSetDevice(q->dev);
      enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      cudaError_t e1 = cudaStreamIsCapturing(cs[i], &st);
      cudaGraph_t g = NULL;
      cudaError_t e2 = cudaStreamEndCapture(cs[i], &g);
      int invalid = st == cudaStreamCaptureStatusInvalidated || e2 == cudaErrorStreamCaptureInvalidated;
      ng_say("rank %d/%d: capture status before end: %s (%s); cudaStreamEndCapture -> %s; capture %s", q->rank,
             q->nranks, capture_status_name(st), cudaGetErrorString(e1), cudaGetErrorString(e2),
             invalid ? "INVALIDATED" : "intact");
      q->capture_done = 1;
      if (invalid) { q->capture_invalidated = 1; fail(q, "the caller's capture was invalidated"); }
      else if (e2 != cudaSuccess) fail(q, "cudaStreamEndCapture: %s", cudaGetErrorString(e2));
      if (g) cudaGraphDestroy(g);
      cudaGetLastError(); /* clear a sticky capture error */
      cudaStreamDestroy(cs[i]);
    }
  }
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[k];
    if (!t->registered) continue;
    ng_say("rank %d/%d: registration%s -> %s win=%p%s%p", q->rank, q->nranks, k ? " [child]" : "",
           ng_rc_name(t->reg_rc), (void*)t->win, opt.twice ? " win2=" : "", opt.twice ? (void*)t->win2 : NULL);
    if (expect_reg == EXPECT_OK && t->reg_rc != ncclSuccess)
      fail(q, "registration%s: %s", k ? " [child]" : "", ng_rc_name(t->reg_rc));
    if (expect_reg == EXPECT_ERROR && t->reg_rc == ncclSuccess)
      fail(q, "registration%s returned ncclSuccess, an error was expected", k ? " [child]" : "");
    if (opt.expect_win == EXPECT_NULL && (t->win || t->win2))
      fail(q, "window%s is %p, NULL was expected", k ? " [child]" : "", (void*)t->win);
    if (opt.expect_win == EXPECT_NONNULL && (!t->win || (opt.twice && !t->win2)))
      fail(q, "window%s is NULL, non-NULL was expected", k ? " [child]" : "");
  }
}

/* ---- ncclDevCommCreate (--devcomm) ---- */
/* ncclDevCommRequirements as NCCL 2.28 lays it out (nccl_device/core.h, a C++-only header; 2.28 has
 * no initializer macro: all zero means "no extra resources"). 2.29+ adds an initializer with a
 * size/magic/version header that a C program cannot build without that header: we pass zeroes. */
struct ng_devcomm_reqs_228 {
  void* resourceRequirementsList;
  void* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount, lsaBarrierCount, railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount, ginSignalCount, ginCounterCount;
};
union ng_devcomm_reqs {
  struct ng_devcomm_reqs_228 v228;
  unsigned char bytes[256];
};
_Static_assert(sizeof(struct ng_devcomm_reqs_228) <= 256, "requirements fit the buffer");
typedef ncclResult_t (*devcomm_create_t)(ncclComm_t, const void* reqs, void* outDevComm);
typedef ncclResult_t (*devcomm_destroy_t)(ncclComm_t, const void* devComm);

static void phase_devcomm(struct ng_rank* r, int n) {
  devcomm_create_t create = (devcomm_create_t)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
  if (!create) {
    for (int i = 0; i < n; i++) {
      r[i].devcomm_state = 2;
      r[i].skipped = 1;
      snprintf(r[i].skip_why, sizeof r[i].skip_why, "ncclDevCommCreate is not in the loaded NCCL");
    }
    return;
  }
  static union ng_devcomm_reqs reqs; /* zero: the 2.28 "no requirements" value */
  memset(&reqs, 0, sizeof reqs);
  int v = 0;
  ncclGetVersion(&v);
  if (v >= 22900) ng_say("ngtest: NCCL %d: passing zeroed requirements (the 2.28 layout)", v);
  group_start(r, n, n > 1);
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    if (skip_tgt(q, &q->tgt[0])) continue;
    ng_step(q, "ncclDevCommCreate");
    cudaSetDevice(q->dev);
    ncclResult_t rc;
    memset(q->devcomm, 0, sizeof q->devcomm);
    NCALL(q, 1, rc, create(q->tgt[0].comm, &reqs, q->devcomm), "ncclDevCommCreate(comm=%p, reqs=zeroed, out=%p)",
          (void*)q->tgt[0].comm, (void*)q->devcomm);
    q->devcomm_state = is_err(rc) ? -1 : 1;
  }
  ncclResult_t ge = group_end(r, n, n > 1, "devcomm");
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    if (q->devcomm_state == 0) continue;
    if (is_err(ge)) q->devcomm_state = -1;
    if (q->devcomm_state == 1 && opt.nonblocking && wait_comm(q, q->tgt[0].comm, "devcomm") != ncclSuccess)
      q->devcomm_state = -1;
    if (q->devcomm_state < 0) fail(q, "ncclDevCommCreate failed");
  }
}

/* ---- all-reduce ---- */
static void phase_allreduce(struct ng_rank* r, int n, int k) {
  size_t count = opt.size / sizeof(float);
  int any = 0;
  for (int i = 0; i < n; i++) {
    struct ng_tgt* t = &r[i].tgt[k];
    if (skip_tgt(&r[i], t)) { snprintf(t->ar, sizeof t->ar, "not-run"); continue; }
    if (!opt.allreduce) { snprintf(t->ar, sizeof t->ar, "skipped"); continue; }
    snprintf(t->ar, sizeof t->ar, "pending");
    t->expect = (float)(t->group_size * (t->group_size + 1) / 2);
    any = 1;
  }
  if (!any) return;
  float* host = malloc(count * sizeof(float));
  if (!host) { for (int i = 0; i < n; i++) fail(&r[i], "out of host memory"); return; }
  double t0 = ng_now_us(), last = 0;
  for (int it = 0; it < opt.iters; it++) {
    int loud = it == 0 || it == opt.iters - 1;
    for (int i = 0; i < n; i++) {
      struct ng_rank* q = &r[i];
      struct ng_tgt* t = &q->tgt[k];
      if (strcmp(t->ar, "pending")) continue;
      cudaSetDevice(q->dev);
      if (fill(q, t, host, count)) snprintf(t->ar, sizeof t->ar, "fill-error");
    }
    double ti = ng_now_us();
    if (n > 1) {
      ncclResult_t rc = ncclGroupStart();
      if (loud) logrc(r, n, rc, 0, "ncclGroupStart()");
    }
    for (int i = 0; i < n; i++) {
      struct ng_rank* q = &r[i];
      struct ng_tgt* t = &q->tgt[k];
      if (strcmp(t->ar, "pending")) continue;
      ng_step(q, k ? "ncclAllReduce(child)" : "ncclAllReduce");
      cudaSetDevice(q->dev);
      void* b = (char*)t->base + t->off;
      double tc = ng_now_us();
      ncclResult_t rc = ncclAllReduce(b, b, count, ncclFloat, ncclSum, t->comm, q->stream);
      if (loud || is_err(rc))
        logrc(q, 1, rc, ng_now_us() - tc, "ncclAllReduce(buff=%p, count=%zu, float, sum, comm=%p) #%d%s", b, count,
              (void*)t->comm, it, k ? " [child]" : "");
      if (is_err(rc)) { snprintf(t->ar, sizeof t->ar, "error:%s", ng_rc_name(rc)); fail(q, "all-reduce: %s", ng_rc_name(rc)); }
    }
    if (n > 1) {
      double tg = ng_now_us();
      ncclResult_t rc = ncclGroupEnd();
      if (loud || is_err(rc)) logrc(r, n, rc, ng_now_us() - tg, "ncclGroupEnd() [all-reduce #%d]", it);
      for (int i = 0; i < n && is_err(rc); i++)
        if (!strcmp(r[i].tgt[k].ar, "pending")) {
          snprintf(r[i].tgt[k].ar, sizeof r[i].tgt[k].ar, "error:%s", ng_rc_name(rc));
          fail(&r[i], "all-reduce group end: %s", ng_rc_name(rc));
        }
    }
    for (int i = 0; i < n; i++) {
      struct ng_rank* q = &r[i];
      struct ng_tgt* t = &q->tgt[k];
      if (strcmp(t->ar, "pending")) continue;
      if (opt.nonblocking) {
        ncclResult_t rc = wait_comm(q, t->comm, "all-reduce");
        if (rc != ncclSuccess) { snprintf(t->ar, sizeof t->ar, "error:%s", ng_rc_name(rc)); fail(q, "all-reduce (async): %s", ng_rc_name(rc)); continue; }
      }
      ng_step(q, k ? "cudaStreamSynchronize after all-reduce(child)" : "cudaStreamSynchronize after all-reduce");
      cudaSetDevice(q->dev);
      if (cu(q, cudaStreamSynchronize(q->stream), "cudaStreamSynchronize(all-reduce)"))
        snprintf(t->ar, sizeof t->ar, "sync-error");
    }
    last = ng_now_us() - ti;
  }
  double total = ng_now_us() - t0;
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[k];
    if (strcmp(t->ar, "pending")) continue;
    ng_step(q, "checking the all-reduce result");
    cudaSetDevice(q->dev);
    if (cu(q, cudaMemcpy(host, (char*)t->base + t->off, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(check)")) {
      snprintf(t->ar, sizeof t->ar, "copy-error");
      continue;
    }
    size_t bad = 0, first = 0;
    for (size_t j = 0; j < count; j++)
      if (host[j] != t->expect) { if (!bad) first = j; bad++; }
    if (bad) {
      snprintf(t->ar, sizeof t->ar, "WRONG(%zu/%zu,[%zu]=%g,want=%g)", bad, count, first, host[first], t->expect);
      fail(q, "all-reduce%s result wrong: %s", k ? " [child]" : "", t->ar);
    } else {
      snprintf(t->ar, sizeof t->ar, "ok");
    }
    ng_say("rank %d/%d: %d all-reduce(s) of %zu floats%s in %.0f us (last %.0f us): %s", q->rank, q->nranks, opt.iters,
           count, k ? " [child]" : "", total, last, t->ar);
  }
  free(host);
}

/* ---- split (--split) ---- */
static void phase_split(struct ng_rank* r, int n) {
  int any = 0;
  for (int i = 0; i < n; i++) any |= !skip_tgt(&r[i], &r[i].tgt[0]);
  if (!any) return;
  group_start(r, n, n > 1);
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    if (skip_tgt(q, &q->tgt[0])) continue;
    ng_step(q, "ncclCommSplit");
    cudaSetDevice(q->dev);
    ncclResult_t rc;
    NCALL(q, 1, rc, ncclCommSplit(q->tgt[0].comm, q->rank % 2, q->rank, &q->tgt[1].comm, NULL),
          "ncclCommSplit(comm=%p, color=%d, key=%d)", (void*)q->tgt[0].comm, q->rank % 2, q->rank);
    if (is_err(rc)) { fail(q, "ncclCommSplit: %s", ng_rc_name(rc)); q->tgt[1].comm = NULL; }
  }
  ncclResult_t ge = group_end(r, n, n > 1, "split");
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[1];
    if (q->fatal) continue;
    if (is_err(ge)) { fail(q, "split group end: %s", ng_rc_name(ge)); continue; }
    if (opt.nonblocking && q->tgt[0].comm && !is_err(ge)) {
      /* a nonblocking parent's split returns ncclInProgress; NCCL writes the child when the split's job ends,
       * which the parent's state tells (ncclCommInitChildComm: "*newcomm should be NCCL_COMM_NULL until comm
       * split fully complete") */
      if (wait_comm(q, q->tgt[0].comm, "split (parent)") != ncclSuccess) { fail(q, "ncclCommSplit (async) failed"); continue; }
      t->comm = __atomic_load_n(&t->comm, __ATOMIC_ACQUIRE);
    }
    if (!t->comm) continue;
    if (opt.nonblocking && wait_comm(q, t->comm, "split") != ncclSuccess) { fail(q, "ncclCommSplit (async) failed"); continue; }
    if (getenv("NGTEST_SPLIT_DESTROYED")) {
      /* NGTEST_SPLIT_DESTROYED=1: the child is destroyed, then split again (a use of a freed communicator
       * without ncclguard; with it, a clean ncclInvalidArgument); the child is not used further */
      ncclComm_t gone = t->comm, again = NULL;
      ncclResult_t rc;
      t->comm = NULL;
      NCALL(q, 1, rc, ncclCommDestroy(gone), "ncclCommDestroy(child=%p)", (void*)gone);
      NCALL(q, 1, rc, ncclCommSplit(gone, 0, q->rank, &again, NULL), "ncclCommSplit(destroyed comm=%p)", (void*)gone);
      ng_say("rank %d/%d: split of a destroyed parent: %s", q->rank, q->nranks, ng_rc_name(rc));
      if (rc != ncclInvalidArgument) fail(q, "split of a destroyed parent: %s, not ncclInvalidArgument", ng_rc_name(rc));
      continue;
    }
    int color = q->rank % 2;
    t->group_size = (q->nranks - color + 1) / 2;
    t->group_rank = q->rank / 2;
    t->off = 0;
    ng_say("rank %d/%d: child comm=%p color=%d rank %d of %d", q->rank, q->nranks, (void*)t->comm, color,
           t->group_rank, t->group_size);
    alloc_buf(q, t, q->tgt[0].alloc_nccl, opt.size);
  }
}

/* ---- teardown ---- */
static void dereg(struct ng_rank* q, struct ng_tgt* t, int k) {
  if (!t->registered || (k == 0 && opt.null_win)) return;
  ncclWindow_t w[2] = {t->win, t->win2};
  for (int j = 0; j < (opt.twice ? 2 : 1); j++) {
    ncclResult_t rc;
    ng_step(q, "ncclCommWindowDeregister");
    NCALL(q, 1, rc, ncclCommWindowDeregister(t->comm, w[j]), "ncclCommWindowDeregister(comm=%p, win=%p)%s%s",
          (void*)t->comm, (void*)w[j], t->destroyed ? " [after destroy]" : "", k ? " [child]" : "");
    if (rc != ncclSuccess) fail(q, "deregister%s%s: %s", k ? " [child]" : "", t->destroyed ? " after destroy" : "", ng_rc_name(rc));
  }
}

static void destroy(struct ng_rank* q, struct ng_tgt* t, int k) {
  ncclResult_t rc;
  ng_step(q, "ncclCommDestroy");
  NCALL(q, 1, rc, ncclCommDestroy(t->comm), "ncclCommDestroy(comm=%p)%s", (void*)t->comm, k ? " [child]" : "");
  if (is_err(rc)) fail(q, "ncclCommDestroy%s: %s", k ? " [child]" : "", ng_rc_name(rc));
  t->destroyed = 1;
}

static void phase_teardown(struct ng_rank* r, int n, int k) {
  devcomm_destroy_t dd = NULL;
  if (k == 0 && opt.devcomm) dd = (devcomm_destroy_t)dlsym(RTLD_DEFAULT, "ncclDevCommDestroy");
  for (int i = 0; i < n; i++) {
    struct ng_rank* q = &r[i];
    struct ng_tgt* t = &q->tgt[k];
    if (q->dev >= 0) cudaSetDevice(q->dev);
    if (t->comm) {
      if (k == 0 && q->devcomm_state == 1 && dd) {
        ncclResult_t rc;
        ng_step(q, "ncclDevCommDestroy");
        NCALL(q, 1, rc, dd(t->comm, q->devcomm), "ncclDevCommDestroy(comm=%p)", (void*)t->comm);
        if (rc != ncclSuccess) fail(q, "ncclDevCommDestroy: %s", ng_rc_name(rc));
      }
      if (opt.dereg_after_destroy) { destroy(q, t, k); dereg(q, t, k); }
      else { dereg(q, t, k); destroy(q, t, k); }
    }
    if (t->base && t->alloc_nccl == 2) t->base = NULL; /* --alloc small: left mapped */
    if (t->base) {
      ng_step(q, "free");
      if (t->alloc_nccl) {
        ncclResult_t rc;
        NCALL(q, 1, rc, ncclMemFree(t->base), "ncclMemFree(%p)", t->base);
        if (rc != ncclSuccess) fail(q, "ncclMemFree: %s", ng_rc_name(rc));
      } else {
        cu(q, cudaFree(t->base), "cudaFree");
      }
      t->base = NULL;
    }
  }
}

void ng_run(struct ng_rank* r, int n) {
  phase_setup(r, n);
  phase_init(r, n);
  phase_alloc(r, n);
  phase_register(r, n, 0);
  if (opt.devcomm) phase_devcomm(r, n);
  phase_allreduce(r, n, 0);
  if (opt.split) {
    phase_split(r, n);
    phase_register(r, n, 1);
    phase_allreduce(r, n, 1);
    phase_teardown(r, n, 1);
  }
  phase_teardown(r, n, 0);
  for (int i = 0; i < n; i++) {
    if (r[i].stream) cudaStreamDestroy(r[i].stream);
    ng_step(&r[i], "done");
  }
}

static void tgt_summary(const struct ng_tgt* t, char* buf, size_t len, const char* prefix) {
  char w[32];
  if (t->win) snprintf(w, sizeof w, "%p", (void*)t->win);
  else snprintf(w, sizeof w, "null");
  snprintf(buf, len, " %sreg=%s %swin=%s %sar=%s", prefix, t->registered ? ng_rc_name(t->reg_rc) : "none", prefix, w,
           prefix, t->ar[0] ? t->ar : "not-run");
}

int ng_report(struct ng_rank* r) {
  char sum[1024] = "", part[400];
  tgt_summary(&r->tgt[0], part, sizeof part, "");
  strncat(sum, part, sizeof sum - strlen(sum) - 1);
  if (opt.split) {
    tgt_summary(&r->tgt[1], part, sizeof part, "child-");
    strncat(sum, part, sizeof sum - strlen(sum) - 1);
  }
  if (r->capture_done) strncat(sum, r->capture_invalidated ? " capture=invalidated" : " capture=intact", sizeof sum - strlen(sum) - 1);
  if (opt.devcomm) {
    static const char* dc[] = {"failed", "not-run", "ok", "skipped"};
    snprintf(part, sizeof part, " devcomm=%s", dc[r->devcomm_state + 1]);
    strncat(sum, part, sizeof sum - strlen(sum) - 1);
  }
  if (r->failed) { ng_say("rank %d/%d: RESULT fail %s |%s", r->rank, r->nranks, r->why, sum); return 1; }
  if (r->skipped) { ng_say("rank %d/%d: RESULT skip %s |%s", r->rank, r->nranks, r->skip_why, sum); return 77; }
  ng_say("rank %d/%d: RESULT ok%s", r->rank, r->nranks, sum);
  return 0;
}
