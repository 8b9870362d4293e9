/* Fake CUDA driver: memory. cuMemAlloc memory is plain host memory (like cudaMalloc: NOT VMM);
 * the VMM API (cuMemCreate/cuMemAddressReserve/cuMemMap) is modelled with memfd + mmap, so
 * cuMemRetainAllocationHandle succeeds only for VMM-mapped memory (docs/NCCL.md §2). */
#define _GNU_SOURCE
#include "fake_cuda_int.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { R_MALLOC, R_RESERVED, R_MAPPED };

struct vmm_handle {
  int fd;
  size_t size;
  int dev;
  int refs;
};

struct region {
  uintptr_t base;
  size_t size;
  int kind;
  int dev;
  struct vmm_handle *h; /* R_MAPPED */
  struct region *next;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;

static void mem_atfork_child(void) { pthread_mutex_init(&mem_lock, NULL); }
__attribute__((constructor)) static void mem_init(void) { pthread_atfork(NULL, NULL, mem_atfork_child); }

static void add_region(uintptr_t base, size_t size, int kind, int dev, struct vmm_handle *h)
{
  struct region *r = calloc(1, sizeof *r);
  if (!r) return;
  r->base = base; r->size = size; r->kind = kind; r->dev = dev; r->h = h;
  r->next = regions;
  regions = r;
}

/* device memory (cuMemAlloc or VMM-mapped) containing p; caller holds mem_lock */
static struct region *find_dev(uintptr_t p)
{
  for (struct region *r = regions; r; r = r->next)
    if (r->kind != R_RESERVED && p >= r->base && p < r->base + r->size) return r;
  return NULL;
}

static struct region *find_exact(uintptr_t p, int kind)
{
  for (struct region *r = regions; r; r = r->next)
    if (r->kind == kind && r->base == p) return r;
  return NULL;
}

static void unlink_region(struct region *x)
{
  for (struct region **pp = &regions; *pp; pp = &(*pp)->next)
    if (*pp == x) { *pp = x->next; free(x); return; }
}

static void handle_put(struct vmm_handle *h)
{
  if (--h->refs == 0) { close(h->fd); free(h); }
}

/* cuMemAlloc (-> cuMemAlloc_v2): what cudaMalloc uses. Potentially unsafe during capture. */
EXPORT CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  /* Fault injection (read at every call, so a program can turn it on and off around one step):
   * FAKE_CUDA_OOM_BELOW=N fails every cuMemAlloc of at most N bytes, as a GPU whose memory the
   * caching allocator already holds does (issue 19, case 1). */
  const char *oom = getenv("FAKE_CUDA_OOM_BELOW");
  if (oom && *oom && bytesize <= (size_t)strtoull(oom, NULL, 0)) return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytesize) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mem_lock);
  add_region((uintptr_t)p, bytesize, R_MALLOC, fc_current_dev(), NULL);
  pthread_mutex_unlock(&mem_lock);
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* Pinned host memory (cuMemAllocHost): plain host memory here; async copies to and from it run on
 * the stream's worker in order, as with the real driver. Potentially unsafe during capture. */
EXPORT CUresult cuMemAllocHost(void **pp, size_t bytesize)
{
  if (!pp || !bytesize) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  *pp = aligned_alloc(4096, (bytesize + 4095) & ~(size_t)4095);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuMemFreeHost(void *p)
{
  free(p);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree(CUdeviceptr dptr)
{
  if (dptr == 0) return CUDA_SUCCESS;
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_exact((uintptr_t)dptr, R_MALLOC);
  if (x) unlink_region(x);
  pthread_mutex_unlock(&mem_lock);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  free((void *)(uintptr_t)dptr);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo(size_t *free_b, size_t *total)
{
  if (free_b) *free_b = FC_FREE_MEM;
  if (total) *total = FC_TOTAL_MEM;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_dev((uintptr_t)dptr);
  if (x) {
    if (pbase) *pbase = (CUdeviceptr)x->base;
    if (psize) *psize = x->size;
  }
  pthread_mutex_unlock(&mem_lock);
  return x ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Host memory the fake did not allocate: CUDA_ERROR_INVALID_VALUE, as the real driver answers
 * for plain (unregistered) host memory. */
EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_dev((uintptr_t)ptr);
  struct region copy;
  if (x) copy = *x;
  pthread_mutex_unlock(&mem_lock);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)data = CU_MEMORYTYPE_DEVICE; break;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = copy.dev; break;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)copy.base; break;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = copy.size; break;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = 0; break;
  case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned int *)data = 1; break;
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(unsigned int *)data = copy.kind == R_MALLOC; break;
  case CU_POINTER_ATTRIBUTE_CONTEXT: {
    CUcontext c;
    cuDevicePrimaryCtxRetain(&c, copy.dev);
    *(CUcontext *)data = c;
    break;
  }
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* ---- VMM ---- */

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
  (void)option;
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = FC_GRANULARITY;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags)
{
  (void)flags;
  if (!handle || !prop || size == 0 || size % FC_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= fc_device_count())
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  struct vmm_handle *h = calloc(1, sizeof *h);
  if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
  h->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
  if (h->fd < 0 || ftruncate(h->fd, (off_t)size) != 0) {
    if (h->fd >= 0) close(h->fd);
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  h->size = size; h->dev = prop->location.id; h->refs = 1;
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mem_lock);
  handle_put((struct vmm_handle *)(uintptr_t)handle);
  pthread_mutex_unlock(&mem_lock);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
  if (!prop || !handle) return CUDA_ERROR_INVALID_VALUE;
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = ((struct vmm_handle *)(uintptr_t)handle)->dev;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags)
{
  (void)addr; (void)flags;
  if (!ptr || size == 0 || size % FC_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  size_t al = alignment > FC_GRANULARITY ? alignment : FC_GRANULARITY;
  size_t span = size + al;
  char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t b = ((uintptr_t)p + al - 1) & ~(uintptr_t)(al - 1);
  if (b > (uintptr_t)p) munmap(p, b - (uintptr_t)p);
  uintptr_t end = (uintptr_t)p + span;
  if (end > b + size) munmap((void *)(b + size), end - (b + size));
  pthread_mutex_lock(&mem_lock);
  add_region(b, size, R_RESERVED, fc_current_dev(), NULL);
  pthread_mutex_unlock(&mem_lock);
  *ptr = (CUdeviceptr)b;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_exact((uintptr_t)ptr, R_RESERVED);
  if (x && x->size == size) unlink_region(x); else x = NULL;
  pthread_mutex_unlock(&mem_lock);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  munmap((void *)(uintptr_t)ptr, size);
  return CUDA_SUCCESS;
}

static struct region *reservation_of(uintptr_t p, size_t size)
{
  for (struct region *r = regions; r; r = r->next)
    if (r->kind == R_RESERVED && p >= r->base && p + size <= r->base + r->size) return r;
  return NULL;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags)
{
  (void)flags;
  struct vmm_handle *h = (struct vmm_handle *)(uintptr_t)handle;
  if (!h || size == 0 || offset + size > h->size) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&mem_lock);
  if (!reservation_of((uintptr_t)ptr, size) || find_dev((uintptr_t)ptr)) {
    pthread_mutex_unlock(&mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  void *m = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset);
  if (m == MAP_FAILED) {
    pthread_mutex_unlock(&mem_lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  h->refs++;
  add_region((uintptr_t)ptr, size, R_MAPPED, h->dev, h);
  pthread_mutex_unlock(&mem_lock);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_exact((uintptr_t)ptr, R_MAPPED);
  if (!x || x->size != size) {
    pthread_mutex_unlock(&mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  handle_put(x->h);
  unlink_region(x);
  pthread_mutex_unlock(&mem_lock);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_dev((uintptr_t)ptr);
  int ok = x && x->kind == R_MAPPED && (uintptr_t)ptr + size <= x->base + x->size;
  pthread_mutex_unlock(&mem_lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Succeeds only for VMM-mapped memory: this is how NCCL (and ncclguard) tell VMM memory from
 * cudaMalloc memory (docs/NCCL.md §2). */
EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mem_lock);
  struct region *x = find_dev((uintptr_t)addr);
  int ok = x && x->kind == R_MAPPED;
  if (ok) {
    x->h->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)x->h;
  }
  pthread_mutex_unlock(&mem_lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- synchronous copies and sets: potentially unsafe during capture; ordered after the legacy stream ---- */

static CUresult sync_legacy(void)
{
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  return fc_sync_stream(fc_resolve(NULL));
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  CUresult r = sync_legacy();
  if (r == CUDA_SUCCESS && n) memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return r;
}
EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) { return cuMemcpy(dst, (CUdeviceptr)(uintptr_t)src, n); }
EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { return cuMemcpy((CUdeviceptr)(uintptr_t)dst, src, n); }
EXPORT CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cuMemcpy(dst, src, n); }

EXPORT CUresult cuMemsetD8(CUdeviceptr dst, unsigned char uc, size_t n)
{
  CUresult r = sync_legacy();
  if (r == CUDA_SUCCESS && n) memset((void *)(uintptr_t)dst, uc, n);
  return r;
}

EXPORT CUresult cuMemsetD32(CUdeviceptr dst, unsigned int ui, size_t n)
{
  CUresult r = sync_legacy();
  if (r == CUDA_SUCCESS)
    for (size_t i = 0; i < n; i++) ((unsigned int *)(uintptr_t)dst)[i] = ui;
  return r;
}

/* plain names of the _v2 memory functions */
#define PLAIN_ALIAS(plain, v2) __asm__(".globl " #plain "\n.set " #plain ", " #v2)
PLAIN_ALIAS(cuMemAlloc, cuMemAlloc_v2);
PLAIN_ALIAS(cuMemFree, cuMemFree_v2);
PLAIN_ALIAS(cuMemAllocHost, cuMemAllocHost_v2);
PLAIN_ALIAS(cuMemGetAddressRange, cuMemGetAddressRange_v2);
PLAIN_ALIAS(cuMemGetInfo, cuMemGetInfo_v2);
PLAIN_ALIAS(cuMemcpyHtoD, cuMemcpyHtoD_v2);
PLAIN_ALIAS(cuMemcpyDtoH, cuMemcpyDtoH_v2);
PLAIN_ALIAS(cuMemcpyDtoD, cuMemcpyDtoD_v2);
PLAIN_ALIAS(cuMemsetD8, cuMemsetD8_v2);
PLAIN_ALIAS(cuMemsetD32, cuMemsetD32_v2);
