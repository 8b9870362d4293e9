/* Helpers shared by the consumer programs (ngtest, consumer, fork_after, soak, bench).
 * Only the plain CUDA runtime API and nccl.h: the same sources build against the fakes (CI)
 * and the real CUDA/NCCL (GPU host), and ngtest and repeat also header-free (ngapi.h). */
#ifndef NG_COMMON_H
#define NG_COMMON_H
#include <stddef.h>
#ifdef NG_HEADERFREE
#include "ngapi.h" /* no NCCL or CUDA header: both opened at run time (the probe's programs) */
#else
#include <cuda_runtime.h>
#include <nccl.h>
#endif

/* "ncclSuccess", "ncclInvalidArgument", ... (the enum's name, not NCCL's sentence) */
const char* ng_rc_name(ncclResult_t rc);
/* ncclGetLastError(comm) when the loaded NCCL has it, else "" */
const char* ng_last_error(ncclComm_t comm);
/* monotonic clock in microseconds */
double ng_now_us(void);
/* one line to stdout with a single write(2), newline added: lines of ranks never mix */
void ng_say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* VmRSS in kB from /proc/self/status (-1 if unknown); open descriptors in /proc/self/fd */
long ng_vmrss_kb(void);
int ng_fd_count(void);
/* "4096", "4K", "2M", "1G" (powers of 1024); returns 0 and sets *out on success */
int ng_parse_size(const char* s, size_t* out);
/* The application's own all-reduce: every rank's (rank + 1) over `count` floats of d, summed on a stream
 * of its own and waited for wait_ms: "ok" (every element n(n+1)/2), "wrong" (completed with another
 * value), "error" (NCCL or CUDA reported one, also an asynchronous error while it waits) or "hang" (not
 * done: the stream is left to the communicator's abort). */
const char* ng_app_allreduce(ncclComm_t c, float* d, size_t count, int rank, int nranks, int wait_ms);
/* median of n doubles (sorts the array) */
double ng_median(double* v, int n);
#endif
