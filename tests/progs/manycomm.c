/* manycomm: many one-rank communicators alive at once, each registering a window, all destroyed, in
 * cycles; ncclguard's agreement resources of destroyed communicators must be reused or freed, never
 * dropped (issue 19, case 6: 300 alive per cycle grew a process by the resources of every one past the
 * pool of 256). usage: manycomm [-n COMMS] [-c CYCLES]
 * Prints "manycomm: cycle=K threads=T rss_kb=R fds=F gpu_used_mib=G" after each cycle and "manycomm: RESULT ok|fail"
 * (fail: a call failed), after "manycomm: settled threads=T" (the count once it stops falling, at most 3 s
 * after the last cycle). Threads count CUDA streams on the fakes (one worker thread per stream). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static int threads(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Threads:", 8)) n = atoi(line + 8);
  if (f) fclose(f);
  return n;
}

int main(int argc, char** argv) {
  int ncomms = 300, cycles = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) ncomms = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-c")) cycles = atoi(argv[i + 1]);
  }
  cudaSetDevice(0);
  void* buf = NULL;
  if (ncclMemAlloc(&buf, 1 << 21) != ncclSuccess) {
    ng_say("manycomm: RESULT fail ncclMemAlloc");
    return 1;
  }
  ncclComm_t* c = calloc((size_t)ncomms, sizeof *c);
  ncclWindow_t* w = calloc((size_t)ncomms, sizeof *w);
  int dev = 0, bad = 0;
  for (int k = 0; k < cycles && !bad; k++) {
    for (int i = 0; i < ncomms && !bad; i++) {
      ncclResult_t r = ncclCommInitAll(&c[i], 1, &dev);
      if (r == ncclSuccess) r = ncclCommWindowRegister(c[i], buf, 1 << 21, &w[i], NCCL_WIN_COLL_SYMMETRIC);
      if (r != ncclSuccess) bad = 1, ng_say("manycomm: cycle %d comm %d: %s", k, i, ng_rc_name(r));
    }
    for (int i = 0; i < ncomms; i++) {
      if (w[i]) ncclCommWindowDeregister(c[i], w[i]);
      if (c[i]) ncclCommDestroy(c[i]);
      c[i] = NULL, w[i] = NULL;
    }
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    ng_say("manycomm: cycle=%d threads=%d rss_kb=%ld fds=%d gpu_used_mib=%zu", k, threads(), ng_vmrss_kb(),
           ng_fd_count(), (tot - fr) >> 20);
  }
  /* streams end asynchronously (cuStreamDestroy returns at once): wait up to 3 s for the count to settle */
  int t = threads(), prev = -1;
  for (int i = 0; i < 30 && t != prev; i++) prev = t, usleep(100000), t = threads();
  ng_say("manycomm: settled threads=%d", t);
  ng_say("manycomm: RESULT %s", bad ? "fail" : "ok");
  ncclMemFree(buf);
  return bad;
}
