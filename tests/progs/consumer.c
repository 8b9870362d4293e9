/* libconsumer.so: a library linked against libnccl.so.2 (NEEDED), the way libtorch_cuda.so is.
 * dlopen_local loads it RTLD_NOW|RTLD_LOCAL (the way Python loads torch, docs/PYTORCH.md §2), so libnccl is
 * not in the global scope and dlsym(RTLD_NEXT) from a preloaded library misses it.
 *
 * int consumer_run(int argc, char** argv): options -n NRANKS (default 1: one communicator per
 * device slot, all from this thread with ncclCommInitAll), --size BYTES (default 2M).
 * Init, register a window on ncclMemAlloc memory (in a group), all-reduce and check,
 * deregister, destroy, free. Prints "consumer: RESULT ok|fail ..."; returns 0 on success. */
#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONSUMER_MAX 16

static int check(const char* what, ncclResult_t rc, double us) {
  ng_say("consumer: %s -> %s \"%s\" %.0f us", what, ng_rc_name(rc), ncclGetErrorString(rc), us);
  return rc != ncclSuccess;
}

#define NC(bad, what, expr) do { double t0_ = ng_now_us(); ncclResult_t rc_ = (expr); \
    if (check((what), rc_, ng_now_us() - t0_)) (bad)++; } while (0)

__attribute__((visibility("default"))) int consumer_run(int argc, char** argv) {
  int n = 1;
  size_t size = 2u << 20;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
      if (ng_parse_size(argv[++i], &size) || size < 4) { ng_say("consumer: bad --size"); return 2; }
    }
  }
  if (n < 1 || n > CONSUMER_MAX) { ng_say("consumer: -n 1..%d", CONSUMER_MAX); return 2; }
  int ndev = 0;
  cudaError_t ce = cudaGetDeviceCount(&ndev);
  if (ce != cudaSuccess || ndev < 1) {
    ng_say("consumer: RESULT fail cudaGetDeviceCount: %s, %d device(s)", cudaGetErrorString(ce), ndev);
    return 1;
  }
  int devs[CONSUMER_MAX];
  ncclComm_t comms[CONSUMER_MAX] = {0};
  void* buf[CONSUMER_MAX] = {0};
  ncclWindow_t win[CONSUMER_MAX] = {0};
  cudaStream_t st[CONSUMER_MAX] = {0};
  size_t count = size / sizeof(float);
  float* host = malloc(count * sizeof(float));
  int bad = 0, wrong = 0;
  if (!host) return 1;
  for (int i = 0; i < n; i++) devs[i] = i % ndev;

  NC(bad, "ncclCommInitAll", ncclCommInitAll(comms, n, devs));
  if (bad) { ng_say("consumer: RESULT fail ncclCommInitAll"); free(host); return 1; }
  for (int i = 0; i < n; i++) {
    cudaSetDevice(devs[i]);
    if (cudaStreamCreate(&st[i]) != cudaSuccess) bad++;
    NC(bad, "ncclMemAlloc", ncclMemAlloc(&buf[i], size));
    for (size_t j = 0; j < count; j++) host[j] = (float)(i + 1);
    if (buf[i] && cudaMemcpy(buf[i], host, count * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) bad++;
  }
  if (!bad) {
    NC(bad, "ncclGroupStart", ncclGroupStart());
    for (int i = 0; i < n; i++) NC(bad, "ncclCommWindowRegister", ncclCommWindowRegister(comms[i], buf[i], size, &win[i], NCCL_WIN_COLL_SYMMETRIC));
    NC(bad, "ncclGroupEnd [registration]", ncclGroupEnd());
    for (int i = 0; i < n; i++) ng_say("consumer: rank %d window %p", i, (void*)win[i]);
  }
  if (!bad) {
    NC(bad, "ncclGroupStart", ncclGroupStart());
    for (int i = 0; i < n; i++)
      NC(bad, "ncclAllReduce", ncclAllReduce(buf[i], buf[i], count, ncclFloat, ncclSum, comms[i], st[i]));
    NC(bad, "ncclGroupEnd [all-reduce]", ncclGroupEnd());
    float want = (float)(n * (n + 1) / 2);
    for (int i = 0; i < n && !bad; i++) {
      cudaSetDevice(devs[i]);
      if (cudaStreamSynchronize(st[i]) != cudaSuccess ||
          cudaMemcpy(host, buf[i], count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) { bad++; break; }
      for (size_t j = 0; j < count; j++)
        if (host[j] != want) { wrong++; break; }
    }
  }
  for (int i = 0; i < n; i++) {
    cudaSetDevice(devs[i]);
    if (win[i]) NC(bad, "ncclCommWindowDeregister", ncclCommWindowDeregister(comms[i], win[i]));
    if (comms[i]) NC(bad, "ncclCommDestroy", ncclCommDestroy(comms[i]));
    if (buf[i]) NC(bad, "ncclMemFree", ncclMemFree(buf[i]));
    if (st[i]) cudaStreamDestroy(st[i]);
  }
  free(host);
  if (bad || wrong) {
    ng_say("consumer: RESULT fail %d failed call(s), %d wrong result(s)", bad, wrong);
    return 1;
  }
  ng_say("consumer: RESULT ok nranks=%d size=%zu", n, size);
  return 0;
}
