/* The CUDA driver ABI constants ncclguard uses (cuda.h), in our own words: the library builds with
 * no CUDA header. tests/abi/abi_check.c compares every value with cuda.h where it is installed. */
#ifndef NCCLGUARD_CUDA_ABI_H
#define NCCLGUARD_CUDA_ABI_H

/* X(our name, cuda.h's name, value) */
#define NG_CUDA_CONSTS(X)                                                                 \
  X(NG_CUDA_SUCCESS, CUDA_SUCCESS, 0)                                                     \
  X(NG_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE, 1)                             \
  X(NG_CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND, 500)                                    \
  X(NG_CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_READY, 600)                                   \
  X(NG_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906)       \
  X(NG_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 2)             \
  X(NG_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 9)       \
  X(NG_CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE, 2)                                     \
  X(NG_CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING, 1)                                 \
  X(NG_CU_STREAM_CAPTURE_STATUS_NONE, CU_STREAM_CAPTURE_STATUS_NONE, 0)                   \
  X(NG_CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_RELAXED, 2)                 \
  X(NG_CU_DEVICE_ATTRIBUTE_VMM_SUPPORTED, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102)

enum {
#define NG_CUDA_ENUM(ours, theirs, value) ours = value,
  NG_CUDA_CONSTS(NG_CUDA_ENUM)
#undef NG_CUDA_ENUM
};
#define NG_CU_STREAM_LEGACY ((ng_stream)0x1) /* CU_STREAM_LEGACY */

#endif
