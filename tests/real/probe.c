/* Feature detection the way some programs do it: dlsym(RTLD_DEFAULT, name) for NCCL functions that
 * only some versions have. Linked against libnccl.so.2 (any version at run time). Prints the
 * version and, per name, "found" or "absent"; with ncclguard preloaded the line must be the same. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include <nccl.h>

int main(void) {
  static const char* names[] = {"ncclCommInitRankScalable", "ncclGroupSimulateEnd", "ncclCommShrink",
                                "ncclCommWindowRegister", "ncclCommWindowDeregister", "ncclDevCommCreate",
                                "ncclDevCommDestroy", "ncclCommRevoke", "ncclCommGrow", "ncclCommSuspend",
                                "ncclCommResume", "ncclCommSplit"};
  int v = 0;
  ncclGetVersion(&v);
  printf("version=%d", v);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    printf(" %s=%s", names[i], dlsym(RTLD_DEFAULT, names[i]) ? "found" : "absent");
  printf("\n");
  return 0;
}
