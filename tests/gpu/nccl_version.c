/* nccl_version.c: the NCCL a library file really is. tests/gpu/run builds it into $BUILD/gpu/ and asks it about
 * the libnccl.so.2 the scenarios load (NG_NCCL_PRELOAD, else the one found), for the results header: the
 * version the library itself reports (ncclGetVersion), not the one of the header the programs were built with.
 * usage: nccl_version PATH   prints "X.Y.Z CODE REALPATH"; exit 1 (and one line on stderr) when PATH cannot be
 * loaded or has no working ncclGetVersion. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: nccl_version PATH/libnccl.so.2\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    fprintf(stderr, "nccl_version: %s cannot be loaded: %s\n", argv[1], e ? e : "?");
    return 1;
  }
  int (*get)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
  int code = 0;
  if (!get || get(&code) != 0 || code <= 0) {
    fprintf(stderr, "nccl_version: %s has no working ncclGetVersion\n", argv[1]);
    return 1;
  }
  char r[PATH_MAX];
  const char *p = realpath(argv[1], r) ? r : argv[1];
  /* NCCL_VERSION_CODE: X*10000 + Y*100 + Z from 2.9 on, X*1000 + Y*100 + Z before */
  if (code >= 10000) printf("%d.%d.%d %d %s\n", code / 10000, code % 10000 / 100, code % 100, code, p);
  else printf("%d.%d.%d %d %s\n", code / 1000, code % 1000 / 100, code % 100, code, p);
  return 0;
}
