/* LD_PRELOAD interposer for tests/t_fake.sh: counts the ncclCommWindowDeregister and
 * ncclCommDeregister calls that reach it (also NCCL's own, made through the PLT) and
 * forwards them to pncclX. Prints "plt_spy: NAME" on stderr for each. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
  __typeof__(&pncclCommWindowDeregister) real = (__typeof__(&pncclCommWindowDeregister))dlsym(RTLD_NEXT, "pncclCommWindowDeregister");
  fprintf(stderr, "plt_spy: ncclCommWindowDeregister win=%p\n", (void *)win);
  return real ? real(comm, win) : ncclInvalidUsage;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
  __typeof__(&pncclCommDeregister) real = (__typeof__(&pncclCommDeregister))dlsym(RTLD_NEXT, "pncclCommDeregister");
  fprintf(stderr, "plt_spy: ncclCommDeregister handle=%p\n", handle);
  return real ? real(comm, handle) : ncclInvalidUsage;
}
