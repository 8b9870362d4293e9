/* Fake NVML (libnvidia-ml.so.1): the device count and the P2P status that NCCL 2.28.7+ bases its
 * symmetric support on (isAllCudaP2p: NVML's P2P read and write status of every pair of local
 * GPUs; docs/NCCL.md §1). The fake NCCL and ncclguard both read it through these functions.
 *   FAKE_CUDA_DEVICES  device count (default 8, as the fake driver); every pair reports NVML_P2P_STATUS_OK */
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
typedef struct fake_nvml_dev* nvmlDevice_t;
static struct fake_nvml_dev { int index; } devs[64]; /* handles: &devs[i], never written */

static int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}
static unsigned count(void) {
  int n = env_int("FAKE_CUDA_DEVICES", 8);
  return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

EXPORT int nvmlInit_v2(void) { return 0; }
EXPORT int nvmlShutdown(void) { return 0; }
EXPORT int nvmlDeviceGetCount_v2(unsigned* n) {
  if (!n) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *n = count();
  return 0;
}
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (!d || i >= count()) return 2;
  *d = &devs[i];
  return 0;
}
/* caps index: 0 read, 1 write, 2 nvlink, 3 atomics, 4 pci; status 0: OK */
EXPORT int nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps, int* status) {
  if (!a || !b || !status || caps < 0) return 2;
  *status = 0;
  return 0;
}
