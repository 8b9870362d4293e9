/* Loads libnccluser.so with RTLD_LOCAL, as Python loads torch's extension (docs/PYTORCH.md §2): libnccl is
 * then not in the global scope and dlsym(RTLD_NEXT) from a preloaded library misses it. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  const char* lib = argc > 1 ? argv[1] : "libnccluser.so";
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen %s: %s\n", lib, dlerror()); return 2; }
  int (*run)(void) = (int (*)(void))dlsym(h, "user_run");
  if (!run) { fprintf(stderr, "no user_run\n"); return 2; }
  return run();
}
