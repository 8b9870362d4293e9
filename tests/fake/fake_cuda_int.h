/* Internal interface of the fake CUDA driver (libcuda.so.1); not installed, not used by consumers.
 * Host memory stands in for device memory. See README.md for what is modelled. */
#ifndef FAKE_CUDA_INT_H
#define FAKE_CUDA_INT_H
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FC_MAXDEV 64
#define FC_GRANULARITY ((size_t)2 << 20) /* cuMemGetAllocationGranularity: 2 MiB */
/* cuDeviceTotalMem and cuMemGetInfo of an H200 (measured 2026-12-01 on 1 x H200, driver 580.159.04, through
 * ctypes: total 150109880320 = 0x22f33f0000, 139.8 GiB; free 149557477376 with one context). NCCL's
 * symmetric address space is this rounded up to 4 GiB: 0x2300000000, the limit its WARN printed there
 * (issue 20, NVIDIA/nccl#2331; docs/NCCL.md §10). */
#define FC_TOTAL_MEM ((size_t)150109880320ULL)
#define FC_FREE_MEM ((size_t)149557477376ULL)

/* One queued unit of stream work: a host function and its argument. */
struct fc_item {
  CUhostFn fn;
  void *data;
  int owned; /* the driver frees data after running it */
  struct fc_item *next;
};

/* Captured graph: the host functions recorded while a stream was capturing. */
struct CUgraph_st {
  struct fc_item *head, *tail;
};

struct CUstream_st {
  unsigned flags;         /* CU_STREAM_NON_BLOCKING or 0 */
  int dev;
  int legacy;             /* the legacy default stream of dev */
  struct fc_item *head, *tail;
  int pending;            /* queued + running items */
  int worker;             /* worker thread started */
  int destroyed;
  /* capture */
  CUstreamCaptureStatus cap_status;
  CUstreamCaptureMode cap_mode;
  pthread_t cap_thread;
  struct CUgraph_st *cap_graph;
  struct CUstream_st *next_all; /* list of all streams of the process */
};


struct CUctx_st {
  int dev;
};

/* driver-wide lock protecting streams, events and captures; one condvar for every wait */
extern pthread_mutex_t fc_lock;
extern pthread_cond_t fc_cond;

int fc_current_dev(void);
int fc_device_count(void);
/* potentially unsafe call check (CUDA capture rules): CUDA_SUCCESS or CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
CUresult fc_unsafe_check(void);
/* resolve NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD to a real stream object */
struct CUstream_st *fc_resolve(CUstream s);
CUresult fc_enqueue(CUstream s, CUhostFn fn, void *data, int owned);
CUresult fc_sync_stream(struct CUstream_st *s);
#endif
