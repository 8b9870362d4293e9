/* libdlspy.so: another dlsym interposer, as a profiler or tracer preloads one (issue 22: ncclguard's own
 * dlsym and dlvsym must live beside it, in either order, without recursion). Like such tools it defines
 * dlsym only, counts the lookups it sees and calls the next dlsym, which it finds the usual way:
 * dlvsym(RTLD_NEXT, "dlsym", <glibc's version>). At exit it prints "dlspy: lookups=N" on stderr.
 * Used by tests/t_dlsym.sh with LD_PRELOAD="libncclguard.so:libdlspy.so" and the reverse. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

static void* (*next_sym)(void*, const char*);
static long lookups;

static void init(void) {
  static const char* const vers[] = {"GLIBC_2.34", "GLIBC_2.2.5"};
  for (int i = 0; i < 2 && !next_sym; i++) next_sym = (void* (*)(void*, const char*))dlvsym(RTLD_NEXT, "dlsym", vers[i]);
}

__attribute__((constructor)) static void start(void) { init(); }
__attribute__((destructor)) static void report(void) { fprintf(stderr, "dlspy: lookups=%ld\n", lookups); }

__attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  __atomic_add_fetch(&lookups, 1, __ATOMIC_RELAXED);
  if (!next_sym) init();
  return next_sym ? next_sym(handle, name) : NULL;
}
