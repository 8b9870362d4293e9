/* libtracer.so: a tracing library of the kind preloaded after ncclguard (LD_PRELOAD=libncclguard.so:libtracer.so):
 * it defines some NCCL functions under both names, nccl* and NCCL's profiling pnccl* (the names ncclguard looks up
 * first, shim/real.c), counts them and forwards each to the next definition (dlsym RTLD_NEXT), and leaves the
 * others to libnccl. Here: ncclGetVersion only. A function ncclguard forwards that takes no communicator
 * (ncclMemAlloc) must still reach NCCL where the tracer does not define it, as it does without ncclguard. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

typedef int (*get_version_t)(int*);
static int calls;

int pncclGetVersion(int* version) {
  get_version_t next = (get_version_t)dlsym(RTLD_NEXT, "pncclGetVersion");
  calls++;
  return next ? next(version) : 3; /* ncclSystemError */
}

int ncclGetVersion(int* version) { return pncclGetVersion(version); }

__attribute__((destructor)) static void said(void) {
  if (calls) fprintf(stderr, "tracer: %d ncclGetVersion calls\n", calls);
}
