/*
 * The CUDA implementation of the memory interface (dr_gpu.h) and the
 * reduction kernels.
 *
 * Detection. The first call asks the runtime for devices
 * (cudaGetDeviceCount). No driver, no device or any error: "no GPU", cached,
 * never printed, and every pointer is host memory from then on at the cost
 * of one load. One exception: a driver older than this runtime needs (CUDA
 * 13 needs r580) while the application's own runtime is content with it.
 * The application may then hold device buffers that the host path would
 * read with the CPU and crash on; so when libcuda is there, pointers are
 * still classified through it (dlopen, cuPointerGetAttributes: it answers
 * "not initialized", host memory, until the application initialized CUDA),
 * and a device buffer is refused by the staging (no usable GPU) instead.
 * With a GPU, pointers are classified with the driver's
 * cuPointerGetAttributes, fetched through the runtime (no link against
 * libcuda, so the component still loads where there is none); it answers
 * for host pointers without creating a context, unlike
 * cudaPointerGetAttributes, which would put a context on device 0 of every
 * rank of a CPU-only job.
 *
 * Kernels. One grid-stride kernel per (op, type): 16-byte vector loads and
 * stores on the part where in and inout share their alignment, scalar
 * element accesses for the head and tail, byte accesses when a pointer is
 * not even element-aligned. The element operation is dr_gpu_ops.hpp's, the
 * same code the host reference runs.
 */
#include <cuda.h> /* types and enums only: the driver is reached through the runtime */
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "gpu/dr_gpu.h"
#include "gpu/dr_gpu_ops.hpp"

namespace {

using namespace dualrail::gpu;

std::once_flag g_once;
int g_available = 0;
/* Set once detect() has run: every collective asks for each of its buffers, and
 * call_once costs two thread-local accesses and a pthread_once even when done (about
 * 90 instructions of an 8-byte allreduce's 5000 in user space). */
std::atomic<bool> g_detected{false};
PFN_cuPointerGetAttributes_v7000 g_ptr_attrs = nullptr;
PFN_cuCtxGetCurrent_v4000 g_ctx_get = nullptr;
PFN_cuCtxSetCurrent_v4000 g_ctx_set = nullptr;
thread_local char g_err[256] = "";
std::atomic<uint64_t> g_queries{0}; /* pointer-attribute queries (dr_mem_cuda_pointer_queries) */

dr_status_t fail(cudaError_t e, const char *what)
{
    snprintf(g_err, sizeof(g_err), "cuda: %s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError(); /* clear a non-sticky error so it is not reported twice */
    /* Not DR_ERR_INVALID: the application's arguments were checked before any device work. */
    return e == cudaErrorMemoryAllocation ? DR_ERR_NO_MEMORY : DR_ERR_GPU;
}

/* A driver function through the runtime (no link against libcuda); nullptr when missing. */
void *driver(const char *name)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return fn;
}

/* No usable runtime but a driver: classify pointers with libcuda itself (see the top). */
void detect_driver_only()
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        return; /* no driver at all: no device buffer can exist */
    }
    void *fn = dlsym(lib, "cuPointerGetAttributes");
    if (fn == nullptr) {
        dlclose(lib);
        return;
    }
    g_ptr_attrs = reinterpret_cast<PFN_cuPointerGetAttributes_v7000>(fn); /* lib stays loaded */
}

void detect()
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        g_available = 0;
        if (e == cudaErrorInsufficientDriver) { /* also what a machine without libcuda says */
            detect_driver_only();
        }
        return;
    }
    g_ptr_attrs =
        reinterpret_cast<PFN_cuPointerGetAttributes_v7000>(driver("cuPointerGetAttributes"));
    g_ctx_get = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(driver("cuCtxGetCurrent"));
    g_ctx_set = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(driver("cuCtxSetCurrent"));
    g_available = 1;
}

int cuda_available(void)
{
    if (!g_detected.load(std::memory_order_acquire)) {
        std::call_once(g_once, detect);
        g_detected.store(true, std::memory_order_release);
    }
    return g_available;
}

dr_mem_kind_t cuda_kind(const void *p)
{
    if (p == nullptr || (!cuda_available() && g_ptr_attrs == nullptr)) {
        return DR_MEM_HOST;
    }
    g_queries.fetch_add(1, std::memory_order_relaxed);
    if (g_ptr_attrs != nullptr) {
        CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_IS_MANAGED};
        unsigned int memtype = 0, managed = 0;
        void *data[2] = {&memtype, &managed};
        if (g_ptr_attrs(2, attrs, data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
            return DR_MEM_HOST;
        }
        if (managed) {
            return DR_MEM_MANAGED;
        }
        return memtype == CU_MEMORYTYPE_DEVICE ? DR_MEM_DEVICE : DR_MEM_HOST;
    }
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return DR_MEM_HOST;
    }
    return a.type == cudaMemoryTypeManaged  ? DR_MEM_MANAGED
           : a.type == cudaMemoryTypeDevice ? DR_MEM_DEVICE
                                            : DR_MEM_HOST;
}

dr_status_t cuda_stream_create(void **stream)
{
    cudaStream_t s;
    /* Non-blocking: the application's legacy default stream must not serialize with ours. */
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        return fail(e, "stream create");
    }
    *stream = s;
    return DR_OK;
}

void cuda_stream_destroy(void *stream)
{
    if (stream != nullptr) {
        cudaStreamDestroy(static_cast<cudaStream_t>(stream));
    }
}

dr_status_t cuda_event_create(void **event)
{
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        return fail(e, "event create");
    }
    *event = ev;
    return DR_OK;
}

void cuda_event_destroy(void *event)
{
    if (event != nullptr) {
        cudaEventDestroy(static_cast<cudaEvent_t>(event));
    }
}

dr_status_t cuda_event_record(void *event, void *stream)
{
    cudaError_t e =
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? DR_OK : fail(e, "event record");
}

dr_status_t cuda_event_query(void *event)
{
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) {
        return DR_OK;
    }
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return DR_INPROGRESS;
    }
    return fail(e, "event query");
}

dr_status_t cuda_stream_wait_event(void *stream, void *event)
{
    cudaError_t e =
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0);
    return e == cudaSuccess ? DR_OK : fail(e, "stream wait event");
}

dr_status_t cuda_stream_sync(void *stream)
{
    cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? DR_OK : fail(e, "stream synchronize");
}

dr_status_t cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0) {
        return DR_OK;
    }
    cudaError_t e =
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? DR_OK : fail(e, "copy");
}

dr_status_t cuda_reduce_async(int op, int type, const void *in, void *inout, size_t count,
                              void *stream)
{
    return dr_gpu_reduce(op, type, in, inout, count, stream);
}

dr_status_t cuda_host_alloc(void **p, size_t bytes)
{
    cudaError_t e = cudaHostAlloc(p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
    return e == cudaSuccess ? DR_OK : fail(e, "pinned host allocation");
}

void cuda_host_free(void *p)
{
    if (p != nullptr) {
        cudaFreeHost(p);
    }
}

dr_status_t cuda_device_alloc(void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes == 0 ? 1 : bytes);
    return e == cudaSuccess ? DR_OK : fail(e, "device allocation");
}

void cuda_device_free(void *p)
{
    if (p != nullptr) {
        cudaFree(p);
    }
}

const char *cuda_last_error(void)
{
    return g_err;
}

int cuda_device_of(const void *p)
{
    if (p == nullptr || !cuda_available()) {
        return -1;
    }
    if (g_ptr_attrs != nullptr) {
        CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        unsigned int memtype = 0, managed = 0;
        int ordinal = -1;
        void *data[3] = {&memtype, &managed, &ordinal};
        if (g_ptr_attrs(3, attrs, data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
            return -1;
        }
        return (managed || memtype == CU_MEMORYTYPE_DEVICE) && ordinal >= 0 ? ordinal : -1;
    }
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) && a.device >= 0
               ? a.device
               : -1;
}

int cuda_device_current(void)
{
    /* Creates no context: a thread that never chose a device is on device 0. */
    int cur = 0;
    if (cudaGetDevice(&cur) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return cur;
}

/*
 * The thread's context is saved and put back as it was, not as a device
 * number: cudaSetDevice(0) on a thread that had no context would create
 * device 0's primary context (hundreds of MiB on GPU 0 for every rank whose
 * MPI thread never touched CUDA), and would replace an application's own
 * context by a primary one.
 */
dr_status_t cuda_device_enter(int device, void **saved)
{
    *saved = nullptr;
    if (g_ctx_get == nullptr || g_ctx_set == nullptr) {
        snprintf(g_err, sizeof(g_err), "cuda: the driver has no cuCtxGetCurrent/cuCtxSetCurrent");
        return DR_ERR_NO_DEVICE;
    }
    CUcontext prev = nullptr;
    if (g_ctx_get(&prev) != CUDA_SUCCESS) {
        snprintf(g_err, sizeof(g_err), "cuda: cannot read the thread's context");
        return DR_ERR_GPU;
    }
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        return fail(e, "set device");
    }
    *saved = prev;
    return DR_OK;
}

void cuda_device_leave(void *saved)
{
    if (g_ctx_set != nullptr) {
        g_ctx_set(static_cast<CUcontext>(saved));
    }
}

const dr_mem_ops_t kCuda = {
    "cuda",
    cuda_available,
    cuda_kind,
    cuda_stream_create,
    cuda_stream_destroy,
    cuda_event_create,
    cuda_event_destroy,
    cuda_event_record,
    cuda_event_query,
    cuda_stream_wait_event,
    cuda_stream_sync,
    cuda_copy_async,
    cuda_reduce_async,
    cuda_host_alloc,
    cuda_host_free,
    cuda_device_alloc,
    cuda_device_free,
    cuda_last_error,
    cuda_device_of,
    cuda_device_current,
    cuda_device_enter,
    cuda_device_leave,
};

/* ------------------------------------------------------------------ kernels */

constexpr int kThreads = 256;

/*
 * [0, head): scalar; [head, head + nvec * V): 16-byte vectors; the rest
 * scalar. bytewise: neither pointer is trusted to be element-aligned.
 */
template <int OP, typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(const T *__restrict__ in, T *__restrict__ io, size_t count, size_t head,
                  size_t nvec, bool bytewise)
{
    constexpr size_t V = 16 / sizeof(T);
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    if (bytewise) {
        const unsigned char *a = reinterpret_cast<const unsigned char *>(in);
        unsigned char *b = reinterpret_cast<unsigned char *>(io);
        for (size_t i = tid; i < count; i += stride) {
            T x, y;
            memcpy(&x, a + i * sizeof(T), sizeof(T));
            memcpy(&y, b + i * sizeof(T), sizeof(T));
            y = apply<OP>(x, y);
            memcpy(b + i * sizeof(T), &y, sizeof(T));
        }
        return;
    }
    const uint4 *vin = reinterpret_cast<const uint4 *>(in + head);
    uint4 *vio = reinterpret_cast<uint4 *>(io + head);
    for (size_t i = tid; i < nvec; i += stride) {
        const uint4 a = vin[i];
        uint4 b = vio[i];
        T x[V], y[V];
        memcpy(x, &a, 16);
        memcpy(y, &b, 16);
#pragma unroll
        for (size_t k = 0; k < V; ++k) {
            y[k] = apply<OP>(x[k], y[k]);
        }
        memcpy(&b, y, 16);
        vio[i] = b;
    }
    const size_t tail = head + nvec * V;
    for (size_t i = tid; i < head; i += stride) {
        io[i] = apply<OP>(in[i], io[i]);
    }
    for (size_t i = tail + tid; i < count; i += stride) {
        io[i] = apply<OP>(in[i], io[i]);
    }
}

int sm_count()
{
    static std::atomic<int> cache[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        (void)cudaGetLastError();
        return 32;
    }
    int n = cache[dev].load(std::memory_order_relaxed);
    if (n == 0) {
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            n <= 0) {
            (void)cudaGetLastError();
            n = 32;
        }
        cache[dev].store(n, std::memory_order_relaxed);
    }
    return n;
}

struct Launch {
    const void *in;
    void *inout;
    size_t count;
    cudaStream_t stream;
    cudaError_t err = cudaSuccess;

    template <int OP, typename T> void run()
    {
        if constexpr (!(std::is_floating_point<T>::value || std::is_same<T, Half>::value ||
                        std::is_same<T, BFloat16>::value) ||
                      OP <= DR_GPU_MAX) {
            const uintptr_t a = (uintptr_t)in, b = (uintptr_t)inout;
            bool bytewise = (a % sizeof(T)) != 0 || (b % sizeof(T)) != 0;
            size_t head = count, nvec = 0;
            if (!bytewise && a % 16 == b % 16) {
                head = ((16 - b % 16) % 16) / sizeof(T);
                head = head > count ? count : head;
                nvec = (count - head) / (16 / sizeof(T));
            }
            /* Work items: vectors plus the scalar remainder, at most 8 blocks per SM resident. */
            const size_t work = nvec + (count - nvec * (16 / sizeof(T)));
            size_t blocks = (work + kThreads - 1) / kThreads;
            const size_t cap = (size_t)sm_count() * 8;
            blocks = blocks > cap ? cap : blocks == 0 ? 1 : blocks;
            /*
             * cudaLaunchKernel, not <<< >>> and cudaGetLastError: its status is this
             * launch's alone. The last error may hold one left pending by an earlier
             * call whose status was ignored (a free or destroy of ours, or the
             * application's where it shares this runtime, e.g. the usual unchecked
             * cudaErrorPeerAccessAlreadyEnabled): reading it would fail this reduction
             * for nothing and swallow that error.
             */
            const T *tin = static_cast<const T *>(in);
            T *tio = static_cast<T *>(inout);
            size_t n = count;
            void *args[] = {&tin, &tio, &n, &head, &nvec, &bytewise};
            err = cudaLaunchKernel(reinterpret_cast<const void *>(&reduce_kernel<OP, T>),
                                   dim3((unsigned)blocks), dim3(kThreads), args, 0, stream);
        }
    }
};

} // namespace

extern "C" const dr_mem_ops_t *dr_mem_cuda(void)
{
    return &kCuda;
}

extern "C" uint64_t dr_mem_cuda_pointer_queries(void)
{
    return g_queries.load(std::memory_order_relaxed);
}

extern "C" int dr_mem_cuda_no_device(void)
{
    /* cuda_kind's early answer, for every pointer (g_ptr_attrs is set, if ever, by the
     * detection cuda_available runs first) */
    return !cuda_available() && g_ptr_attrs == nullptr;
}

extern "C" dr_status_t dr_gpu_reduce(int op, int type, const void *in, void *inout, size_t count,
                                     void *stream)
{
    if (!dr_gpu_op_valid(op, type)) {
        snprintf(g_err, sizeof(g_err), "cuda: no reduction kernel for %s on %s", dr_gpu_op_name(op),
                 dr_gpu_type_name(type));
        return DR_ERR_INVALID;
    }
    if (count == 0) {
        return DR_OK;
    }
    Launch l{in, inout, count, static_cast<cudaStream_t>(stream)};
    dispatch(op, type, l);
    return l.err == cudaSuccess ? DR_OK : fail(l.err, "reduction kernel launch");
}
