/* Fake CUDA driver: streams (a worker thread each, running host functions in order), stream
 * capture with CUDA's documented capture-mode rules, graphs of captured host functions, events. */
#define _GNU_SOURCE
#include "fake_cuda_int.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fc_cond = PTHREAD_COND_INITIALIZER;
struct CUstream_st *fc_all_streams;

static struct CUstream_st *legacy[FC_MAXDEV];
static __thread struct CUstream_st *per_thread[FC_MAXDEV];
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* A forked child has none of the parent's worker threads: forget all queued work. */
static void atfork_child(void)
{
  pthread_mutex_init(&fc_lock, NULL);
  pthread_cond_init(&fc_cond, NULL);
  for (struct CUstream_st *s = fc_all_streams; s; s = s->next_all) {
    s->head = s->tail = NULL;
    s->pending = 0;
    s->worker = 0;
  }
}
__attribute__((constructor)) static void stream_init(void) { pthread_atfork(NULL, NULL, atfork_child); }

static struct CUstream_st *new_stream(unsigned flags, int dev, int is_legacy)
{
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->flags = flags; s->dev = dev; s->legacy = is_legacy;
  s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
  pthread_mutex_lock(&fc_lock);
  s->next_all = fc_all_streams;
  fc_all_streams = s;
  pthread_mutex_unlock(&fc_lock);
  return s;
}

struct CUstream_st *fc_resolve(CUstream s)
{
  int dev = fc_current_dev();
  if (s == NULL || s == CU_STREAM_LEGACY) {
    if (!legacy[dev]) {
      struct CUstream_st *n = new_stream(0, dev, 1);
      if (!__sync_bool_compare_and_swap(&legacy[dev], NULL, n) && n) n->destroyed = 1; /* lost the race */
    }
    return legacy[dev];
  }
  if (s == CU_STREAM_PER_THREAD) {
    if (!per_thread[dev]) per_thread[dev] = new_stream(CU_STREAM_NON_BLOCKING, dev, 0);
    return per_thread[dev];
  }
  return s;
}

/* ---- capture rules ---- */

/* Is a blocking (non-CU_STREAM_NON_BLOCKING) stream capturing? Caller holds fc_lock. */
static struct CUstream_st *blocking_capture(void)
{
  for (struct CUstream_st *s = fc_all_streams; s; s = s->next_all)
    if (!s->destroyed && !s->legacy && !(s->flags & CU_STREAM_NON_BLOCKING) &&
        s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE)
      return s;
  return NULL;
}

/* CUDA: in GLOBAL mode a thread may not make potentially unsafe calls while it has a capture
 * of its own not begun in RELAXED mode, or any thread has a capture begun in GLOBAL mode; in
 * THREAD_LOCAL mode only its own captures count; RELAXED lifts the rule. The offending call
 * fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures. */
CUresult fc_unsafe_check(void)
{
  CUstreamCaptureMode m = thread_mode;
  if (m == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  pthread_t self = pthread_self();
  int hit = 0;
  pthread_mutex_lock(&fc_lock);
  for (struct CUstream_st *s = fc_all_streams; s; s = s->next_all) {
    if (s->destroyed || s->cap_status != CU_STREAM_CAPTURE_STATUS_ACTIVE) continue;
    int own = pthread_equal(s->cap_thread, self) && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    int global = m == CU_STREAM_CAPTURE_MODE_GLOBAL && s->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || global) {
      s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      hit = 1;
    }
  }
  pthread_mutex_unlock(&fc_lock);
  return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode old = thread_mode;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  thread_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
  struct CUstream_st *s = arg;
  (void)pthread_setname_np(pthread_self(), "fake-stream");
  pthread_mutex_lock(&fc_lock);
  for (;;) {
    while (!s->head && !s->destroyed) pthread_cond_wait(&fc_cond, &fc_lock);
    if (!s->head) break; /* destroyed and drained */
    struct fc_item *it = s->head;
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&fc_lock);
    it->fn(it->data); /* may block forever: a collective whose peer never arrives */
    if (it->owned) free(it->data);
    free(it);
    pthread_mutex_lock(&fc_lock);
    s->pending--;
    pthread_cond_broadcast(&fc_cond);
  }
  s->worker = 0;
  pthread_mutex_unlock(&fc_lock);
  return NULL; /* the stream object stays (tombstone): handles may still be compared */
}

/* caller holds fc_lock */
static CUresult push(struct CUstream_st *s, CUhostFn fn, void *data, int owned)
{
  struct fc_item *it = calloc(1, sizeof *it);
  if (!it) return CUDA_ERROR_OUT_OF_MEMORY;
  it->fn = fn; it->data = data; it->owned = owned;
  if (!s->worker) {
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, worker_main, s) != 0) {
      pthread_attr_destroy(&a);
      free(it);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_attr_destroy(&a);
    s->worker = 1;
  }
  if (s->tail) s->tail->next = it; else s->head = it;
  s->tail = it;
  s->pending++;
  pthread_cond_broadcast(&fc_cond);
  return CUDA_SUCCESS;
}

static void graph_add(struct CUgraph_st *g, CUhostFn fn, void *data, int owned)
{
  struct fc_item *it = calloc(1, sizeof *it);
  if (!it) return;
  it->fn = fn; it->data = data; it->owned = owned;
  if (g->tail) g->tail->next = it; else g->head = it;
  g->tail = it;
}

/* Enqueue host work on a stream, or record it into the stream's capture graph. */
CUresult fc_enqueue(CUstream hs, CUhostFn fn, void *data, int owned)
{
  struct CUstream_st *s = fc_resolve(hs);
  if (!s || s->destroyed) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&fc_lock);
  if (s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    graph_add(s->cap_graph, fn, data, owned);
  } else if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else {
    struct CUstream_st *b = s->legacy ? blocking_capture() : NULL;
    if (b) {
      b->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else {
      r = push(s, fn, data, owned);
    }
  }
  pthread_mutex_unlock(&fc_lock);
  if (r != CUDA_SUCCESS && owned) free(data);
  return r;
}

CUresult fc_sync_stream(struct CUstream_st *s)
{
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fc_lock);
  if (s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE) {
    s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    pthread_mutex_unlock(&fc_lock);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  while (s->pending > 0) pthread_cond_wait(&fc_cond, &fc_lock);
  pthread_mutex_unlock(&fc_lock);
  return CUDA_SUCCESS;
}

/* ---- stream API ---- */

EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags)
{
  if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  struct CUstream_st *s = new_stream(flags, fc_current_dev(), 0);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  *ph = s;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
  (void)priority;
  return cuStreamCreate(ph, flags);
}

/* Like CUDA: returns at once; queued work still runs, then the worker ends. */
EXPORT CUresult cuStreamDestroy(CUstream hs)
{
  if (!hs || hs == CU_STREAM_LEGACY || hs == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fc_lock);
  CUresult r = hs->destroyed ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
  hs->destroyed = 1;
  pthread_cond_broadcast(&fc_cond);
  pthread_mutex_unlock(&fc_lock);
  return r;
}

EXPORT CUresult cuStreamQuery(CUstream hs)
{
  struct CUstream_st *s = fc_resolve(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fc_lock);
  CUresult r;
  if (s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE) {
    s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  } else {
    r = s->pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&fc_lock);
  return r;
}

EXPORT CUresult cuStreamSynchronize(CUstream hs) { return fc_sync_stream(fc_resolve(hs)); }

EXPORT CUresult cuStreamGetFlags(CUstream hs, unsigned int *flags)
{
  struct CUstream_st *s = fc_resolve(hs);
  if (!s || !flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream hs, CUhostFn fn, void *userData)
{
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  /* Work launched into a stream of another device's context than the current one fails with
   * "invalid resource handle" (what NCCL reported on 2 x H200 when ncclguard used a stream of
   * GPU 0 for a communicator of GPU 1). */
  struct CUstream_st *s = fc_resolve(hs);
  if (s && !s->legacy && s->dev != fc_current_dev()) return CUDA_ERROR_INVALID_HANDLE;
  return fc_enqueue(hs, fn, userData, 0);
}

/* ---- capture ---- */

EXPORT CUresult cuStreamBeginCapture(CUstream hs, CUstreamCaptureMode mode)
{
  if (hs == NULL || hs == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  struct CUstream_st *s = fc_resolve(hs);
  if (!s || s->destroyed) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fc_lock);
  CUresult r = CUDA_SUCCESS;
  if (s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else {
    s->cap_graph = calloc(1, sizeof *s->cap_graph);
    s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    s->cap_mode = mode;
    s->cap_thread = pthread_self();
  }
  pthread_mutex_unlock(&fc_lock);
  return r;
}

EXPORT CUresult cuStreamEndCapture(CUstream hs, CUgraph *phGraph)
{
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  struct CUstream_st *s = fc_resolve(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fc_lock);
  CUresult r = CUDA_SUCCESS;
  if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else if (s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->cap_thread, pthread_self())) {
    r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    *phGraph = NULL;
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* the recorded graph is dropped (leaked) */
    s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
    s->cap_graph = NULL;
  } else {
    *phGraph = s->cap_graph;
    s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
    s->cap_graph = NULL;
  }
  pthread_mutex_unlock(&fc_lock);
  return r;
}

EXPORT CUresult cuStreamIsCapturing(CUstream hs, CUstreamCaptureStatus *st)
{
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  struct CUstream_st *s = fc_resolve(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&fc_lock);
  CUresult r = CUDA_SUCCESS;
  if (s->legacy && blocking_capture()) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  else *st = s->cap_status;
  pthread_mutex_unlock(&fc_lock);
  return r;
}

/* ---- graphs: the host functions a capture recorded (no test launches a graph) ---- */

EXPORT CUresult cuGraphDestroy(CUgraph g)
{
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  for (struct fc_item *it = g->head, *n; it; it = n) {
    n = it->next;
    if (it->owned) free(it->data);
    free(it);
  }
  free(g);
  return CUDA_SUCCESS;
}

/* ---- async copies and sets ---- */

struct copy_args { void *dst; const void *src; size_t n; int set; unsigned val; int width; };

static void do_copy(void *p)
{
  struct copy_args *a = p;
  if (!a->set) { if (a->n) memmove(a->dst, a->src, a->n); return; }
  if (a->width == 1) memset(a->dst, (int)a->val, a->n);
  else for (size_t i = 0; i < a->n; i++) ((unsigned *)a->dst)[i] = a->val;
}

static CUresult async_op(CUstream hs, void *dst, const void *src, size_t n, int set, unsigned val, int width)
{
  struct copy_args *a = malloc(sizeof *a);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->dst = dst; a->src = src; a->n = n; a->set = set; a->val = val; a->width = width;
  return fc_enqueue(hs, do_copy, a, 1);
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs)
{
  return async_op(hs, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, 0, 0, 0);
}
EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream hs)
{
  return async_op(hs, (void *)(uintptr_t)dst, src, n, 0, 0, 0);
}
EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream hs)
{
  return async_op(hs, dst, (const void *)(uintptr_t)src, n, 0, 0, 0);
}
EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs)
{
  return async_op(hs, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, 0, 0, 0);
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream hs)
{
  return async_op(hs, (void *)(uintptr_t)dst, NULL, n, 1, uc, 1);
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream hs)
{
  return async_op(hs, (void *)(uintptr_t)dst, NULL, n, 1, ui, 4);
}

#define PLAIN_ALIAS(plain, v2) __asm__(".globl " #plain "\n.set " #plain ", " #v2)
PLAIN_ALIAS(cuStreamDestroy, cuStreamDestroy_v2);
PLAIN_ALIAS(cuStreamBeginCapture, cuStreamBeginCapture_v2);
