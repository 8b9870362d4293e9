/* What the loaded NCCL will do with a window registration, version by version (docs/NCCL.md has
 * the rules with their sources and measurements): does this communicator take the symmetric path
 * (which needs a CUDA VMM buffer and has each version's own local checks, and where a rank that
 * fails a check leaves its peers waiting), or not (a local registration or a NULL window: nothing
 * is exchanged and NCCL accepts any buffer)?
 *
 * NCCL calls that "symmetric support", fixed at communicator creation:
 *   2.27.x, 2.28.3    all ranks on one node, more than one local rank, every pair of local GPUs
 *                     directly P2P (topology; NCCL_P2P_DISABLE / NCCL_P2P_LEVEL count), NCCL_WIN_ENABLE,
 *                     cuMem enabled;
 *   2.28.7 - 2.28.9   every pair of local GPUs P2P by NVML's read/write status (the variables do not
 *                     count; one local rank is enough), NCCL_WIN_ENABLE, cuMem enabled;
 *   2.29.2 and later  NCCL says it: ncclCommQueryProperties' deviceApiSupport.
 * Where ncclguard cannot establish the answer it says "unknown", and an unknown answer never makes
 * a buffer degrade: the registration goes to NCCL as it would without ncclguard. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

/* NCCL's parameters are 64-bit integers read with strtoll(base 0); an unparsable value keeps the
 * default (NCCL's own rule). NCCL has put the values of its configuration files into the
 * environment (setenv, without overwriting) by the time a communicator exists. */
static long long nccl_param(const char* name, long long dflt) {
  const char* v = secure_getenv(name); /* (a setuid program does not preload ncclguard at all) */
  if (!v || !*v) return dflt;
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  return errno || end == v ? dflt : x;
}

/* ---- NVML's P2P status of every pair of GPUs of this host (read once per process) ---------- */
enum { NG_NVML_SUCCESS = 0, NG_NVML_P2P_READ = 0, NG_NVML_P2P_WRITE = 1, NG_NVML_P2P_OK = 0 };
static int nvml_all_p2p = -1; /* 1 every pair OK (or one GPU), 0 some pair not, -1 unknown */
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void nvml_probe(void) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  typedef int (*init_t)(void);
  typedef int (*count_t)(unsigned*);
  typedef int (*handle_t)(unsigned, void**);
  typedef int (*p2p_t)(void*, void*, int, int*);
  init_t init = (init_t)ng_dl_sym(h, "nvmlInit_v2");
  init_t shutdown = (init_t)ng_dl_sym(h, "nvmlShutdown");
  count_t count = (count_t)ng_dl_sym(h, "nvmlDeviceGetCount_v2");
  handle_t handle = (handle_t)ng_dl_sym(h, "nvmlDeviceGetHandleByIndex_v2");
  p2p_t p2p = (p2p_t)ng_dl_sym(h, "nvmlDeviceGetP2PStatus");
  if (!init || !shutdown || !count || !handle || !p2p || init() != NG_NVML_SUCCESS) return; /* h stays loaded */
  unsigned n = 0;
  void* dev[64];
  int ok = count(&n) == NG_NVML_SUCCESS && n > 0 && n <= 64;
  for (unsigned i = 0; ok && i < n; i++) ok = handle(i, &dev[i]) == NG_NVML_SUCCESS;
  int all = 1;
  for (unsigned i = 0; ok && i < n; i++)
    for (unsigned j = 0; ok && j < n; j++) {
      if (i == j) continue;
      int r = -1, w = -1;
      if (p2p(dev[i], dev[j], NG_NVML_P2P_READ, &r) != NG_NVML_SUCCESS ||
          p2p(dev[i], dev[j], NG_NVML_P2P_WRITE, &w) != NG_NVML_SUCCESS)
        ok = 0;
      else if (r != NG_NVML_P2P_OK || w != NG_NVML_P2P_OK)
        all = 0;
    }
  shutdown();
  nvml_all_p2p = ok ? all : -1;
}

static int host_all_p2p(void) {
  pthread_once(&nvml_once, nvml_probe);
  return nvml_all_p2p;
}

/* ---- cuMem enabled? (NCCL_CUMEM_ENABLE: >= 0 forced, -2 auto, other negative off) ------------- */
static int cumem_enabled(int dev, const char** why) {
  long long v = nccl_param("NCCL_CUMEM_ENABLE", -2);
  if (v >= 0) {
    *why = v ? "NCCL_CUMEM_ENABLE set" : "NCCL_CUMEM_ENABLE=0";
    return v != 0;
  }
  if (v != -2) {
    *why = "NCCL_CUMEM_ENABLE negative";
    return 0;
  }
  /* auto: a driver of CUDA 12.0 or later and a device with virtual memory management */
  int drv = ng_cuda_driver_version(), vmm = ng_cuda_vmm_supported(dev);
  if (drv <= 0 || vmm < 0) {
    *why = "cuMem support not readable";
    return -1;
  }
  *why = drv < 12000 ? "driver older than CUDA 12.0: no cuMem" : !vmm ? "GPU without VMM: no cuMem" : "";
  return drv >= 12000 && vmm;
}

/* ---- ncclCommQueryProperties (2.29.2+): deviceApiSupport is symmetricSupport --------------------- */
struct ng_nccl_props { /* the stable prefix of ncclCommProperties_t, and room for any later layout */
  size_t size;
  unsigned magic, version;
  int rank, nRanks, cudaDev, nvmlDev;
  unsigned char deviceApiSupport; /* a bool at offset 32 in 2.29.2 - 2.30.7 */
  unsigned char rest[1024 - 33];
};
_Static_assert(offsetof(struct ng_nccl_props, deviceApiSupport) == 32, "ncclCommProperties_t");
#define NG_NCCL_API_MAGIC 0xcafebeefu

static int query_sym(ncclComm_t comm, int version) {
  typedef ncclResult_t (*q_t)(ncclComm_t, struct ng_nccl_props*);
  q_t q = (q_t)ng_real(NG_ID_ncclCommQueryProperties);
  if (!q || NG_FP("nccl.ncclCommQueryProperties")) return -1; /* unknown: voted, never degrades */
  struct ng_nccl_props p;
  memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.magic = NG_NCCL_API_MAGIC;
  p.version = (unsigned)version;
  ng_tls.in_nccl++;
  ncclResult_t r = q(comm, &p);
  ng_tls.in_nccl--;
  if (r != ncclSuccess) return -1;
  return p.deviceApiSupport != 0;
}

/* NCCL releases whose symmetric registration does not reuse an allocation already registered on the
 * communicator (src/dev_runtime.cc, symMemoryObtain: a registered allocation is looked up and reference
 * counted up to v2.30.4-1; from v2.30.7-1, the commit that added asymmetric window sizes, every
 * registration takes new symmetric address space of the whole allocation, and NCCL's user guide says
 * host APIs do not accept a buffer registered symmetrically more than once; unchanged on NCCL's master
 * of 2026-06). Measured on 1 x H200: 2.29.7 12 of 12 repeats, 2.30.7 5 of 12, then "Allocation failed.
 * No suitable space found" (NVIDIA/nccl#2331). 2.31.2's binary has 2.30.7's layout (symMemoryObtain and
 * symMemoryDestroy, no symMemoryDropRef); 2.32.3's has symMemoryDropRef back, and 12 of 12 repeats passed
 * with NCCL alone there (shared/research/2026-12-07-upstream.md): from 2.32.3 NCCL's own reuse is left to it. */
#define NG_NO_REUSE_FROM 23007
#define NG_NO_REUSE_UNTIL 23203
int ng_nccl_no_reuse(int version) { return version >= NG_NO_REUSE_FROM && version < NG_NO_REUSE_UNTIL; }

void ng_rules_for(ncclComm_t comm, int dev, int nranks, struct ng_rules* r) {
  memset(r, 0, sizeof *r);
  int v = ng_nccl_version();
  r->version = v;
  r->no_reuse = ng_nccl_no_reuse(v);
  r->sym = NG_SYM_UNKNOWN;
  snprintf(r->why, sizeof r->why, "NCCL version unknown");
  if (v <= 0) return;
  if (v < 22700) { /* no window registration in NCCL before 2.27 */
    snprintf(r->why, sizeof r->why, "NCCL %d has no window registration", v);
    return;
  }
  if (v >= 22902) {
    int s = query_sym(comm, v);
    if (s >= 0) {
      r->sym = s ? NG_SYM_YES : NG_SYM_NO;
      snprintf(r->why, sizeof r->why, "ncclCommQueryProperties: deviceApiSupport=%d", s);
    } else {
      snprintf(r->why, sizeof r->why, "ncclCommQueryProperties failed");
    }
    return;
  }
  /* 2.27 - 2.28.x: NCCL's inputs, reproduced */
  if (v < 22800 && nccl_param("NCCL_LOCAL_REGISTER", 1)) { /* 2.27's checks before any path is taken */
    const char* w = "";
    r->all_paths = cumem_enabled(dev, &w) == 1;
  }
  if (!nccl_param("NCCL_WIN_ENABLE", 1)) {
    r->sym = NG_SYM_NO;
    snprintf(r->why, sizeof r->why, "NCCL_WIN_ENABLE=0");
    return;
  }
  if (v < 22800 && !nccl_param("NCCL_LOCAL_REGISTER", 1)) {
    r->sym = NG_SYM_NO; /* 2.27 answers every registration with a NULL window then */
    snprintf(r->why, sizeof r->why, "NCCL_LOCAL_REGISTER=0 (2.27: no registration at all)");
    return;
  }
  const char* cw = "";
  int cm = cumem_enabled(dev, &cw);
  if (cm == 0) {
    r->sym = NG_SYM_NO;
    snprintf(r->why, sizeof r->why, "cuMem off (%s)", cw);
    return;
  }
  if (v < 22807) { /* isAllDirectP2p: topology and the P2P variables; one node; >1 local rank */
    if (nranks <= 1) {
      r->sym = NG_SYM_NO;
      snprintf(r->why, sizeof r->why, "one rank: no direct P2P pair (NCCL %d)", v);
      return;
    }
    if (nccl_param("NCCL_P2P_DISABLE", 0)) {
      r->sym = NG_SYM_NO;
      snprintf(r->why, sizeof r->why, "NCCL_P2P_DISABLE=1 (NCCL %d decides from the P2P topology)", v);
      return;
    }
    if (secure_getenv("NCCL_P2P_LEVEL")) {
      snprintf(r->why, sizeof r->why, "NCCL_P2P_LEVEL set: NCCL's topology decides");
      return;
    }
    r->one_node = 1;
  }
  int p2p = host_all_p2p();
  if (cm < 0 || p2p != 1) {
    snprintf(r->why, sizeof r->why, "%s", cm < 0 ? cw : p2p == 0 ? "some GPU pair of this host without P2P (NVML)"
                                                                : "NVML P2P status not readable");
    return;
  }
  r->sym = NG_SYM_YES;
  snprintf(r->why, sizeof r->why, "NVML: all GPU pairs P2P, NCCL_WIN_ENABLE, cuMem on%s",
           r->one_node ? " (and NCCL needs one node)" : "");
}
