/* ngtest: scenario driver for NCCL window registration (see README.md for every flag).
 * Prints per rank "rank R/N: RESULT ok ..." / "RESULT fail <why>" / "RESULT skip <why>";
 * exits 0 when every rank succeeded, 77 when a step was skipped and the rest succeeded,
 * 1 when a rank failed, 2 on a usage error, 124 when --timeout expired, 128+signal when a rank
 * process was killed by a signal (proc mode). */
#define _GNU_SOURCE
#include "ngtest.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ng_opts opt = {
  .mode = MODE_PROC, .nranks = 2, .alloc = ALLOC_NCCL, .size = 2u << 20,
  .flags = NCCL_WIN_COLL_SYMMETRIC, .iters = 1, .allreduce = 1,
  .expect_win = EXPECT_ANY, .expect_reg = -1,
};

static void usage(FILE* f) {
  fprintf(f,
    "usage: ngtest [-m proc|thread|group] [-n NRANKS] [options]\n"
    "  -m proc|thread|group   one process per rank (default), one thread per rank, or one thread for all\n"
    "  -n NRANKS              number of ranks (default 2); device = rank %% cudaGetDeviceCount\n"
    "  --nonblocking          config.blocking=0 (ncclCommInitRankConfig)\n"
    "  --wait-ready           nonblocking: poll ncclCommGetAsyncError until init is done before registering\n"
    "  --config               blocking init through ncclCommInitRankConfig (PyTorch's way)\n"
    "  --alloc nccl|cuda|cuda0|small  ncclMemAlloc, cudaMalloc, cudaMalloc on rank 0 only (default nccl), or a\n"
    "                         VMM mapping of only the size asked (cuMemMap of part of a 2 MiB handle; the fake\n"
    "                         CUDA allows it: an allocation whose size is no multiple of 2 MiB)\n"
    "  --size BYTES           registered size (default 2M; K/M/G suffixes)\n"
    "  --offset BYTES         register buff+offset (multiple of 4)\n"
    "  --flags N              winFlags (default 1 = NCCL_WIN_COLL_SYMMETRIC)\n"
    "  --reg-in-group         ncclGroupStart / register / ncclGroupEnd\n"
    "  --capture              register while a global-mode stream capture is active\n"
    "  --twice                register the same buffer twice\n"
    "  --dereg-after-destroy  ncclCommDestroy, then ncclCommWindowDeregister (PyTorch's teardown)\n"
    "  --null-comm --null-win --null-buff --zero-size   pass that bad argument to the registration\n"
    "  --wrap-size            register a size such that buff + size wraps past the top of the address\n"
    "                         space (to buff + --size, modulo 2^64)\n"
    "  --split                ncclCommSplit(color=rank%%2) and register/all-reduce on the child too\n"
    "  --devcomm              ncclDevCommCreate after registering (skip if the loaded NCCL lacks it)\n"
    "  --iters K              K all-reduces (default 1); --no-allreduce: none\n"
    "  --expect-win null|nonnull|any     (default any)\n"
    "  --expect-reg ok|error|any         (default ok; error with a --null-*/--zero-size flag)\n"
    "  --timeout SEC          watchdog: report the step each rank hangs in and exit 124\n"
    "                         (default: $NGTEST_TIMEOUT, else none)\n"
    "  -v                     log every CUDA call too\n");
}

static int parse_expect(const char* s, int* out) {
  static const struct { const char* s; int v; } t[] = {
    {"any", EXPECT_ANY}, {"null", EXPECT_NULL}, {"nonnull", EXPECT_NONNULL},
    {"ok", EXPECT_OK}, {"error", EXPECT_ERROR}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(s, t[i].s) == 0) { *out = t[i].v; return 0; }
  return -1;
}

enum {
  O_NONBLOCKING = 256, O_WAIT_READY, O_CONFIG, O_ALLOC, O_SIZE, O_OFFSET, O_FLAGS, O_REG_IN_GROUP,
  O_CAPTURE, O_TWICE, O_DEREG_AFTER, O_NULL_COMM, O_NULL_WIN, O_NULL_BUFF, O_ZERO_SIZE, O_WRAP_SIZE, O_SPLIT,
  O_DEVCOMM, O_ITERS, O_NO_ALLREDUCE, O_EXPECT_WIN, O_EXPECT_REG, O_TIMEOUT,
};

int main(int argc, char** argv) {
  static const struct option lo[] = {
    {"nonblocking", no_argument, 0, O_NONBLOCKING}, {"wait-ready", no_argument, 0, O_WAIT_READY},
    {"config", no_argument, 0, O_CONFIG}, {"alloc", required_argument, 0, O_ALLOC},
    {"size", required_argument, 0, O_SIZE}, {"offset", required_argument, 0, O_OFFSET},
    {"flags", required_argument, 0, O_FLAGS}, {"reg-in-group", no_argument, 0, O_REG_IN_GROUP},
    {"capture", no_argument, 0, O_CAPTURE}, {"twice", no_argument, 0, O_TWICE},
    {"dereg-after-destroy", no_argument, 0, O_DEREG_AFTER},
    {"null-comm", no_argument, 0, O_NULL_COMM}, {"null-win", no_argument, 0, O_NULL_WIN},
    {"null-buff", no_argument, 0, O_NULL_BUFF}, {"zero-size", no_argument, 0, O_ZERO_SIZE},
    {"wrap-size", no_argument, 0, O_WRAP_SIZE},
    {"split", no_argument, 0, O_SPLIT}, {"devcomm", no_argument, 0, O_DEVCOMM},
    {"iters", required_argument, 0, O_ITERS}, {"no-allreduce", no_argument, 0, O_NO_ALLREDUCE},
    {"expect-win", required_argument, 0, O_EXPECT_WIN},
    {"expect-reg", required_argument, 0, O_EXPECT_REG},
    {"timeout", required_argument, 0, O_TIMEOUT}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char* env_timeout = getenv("NGTEST_TIMEOUT"); /* default for --timeout (tests/gpu/run sets it) */
  if (env_timeout) opt.timeout = atoi(env_timeout);
  int c;
  while ((c = getopt_long(argc, argv, "m:n:vh", lo, NULL)) != -1) {
    switch (c) {
    case 'm':
      if (!strcmp(optarg, "proc")) opt.mode = MODE_PROC;
      else if (!strcmp(optarg, "thread")) opt.mode = MODE_THREAD;
      else if (!strcmp(optarg, "group")) opt.mode = MODE_GROUP;
      else { fprintf(stderr, "ngtest: bad mode %s\n", optarg); return 2; }
      break;
    case 'n': opt.nranks = atoi(optarg); break;
    case 'v': opt.verbose = 1; break;
    case 'h': usage(stdout); return 0;
    case O_NONBLOCKING: opt.nonblocking = 1; break;
    case O_WAIT_READY: opt.wait_ready = 1; break;
    case O_CONFIG: opt.config = 1; break;
    case O_ALLOC:
      if (!strcmp(optarg, "nccl")) opt.alloc = ALLOC_NCCL;
      else if (!strcmp(optarg, "cuda")) opt.alloc = ALLOC_CUDA;
      else if (!strcmp(optarg, "cuda0")) opt.alloc = ALLOC_CUDA0;
      else if (!strcmp(optarg, "small")) opt.alloc = ALLOC_SMALL;
      else { fprintf(stderr, "ngtest: bad --alloc %s\n", optarg); return 2; }
      break;
    case O_SIZE:
      if (ng_parse_size(optarg, &opt.size)) { fprintf(stderr, "ngtest: bad --size\n"); return 2; }
      break;
    case O_OFFSET:
      if (ng_parse_size(optarg, &opt.offset)) { fprintf(stderr, "ngtest: bad --offset\n"); return 2; }
      break;
    case O_FLAGS: opt.flags = (int)strtol(optarg, NULL, 0); break;
    case O_REG_IN_GROUP: opt.reg_in_group = 1; break;
    case O_CAPTURE: opt.capture = 1; break;
    case O_TWICE: opt.twice = 1; break;
    case O_DEREG_AFTER: opt.dereg_after_destroy = 1; break;
    case O_NULL_COMM: opt.null_comm = 1; break;
    case O_NULL_WIN: opt.null_win = 1; break;
    case O_NULL_BUFF: opt.null_buff = 1; break;
    case O_ZERO_SIZE: opt.zero_size = 1; break;
    case O_WRAP_SIZE: opt.wrap_size = 1; break;
    case O_SPLIT: opt.split = 1; break;
    case O_DEVCOMM: opt.devcomm = 1; break;
    case O_ITERS: opt.iters = atoi(optarg); break;
    case O_NO_ALLREDUCE: opt.allreduce = 0; break;
    case O_EXPECT_WIN:
      if (parse_expect(optarg, &opt.expect_win) || opt.expect_win > EXPECT_NONNULL) {
        fprintf(stderr, "ngtest: bad --expect-win %s\n", optarg); return 2;
      }
      break;
    case O_EXPECT_REG:
      if (parse_expect(optarg, &opt.expect_reg) ||
          (opt.expect_reg != EXPECT_ANY && opt.expect_reg < EXPECT_OK)) {
        fprintf(stderr, "ngtest: bad --expect-reg %s\n", optarg); return 2;
      }
      break;
    case O_TIMEOUT: opt.timeout = atoi(optarg); break;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) { fprintf(stderr, "ngtest: unexpected argument %s\n", argv[optind]); return 2; }
  if (opt.nranks < 1 || opt.nranks > NG_MAXRANKS) { fprintf(stderr, "ngtest: -n 1..%d\n", NG_MAXRANKS); return 2; }
  if (opt.size < 4 || opt.size % 4 || opt.offset % 4) {
    fprintf(stderr, "ngtest: --size must be >= 4 and --size and --offset multiples of 4 (floats)\n");
    return 2;
  }
  if (opt.iters < 0) opt.iters = 0;
  if (opt.iters == 0) opt.allreduce = 0;
  if (opt.expect_reg < 0)
    opt.expect_reg = (opt.null_comm || opt.null_win || opt.null_buff || opt.zero_size) ? EXPECT_ERROR : EXPECT_OK;
  setvbuf(stdout, NULL, _IONBF, 0);

  static const char* modes[] = {"proc", "thread", "group"};
  char args[1024] = "";
  for (int i = 1; i < argc; i++) {
    size_t l = strlen(args);
    snprintf(args + l, sizeof args - l, "%s%s", i > 1 ? " " : "", argv[i]);
  }
#ifdef NG_HEADERFREE
  ng_say("ngtest: mode=%s nranks=%d header none (NCCL opened at run time) args: %s", modes[opt.mode], opt.nranks, args);
#else
  ng_say("ngtest: mode=%s nranks=%d header NCCL %d args: %s", modes[opt.mode], opt.nranks,
         NCCL_VERSION_CODE, args);
#endif
  return ng_launch();
}
