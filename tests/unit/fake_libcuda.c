/*
 * A libcuda.so.1 standing in for a driver older than this build's CUDA
 * runtime (CUDA 13 needs r580; this one says 12.2), under an application
 * whose own runtime is content with it and that holds device memory at
 * kFakeDeviceAddress. Only what the static runtime's version check and the
 * pointer query reach is here (tests/unit/test_gpu_old_driver.cc).
 */
#include <stdint.h>

#define kFakeDeviceAddress 0x7e0000000000ull

typedef int CUresult;

CUresult cuDriverGetVersion(int *version);
CUresult cuPointerGetAttributes(unsigned n, const int *attrs, void **data, uint64_t ptr);

CUresult cuDriverGetVersion(int *version)
{
    *version = 12020;
    return 0;
}

/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2): CU_MEMORYTYPE_DEVICE (2) inside the fake allocation. */
CUresult cuPointerGetAttributes(unsigned n, const int *attrs, void **data, uint64_t ptr)
{
    const int device = ptr >= kFakeDeviceAddress && ptr < kFakeDeviceAddress + 4096;
    for (unsigned i = 0; i < n; ++i) {
        if (attrs[i] == 2) {
            *(unsigned *)data[i] = device ? 2u : 0u;
        } else if (attrs[i] == 8) { /* CU_POINTER_ATTRIBUTE_IS_MANAGED: a bool */
            *(unsigned char *)data[i] = 0;
        }
    }
    return 0;
}
