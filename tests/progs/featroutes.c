/* featroutes: feature detection by every route a program asks "does the loaded NCCL have X" (tests/t_dlsym.sh).
 * For each name of the list, the object whose function each route answers, in words that do not depend on
 * where objects were mapped: "nccl" (a libnccl), "guard" (libncclguard), "absent" (NULL), "other".
 *   featroutes before LIB   dlsym(RTLD_DEFAULT) and dlsym(RTLD_NEXT) before any libnccl is loaded, then LIB
 *                           loaded RTLD_GLOBAL and dlsym(RTLD_DEFAULT) again ("default_after")
 *   featroutes global LIB   LIB loaded RTLD_GLOBAL: dlsym(RTLD_DEFAULT), dlsym(RTLD_NEXT), dlsym(handle),
 *                           dlvsym(RTLD_DEFAULT, name, "NCCL_FAKE"), dlvsym(handle, name, "NCCL_FAKE")
 *   featroutes local LIB    LIB loaded RTLD_LOCAL (PyTorch's way): the same routes
 *   featroutes two LIB LIB2 two copies of NCCL, LIB then LIB2, each RTLD_LOCAL (PyTorch's and a binding's own):
 *                           dlsym(RTLD_DEFAULT) ("two_default"): under ncclguard the answer of the copy its
 *                           wrappers call (the first loaded, nothing having pinned another), never the other's
 *   featroutes_linked       (the same source built with -DFEAT_LINKED, linked against libnccl.so.2 with a weak
 *                           reference to each name, bound when the program is relocated): "weak", then
 *                           dlsym(RTLD_DEFAULT), dlsym(RTLD_NEXT), dlsym on dlopen("libnccl.so.2", RTLD_NOLOAD)
 * One line per route and name: "ROUTE <route> <name>=<answer>". Exit 0, 2 if LIB cannot be loaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define FEAT_NAMES(X)                                                                                          \
  X(ncclGroupSimulateEnd) X(ncclCommInitRankScalable) X(ncclCommShrink) X(ncclCommWindowRegister)              \
  X(ncclCommWindowDeregister) X(ncclDevCommCreate) X(ncclDevCommDestroy) X(ncclCommRevoke) X(ncclCommGrow)     \
  X(ncclCommSuspend) X(ncclCommResume) X(ncclCommQueryProperties) X(ncclCommInitRank) X(ncclAllReduce)

#define FEAT_STR(n) #n,
static const char* const names[] = {FEAT_NAMES(FEAT_STR)};
#define NNAMES (sizeof names / sizeof names[0])

static const char* where(void* p) {
  Dl_info d;
  if (!p) return "absent";
  if (!dladdr(p, &d) || !d.dli_fname) return "other";
  const char* b = strrchr(d.dli_fname, '/');
  b = b ? b + 1 : d.dli_fname;
  if (!strncmp(b, "libncclguard", 12)) return "guard";
  if (!strncmp(b, "libnccl", 7)) return "nccl";
  return "other";
}

static void say(const char* route, void* const* answers) {
  for (size_t i = 0; i < NNAMES; i++) printf("ROUTE %s %s=%s\n", route, names[i], where(answers[i]));
}

static void routes(void* h) {
  void* a[NNAMES];
  for (size_t i = 0; i < NNAMES; i++) a[i] = dlsym(RTLD_DEFAULT, names[i]);
  say("default", a);
  for (size_t i = 0; i < NNAMES; i++) a[i] = dlsym(RTLD_NEXT, names[i]);
  say("next", a);
  if (!h) return;
  for (size_t i = 0; i < NNAMES; i++) a[i] = dlsym(h, names[i]);
  say("handle", a);
  for (size_t i = 0; i < NNAMES; i++) a[i] = dlvsym(RTLD_DEFAULT, names[i], "NCCL_FAKE");
  say("vdefault", a);
  for (size_t i = 0; i < NNAMES; i++) a[i] = dlvsym(h, names[i], "NCCL_FAKE");
  say("vhandle", a);
}

#ifdef FEAT_LINKED
#define FEAT_WEAK(n) extern void n(void) __attribute__((weak));
FEAT_NAMES(FEAT_WEAK)
#define FEAT_ADDR(n) (void*)&n,
int main(void) {
  void* weak[] = {FEAT_NAMES(FEAT_ADDR)};
  say("weak", weak);
  routes(dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD));
  return 0;
}
#else
int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: featroutes before|global|local LIBNCCL | two LIBNCCL LIBNCCL2\n");
    return 2;
  }
  const char* mode = argv[1];
  if (!strcmp(mode, "two")) {
    if (argc < 4 || !dlopen(argv[2], RTLD_NOW | RTLD_LOCAL) || !dlopen(argv[3], RTLD_NOW | RTLD_LOCAL)) return 2;
    void* a[NNAMES];
    for (size_t i = 0; i < NNAMES; i++) a[i] = dlsym(RTLD_DEFAULT, names[i]);
    say("two_default", a);
    return 0;
  }
  if (!strcmp(mode, "before")) {
    routes(NULL);
    if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) return 2;
    void* a[NNAMES];
    for (size_t i = 0; i < NNAMES; i++) a[i] = dlsym(RTLD_DEFAULT, names[i]);
    say("default_after", a);
    return 0;
  }
  void* h = dlopen(argv[2], RTLD_NOW | (!strcmp(mode, "global") ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!h) {
    fprintf(stderr, "featroutes: %s\n", dlerror());
    return 2;
  }
  routes(h);
  return 0;
}
#endif
