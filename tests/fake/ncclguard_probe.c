/* A library whose file name contains "ncclguard" (libncclguard_probe.so), preloaded by tests/t_fake.sh:
 * a collective it issues must be attributed caller=guard by the fake NCCL's matching checker. */
#include <nccl.h>

ncclResult_t ncclguard_probe_allreduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclguard_probe_allreduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                       ncclComm_t comm, cudaStream_t stream)
{
  ncclResult_t r = ncclAllReduce(send, recv, count, dt, op, comm, stream);
  __asm__ volatile("" ::: "memory"); /* no tail call: the return address stays in this library */
  return r;
}
