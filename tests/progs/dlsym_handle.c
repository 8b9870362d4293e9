/* dlsym_handle: a binding that dlopens libnccl RTLD_LOCAL and looks NCCL's functions up on its handle,
 * the way ctypes.CDLL does (vLLM's legacy pynccl_wrapper.py, SGLang's pynccl): issue 22.
 * usage: dlsym_handle LIBNCCL CASE [VER]
 *   reg      ncclCommWindowRegister(NULL, ...) found with dlsym(handle): "RESULT reg=<rc>" (2.28: SIGSEGV
 *            without ncclguard)
 *   vreg VER the same found with dlvsym(handle, name, VER): NCCL's releases carry no symbol versions, so
 *            glibc answers NULL for every VER; the tests use a fake built with a version node
 *   init     one rank: ncclGetUniqueId, ncclCommInitRank, ncclMemAlloc, ncclCommWindowRegister,
 *            ncclCommWindowDeregister, ncclCommDestroy, all through dlsym(handle)
 *   lookups  what the lookups answer, in words that do not depend on where the objects were mapped:
 *            a collective (object, offset from its base), a missing name (NULL, dlerror's text), dlerror
 *            after a redirected lookup that followed a failed dlopen, the object of each wrapped name
 *            listed on stdin, RTLD_NEXT from a library after ncclguard (libnextprobe.so)
 *   scoped LIBCONSUMER [LIB...]  LIBNCCL's ncclCommInitRank looked up (ncclguard settles on LIBNCCL), each
 *            LIB loaded and ncclCommWindowRegister looked up on its handle, then a library linked against
 *            another libnccl loaded RTLD_LOCAL and its consumer_run(-n 1) called: it calls NCCL through the
 *            global names, ncclguard's, and its collectives go to its own libnccl:
 *            "RESULT scoped=<consumer_run's status>"
 *   twogroup LIBB  a group open on LIBNCCL (ncclGroupStart) while LIBB, loaded RTLD_LOCAL, registers a window in
 *            a group of its own on a communicator of its own; each copy of NCCL has its own group, so LIBB's
 *            ncclGroupEnd ends LIBB's: "RESULT twogroup start=.. reg=.. end=.. win=set|NULL outer=.."
 *   late LIBB  LIBNCCL's functions looked up first (ncclguard settles on LIBNCCL), then LIBB loaded RTLD_GLOBAL,
 *            then a communicator, a window and an all-reduce through LIBNCCL's pointers (the program does
 *            not link against any libnccl: its calls belong to the library of the pointers it holds):
 *            "RESULT late init=.. reg=.. allreduce=.. destroy=.."
 *   copies LIB...  LIBNCCL's ncclCommInitRank looked up, then each LIB loaded in turn and
 *            ncclCommWindowRegister(NULL, ...) found on its handle: "RESULT copies <rc> <rc> ..."
 *   extra LIB...  LIBNCCL's ncclCommInitRank looked up, then each LIB in turn loaded and, through its handle,
 *            a communicator with a window and a buffer registration, destroyed with both live (LIB deregisters
 *            them itself, through its own public functions; under ncclguard each LIB takes one of its
 *            indices while there are some): "RESULT extra uid,init,alloc,reg,breg,destroy ..." (one per LIB)
 *   two LIBB two copies of libnccl, both RTLD_LOCAL (PyTorch's and a binding's): a communicator on LIBNCCL
 *            with a window, then LIBB loaded and a communicator on it with a window and a buffer
 *            registration, destroyed with both live (LIBB deregisters them itself, through its own public
 *            functions), then LIBNCCL's destroyed the same way: "RESULT two a=... b=..."
 *   two LIBB global  the same with LIBNCCL loaded RTLD_GLOBAL (a program linked against it)
 *   twonull LIBB  LIBNCCL's ncclCommInitRank looked up (ncclguard settles on LIBNCCL), then LIBB loaded and
 *            ncclCommWindowRegister(NULL, ...) found on its handle: "RESULT twonull=<rc>" (2.28: SIGSEGV
 *            without ncclguard)
 * Exit status 0 unless loading failed (2). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nccl.h>

void* nextprobe_next(void);
void* nextprobe_next_v(void);

static const char* base(const char* p) {
  const char* b = p ? strrchr(p, '/') : NULL;
  return b ? b + 1 : p ? p : "?";
}
/* "libx.so+0xoff" or "NULL" */
static void where(void* f, char* out, size_t n) {
  Dl_info di;
  if (!f) snprintf(out, n, "NULL");
  else if (!dladdr(f, &di)) snprintf(out, n, "unknown");
  else snprintf(out, n, "%s+0x%lx", base(di.dli_fname), (unsigned long)((uintptr_t)f - (uintptr_t)di.dli_fbase));
}

typedef ncclResult_t (*reg_t)(ncclComm_t, void*, size_t, ncclWindow_t*, int);

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int global = argc > 4 && !strcmp(argv[2], "two") && !strcmp(argv[4], "global");
  void* h = dlopen(argv[1], RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!h) { fprintf(stderr, "dlsym_handle: %s\n", dlerror()); return 2; }
  const char* c = argv[2];
  static char buf[4096];
  if (!strcmp(c, "reg") || !strcmp(c, "vreg")) {
    reg_t reg = !strcmp(c, "reg") ? (reg_t)dlsym(h, "ncclCommWindowRegister")
                                  : (reg_t)dlvsym(h, "ncclCommWindowRegister", argc > 3 ? argv[3] : "NCCL");
    if (!reg) { printf("RESULT %s lookup failed: %s\n", c, dlerror()); return 0; }
    fflush(stdout);
    ncclWindow_t w = NULL;
    ncclResult_t r = reg(NULL, buf, sizeof buf, &w, 0);
    printf("RESULT %s=%d\n", c, (int)r);
  } else if (!strcmp(c, "init")) {
    ncclResult_t (*uid)(ncclUniqueId*) = (ncclResult_t(*)(ncclUniqueId*))dlsym(h, "ncclGetUniqueId");
    ncclResult_t (*init)(ncclComm_t*, int, ncclUniqueId, int) =
        (ncclResult_t(*)(ncclComm_t*, int, ncclUniqueId, int))dlsym(h, "ncclCommInitRank");
    ncclResult_t (*alloc)(void**, size_t) = (ncclResult_t(*)(void**, size_t))dlsym(h, "ncclMemAlloc");
    reg_t reg = (reg_t)dlsym(h, "ncclCommWindowRegister");
    ncclResult_t (*dereg)(ncclComm_t, ncclWindow_t) = (ncclResult_t(*)(ncclComm_t, ncclWindow_t))dlsym(h, "ncclCommWindowDeregister");
    ncclResult_t (*destroy)(ncclComm_t) = (ncclResult_t(*)(ncclComm_t))dlsym(h, "ncclCommDestroy");
    if (!uid || !init || !alloc || !reg || !dereg || !destroy) { printf("RESULT init lookup failed\n"); return 0; }
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    void* b = NULL;
    ncclWindow_t w = NULL;
    int r1 = uid(&id), r2 = init(&comm, 1, id, 0), r3 = alloc(&b, 1 << 21);
    int r4 = reg(comm, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
    int r5 = dereg(comm, w), r6 = destroy(comm);
    printf("RESULT init uid=%d init=%d alloc=%d reg=%d win=%s dereg=%d destroy=%d\n", r1, r2, r3, r4,
           w ? "set" : "NULL", r5, r6);
  } else if (!strcmp(c, "scoped") && argc > 3) {
    if (!dlsym(h, "ncclCommInitRank")) { printf("RESULT scoped lookup failed\n"); return 0; }
    for (int i = 4; i < argc; i++) { /* other copies first, each looked up on its handle */
      void* hb = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
      if (!hb || !dlsym(hb, "ncclCommWindowRegister")) { fprintf(stderr, "dlsym_handle: %s: %s\n", argv[i], dlerror()); return 2; }
    }
    void* hc = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
    int (*run)(int, char**) = hc ? (int (*)(int, char**))dlsym(hc, "consumer_run") : NULL;
    if (!run) { fprintf(stderr, "dlsym_handle: %s\n", dlerror()); return 2; }
    char* args[] = {(char*)"-n", (char*)"1", NULL};
    int r = run(2, args);
    printf("RESULT scoped=%d\n", r);
  } else if (!strcmp(c, "twogroup") && argc > 3) {
    ncclResult_t (*gs)(void) = (ncclResult_t(*)(void))dlsym(h, "ncclGroupStart");
    ncclResult_t (*ge)(void) = (ncclResult_t(*)(void))dlsym(h, "ncclGroupEnd");
    void* hb = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
    if (!gs || !ge || !hb) { printf("RESULT twogroup lookup failed\n"); return 0; }
    ncclResult_t (*uid)(ncclUniqueId*) = (ncclResult_t(*)(ncclUniqueId*))dlsym(hb, "ncclGetUniqueId");
    ncclResult_t (*init)(ncclComm_t*, int, ncclUniqueId, int) =
        (ncclResult_t(*)(ncclComm_t*, int, ncclUniqueId, int))dlsym(hb, "ncclCommInitRank");
    ncclResult_t (*alloc)(void**, size_t) = (ncclResult_t(*)(void**, size_t))dlsym(hb, "ncclMemAlloc");
    reg_t reg = (reg_t)dlsym(hb, "ncclCommWindowRegister");
    ncclResult_t (*bgs)(void) = (ncclResult_t(*)(void))dlsym(hb, "ncclGroupStart");
    ncclResult_t (*bge)(void) = (ncclResult_t(*)(void))dlsym(hb, "ncclGroupEnd");
    ncclResult_t (*destroy)(ncclComm_t) = (ncclResult_t(*)(ncclComm_t))dlsym(hb, "ncclCommDestroy");
    if (!uid || !init || !alloc || !reg || !bgs || !bge || !destroy) { printf("RESULT twogroup lookup failed\n"); return 0; }
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    void* b = NULL;
    ncclWindow_t w = NULL;
    int r0 = gs(); /* the first copy's group stays open throughout */
    int r1 = uid(&id) | init(&comm, 1, id, 0) | alloc(&b, 1 << 21);
    int r2 = bgs(), r3 = reg(comm, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC), r4 = bge();
    const char* seen = w ? "set" : "NULL"; /* at the second copy's group end, as NCCL writes it */
    int r5 = ge();
    destroy(comm);
    printf("RESULT twogroup start=%d init=%d bstart=%d reg=%d end=%d win=%s outer=%d\n", r0, r1, r2, r3, r4, seen, r5);
  } else if (!strcmp(c, "late") && argc > 3) {
    ncclResult_t (*uid)(ncclUniqueId*) = (ncclResult_t(*)(ncclUniqueId*))dlsym(h, "ncclGetUniqueId");
    ncclResult_t (*init)(ncclComm_t*, int, ncclUniqueId, int) =
        (ncclResult_t(*)(ncclComm_t*, int, ncclUniqueId, int))dlsym(h, "ncclCommInitRank");
    ncclResult_t (*alloc)(void**, size_t) = (ncclResult_t(*)(void**, size_t))dlsym(h, "ncclMemAlloc");
    reg_t reg = (reg_t)dlsym(h, "ncclCommWindowRegister");
    ncclResult_t (*ar)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) =
        (ncclResult_t(*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))dlsym(h, "ncclAllReduce");
    ncclResult_t (*destroy)(ncclComm_t) = (ncclResult_t(*)(ncclComm_t))dlsym(h, "ncclCommDestroy");
    if (!uid || !init || !alloc || !reg || !ar || !destroy) { printf("RESULT late lookup failed\n"); return 0; }
    if (!dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL)) { fprintf(stderr, "dlsym_handle: %s\n", dlerror()); return 2; }
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    void* b = NULL;
    ncclWindow_t w = NULL;
    int r0 = uid(&id) | alloc(&b, 1 << 21), r1 = init(&comm, 1, id, 0);
    int r2 = reg(comm, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
    int r3 = ar(b, b, 16, ncclFloat32, ncclSum, comm, NULL);
    int r4 = destroy(comm);
    printf("RESULT late uid=%d init=%d reg=%d allreduce=%d destroy=%d\n", r0, r1, r2, r3, r4);
  } else if (!strcmp(c, "copies")) {
    if (!dlsym(h, "ncclCommInitRank")) { printf("RESULT copies lookup failed\n"); return 0; }
    char line[512] = "RESULT copies";
    for (int i = 3; i < argc; i++) {
      void* hb = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
      reg_t reg = hb ? (reg_t)dlsym(hb, "ncclCommWindowRegister") : NULL;
      if (!reg) { fprintf(stderr, "dlsym_handle: %s: %s\n", argv[i], dlerror()); return 2; }
      ncclWindow_t w = NULL;
      snprintf(line + strlen(line), sizeof line - strlen(line), " %d", (int)reg(NULL, buf, sizeof buf, &w, 0));
    }
    printf("%s\n", line);
  } else if (!strcmp(c, "extra") && argc > 3) {
    if (!dlsym(h, "ncclCommInitRank")) { printf("RESULT extra lookup failed\n"); return 0; }
    char line[1024] = "RESULT extra";
    for (int i = 3; i < argc; i++) {
      void* hl = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
      if (!hl) { fprintf(stderr, "dlsym_handle: %s\n", dlerror()); return 2; }
      ncclResult_t (*uid)(ncclUniqueId*) = (ncclResult_t(*)(ncclUniqueId*))dlsym(hl, "ncclGetUniqueId");
      ncclResult_t (*init)(ncclComm_t*, int, ncclUniqueId, int) =
          (ncclResult_t(*)(ncclComm_t*, int, ncclUniqueId, int))dlsym(hl, "ncclCommInitRank");
      ncclResult_t (*alloc)(void**, size_t) = (ncclResult_t(*)(void**, size_t))dlsym(hl, "ncclMemAlloc");
      reg_t reg = (reg_t)dlsym(hl, "ncclCommWindowRegister");
      ncclResult_t (*breg)(ncclComm_t, void*, size_t, void**) =
          (ncclResult_t(*)(ncclComm_t, void*, size_t, void**))dlsym(hl, "ncclCommRegister");
      ncclResult_t (*destroy)(ncclComm_t) = (ncclResult_t(*)(ncclComm_t))dlsym(hl, "ncclCommDestroy");
      if (!uid || !init || !alloc || !reg || !breg || !destroy) { printf("RESULT extra lookup failed\n"); return 0; }
      ncclUniqueId id;
      ncclComm_t comm = NULL;
      void *b = NULL, *bh = NULL;
      ncclWindow_t w = NULL;
      int r[6];
      r[0] = uid(&id), r[1] = init(&comm, 1, id, 0), r[2] = alloc(&b, 1 << 21);
      r[3] = reg(comm, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
      r[4] = breg(comm, b, 1 << 21, &bh);
      r[5] = destroy(comm);
      snprintf(line + strlen(line), sizeof line - strlen(line), " %d,%d,%d,%d,%d,%d", r[0], r[1], r[2], r[3], r[4], r[5]);
    }
    printf("%s\n", line);
  } else if (!strcmp(c, "twonull") && argc > 3) {
    if (!dlsym(h, "ncclCommInitRank")) { printf("RESULT twonull lookup failed\n"); return 0; }
    void* hb = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
    if (!hb) { fprintf(stderr, "dlsym_handle: %s\n", dlerror()); return 2; }
    reg_t reg = (reg_t)dlsym(hb, "ncclCommWindowRegister");
    if (!reg) { printf("RESULT twonull lookup failed\n"); return 0; }
    fflush(stdout);
    ncclWindow_t w = NULL;
    printf("RESULT twonull=%d\n", (int)reg(NULL, buf, sizeof buf, &w, 0));
  } else if (!strcmp(c, "two") && argc > 3) {
    int ra[5], rb[6];
    for (int lib = 0; lib < 2; lib++) {
      void* hl = lib ? dlopen(argv[3], RTLD_NOW | RTLD_LOCAL) : h;
      if (!hl) { fprintf(stderr, "dlsym_handle: %s\n", dlerror()); return 2; }
      ncclResult_t (*uid)(ncclUniqueId*) = (ncclResult_t(*)(ncclUniqueId*))dlsym(hl, "ncclGetUniqueId");
      ncclResult_t (*init)(ncclComm_t*, int, ncclUniqueId, int) =
          (ncclResult_t(*)(ncclComm_t*, int, ncclUniqueId, int))dlsym(hl, "ncclCommInitRank");
      ncclResult_t (*alloc)(void**, size_t) = (ncclResult_t(*)(void**, size_t))dlsym(hl, "ncclMemAlloc");
      reg_t reg = (reg_t)dlsym(hl, "ncclCommWindowRegister");
      ncclResult_t (*breg)(ncclComm_t, void*, size_t, void**) =
          (ncclResult_t(*)(ncclComm_t, void*, size_t, void**))dlsym(hl, "ncclCommRegister");
      ncclResult_t (*destroy)(ncclComm_t) = (ncclResult_t(*)(ncclComm_t))dlsym(hl, "ncclCommDestroy");
      if (!uid || !init || !alloc || !reg || !breg || !destroy) { printf("RESULT two lookup failed\n"); return 0; }
      ncclUniqueId id;
      ncclComm_t comm = NULL;
      void *b = NULL, *bh = NULL;
      ncclWindow_t w = NULL;
      int* r = lib ? rb : ra;
      r[0] = uid(&id), r[1] = init(&comm, 1, id, 0), r[2] = alloc(&b, 1 << 21);
      r[3] = reg(comm, b, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
      if (lib) r[5] = breg(comm, b, 1 << 21, &bh);
      r[4] = destroy(comm);
    }
    printf("RESULT two a=%d,%d,%d,%d,%d b=%d,%d,%d,%d,%d,%d\n", ra[0], ra[1], ra[2], ra[3], ra[4], rb[0], rb[1],
           rb[2], rb[3], rb[5], rb[4]);
  } else if (!strcmp(c, "lookups")) {
    char s[512];
    where(dlsym(h, "ncclAllReduce"), s, sizeof s);
    printf("RESULT collective=%s\n", s);
    where(dlvsym(h, "ncclAllReduce", argc > 3 ? argv[3] : "NCCL"), s, sizeof s);
    printf("RESULT collective_v=%s\n", s);
    dlerror();
    void* m = dlsym(h, "ncclNoSuchFunction");
    const char* e = dlerror();
    printf("RESULT missing=%s dlerror=%s\n", m ? "set" : "NULL", e ? e : "NULL");
    m = dlvsym(h, "ncclNoSuchFunction", argc > 3 ? argv[3] : "NCCL");
    e = dlerror();
    printf("RESULT missing_v=%s dlerror=%s\n", m ? "set" : "NULL", e ? e : "NULL");
    /* a failed dlopen leaves an error; a lookup that succeeds clears it (glibc 2.34+) */
    dlopen("/nonexistent/libnothing.so", RTLD_NOW);
    m = dlsym(h, "ncclCommWindowRegister");
    e = dlerror();
    printf("RESULT after_failed_dlopen=%s dlerror=%s\n", m ? "set" : "NULL", e ? e : "NULL");
    where(nextprobe_next(), s, sizeof s);
    printf("RESULT rtld_next_from_library=%s\n", s);
    where(nextprobe_next_v(), s, sizeof s);
    printf("RESULT rtld_next_v_from_library=%s\n", s);
    char name[128];
    while (scanf("%127s", name) == 1) {
      where(dlsym(h, name), s, sizeof s);
      char sv[512];
      where(dlvsym(h, name, argc > 3 ? argv[3] : "NCCL"), sv, sizeof sv);
      *strchrnul(s, '+') = 0;
      *strchrnul(sv, '+') = 0;
      printf("RESULT name %s %s %s\n", name, s, sv);
    }
  }
  return 0;
}
