/* Fake NCCL: memory (ncclMemAlloc through the VMM API), buffer registration, window
 * registration (docs/NCCL.md §2, §3, §6, §7) and device communicators. */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB2 ((size_t)2 << 20)

static ncclResult_t cuda_fail(CUresult cr, const char *what)
{
  const char *s = NULL;
  cuGetErrorString(cr, &s);
  fn_set_error("Cuda failure %d '%s' (%s)", (int)cr, s ? s : "?", what);
  return ncclUnhandledCudaError;
}

/* ---- ncclMemAlloc / ncclMemFree: cuMemCreate + cuMemAddressReserve + cuMemMap (internal calls) ---- */

static int cumem_on(void);

/* NCCL's fallback where cuMem is off (NCCL_CUMEM_ENABLE=0): cudaMalloc (allocator.cc at v2.27.7-1, v2.28.9-1,
 * v2.30.7-1; docs/NCCL.md §2). Its failure sets the calling thread's last error in the runtime NCCL calls;
 * before 2.29.2 NCCL's CUDACHECKGOTO leaves it there, from 2.29.2 it resets it (cudaGetLastError in
 * include/checks.h). This fake models a libnccl built against the shared runtime (CUDARTLIB=cudart): its
 * runtime is the application's, found loaded (never loaded here); with none loaded, cuMemAlloc alone, as a
 * libnccl with its own (static) runtime, whose error no application reads. */
static ncclResult_t memalloc_fallback(void **ptr, size_t size)
{
  static void *rt_malloc, *rt_getlast;
  if (!__atomic_load_n(&rt_malloc, __ATOMIC_ACQUIRE)) {
    void *h = RTLD_DEFAULT;
    void *m = dlsym(h, "cudaMalloc");
    if (!m && (h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD))) m = dlsym(h, "cudaMalloc");
    if (m) {
      __atomic_store_n(&rt_getlast, dlsym(h, "cudaGetLastError"), __ATOMIC_RELEASE);
      __atomic_store_n(&rt_malloc, m, __ATOMIC_RELEASE);
    }
  }
  if (rt_malloc) {
    int e = ((int (*)(void **, size_t))rt_malloc)(ptr, size);
    if (e == 0) return ncclSuccess;
    fn_warn("Cuda failure %d 'cudaMalloc of %zu bytes'", e, size);
    fn_set_error("Cuda failure %d (cudaMalloc of %zu bytes)", e, size);
    if (fn_version() >= 22902 && rt_getlast) (void)((int (*)(void))rt_getlast)();
    return ncclUnhandledCudaError;
  }
  CUdeviceptr p = 0;
  CUresult cr = ptr ? cuMemAlloc(&p, size) : CUDA_ERROR_INVALID_VALUE; /* (cudaMalloc's answer to a NULL pointer) */
  if (cr != CUDA_SUCCESS) return cuda_fail(cr, "cudaMalloc");
  *ptr = (void *)(uintptr_t)p;
  return ncclSuccess;
}

ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h = 0;
  size_t gran = 0, sz = 0;
  /* a NULL ptr or size 0 goes to the cudaMalloc path, as NCCL's does ("we want CUDA to return an error to the
   * caller": allocator.cc at v2.28.9-1) */
  if (!ptr || size == 0 || !cumem_on()) { r = memalloc_fallback(ptr, size); goto out; }
  CUdevice dev = 0;
  if (cuCtxGetDevice(&dev) != CUDA_SUCCESS) dev = 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUresult cr = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (cr != CUDA_SUCCESS) { r = cuda_fail(cr, "cuMemGetAllocationGranularity"); goto out; }
  sz = (size + gran - 1) / gran * gran;
  if ((cr = cuMemCreate(&h, sz, &prop, 0)) != CUDA_SUCCESS) { r = cuda_fail(cr, "cuMemCreate"); goto out; }
  if ((cr = cuMemAddressReserve(&va, sz, gran, 0, 0)) != CUDA_SUCCESS) { r = cuda_fail(cr, "cuMemAddressReserve"); goto out; }
  if ((cr = cuMemMap(va, sz, 0, h, 0)) != CUDA_SUCCESS) { r = cuda_fail(cr, "cuMemMap"); goto out; }
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((cr = cuMemSetAccess(va, sz, &acc, 1)) != CUDA_SUCCESS) { r = cuda_fail(cr, "cuMemSetAccess"); goto out; }
  *ptr = (void *)(uintptr_t)va;
out:
  if (h) cuMemRelease(h); /* the mapping keeps the memory */
  if (r != ncclSuccess && va) { cuMemUnmap(va, sz); cuMemAddressFree(va, sz); }
  return LEAVE("ncclMemAlloc", r, "ptr=%p size=%zu", ptr ? *ptr : NULL, size);
}
FN_ALIAS(ncclMemAlloc);

ncclResult_t pncclMemFree(void *ptr)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (ptr && !cumem_on()) { /* the fallback's cudaFree */
    CUresult cr = cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    if (cr != CUDA_SUCCESS) r = cuda_fail(cr, "cudaFree");
  } else if (ptr) {
    CUdeviceptr base = 0;
    size_t sz = 0;
    CUmemGenericAllocationHandle h;
    CUresult cr = cuMemRetainAllocationHandle(&h, ptr);
    if (cr != CUDA_SUCCESS) r = cuda_fail(cr, "cuMemRetainAllocationHandle");
    else {
      cuMemRelease(h);
      if ((cr = cuMemGetAddressRange(&base, &sz, (CUdeviceptr)(uintptr_t)ptr)) != CUDA_SUCCESS) r = cuda_fail(cr, "cuMemGetAddressRange");
      else if ((cr = cuMemUnmap(base, sz)) != CUDA_SUCCESS) r = cuda_fail(cr, "cuMemUnmap");
      else if ((cr = cuMemAddressFree(base, sz)) != CUDA_SUCCESS) r = cuda_fail(cr, "cuMemAddressFree");
    }
  }
  return LEAVE("ncclMemFree", r, "ptr=%p", ptr);
}
FN_ALIAS(ncclMemFree);

/* ---- buffer registration: local ---- */

static int is_device(const void *p)
{
  unsigned int mt = 0;
  return cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
         mt == CU_MEMORYTYPE_DEVICE;
}

ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess && (!handle || !buff || !size)) { fn_set_error("ncclCommRegister: invalid argument"); r = ncclInvalidArgument; }
  if (r == ncclSuccess && !is_device(buff)) { fn_set_error("ncclCommRegister: %p is not device memory", buff); r = ncclInvalidArgument; }
  if (r == ncclSuccess) {
    struct fn_reg *g = calloc(1, sizeof *g);
    g->magic = 0x7e9; g->buff = buff; g->size = size; g->live = 1;
    pthread_mutex_lock(&comm->lk);
    g->next = comm->regs;
    comm->regs = g;
    pthread_mutex_unlock(&comm->lk);
    *handle = g;
  }
  return LEAVE("ncclCommRegister", r, "comm=%p buff=%p size=%zu handle=%p", (void *)comm, buff, size,
               handle ? *handle : NULL);
}
FN_ALIAS(ncclCommRegister);

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclInvalidUsage) r = ncclSuccess; /* finalized/revoked: still allowed */
  if (r == ncclSuccess) {
    int found = 0;
    pthread_mutex_lock(&comm->lk);
    for (struct fn_reg **pp = &comm->regs; *pp; pp = &(*pp)->next)
      if (*pp == handle) { (*pp)->live = 0; *pp = (*pp)->next; found = 1; break; }
    pthread_mutex_unlock(&comm->lk);
    /* "Deregister: Could not find handle" and ncclInvalidUsage (commDeregister, src/register/register.cc at
     * v2.30.7-1): also for a window given here (pytorch#181610 then aborts in PyTorch, not in NCCL) */
    if (!found) { fn_set_error("Deregister: Could not find handle %p", handle); r = ncclInvalidUsage; }
  }
  return LEAVE("ncclCommDeregister", r, "comm=%p handle=%p", (void *)comm, handle);
}
FN_ALIAS(ncclCommDeregister);

/* ---- window registration ---- */

struct reg_arg {
  void *buff;
  size_t size;
  ncclWindow_t *win;    /* the caller's own pointer: written at group end (docs/NCCL.md §6) */
  int flags;
  int skip;             /* decided locally, no exchange: 1 = NULL window, 2 = local handle, 3 = *win untouched */
  int in_group;         /* issued inside the application's ncclGroupStart/End */
  CUdeviceptr va;
  size_t va_size;
  struct fn_symmem *mem; /* its place in the symmetric address space (sym_obtain) */
  struct ncclWindow_vidmem *w; /* 2.27: the window, made and written at call time (reg_call_227) */
  int in_job;           /* 2.28+: reached NCCL's group-end job (ncclDevrWindowRegisterInGroup) */
  /* the fault knobs, read when the call is made, in the caller's thread: the group-end job that uses them
   * may run in a thread of NCCL's, where a getenv races with the program's setenv */
  int stall_k;          /* FAKE_NCCL_REG_STALL */
  int delay_ms;         /* FAKE_NCCL_REG_DELAY_MS */
};

/* ---- symmetric support (docs/NCCL.md, from NCCL's init.cc and transport.cc per version) ---- */
static int all_p2p = 1;
static pthread_once_t p2p_once = PTHREAD_ONCE_INIT;
static void p2p_probe(void)
{
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  int (*count)(unsigned *) = h ? (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2") : NULL;
  int (*handle)(unsigned, void **) = h ? (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2") : NULL;
  int (*p2p)(void *, void *, int, int *) = h ? (int (*)(void *, void *, int, int *))dlsym(h, "nvmlDeviceGetP2PStatus") : NULL;
  unsigned n = 0;
  int ok = 1;
  if (count && handle && p2p && count(&n) == 0)
    for (unsigned i = 0; i < n && ok; i++)
      for (unsigned j = 0; j < n && ok; j++) {
        void *a, *b;
        int r = 0, w = 0;
        if (i == j || handle(i, &a) || handle(j, &b)) continue;
        if (p2p(a, b, 0, &r) || p2p(a, b, 1, &w) || r || w) ok = 0;
      }
  all_p2p = ok;
}
static int nvml_all_p2p(void)
{
  pthread_once(&p2p_once, p2p_probe);
  return all_p2p;
}

static int cumem_on(void)
{
  long long v = fn_param("NCCL_CUMEM_ENABLE", -2); /* -2 auto: the fake driver is 13.0 with VMM */
  return v >= 0 ? v != 0 : v == -2;
}

int fn_symmetric(struct ncclComm *c)
{
  if (c->sym >= 0) return c->sym;
  int v = fn_version(), s;
  if (fn_env_int("FAKE_NCCL_NO_SYMMETRIC", 0)) s = 0;
  else if (!fn_param("NCCL_WIN_ENABLE", 1) || !cumem_on()) s = 0;
  else if (v < 22807) /* one node, isAllDirectP2p (>1 local rank, the P2P variables count): init.cc at v2.27.7-1,
                        * v2.28.3-1: `symmetricSupport = isAllDirectP2p && nNodes == 1 && ...`; ranks of different
                        * host ids (NCCL_HOSTID) are nodes of their own there, so no symmetric support */
    s = c->nnodes == 1 && c->nranks > 1 && !fn_param("NCCL_P2P_DISABLE", 0) && nvml_all_p2p();
  else /* isAllCudaP2p: NVML only, of the ranks of one node (2.29+: and one LSA team: below) */
    s = nvml_all_p2p();
  /* several nodes (ranks with different host ids): 2.29+ need GIN or every rank in the LSA team
   * (init.cc at v2.29.7-1, v2.30.7-1: `symmetricSupport = isAllCudaP2p && ... && (globalGinSupport !=
   * NCCL_GIN_CONNECTION_NONE || ncclTeamLsa(comm).nRanks == comm->nRanks)`); the fake has no GIN, and the LSA
   * team is one node's ranks. 2.28.7+ check the local ranks' P2P only (transport.cc, and init.cc's `symmetricSupport =
   * isAllCudaP2p && ncclParamWinEnable() && ncclCuMemEnable()`, at v2.28.7-1, v2.28.9-1): support kept */
  if (s && v >= 22900 && c->nnodes > 1) s = 0;
  c->sym = s;
  return s;
}

/* ncclCommQueryProperties (2.29.2+): deviceApiSupport is symmetricSupport. The prefix of
 * ncclCommProperties_t that is the same in 2.29.2 - 2.30.7. */
struct fake_props {
  size_t size;
  unsigned magic, version;
  int rank, nRanks, cudaDev, nvmlDev;
  unsigned char deviceApiSupport;
};
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, struct fake_props *p);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, struct fake_props *p)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && (!p || p->size < sizeof *p)) { fn_set_error("props argument invalid"); r = ncclInvalidArgument; }
  if (r == ncclSuccess && (p->magic != 0xcafebeef || p->version > (unsigned)fn_version())) {
    fn_set_error("ncclCommProperties_t: bad magic or version %u", p->version);
    r = ncclInvalidUsage;
  }
  if (r == ncclSuccess) {
    p->rank = comm->rank; p->nRanks = comm->nranks; p->cudaDev = comm->dev; p->nvmlDev = comm->dev;
    p->deviceApiSupport = (unsigned char)fn_symmetric(comm);
  }
  return LEAVE("ncclCommQueryProperties", r, "comm=%p", (void *)comm);
}
FN_ALIAS(ncclCommQueryProperties);

/* ---- symmetric address space (NCCL 2.28+, src/dev_runtime.cc and src/allocator.cc; issue 20,
 * NVIDIA/nccl#2331, docs/NCCL.md §10; measured on 1 x H200 2026-12-01) ----
 * Every symmetric window's allocation takes a place in a per-communicator space of bigSize bytes
 * (ncclDevrInitOnce: NCCL_WIN_STRIDE when set, else the largest GPU memory among the ranks, then in
 * both cases rounded UP to 4 GiB: alignUp(bigSize, 1 << 32), at v2.28.9-1, v2.29.7-1, v2.30.7-1).
 * symMemoryObtain gives the window's whole allocation (cuMemGetAddressRange's size, the span of its
 * segments from 2.30), not the window, a place with ncclSpaceAlloc: the first free gap, its lower end
 * aligned to the allocation granularity, that holds it; none: WARN "Allocation failed. No suitable space
 * found to accommodate size=0x%lx within limit=0x%lx" and ncclInternalError. Deregistration
 * (symMemoryDestroy, at the last reference) gives the place back (ncclSpaceFree).
 * Before FN_SYM_NO_REUSE symMemoryObtain first looks the allocation up among those the communicator
 * already has and reuses it (a reference count): by allocation handle at v2.28.9-1 and v2.29.7-1, by
 * base, size and every segment's handle at v2.30.3-1 and v2.30.4-1. v2.30.7-1 has no lookup: every
 * registration takes the whole allocation's size again (measured: one 24 GiB buffer 5 of 12, halves of a
 * 48 GiB allocation 2 of 12, size=0xc00000000, limit=0x2300000000; 2.28.9 and 2.29.7: 12 of 12).
 * Not modelled: NCCL's own buffers in the same space (symMemoryObtain for the symmetric kernels'
 * and device communicators' memory). v2.30.7-1 reserves the largest of the LSA ranks' sizes, exchanged
 * (bootstrapAllGather) just before ncclSpaceAlloc: the fake takes this rank's own size and decides, per
 * rank, before this rank joins the registration's exchange. With the same registrations on every rank
 * each reaches the same answer (spaces of one size, one sequence), so ranks fail together and nobody
 * waits; a rank failing alone leaves its peers waiting in the exchange, as in NCCL (there they wait in
 * the next one, symMemoryMapLsaTeam). 2.27 (< 22800): no space here, repeats register as before (not
 * modelled). A failure does not damage the communicator (not measured inside an application group). */
#define FN_SYM_NO_REUSE 23007 /* the lookup is present at v2.30.4-1, gone at v2.30.7-1 (docs/NCCL.md §10;
                                 * no tag between was read): from here, no reuse */
#define FN_SYM_REUSE_AGAIN 23203 /* back in 2.32.3: its binary has symMemoryDropRef again and 12 of 12 repeat
                                    * registrations passed with NCCL alone; 2.31.2's binary still has only
                                    * symMemoryObtain/symMemoryDestroy, 2.30.7's layout (shared/research/
                                    * 2026-12-07-upstream.md, "#2331 is still present" / "#2331 fixed") */

static void sym_space_init(struct ncclComm *c) /* ncclDevrInitOnce; caller holds c->lk */
{
  if (c->big_size) return;
  long long stride = fn_param("NCCL_WIN_STRIDE", -1); /* NCCL_PARAM(WinStride, "WIN_STRIDE", -1) */
  size_t big = (size_t)stride;
  if (stride <= 0) { /* NCCL: 0 or -1 (`-bigSize <= 1`); other negative values are not modelled (auto here) */
    size_t tot = 0;
    /* every fake device has the same memory, so this rank's device is the largest among the ranks */
    if (cuDeviceTotalMem(&tot, c->dev) != CUDA_SUCCESS || !tot) tot = (size_t)1 << 32;
    big = tot;
  }
  c->big_size = (big + ((size_t)1 << 32) - 1) & ~(((size_t)1 << 32) - 1);
  if (!c->big_size) c->big_size = (size_t)1 << 32;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = c->dev;
  if (cuMemGetAllocationGranularity(&c->big_align, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
      !c->big_align)
    c->big_align = MB2;
}

/* The allocations [base, base + size) covers, whose segments start at base: nseg and their handles
 * (retained; NULL on failure). */
static CUmemGenericAllocationHandle *sym_segments(CUdeviceptr base, size_t size, int *nseg)
{
  CUmemGenericAllocationHandle *hs = NULL;
  int n = 0;
  for (CUdeviceptr p = base; p < base + size;) {
    CUdeviceptr b = 0;
    size_t s = 0;
    CUmemGenericAllocationHandle h;
    if (cuMemGetAddressRange(&b, &s, p) != CUDA_SUCCESS || !s ||
        cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p) != CUDA_SUCCESS)
      goto fail;
    CUmemGenericAllocationHandle *nh = realloc(hs, (size_t)(n + 1) * sizeof *hs);
    if (!nh) { cuMemRelease(h); goto fail; }
    hs = nh;
    hs[n++] = h;
    p = b + s;
  }
  *nseg = n;
  return hs;
fail:
  for (int i = 0; i < n; i++) cuMemRelease(hs[i]);
  free(hs);
  return NULL;
}

/* symMemoryObtain: the place of the allocation behind [buff, buff + size) (allocation base `base`,
 * whole size `asz`), reused or new. */
static ncclResult_t sym_obtain(struct ncclComm *c, const void *buff, size_t size, CUdeviceptr base, size_t asz,
                               struct fn_symmem **out)
{
  int v = fn_version(), nseg = 0;
  /* 2.30+: the span of the segments the window covers; before, one allocation (2.28 has no range check) */
  size_t span = asz;
  if (v >= 23000) {
    CUdeviceptr end = (CUdeviceptr)(uintptr_t)buff + size;
    if (end > base + asz) { /* runs on into further mapped allocations (checked by the caller) */
      for (CUdeviceptr p = base + asz; p < end;) {
        CUdeviceptr b = 0;
        size_t s = 0;
        if (cuMemGetAddressRange(&b, &s, p) != CUDA_SUCCESS || !s) break;
        p = b + s;
        span = (size_t)(p - base);
      }
    }
  }
  CUmemGenericAllocationHandle *hs = sym_segments(base, v >= 23000 ? span : 1, &nseg);
  if (!hs) return cuda_fail(CUDA_ERROR_INVALID_VALUE, "cuMemRetainAllocationHandle");
  ncclResult_t r = ncclSuccess;
  pthread_mutex_lock(&c->lk);
  sym_space_init(c);
  struct fn_symmem *m = NULL;
  if (v < FN_SYM_NO_REUSE || v >= FN_SYM_REUSE_AGAIN) /* (2.32.3: the key is not known; modelled as 2.30.4's) */
    for (m = c->mems; m; m = m->next) {
      if (v < 23000 ? m->h[0] == hs[0] /* 2.28, 2.29: by the allocation handle */
                    : m->base == base && m->size == span && m->nseg == nseg &&
                      !memcmp(m->h, hs, (size_t)nseg * sizeof *hs)) /* 2.30.3, 2.30.4: base, size, handles */
        break;
    }
  if (m) {
    m->refs++;
    for (int i = 0; i < nseg; i++) cuMemRelease(hs[i]);
    free(hs);
  } else { /* ncclSpaceAlloc: first fit, the gap's lower end aligned up to the granularity */
    size_t lo = 0, off = 0;
    struct fn_symmem **pp = &c->mems;
    for (;; pp = &(*pp)->next) {
      off = (lo + c->big_align - 1) / c->big_align * c->big_align;
      size_t hi = *pp ? (*pp)->off : c->big_size;
      if (off <= hi && span <= hi - off) break;
      if (!*pp) { pp = NULL; break; }
      lo = (*pp)->off + (*pp)->size;
    }
    if (!pp) {
      fn_set_error("Allocation failed. No suitable space found to accommodate size=0x%lx within limit=0x%lx",
                   (long)span, (long)c->big_size);
      fn_warn("Allocation failed. No suitable space found to accommodate size=0x%lx within limit=0x%lx",
              (long)span, (long)c->big_size);
      for (int i = 0; i < nseg; i++) cuMemRelease(hs[i]);
      free(hs);
      r = ncclInternalError;
    } else {
      m = calloc(1, sizeof *m);
      m->base = base; m->size = span; m->nseg = nseg; m->h = hs; m->off = off; m->refs = 1;
      m->next = *pp;
      *pp = m;
    }
  }
  pthread_mutex_unlock(&c->lk);
  *out = m;
  return r;
}

/* a window's reference dropped: at the last, the place goes back (symMemoryDestroy, ncclSpaceFree) */
static void sym_drop(struct ncclComm *c, struct fn_symmem *m)
{
  if (!m) return;
  pthread_mutex_lock(&c->lk);
  int last = --m->refs == 0;
  if (last)
    for (struct fn_symmem **pp = &c->mems; *pp; pp = &(*pp)->next)
      if (*pp == m) { *pp = m->next; break; }
  pthread_mutex_unlock(&c->lk);
  if (!last) return;
  for (int i = 0; i < m->nseg; i++) cuMemRelease(m->h[i]);
  free(m->h);
  free(m);
}

/* cudaMalloc memory (docs/NCCL.md §2, §7): cuMemRetainAllocationHandle fails, this rank leaves,
 * its peers wait forever. Inside a group the communicator is left damaged (docs/NCCL.md §7: the next
 * group fails with an internal error); alone, a later ncclMemAlloc registration and a device
 * communicator work (docs/NCCL.md §8, measured on 2.28.9) */
static ncclResult_t not_vmm(struct ncclComm *c, struct reg_arg *a, CUresult cr)
{
  if (a->in_group) {
    c->damaged = 1;
    __atomic_store_n(&c->async, ncclUnhandledCudaError, __ATOMIC_RELEASE);
  }
  return cuda_fail(cr, "cuMemRetainAllocationHandle: window buffer is not from the CUDA VMM API");
}

/* 2.28 with a NULL `win`: ncclCommWindowRegister does not look at `win` and queues the task with
 * outWinDev = NULL (src/dev_runtime.cc, ncclCommWindowRegister at v2.28.9-1). At group end
 * ncclDevrWindowRegisterInGroup writes through it on every failure path (`fail: *outWinDev = nullptr`)
 * and, without symmetric support, to return the local registration (`*outWinDev = localRegHandle`):
 * a real SIGSEGV, modelled on purpose. Its success path writes only `if (outWinDev)` (symWindowCreate). */
static void null_win_write(void)
{
  volatile ncclWindow_t *volatile wp = NULL; /* a volatile store: never optimised away */
  *wp = NULL;
}

static struct ncclWindow_vidmem *win_new(struct ncclComm *c, struct reg_arg *a, int local_only)
{
  struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
  w->magic = 0x3172d0; w->comm = c; w->buff = a->buff; w->size = a->size; w->flags = a->flags;
  w->local_only = local_only; w->va = a->va; w->va_size = a->va_size; w->mem = a->mem; w->live = 1;
  fn_win_add(w);
  pthread_mutex_lock(&c->lk);
  w->next = c->wins;
  c->wins = w;
  pthread_mutex_unlock(&c->lk);
  return w;
}

/* The offset of p in the communicator's symmetric space: p inside a live symmetric window that has a place
 * there (2.28+), else -1. NCCL's symmetric kernels address a peer's copy of a window at this rank's own
 * offset (the window's place + p - its allocation base): the collectives compare it (nccl_coll.c). */
long long fn_win_symoff(struct ncclComm *c, const void *p)
{
  long long off = -1;
  pthread_mutex_lock(&c->lk);
  for (struct ncclWindow_vidmem *w = c->wins; w; w = w->next)
    if (w->live && w->mem && (const char *)p >= (const char *)w->buff &&
        (const char *)p < (const char *)w->buff + w->size) {
      off = (long long)(w->mem->off + ((CUdeviceptr)(uintptr_t)p - w->mem->base));
      break;
    }
  pthread_mutex_unlock(&c->lk);
  return off;
}

/* 2.27 (src/register/register.cc, ncclCommWindowRegister at v2.27.7-1): everything but the exchange
 * happens in the call, inside an application group too. NCCL_LOCAL_REGISTER=0 or cuMem off: success
 * with a NULL window, before it asks for symmetric support; then the allocation is looked up
 * (cuMemGetAddressRange: its CUDA error is returned) and its base and size must be multiples of 2 MiB
 * with `buff + size` inside it (else a WARN and success with a NULL window: on the symmetric path its
 * peers then wait, docs/NCCL.md §2). `buff + size` is computed modulo 2^64, so a range that wraps
 * passes. Then the window is allocated and written to *win (`ncclCalloc(win, 1)`); with symmetric
 * support the allocation's handle is retained (cudaMalloc memory: its CUDA error from the call, *win
 * freed and NULL again; inside a group the group's error: ncclGroupErrCheck) and a task queued
 * (symRegTaskQueue, ncclGroupCommJoin). The task - the symmetric space set up on first use, the peers'
 * mappings, the intra-node barrier - runs at group end (group.cc at v2.27.7-1: groupLaunch ->
 * ncclCommGroupRegisterSymmetric -> ncclCommSymmetricRegisterInternal): the implicit group end of the
 * call outside a group, the application's ncclGroupEnd inside one. Sets a->skip: 1 a NULL window, 2 a
 * window over a local registration (no exchange), 0 the exchange at group end. */
static ncclResult_t reg_call_227(struct ncclComm *c, struct reg_arg *a)
{
  if (c->damaged) { fn_set_error("communicator %p is in an error state after a failed registration", (void *)c); return ncclInternalError; }
  if (!fn_param("NCCL_LOCAL_REGISTER", 1) || !cumem_on()) { a->skip = 1; return ncclSuccess; }
  CUdeviceptr b0 = 0;
  size_t s0 = 0;
  CUresult cr0 = cuMemGetAddressRange(&b0, &s0, (CUdeviceptr)(uintptr_t)a->buff);
  if (cr0 != CUDA_SUCCESS) return cuda_fail(cr0, "cuMemGetAddressRange");
  if (b0 % MB2 || s0 % MB2 || !((uintptr_t)a->buff + a->size <= (uintptr_t)b0 + s0)) {
    fn_warn("NCCL window registration requires a 2MB aligned allocation containing the buffer (buff %p size %zu)",
            a->buff, a->size);
    a->skip = 1;
    return ncclSuccess;
  }
  if (!fn_symmetric(c)) { a->skip = 2; return ncclSuccess; } /* a window over a local registration */
  CUmemGenericAllocationHandle h;
  CUresult cr = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)b0);
  if (cr != CUDA_SUCCESS) return cuda_fail(cr, "cuMemRetainAllocationHandle: window buffer is not from the CUDA VMM API");
  cuMemRelease(h);
  a->skip = 0;
  return ncclSuccess;
}

/* Fault injection: FAKE_NCCL_REG_STALL=K (read at every registration call): this process's K-th registration
 * exchange never completes, as every rank of sglang#36943 (NCCL 2.29.7) blocked in ncclCommWindowRegister
 * in a recvmsg with no timeout. NCCL's waits there (bootstrap, the proxy's fd request) poll the
 * communicator's abort flag (src/bootstrap.cc, src/proxy.cc at v2.29.7-1): ncclCommAbort or a revoke ends
 * them with ncclInternalError, as the other exchanges of the fake. */
static int reg_stall_now(int k)
{
  static int n;
  int mine = __atomic_add_fetch(&n, 1, __ATOMIC_ACQ_REL);
  return k > 0 && mine == k;
}

static ncclResult_t reg_stall(struct ncclComm *c)
{
  struct fn_shm *s = c->shm;
  int e0 = FN_LOAD(c->revoke_epoch);
  fn_shm_lock(s);
  while (!FN_LOAD(c->aborted) && FN_LOAD(c->revoke_epoch) == e0) fn_shm_wait(s);
  fn_shm_unlock(s);
  fn_set_error("bootstrap wait interrupted: communicator aborted or revoked");
  return ncclInternalError;
}

static ncclResult_t reg_stage(struct fn_op *op, int stage, int complete)
{
  (void)stage;
  struct reg_arg *a = op->arg;
  struct ncclComm *c = op->comm;
  int v = fn_version();
  if (complete) return a->skip ? ncclSuccess : reg_stall_now(a->stall_k) ? reg_stall(c) : fn_xcomplete(c, op->gen, NULL);

  if (c->damaged) { fn_set_error("communicator %p is in an error state after a failed registration", (void *)c); return ncclInternalError; }
  a->in_job = 1;
  if (v < 22800) {
    /* 2.27: the call made its checks (reg_call_227); here the group-end task */
  } else if (!fn_symmetric(c)) {
    /* no exchange, any buffer: 2.28 the local registration handle (*win untouched when
     * NCCL_LOCAL_REGISTER=0), 2.29+ a NULL window (docs/NCCL.md §1, §8; NVIDIA/nccl#1963) */
    a->skip = v < 22900 ? (fn_param("NCCL_LOCAL_REGISTER", 1) != 0 ? 2 : 3) : 1;
    return ncclSuccess;
  }
  uintptr_t p = (uintptr_t)a->buff;
  if (v >= 22900 && p + a->size <= p) {
    /* 2.29+, `buff + size` wraps past the top of the address space. ncclCuMemGetAddressRange
     * (src/include/alloc.h at v2.29.7-1, v2.30.7-1) walks `while (mappedPtrEnd < userBuffEnd)` from buff
     * to buff + size computed modulo 2^64: the walk never starts, and the allocation comes back as base
     * 0, size 0, no segment. ncclDevrWindowRegisterInGroup (src/dev_runtime.cc) then takes buff itself
     * as the offset (`memOffset = userPtr - memAddr`): buff not a multiple of 4096 is
     * ncclInvalidArgument. Else 2.29 retains the handle of address 0 (its CUDA error:
     * ncclUnhandledCudaError); 2.30 retains nothing (no segment) and reaches symMemoryObtain with no
     * segment and no address: v2.30.7-1 asserts (src/dev_runtime_segments.cc,
     * ncclDevrPopulateSegmentSizes `assert(numSegments == 1)`; NCCL's makefiles do not define NDEBUG),
     * the process aborts; v2.30.3-1 and v2.30.4-1 (symMemoryObtain) store `mem->segmentSizes[0]` into
     * the NULL array ncclCalloc gives for 0 elements: SIGSEGV. Read from the source, not measured. All
     * before this rank joins an exchange (2.30.7's symMemoryObtain crashes before its bootstrapAllGather) */
    if (p % NCCL_WIN_REQUIRED_ALIGNMENT) {
      fn_set_error("Window address must be suitably aligned (window [%p, +%zu) wraps: no allocation found, offset %zu)",
                   a->buff, a->size, (size_t)p);
      return ncclInvalidArgument;
    }
    if (v < 23000) {
      CUmemGenericAllocationHandle h0;
      CUresult c0 = cuMemRetainAllocationHandle(&h0, NULL);
      if (c0 == CUDA_SUCCESS) { cuMemRelease(h0); c0 = CUDA_ERROR_INVALID_VALUE; }
      return not_vmm(c, a, c0);
    }
    if (v >= 23007) {
      char line[200];
      int n = snprintf(line, sizeof line, "fake-nccl %d: src/dev_runtime_segments.cc:24: ncclDevrPopulateSegmentSizes: "
                       "Assertion `numSegments == 1' failed.\n", (int)getpid());
      if (n > 0) { ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1); (void)w; }
      abort(); /* the fault being modelled, on purpose */
    }
    volatile size_t *volatile seg = NULL; /* 2.30.3, 2.30.4: `mem->segmentSizes[0] = size` */
    *seg = a->size;
  }
  /* 2.28+: the allocation is looked up with cuMemGetAddressRange, whose CUDA error is returned as
   * ncclUnhandledCudaError: a host buffer, or a range that runs into unmapped memory where the version
   * walks the range, gives "Cuda failure 500" (CUDA_ERROR_NOT_FOUND; measured on 1 x H200 with 2.28.9,
   * issue 23). Source, src/dev_runtime.cc ncclDevrWindowRegisterInGroup and src/include/alloc.h
   * ncclCuMemGetAddressRange: v2.28.9-1 looks up the first byte only (no range check); v2.29.7-1 walks
   * the range's allocations (any lookup failing: its CUDA error) and refuses more than one
   * (ncclInvalidArgument); v2.30.7-1 walks them too, retaining each segment's handle in the walk (a
   * cudaMalloc segment fails there, before the offset check), and accepts several. */
  CUdeviceptr base = 0;
  size_t asz = 0;
  CUresult cra = cuMemGetAddressRange(&base, &asz, (CUdeviceptr)p);
  if (cra != CUDA_SUCCESS) return cuda_fail(cra, "cuMemGetAddressRange");
  int inside = a->size <= asz && p - (uintptr_t)base <= asz - a->size;
  if (v >= 23000) { /* every segment: mapped, and VMM memory (its handle retained in the walk) */
    for (CUdeviceptr q = base; q < (CUdeviceptr)(p + a->size);) {
      CUdeviceptr b2 = 0;
      size_t s2 = 0;
      CUmemGenericAllocationHandle h2;
      CUresult c2 = cuMemGetAddressRange(&b2, &s2, q);
      if (c2 != CUDA_SUCCESS) return cuda_fail(c2, "cuMemGetAddressRange");
      if ((c2 = cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)q)) != CUDA_SUCCESS) return not_vmm(c, a, c2);
      cuMemRelease(h2);
      q = b2 + s2;
    }
  } else if (v >= 22900 && !inside) { /* 2.29: one allocation; the next one looked up first */
    CUdeviceptr b2 = 0;
    size_t s2 = 0;
    CUresult c2 = cuMemGetAddressRange(&b2, &s2, base + asz);
    if (c2 != CUDA_SUCCESS) return cuda_fail(c2, "cuMemGetAddressRange");
    fn_set_error("window [%p, +%zu) spans more than one allocation", a->buff, a->size);
    return ncclInvalidArgument;
  }
  if (v >= 22800 && (p - (uintptr_t)base) % NCCL_WIN_REQUIRED_ALIGNMENT) {
    fn_set_error("window buffer offset %zu in its allocation is not a multiple of %d",
                 (size_t)(p - (uintptr_t)base), NCCL_WIN_REQUIRED_ALIGNMENT);
    return ncclInvalidArgument;
  }
  if (v < 22800) { /* 2.27 synchronizes the legacy stream: under a capture that fails in any capture
                     * mode and invalidates the capture (measured on H200 with 2.27.7) */
    CUresult sr = cuStreamSynchronize(CU_STREAM_LEGACY);
    if (sr != CUDA_SUCCESS) return cuda_fail(sr, "cuStreamSynchronize");
  }
  CUmemGenericAllocationHandle h;
  CUresult cr = cuMemRetainAllocationHandle(&h, a->buff);
  if (cr != CUDA_SUCCESS) return not_vmm(c, a, cr);
  cuMemRelease(h);
  /* Reserve address space for this rank's mapping of the allocation: a potentially unsafe call that fails
   * under a global stream capture (docs/NCCL.md §7, §8); 2.30.7 fixed it (modelled with relaxed capture
   * mode). Its size is the allocation's, never the window's: NCCL maps the whole allocation (cuMemMap of
   * cuMemGetAddressRange's size: symMemoryMapLsaTeam at v2.28.9-1, ncclIpcSymmetricMap of baseSize at
   * v2.27.7-1) into address space reserved once per communicator, so the window's own size reaches no
   * reservation or mapping, and a `buff + size` that wraps registers on 2.27 and 2.28 (2.28.9 measured
   * twice on H200, issue 23: success on every rank). */
  a->va_size = (asz + MB2 - 1) / MB2 * MB2;
  /* Where it runs: NCCL's group end gives each communicator's symmetric registration a job
   * (ncclCommGroupRegisterSymmetric); one job runs in the caller's thread, several run each in a thread of
   * its own (asyncJobLaunch in src/group.cc at v2.28.9-1 and v2.29.7-1: pthread_create / STDTHREADCREATE
   * per job when job->next != NULL). A new thread's capture mode is CUDA's default, global: the caller's
   * relaxed mode (ncclguard's NCCLGUARD_CAPTURE=relaxed) does not reach it, so under a global capture
   * several jobs fail where one succeeds. 2.30.7 sets relaxed mode inside the job itself
   * (cudaThreadExchangeStreamCaptureMode in src/dev_runtime.cc at v2.30.7-1), wherever it runs. */
  CUstreamCaptureMode m = v >= 23007 ? CU_STREAM_CAPTURE_MODE_RELAXED : CU_STREAM_CAPTURE_MODE_GLOBAL;
  int sw = v >= 23007 || fn_reg_jobs > 1;
  if (sw) cuThreadExchangeStreamCaptureMode(&m);
  cr = cuMemAddressReserve(&a->va, a->va_size, 0, 0, 0);
  if (sw) cuThreadExchangeStreamCaptureMode(&m);
  if (cr != CUDA_SUCCESS) { a->va = 0; return cuda_fail(cr, "cuMemAddressReserve"); }
  /* its allocation's place in the symmetric address space, before this rank joins the exchange (above) */
  ncclResult_t sr = sym_obtain(c, a->buff, a->size, base, asz, &a->mem);
  if (sr != ncclSuccess) {
    cuMemAddressFree(a->va, a->va_size);
    a->va = 0;
    return sr;
  }
  struct { size_t size; int flags, rank; } rec = {a->size, a->flags, c->rank};
  op->gen = c->xgen++;
  return fn_xpost(c, op->gen, &rec, sizeof rec); /* blocks nothing; complete waits, no timeout */
}

static void reg_finish(struct fn_op *op, ncclResult_t r)
{
  struct reg_arg *a = op->arg;
  int v = fn_version();
  if (r != ncclSuccess) {
    if (a->va) cuMemAddressFree(a->va, a->va_size);
    sym_drop(op->comm, a->mem);
    /* 2.28, NULL win: a failure in the group-end job writes through it (null_win_write). 2.27: the window
     * the call wrote stays in *win (`NCCLCHECK(ret = ncclGroupEndInternal())` returns before `fail`) */
    if (!a->win && a->in_job && v >= 22800 && v < 22900) null_win_write();
    return;
  }
  /* Fault injection, read at every call (when it is made): FAKE_NCCL_REG_DELAY_MS=N holds this rank N ms
   * after the exchange completed, before the call returns (a slow rank: issue 19, case 2) */
  if (a->delay_ms > 0) usleep((useconds_t)a->delay_ms * 1000);
  if (a->w) { /* 2.27: the window the call made and wrote, now symmetric */
    a->w->va = a->va; a->w->va_size = a->va_size; a->w->mem = a->mem;
    return;
  }
  if (a->skip == 3) return; /* 2.28 with NCCL_LOCAL_REGISTER=0 and no symmetric support */
  if (a->skip == 1) { if (a->win) *a->win = NULL; return; }
  if (a->skip == 2 && !a->win && v < 22900) null_win_write(); /* 2.28: `*outWinDev = localRegHandle` */
  /* 2.28, NULL win with symmetric support: the window is made, registered with every rank (the
   * exchange above) and written to no one (symWindowCreate: `if (outWinDev) *outWinDev = winDev`;
   * measured on H200 with 2.28.9, issue 23: success). Nothing can deregister it: it keeps its
   * allocation's place in the symmetric address space (the memory's reference, symMemoryObtain) until
   * its communicator goes (ncclDevrFinalize from ncclCommDestroy/Abort frees the space and the window
   * table, v2.28.9-1); the fake releases it there like every window left registered. */
  struct ncclWindow_vidmem *w = win_new(op->comm, a, a->skip == 2);
  if (a->win) *a->win = w;
}

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
  ENTER();
  int v = fn_version();
  ncclResult_t r = ncclSuccess;
  if (!comm && v < 22900) {
    /* 2.27/2.28 read through the NULL communicator: a real SIGSEGV kills the process (docs/NCCL.md §3).
     * This is the fault being modelled, on purpose. */
    struct ncclComm *volatile cp = comm;
    r = (ncclResult_t)*(volatile int *)&cp->state;
  }
  if (!comm) { fn_set_error("comm argument is NULL"); r = ncclInvalidArgument; goto out; }
  if (v < 22800) { /* 2.27 writes *win = NULL first (register.cc): a NULL win is a real SIGSEGV (docs/NCCL.md §3) */
    ncclWindow_t *volatile wp = win;
    *wp = NULL;
  }
  if (v >= 22900 && (!win || !buff || size == 0)) { /* docs/NCCL.md §3 */
    fn_set_error("%s", !win ? "win argument is NULL" : !buff ? "buff argument is NULL" : "size argument is 0");
    r = ncclInvalidArgument;
    goto out;
  }
  if (v >= 22900 && fn_comm_known(comm) && __atomic_load_n(&comm->state, __ATOMIC_ACQUIRE) == ST_INIT) {
    /* 2.29+: a nonblocking communicator still initialising has no symmetric support yet, and
     * ncclCommWindowRegister returns before ncclCommEnsureReady: success with *win = NULL, silently
     * (src/dev_runtime.cc at v2.29.7-1, v2.30.7-1: `*win = nullptr; ... if (!comm->symmetricSupport)
     * return ncclSuccess;`; measured: first-op-nonblocking, tests/gpu/results/2026-11-30-matrix.md,
     * 2.29.7 and 2.30.7). 2.28 checks readiness first: ncclInvalidArgument (below). */
    *win = NULL;
    goto out;
  }
  /* a revoked communicator still registers: NCCL's revoke flag is checked by collectives only
   * (ncclEnqueueCheck, src/enqueue.cc; ncclCommWindowRegister and ncclCommEnsureReady do not read it:
   * v2.28.9-1, v2.29.7-1, v2.30.7-1; measured on 1 x H200 with 2.28.9, issue 23) */
  if ((r = fn_check_comm(comm, 1)) != ncclSuccess) goto out;
  if (!buff || size == 0) goto out; /* 2.28: success, *win untouched; 2.27: NULL (docs/NCCL.md §3) */
  /* 2.28, NULL win: queued like any registration (null_win_write, reg_finish), unless it returns before
   * the task: `!(comm->symmetricSupport || ncclParamLocalRegister())` (v2.28.9-1) */
  if (!win && !fn_symmetric(comm) && !fn_param("NCCL_LOCAL_REGISTER", 1)) goto out;
  struct reg_arg *a = calloc(1, sizeof *a);
  a->buff = buff; a->size = size; a->win = win; a->flags = winFlags; a->in_group = fn_in_group();
  a->stall_k = fn_env_int("FAKE_NCCL_REG_STALL", 0);
  a->delay_ms = fn_env_int("FAKE_NCCL_REG_DELAY_MS", 0);
  if (v < 22800) { /* 2.27: the checks and *win in the call, the exchange at group end (reg_call_227) */
    if ((r = reg_call_227(comm, a)) != ncclSuccess || a->skip == 1) { free(a); goto out; } /* *win is NULL */
    a->w = win_new(comm, a, a->skip == 2);
    *win = a->w;
    if (a->skip == 2) { free(a); goto out; }
  }
  struct fn_op *op = fn_op_new(comm, 1, reg_stage, reg_finish, a);
  if (op) op->on_simulate = 1;
  /* the work at group end (docs/NCCL.md §6): the implicit one outside a group, every version (2.27: the
   * exchange only) */
  r = fn_submit(op);
  /* On a nonblocking communicator real NCCL 2.28.9 returns ncclSuccess here and finishes in the
   * background (ncclCommGetAsyncError says ncclInProgress until then; measured on 2 x H200, see
   * tests/gpu/results/), unlike a collective, which returns ncclInProgress. */
  if (r == ncclInProgress && !fn_in_group()) r = ncclSuccess;
out:
  if (r != ncclSuccess && r != ncclInProgress) fn_group_error(r);
  return LEAVE("ncclCommWindowRegister", r, "comm=%p buff=%p size=%zu win=%p *win=%p flags=%d", (void *)comm, buff,
               size, (void *)win, win ? (void *)*win : NULL, winFlags);
}
FN_ALIAS(ncclCommWindowRegister);

/* Local, not collective (docs/NCCL.md §4). */
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
  ENTER();
  ncclResult_t r = ncclSuccess;
  if (!comm) { fn_set_error("comm argument is NULL"); r = ncclInvalidArgument; goto out; }
  if (!fn_comm_known(comm)) { fn_set_error("invalid communicator %p", (void *)comm); r = ncclInvalidArgument; goto out; }
  if (!win) goto out; /* docs/NCCL.md §7: NULL window -> success */
  int st = __atomic_load_n(&comm->state, __ATOMIC_ACQUIRE);
  if (st == ST_DESTROYED || st == ST_ABORTED) { /* docs/PYTORCH.md §3: after ncclCommDestroy */
    fn_set_error("Cuda failure 101 'invalid device ordinal'");
    r = ncclUnhandledCudaError;
    goto out;
  }
  if (fn_version() >= 22800 && fn_symmetric(comm) && !fn_win_known(win)) {
    /* not a window (e.g. an ncclCommRegister handle): looked up among the device objects, not found:
     * "Device object does not exist in shadow pool." and ncclInternalError (2.28.9 with symmetric support,
     * 2.29.7, 2.30.7, src/dev_runtime.cc; 2.27 or no window yet: NCCL may crash, not modelled) */
    fn_set_error("Device object does not exist in shadow pool.");
    r = ncclInternalError;
    goto out;
  }
  if (!fn_win_known(win) || win->comm != comm || !win->live) {
    fn_set_error("invalid window %p", (void *)win);
    r = ncclInvalidArgument;
    goto out;
  }
  pthread_mutex_lock(&comm->lk);
  for (struct ncclWindow_vidmem **pp = &comm->wins; *pp; pp = &(*pp)->next)
    if (*pp == win) { *pp = win->next; break; }
  win->live = 0; /* the object stays: window pointers are never reused */
  pthread_mutex_unlock(&comm->lk);
  if (win->va) cuMemAddressFree(win->va, win->va_size);
  sym_drop(comm, win->mem);
  win->mem = NULL;
out:
  return LEAVE("ncclCommWindowDeregister", r, "comm=%p win=%p", (void *)comm, (void *)win);
}
FN_ALIAS(ncclCommWindowDeregister);

#ifndef FAKE_LEGACY
/* ---- device communicators (opaque here) ---- */

static const unsigned char devcomm_pattern[16] = {0xfa, 0xce, 0xde, 0xc0, 0x4d, 0x4d, 0x4f, 0x43,
                                                  0xfa, 0xce, 0xde, 0xc0, 0x4d, 0x4d, 0x4f, 0x43};

ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 0);
  if (r == ncclSuccess && (!outDevComm || !reqs)) { fn_set_error("ncclDevCommCreate: invalid argument"); r = ncclInvalidArgument; }
  /* 2.29+: the requirements begin with size, magic and version (nccl_device/core.h at v2.29.7-1:
   * NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER); a struct without the magic (a caller built against 2.28's device
   * API, PyTorch 2.11 say: docs/PYTORCH.md §5) is refused (dev_runtime.cc at v2.29.7-1,
   * v2.30.7-1: `reqs->magic != NCCL_API_MAGIC`). The 2.28 layout here (2.28.9's header) has no such field:
   * read as bytes. */
  if (r == ncclSuccess && fn_version() >= 22900) {
    unsigned magic = 0;
    memcpy(&magic, (const char *)reqs + sizeof(size_t), sizeof magic);
    if (magic != 0xcafebeefu) {
      fn_warn("Cannot create device communicator: ncclDevCommRequirements_t argument must be initialized via "
              "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER");
      fn_set_error("ncclDevCommRequirements_t argument must be initialized via NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER");
      r = ncclInvalidUsage;
    }
  }
  /* 2.28 across nodes: a device communicator of several nodes turns GIN on (dev_runtime.cc at v2.28.9-1:
   * `comm->nNodes > 1` activates it), and without a GIN plugin ncclGinConnectOnce answers WARN "GIN not
   * supported." and ncclInvalidUsage (gin_host.cc at v2.28.9-1); measured with ranks on one GPU as two hosts
   * (1 x H200, NCCL 2.28.9, 2026-12-04: PyTorch's rendezvous stopped there). 2.29+ turn GIN on only when the requirements ask for it. */
  if (r == ncclSuccess && fn_version() >= 22800 && fn_version() < 22900 && comm->nnodes > 1) {
    fn_warn("GIN not supported.");
    fn_set_error("GIN not supported.");
    r = ncclInvalidUsage;
  }
  if (r == ncclSuccess && comm->damaged) { fn_set_error("communicator is in an error state"); r = ncclInternalError; }
  if (r == ncclSuccess) {
    memcpy(outDevComm, devcomm_pattern, sizeof devcomm_pattern);
    pthread_mutex_lock(&comm->lk);
    comm->ndevcomm++;
    pthread_mutex_unlock(&comm->lk);
  }
  return LEAVE("ncclDevCommCreate", r, "comm=%p reqs=%p out=%p", (void *)comm, (const void *)reqs, (void *)outDevComm);
}
FN_ALIAS(ncclDevCommCreate);

ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm)
{
  ENTER();
  ncclResult_t r = fn_check_comm(comm, 1);
  if (r == ncclSuccess && (!devComm || memcmp(devComm, devcomm_pattern, sizeof devcomm_pattern) != 0)) {
    fn_set_error("ncclDevCommDestroy: not a device communicator");
    r = ncclInvalidArgument;
  }
  if (r == ncclSuccess) {
    pthread_mutex_lock(&comm->lk);
    comm->ndevcomm--;
    pthread_mutex_unlock(&comm->lk);
  }
  return LEAVE("ncclDevCommDestroy", r, "comm=%p devComm=%p", (void *)comm, (const void *)devComm);
}
FN_ALIAS(ncclDevCommDestroy);
#endif
