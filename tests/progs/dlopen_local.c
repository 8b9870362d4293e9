/* dlopen_local: loads libconsumer.so with RTLD_NOW|RTLD_LOCAL, the way Python loads torch's
 * extension (docs/PYTORCH.md §2), and calls consumer_run(argc, argv) with the remaining arguments.
 * This program does not link libnccl: NCCL arrives only as a dependency of a local library, so a
 * preloaded library's dlsym(RTLD_NEXT, ...) cannot find it.
 * usage: dlopen_local [--lib PATH/libconsumer.so] [consumer args: -n N --size BYTES]
 * default PATH: the directory of this executable. Exit status: consumer_run's, 3 if loading failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  char path[PATH_MAX + 32];
  int first = 1;
  if (argc > 2 && !strcmp(argv[1], "--lib")) {
    snprintf(path, sizeof path, "%s", argv[2]);
    first = 3;
  } else {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) { perror("dlopen_local: /proc/self/exe"); return 3; }
    exe[n] = 0;
    snprintf(path, sizeof path, "%s/libconsumer.so", dirname(exe));
  }
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen_local: %s\n", dlerror()); return 3; }
  int (*run)(int, char**) = (int (*)(int, char**))dlsym(h, "consumer_run");
  if (!run) { fprintf(stderr, "dlopen_local: %s\n", dlerror()); return 3; }
  /* what a preloaded library sees: NCCL is not in the global scope */
  printf("dlopen_local: loaded %s RTLD_LOCAL; libnccl (ncclAllReduce) %s in the global scope\n", path,
         dlsym(RTLD_DEFAULT, "ncclAllReduce") ? "IS" : "is not");
  fflush(stdout);
  /* no dlclose, like Python: NCCL's threads may outlive the call */
  return run(argc - first, argv + first);
}
