/* Fake NCCL: collectives and send/recv. The host call only enqueues a host function on the
 * stream (cuLaunchHostFunc), so collectives are asynchronous like real ones: the stream's
 * worker meets the peers in the communicator's segment and computes the result. A peer that
 * never arrives leaves the stream busy forever (docs/NCCL.md §7, the hang); cuStreamQuery says not ready. */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { K_ALLREDUCE, K_ALLGATHER };

struct coll {
  int kind;
  uint64_t ticket; /* its place on its share root's device stream (struct ncclComm, split_share) */
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t dt;
  ncclRedOp_t op;
  struct ncclComm *c;
  uint64_t seq;
  int captured; /* recorded into a graph: takes its seq when it runs */
  int caller;   /* FN_CALLER_*: who issued it (the checker) */
};

static size_t dt_size(ncclDataType_t dt)
{
  switch (dt) {
  case ncclInt8: case ncclUint8: return 1;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  default: return 0; /* half, bfloat16, fp8: not modelled */
  }
}

#define RED(T)                                                                     \
  do {                                                                             \
    T *d = dst; const T *s = src;                                                  \
    for (size_t i = 0; i < n; i++) {                                               \
      switch (op) {                                                                \
      case ncclSum: case ncclAvg: d[i] = (T)(d[i] + s[i]); break;                  \
      case ncclProd: d[i] = (T)(d[i] * s[i]); break;                               \
      case ncclMax: if (s[i] > d[i]) d[i] = s[i]; break;                           \
      case ncclMin: if (s[i] < d[i]) d[i] = s[i]; break;                           \
      default: break;                                                              \
      }                                                                            \
    }                                                                              \
  } while (0)
#define DIV(T) do { T *d = dst; for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] / (T)k); } while (0)

static void reduce_into(void *dst, const void *src, size_t n, ncclDataType_t dt, ncclRedOp_t op)
{
  switch (dt) {
  case ncclInt8: RED(int8_t); break;
  case ncclUint8: RED(uint8_t); break;
  case ncclInt32: RED(int32_t); break;
  case ncclUint32: RED(uint32_t); break;
  case ncclInt64: RED(int64_t); break;
  case ncclUint64: RED(uint64_t); break;
  case ncclFloat32: RED(float); break;
  case ncclFloat64: RED(double); break;
  default: break;
  }
}

static void divide(void *dst, size_t n, ncclDataType_t dt, int k)
{
  switch (dt) {
  case ncclInt8: DIV(int8_t); break;
  case ncclUint8: DIV(uint8_t); break;
  case ncclInt32: DIV(int32_t); break;
  case ncclUint32: DIV(uint32_t); break;
  case ncclInt64: DIV(int64_t); break;
  case ncclUint64: DIV(uint64_t); break;
  case ncclFloat32: DIV(float); break;
  case ncclFloat64: DIV(double); break;
  default: break;
  }
}

static int stopped(struct ncclComm *c) { return FN_LOAD(c->aborted) || FN_LOAD(c->revoked); }

/* Barrier of the collective now running; the final one advances to the next collective.
 * Returns 0, or -1 when the communicator was aborted/revoked. Caller holds the segment lock. */
static int barrier(struct ncclComm *c, int final)
{
  struct fn_shm *s = c->shm;
  if (++s->bar_arrived == c->nranks) {
    s->bar_arrived = 0;
    s->bar_gen++;
    if (final) s->cseq++;
    fn_shm_wake(s);
    return 0;
  }
  uint64_t g = s->bar_gen;
  while (s->bar_gen == g && !stopped(c)) fn_shm_wait(s);
  return stopped(c) ? -1 : 0;
}

/* ---- the collective-matching checker (README.md, "Collective matching") ----
 * Each rank posts a descriptor of its k-th collective in the segment at that collective's
 * rendezvous (after the wait for its turn, before its first barrier: it waits for nothing more) and
 * compares it with the descriptors the other ranks posted for the same k. The ranks already posted
 * agree with each other (else a mismatch was recorded), so one of them stands for all. One line per
 * k, to FAKE_NCCL_MISMATCH_FILE (one O_APPEND write) and stderr. Only observes: the data flows as
 * without it. Send/recv are not collectives here (no sequence number) and are not checked. */
static const char *kind_name(int k) { return k == K_ALLREDUCE ? "allreduce" : k == K_ALLGATHER ? "allgather" : "?"; }
static const char *dt_name(int dt)
{
  switch (dt) {
  case ncclInt8: return "int8";
  case ncclUint8: return "uint8";
  case ncclInt32: return "int32";
  case ncclUint32: return "uint32";
  case ncclInt64: return "int64";
  case ncclUint64: return "uint64";
  case ncclFloat16: return "float16";
  case ncclFloat32: return "float32";
  case ncclFloat64: return "float64";
  default: return "?";
  }
}
static const char *op_name(int op)
{
  switch (op) {
  case -1: return "-";
  case ncclSum: return "sum";
  case ncclProd: return "prod";
  case ncclMax: return "max";
  case ncclMin: return "min";
  case ncclAvg: return "avg";
  default: return "?";
  }
}

static int desc_fmt(char *b, size_t n, int r, const struct fn_cdesc *d)
{
  char root[32] = "";
  if (d->root >= 0) snprintf(root, sizeof root, " root=%d", d->root);
  return snprintf(b, n, "rank %d: %s count=%llu type=%s op=%s%s caller=%s", r, kind_name(d->kind),
                  (unsigned long long)d->count, dt_name(d->dt), op_name(d->op), root,
                  d->caller == FN_CALLER_GUARD ? "guard" : "app");
}

static int desc_same(const struct fn_cdesc *a, const struct fn_cdesc *b)
{
  return a->kind == b->kind && a->count == b->count && a->dt == b->dt && a->op == b->op && a->root == b->root &&
         a->caller == b->caller;
}

/* Caller holds the segment lock; fills line (empty: nothing to record). */
static void check_post(struct ncclComm *c, const struct coll *a, char *line, size_t len)
{
  struct fn_shm *s = c->shm;
  line[0] = 0;
  struct fn_cdesc *mine = &s->cdesc[c->rank];
  mine->kind = a->kind;
  mine->count = a->count;
  mine->dt = (int)a->dt;
  mine->op = a->kind == K_ALLREDUCE ? (int)a->op : -1; /* the op of a non-reduction means nothing */
  mine->root = -1;                                       /* no rooted collective in the fake */
  mine->caller = a->caller;
  mine->symoff = fn_win_symoff(c, a->recv);
  mine->k1 = a->seq + 1;
  if (s->mm_k1 == a->seq + 1) return; /* already recorded for this k */
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank || s->cdesc[r].k1 != a->seq + 1) continue;
    if (!desc_same(&s->cdesc[r], mine)) {
      int lo = r < c->rank ? r : c->rank, hi = r < c->rank ? c->rank : r;
      const char *nm = c->name[0] == '/' ? c->name + 1 : c->name;
      int n = snprintf(line, len, "fake-nccl MISMATCH comm=%s k=%llu ", nm, (unsigned long long)a->seq);
      if (n > 0 && (size_t)n < len) n += desc_fmt(line + n, len - (size_t)n, lo, &s->cdesc[lo]);
      if (n > 0 && (size_t)n < len) n += snprintf(line + n, len - (size_t)n, " vs ");
      if (n > 0 && (size_t)n < len) n += desc_fmt(line + n, len - (size_t)n, hi, &s->cdesc[hi]);
      if (n > 0 && (size_t)n < len) snprintf(line + n, len - (size_t)n, "\n");
      s->mm_k1 = a->seq + 1;
    }
    return; /* the ranks posted before agree with each other: one comparison is enough */
  }
}

/* FAKE_NCCL_MISMATCH_FILE, read once when the library is loaded: record_mismatch runs in a stream's worker
 * thread, where a getenv races with the program's setenv */
static char mismatch_file[4096];
__attribute__((constructor)) static void mismatch_file_read(void)
{
  const char *f = getenv("FAKE_NCCL_MISMATCH_FILE");
  if (f && strlen(f) < sizeof mismatch_file) strcpy(mismatch_file, f);
}

static void record_mismatch(const char *line)
{
  size_t n = strlen(line);
  if (!n) return;
  const char *f = mismatch_file;
  if (*f) {
    int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) { ssize_t w = write(fd, line, n); (void)w; close(fd); }
  }
  ssize_t w = write(2, line, n);
  (void)w;
}

static unsigned char *staging(struct ncclComm *c, int r) { return (unsigned char *)c->shm + c->shm->coll_off + (size_t)r * FN_COLL_CAP; }

/* A symmetric all-reduce on windows that sit at different offsets on the ranks (NCCL 2.28.0-2.30.6: each
 * rank places a window in the symmetric space by its own size, symMemoryObtain -> ncclSpaceAlloc at
 * v2.28.9-1, so ranks that registered different sizes earlier place later windows apart) reads each peer
 * at this rank's own offset: the wrong memory, silently (sglang#33037). 2.30.7 reserves the largest size
 * among the ranks (lsaMaxSize): the same offsets, not modelled further. Caller: after the contribution
 * barrier (every rank's descriptor of this collective posted). */
static int offsets_differ(struct ncclComm *c)
{
  int v = fn_version();
  if (v < 22800 || v >= 23007) return 0;
  long long o0 = c->shm->cdesc[0].symoff;
  for (int r = 0; r < c->nranks; r++)
    if (c->shm->cdesc[r].symoff < 0) return 0; /* not every rank's buffer is a window: no symmetric kernel */
  for (int r = 1; r < c->nranks; r++)
    if (c->shm->cdesc[r].symoff != o0) return 1;
  return 0;
}

static void run_coll(struct coll *a)
{
  struct ncclComm *c = a->c;
  struct fn_shm *s = c->shm;
  size_t es = dt_size(a->dt);
  int n = c->nranks, me = c->rank;
  if (a->captured) a->seq = __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_ACQ_REL);
  char mm[1024] = "";
  fn_shm_lock(s);
  while (s->cseq != a->seq && !stopped(c)) fn_shm_wait(s);
  if (!stopped(c) && n > 1) {
    check_post(c, a, mm, sizeof mm);
    record_mismatch(mm); /* now, under the lock: a mismatch may leave this collective hanging */
  }
  size_t per = FN_COLL_CAP / es;
  size_t off = 0;
  do {
    if (stopped(c)) break;
    size_t e = a->count - off < per ? a->count - off : per;
    unsigned char *mine = staging(c, me);
    const unsigned char *snd = a->send;
    unsigned char *rcv = a->recv;
    /* contribute (copies out before anyone writes a result: in-place is safe) */
    memcpy(mine, snd + off * es, e * es);
    if (barrier(c, 0)) break;
    fn_shm_unlock(s);
    switch (a->kind) {
    case K_ALLREDUCE: {
      unsigned char *tmp = malloc(e * es + 1);
      memcpy(tmp, staging(c, 0), e * es);
      for (int r = 1; r < n; r++) reduce_into(tmp, staging(c, r), e, a->dt, a->op);
      if (offsets_differ(c)) memset(tmp, 0xa5, e * es); /* read a peer's memory at the wrong place: garbage */
      if (a->op == ncclAvg) divide(tmp, e, a->dt, n);
      memcpy(rcv + off * es, tmp, e * es);
      free(tmp);
      break;
    }
    case K_ALLGATHER:
      for (int r = 0; r < n; r++) memcpy(rcv + ((size_t)r * a->count + off) * es, staging(c, r), e * es);
      break;
    }
    fn_shm_lock(s);
    off += e;
    if (barrier(c, off >= a->count)) break;
  } while (off < a->count);
  fn_shm_unlock(s);
}

static void coll_done(struct ncclComm *c)
{
  pthread_mutex_lock(&c->lk);
  c->inflight--;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->lk);
}

/* Kernels of communicators that share one device stream (a parent and its sharing split children) run one
 * after another, in the order they were enqueued (struct ncclComm, split_share): wait for the earlier ones. */
static void stream_turn(struct coll *a)
{
  struct ncclComm *root = a->c->share_root;
  pthread_mutex_lock(&root->lk);
  while (root->tk_done != a->ticket && !stopped(a->c)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&root->cv, &root->lk, &ts); /* (an abort of this one is seen within 20 ms) */
  }
  pthread_mutex_unlock(&root->lk);
}
static void stream_next(struct coll *a)
{
  struct ncclComm *root = a->c->share_root;
  pthread_mutex_lock(&root->lk);
  if (root->tk_done <= a->ticket) root->tk_done = a->ticket + 1;
  pthread_cond_broadcast(&root->cv);
  pthread_mutex_unlock(&root->lk);
}

static void coll_hostfn(void *p)
{
  struct coll *a = p;
  int shared = !a->captured && __atomic_load_n(&a->c->share_root->nshare, __ATOMIC_ACQUIRE) > 0;
  if (shared) stream_turn(a);
  run_coll(a);
  if (!a->captured) stream_next(a);
  if (!a->captured) { coll_done(a->c); free(a); }
}

/* enqueue on the stream, with the comm's device current (NULL stream = that device's legacy stream) */
static ncclResult_t launch(struct ncclComm *c, cudaStream_t stream, CUhostFn fn, void *arg, int *captured)
{
  CUcontext saved;
  fn_switch_dev(c->dev, &saved);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (stream && cuStreamIsCapturing(stream, &st) != CUDA_SUCCESS) st = CU_STREAM_CAPTURE_STATUS_NONE;
  *captured = st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (!*captured) {
    pthread_mutex_lock(&c->lk);
    c->inflight++;
    pthread_mutex_unlock(&c->lk);
  }
  CUresult cr = cuLaunchHostFunc(stream, fn, arg);
  fn_restore_dev(saved);
  if (cr != CUDA_SUCCESS) {
    if (!*captured) coll_done(c);
    const char *s = NULL;
    cuGetErrorString(cr, &s);
    fn_set_error("Cuda failure %d '%s' (enqueue)", (int)cr, s ? s : "?");
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

static int is_captured(struct ncclComm *c, cudaStream_t stream)
{
  if (!stream) return 0;
  CUcontext saved;
  fn_switch_dev(c->dev, &saved);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cuStreamIsCapturing(stream, &st) != CUDA_SUCCESS) st = CU_STREAM_CAPTURE_STATUS_NONE;
  fn_restore_dev(saved);
  return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

/* The connection setup of a communicator's first collective. NCCL connects the peers inside
 * ncclGroupEnd of the first collective that needs them and waits on the host for every peer, with
 * no timeout; the communicators of one group are set up together (all post, then all wait, as the
 * fake's stages do). Measured on NCCL 2.28.9 (tests/gpu/results/2026-11-30-nvidia-h200-x2.md,
 * late-peer-past-timeout): a rank waiting there for peers still to come is released by its own
 * ncclCommRevoke (the watchdog's), while a rank that arrives after a peer has given that setup up
 * waits for ever, and its own revoke does not end that wait (NCCL's revoke clears the abort flag
 * again when its job ends, src/init.cc); only an abort (whose flag stays set) would. */
static void connect_arrive(struct ncclComm *c)
{
  struct fn_shm *s = c->shm;
  c->conn_posted = 1;
  if (c->nranks <= 1 || !s) { c->connected = 1; return; }
  fn_shm_lock(s);
  c->conn_late = s->conn_left;
  c->conn_e0 = __atomic_load_n(&c->revoke_epoch, __ATOMIC_ACQUIRE);
  s->conn_arrived++;
  fn_shm_wake(s);
  fn_shm_unlock(s);
}

static ncclResult_t connect_wait(struct ncclComm *c)
{
  struct fn_shm *s = c->shm;
  fn_shm_lock(s);
  while (s->conn_arrived < c->nranks && !FN_LOAD(c->aborted) &&
         (c->conn_late || __atomic_load_n(&c->revoke_epoch, __ATOMIC_ACQUIRE) == c->conn_e0))
    fn_shm_wait(s);
  int ok = s->conn_arrived >= c->nranks;
  if (!ok) s->conn_left = 1, s->conn_arrived--;
  fn_shm_unlock(s);
  /* measured on 2.28.9 (tests/gpu/results/2026-12-01-nvidia-h200-x2.md, late-peer-past-timeout):
   * after a revoke ended this wait, the application's ncclCommAbort of the communicator never returned */
  if (!ok && !FN_LOAD(c->aborted)) c->teardown_hangs = 1;
  if (!ok) {
    fn_set_error("connection setup of the first collective ended: the communicator was %s", FN_LOAD(c->aborted) ? "aborted" : "revoked");
    return ncclInternalError;
  }
  c->connected = 1;
  return ncclSuccess;
}

static ncclResult_t coll_stage(struct fn_op *op, int stage, int complete)
{
  (void)stage;
  struct coll *a = op->arg;
  struct ncclComm *c = a->c;
  if (!complete) { /* post: arrive at the connection setup (every communicator of the group first) */
    if (!c->connected && !c->conn_posted) connect_arrive(c);
    return ncclSuccess;
  }
  if (!c->connected && c->conn_posted) {
    ncclResult_t r = connect_wait(c);
    if (r != ncclSuccess) return r;
  }
  if (c->damaged) {
    fn_set_error("communicator %p is in an error state after a failed registration", (void *)c);
    return ncclInternalError;
  }
  cudaStream_t stream = (cudaStream_t)(uintptr_t)op->gen; /* stashed at submit */
  struct coll *copy = malloc(sizeof *copy);
  *copy = *a;
  copy->captured = is_captured(c, stream);
  if (!copy->captured) copy->seq = __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_ACQ_REL);
  if (!copy->captured) { /* its place on the shared device stream */
    struct ncclComm *root = c->share_root;
    pthread_mutex_lock(&root->lk);
    copy->ticket = root->tk_next++;
    pthread_mutex_unlock(&root->lk);
  }
  int captured = 0;
  ncclResult_t r = launch(c, stream, coll_hostfn, copy, &captured);
  if (r != ncclSuccess) free(copy);
  return r;
}

static ncclResult_t submit_coll(int kind, const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                ncclComm_t comm, cudaStream_t stream)
{
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess && comm->suspended) {
    /* NCCL 2.29.7 (src/mem_manager.cc) releases the communicator's scratch buffers and peer mappings
     * on suspend, and no collective path checks for it ("cannot be used while suspended", nccl.h):
     * the kernel would touch released memory. The fake stops the process, the way a GPU fault would. */
    fprintf(stderr, "fake NCCL: collective on a suspended communicator %p: its memory is released (illegal address)\n",
            (void *)comm);
    abort();
  }
  if (r == ncclSuccess && !dt_size(dt)) { fn_set_error("datatype %d not supported by the fake", (int)dt); r = ncclInvalidArgument; }
  if (r == ncclSuccess && kind == K_ALLREDUCE && (op < ncclSum || op > ncclAvg)) {
    fn_set_error("invalid reduction op %d", (int)op);
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess && count > 0) {
    unsigned int mt;
    if (cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)send) ||
        cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)recv)) {
      fn_set_error("buffer is not device memory");
      r = ncclInvalidArgument;
    }
  }
  if (r != ncclSuccess) { fn_group_error(r); return r; }
  if (count == 0) return ncclSuccess;
  struct coll *a = calloc(1, sizeof *a);
  a->kind = kind; a->send = send; a->recv = recv; a->count = count; a->dt = dt; a->op = op; a->c = comm;
  a->caller = fn_caller;
  struct fn_op *o = fn_op_new(comm, 1, coll_stage, NULL, a);
  /* A collective on a nonblocking communicator runs as NCCL runs a nonblocking group: on a thread of its own
   * (ncclGroupEndInternal: ncclGroupBlocking = comm->config.blocking, then groupLaunchNonBlocking on a new
   * thread and ncclInProgress; src/group.cc at v2.27.7-1 - v2.30.7-1), the connection setup of a first
   * collective included: the call returns ncclInProgress and the communicator's async state says when it is
   * enqueued. On a blocking one, the call returns when it is enqueued. */
  o->nonblocking = !comm->blocking;
  o->gen = (uint64_t)(uintptr_t)stream;
  return fn_submit(o);
}

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream)
{
  ENTER_COLL();
  ncclResult_t r = submit_coll(K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, comm, stream);
  return LEAVE("ncclAllReduce", r, "send=%p recv=%p count=%zu dt=%d op=%d comm=%p stream=%p", sendbuff, recvbuff,
               count, (int)datatype, (int)op, (void *)comm, (void *)stream);
}
FN_ALIAS(ncclAllReduce);

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream)
{
  ENTER_COLL();
  ncclResult_t r = submit_coll(K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, comm, stream);
  return LEAVE("ncclAllGather", r, "count=%zu comm=%p", sendcount, (void *)comm);
}
FN_ALIAS(ncclAllGather);


/* ---- send/recv: per (src,dst) mailbox rings; the sends and receives of one group on one
 * (comm, stream) run as one host function that progresses them all, so any pattern
 * completes as long as the peers post matching operations. ---- */

struct p2p_item { int send; int peer; unsigned char *buf; size_t bytes, done; };
struct p2p {
  struct ncclComm *c;
  cudaStream_t stream;
  int n, cap;
  struct p2p_item *it;
};

static struct fn_mbox *mbox(struct ncclComm *c, int src, int dst)
{
  return (struct fn_mbox *)((unsigned char *)c->shm + c->shm->mbox_off) + ((size_t)src * (size_t)c->nranks + (size_t)dst);
}

static void p2p_hostfn(void *arg)
{
  struct p2p *p = arg;
  struct ncclComm *c = p->c;
  struct fn_shm *s = c->shm;
  fn_shm_lock(s);
  for (;;) {
    int left = 0, progress = 0;
    for (int i = 0; i < p->n; i++) {
      struct p2p_item *x = &p->it[i];
      if (x->done == x->bytes) continue;
      struct fn_mbox *m = x->send ? mbox(c, c->rank, x->peer) : mbox(c, x->peer, c->rank);
      size_t k;
      if (x->send) {
        size_t space = FN_MB_CAP - (size_t)(m->head - m->tail);
        k = x->bytes - x->done < space ? x->bytes - x->done : space;
        for (size_t j = 0; j < k; j++) m->data[(m->head + j) % FN_MB_CAP] = x->buf[x->done + j];
        m->head += k;
      } else {
        size_t avail = (size_t)(m->head - m->tail);
        k = x->bytes - x->done < avail ? x->bytes - x->done : avail;
        for (size_t j = 0; j < k; j++) x->buf[x->done + j] = m->data[(m->tail + j) % FN_MB_CAP];
        m->tail += k;
      }
      x->done += k;
      if (k) progress = 1;
      if (x->done < x->bytes) left = 1;
    }
    if (progress) fn_shm_wake(s);
    if (!left || stopped(c)) break;
    if (!progress) fn_shm_wait(s);
  }
  fn_shm_unlock(s);
  coll_done(c);
  free(p->it);
  free(p);
}

static ncclResult_t p2p_stage(struct fn_op *op, int stage, int complete)
{
  (void)stage;
  if (complete) return ncclSuccess;
  struct p2p *p = op->arg;
  if (p->c->damaged) { fn_set_error("communicator is in an error state"); return ncclInternalError; }
  op->arg = NULL; /* the host function owns it now */
  int captured = 0;
  ncclResult_t r = launch(p->c, p->stream, p2p_hostfn, p, &captured);
  if (r != ncclSuccess) { free(p->it); free(p); }
  return r;
}

struct p2p_key { struct ncclComm *c; cudaStream_t stream; };
static int p2p_match(struct fn_op *op, void *key)
{
  struct p2p_key *k = key;
  struct p2p *p = op->arg;
  return op->stage == p2p_stage && p && p->c == k->c && p->stream == k->stream;
}

static ncclResult_t submit_p2p(int send, void *buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                               cudaStream_t stream)
{
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess && !dt_size(dt)) r = ncclInvalidArgument;
  if (r == ncclSuccess && (peer < 0 || peer >= comm->nranks)) { fn_set_error("invalid peer %d", peer); r = ncclInvalidArgument; }
  if (r != ncclSuccess) { fn_group_error(r); return r; }
  if (count == 0) return ncclSuccess;
  struct p2p_key key = {comm, stream};
  struct fn_op *op = fn_in_group() ? fn_group_find(p2p_match, &key) : NULL;
  int fresh = op == NULL;
  if (fresh) {
    struct p2p *p = calloc(1, sizeof *p);
    p->c = comm; p->stream = stream;
    op = fn_op_new(comm, 1, p2p_stage, NULL, p); /* nonblocking as its communicator (as a collective) */
  }
  struct p2p *p = op->arg;
  if (p->n == p->cap) { p->cap = p->cap ? 2 * p->cap : 4; p->it = realloc(p->it, (size_t)p->cap * sizeof *p->it); }
  p->it[p->n++] = (struct p2p_item){send, peer, buf, count * dt_size(dt), 0};
  return fresh ? fn_submit(op) : ncclSuccess;
}

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream)
{
  ENTER();
  ncclResult_t r = submit_p2p(1, (void *)sendbuff, count, datatype, peer, comm, stream);
  return LEAVE("ncclSend", r, "count=%zu peer=%d comm=%p", count, peer, (void *)comm);
}
FN_ALIAS(ncclSend);

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream)
{
  ENTER();
  ncclResult_t r = submit_p2p(0, recvbuff, count, datatype, peer, comm, stream);
  return LEAVE("ncclRecv", r, "count=%zu peer=%d comm=%p", count, peer, (void *)comm);
}
FN_ALIAS(ncclRecv);
