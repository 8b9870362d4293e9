/* ngtest: one scenario driver for window registration; see README.md.
 * ngtest.c parses the options, launch.c runs the ranks (proc, thread, group),
 * scenario.c holds the steps every rank goes through. */
#ifndef NG_NGTEST_H
#define NG_NGTEST_H
#include "common.h"

enum ng_mode { MODE_PROC, MODE_THREAD, MODE_GROUP };
enum ng_alloc { ALLOC_NCCL, ALLOC_CUDA, ALLOC_CUDA0, ALLOC_SMALL };
enum ng_expect { EXPECT_ANY, EXPECT_NULL, EXPECT_NONNULL, EXPECT_OK, EXPECT_ERROR };

struct ng_opts {
  int mode, nranks;
  int nonblocking, wait_ready, config;
  int alloc;
  size_t size, offset;
  int flags;
  int reg_in_group, capture, twice;
  int dereg_after_destroy;
  int null_comm, null_win, null_buff, zero_size, wrap_size;
  int split, devcomm;
  int iters, allreduce;
  int expect_win, expect_reg;
  int timeout;
  int verbose;
};
extern struct ng_opts opt;

#define NG_MAXRANKS 64
/* Shared by all ranks: a MAP_SHARED|MAP_ANONYMOUS mapping made before fork (proc mode), or just
 * memory of the process (thread and group modes). */
struct ng_shared {
  int id_ready;
  ncclUniqueId id;
  char step[NG_MAXRANKS][64]; /* what each rank is doing now: named when it hangs or crashes */
  int done[NG_MAXRANKS];
};

/* One communicator of a rank and what was registered on it: tgt[0] the main one, tgt[1] the
 * ncclCommSplit child (--split). */
struct ng_tgt {
  ncclComm_t comm;
  void* base;          /* allocation */
  size_t off;          /* registered part starts at base + off */
  size_t alloc_size;
  int alloc_nccl;      /* 1: ncclMemAlloc, 0: cudaMalloc, 2: a VMM mapping of part of a handle (--alloc small) */
  ncclWindow_t win, win2;
  ncclResult_t reg_rc;
  int registered;      /* the registration step ran */
  int group_size, group_rank;
  float expect;        /* all-reduce result every element must have */
  char ar[160];        /* all-reduce outcome for the RESULT line */
  int destroyed;
};

struct ng_rank {
  int rank, nranks, dev;
  struct ng_shared* sh;
  cudaStream_t stream;
  struct ng_tgt tgt[2];
  int capture_invalidated, capture_done;
  int devcomm_state;   /* 0 not tried, 1 created, -1 failed, 2 skipped */
  _Alignas(64) unsigned char devcomm[4096];
  int fatal;           /* no communicator: skip the collective steps */
  int failed, skipped;
  char why[512];
  char skip_why[128];
};

int ng_launch(void);                       /* launch.c: runs opt.mode, returns the exit status */
void ng_run(struct ng_rank* r, int n);     /* scenario.c: the scenario for n ranks driven by this thread */
int ng_report(struct ng_rank* r);          /* prints the RESULT line; 0 ok, 1 fail, 77 skip */
void ng_step(struct ng_rank* r, const char* what);
#endif
