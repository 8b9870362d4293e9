/* Helpers shared by the consumer programs; see common.h. */
#define _GNU_SOURCE
#include "common.h"
#include <dirent.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char* ng_rc_name(ncclResult_t rc) {
  switch (rc) {
  case ncclSuccess: return "ncclSuccess";
  case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
  case ncclSystemError: return "ncclSystemError";
  case ncclInternalError: return "ncclInternalError";
  case ncclInvalidArgument: return "ncclInvalidArgument";
  case ncclInvalidUsage: return "ncclInvalidUsage";
  case ncclRemoteError: return "ncclRemoteError";
  case ncclInProgress: return "ncclInProgress";
  default: return "ncclResult(?)";
  }
}

const char* ng_last_error(ncclComm_t comm) {
  typedef const char* (*fn_t)(ncclComm_t);
  fn_t fn = (fn_t)dlsym(RTLD_DEFAULT, "ncclGetLastError");
  const char* s = fn ? fn(comm) : NULL;
  return s ? s : "";
}

double ng_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

void ng_say(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t off = 0;
  while (off < n) {
    ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));
    if (w <= 0) break;
    off += w;
  }
}

long ng_vmrss_kb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) { kb = strtol(line + 6, NULL, 10); break; }
  fclose(f);
  return kb;
}

int ng_fd_count(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the descriptor of the directory stream itself */
}

int ng_parse_size(const char* s, size_t* out) {
  char* end;
  unsigned long long v = strtoull(s, &end, 0);
  if (end == s) return -1;
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  default: break;
  }
  if (*end == 'i' && end[1] == 'B') end += 2;
  else if (*end == 'B') end++;
  if (*end) return -1;
  *out = (size_t)v;
  return 0;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double ng_median(double* v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char* ng_app_allreduce(ncclComm_t c, float* d, size_t count, int rank, int nranks, int wait_ms) {
  float* host = malloc(count * sizeof *host);
  if (!host) return "error";
  for (size_t i = 0; i < count; i++) host[i] = (float)(rank + 1);
  cudaMemcpy(d, host, count * sizeof *host, cudaMemcpyHostToDevice);
  cudaStream_t st;
  cudaStreamCreate(&st);
  const char* out = "error";
  int busy = 0; /* work still queued: the stream is left to the communicator's abort */
  ncclResult_t r = ncclAllReduce(d, d, count, ncclFloat, ncclSum, c, st);
  double until = ng_now_us() + wait_ms * 1e3;
  /* a nonblocking communicator: the call returns ncclInProgress and the communicator's state says when the
   * all-reduce is enqueued (NCCL's "nonblocking" section; the connection of a first collective is made then) */
  while (r == ncclInProgress && ng_now_us() < until) {
    usleep(500);
    if (ncclCommGetAsyncError(c, &r) != ncclSuccess) r = ncclSystemError;
  }
  if (r == ncclInProgress) {
    busy = 1;
    out = "hang";
  } else if (r == ncclSuccess) {
    cudaError_t q;
    while ((q = cudaStreamQuery(st)) == cudaErrorNotReady && ng_now_us() < until) usleep(500);
    if (q == cudaErrorNotReady) {
      busy = 1;
      ncclResult_t as = ncclSuccess;
      ncclCommGetAsyncError(c, &as);
      out = as != ncclSuccess && as != ncclInProgress ? "error" : "hang";
    } else if (q == cudaSuccess) {
      cudaMemcpy(host, d, count * sizeof *host, cudaMemcpyDeviceToHost);
      out = "ok";
      for (size_t i = 0; i < count; i++)
        if (host[i] != (float)(nranks * (nranks + 1) / 2)) out = "wrong";
    }
  }
  if (!busy) cudaStreamDestroy(st);
  free(host);
  return out;
}
