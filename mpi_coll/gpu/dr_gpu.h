/*
 * The memory interface: every CUDA call of DualRail sits behind this header.
 *
 * Callers (the staged allreduce in mpi_coll/algo, the Open MPI glue, tests,
 * benchmarks) see one table of functions, dr_mem_ops_t, with two
 * implementations:
 *   - dr_mem_cuda()    the CUDA runtime (dr_gpu_cuda.cu), linked statically so
 *                      the component loads on machines without a driver; with
 *                      no driver or no device it reports "no GPU" once, caches
 *                      that, and every pointer is host memory (but with a
 *                      driver too old for the runtime, kind() still asks
 *                      libcuda, so the application's device buffers are
 *                      refused rather than read by the CPU);
 *   - dr_mem_standin() host memory standing in for a GPU (dr_gpu_standin.cc):
 *                      "device" regions whose addresses fault on any CPU
 *                      access, copies and reductions done by the CPU, and
 *                      events that complete only when polled, late and in
 *                      stream order, so tests catch a missing wait; and
 *                      DR_MEM_STANDIN_DEVICES devices that enforce the
 *                      device rules below as CUDA does.
 * A build without CUDA has only the stand-in; dr_mem_cuda() then returns a
 * table whose available() is 0.
 *
 * Streams and events are opaque pointers. Nothing here allocates on the hot
 * path: streams, events and staging memory are created once per
 * communicator. No function synchronizes the whole device.
 *
 * Devices. As in CUDA, a stream, an event or device memory belongs to the
 * device current on the calling thread when it is created, and a reduction
 * must be queued on a stream of the current device and may only touch that
 * device's memory (a kernel reading another device's memory faults unless
 * the application enabled peer access). Copies may cross devices. Callers
 * that serve buffers of a device other than the thread's current one make it
 * current around the work (device_enter) and give the thread back what it
 * had (device_leave).
 */
#ifndef DUALRAIL_GPU_H
#define DUALRAIL_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "dualrail/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dr_mem_kind {
    DR_MEM_HOST = 0,   /* ordinary or pinned host memory: the CPU may touch it */
    DR_MEM_DEVICE = 1, /* device memory: only copies and kernels may touch it */
    DR_MEM_MANAGED = 2 /* managed memory: treated as device memory (kernels reduce it) */
} dr_mem_kind_t;

/* Reductions, as MPI defines them. Bitwise and logical ops exist for integer types only. */
typedef enum dr_gpu_op {
    DR_GPU_SUM = 0,
    DR_GPU_PROD,
    DR_GPU_MIN,
    DR_GPU_MAX,
    DR_GPU_BAND,
    DR_GPU_BOR,
    DR_GPU_BXOR,
    DR_GPU_LAND,
    DR_GPU_LOR,
    DR_GPU_LXOR,
    DR_GPU_OP_COUNT
} dr_gpu_op_t;

typedef enum dr_gpu_type {
    DR_GPU_F32 = 0,
    DR_GPU_F64,
    DR_GPU_F16,  /* IEEE half (__half) */
    DR_GPU_BF16, /* bfloat16 (__nv_bfloat16) */
    DR_GPU_I8,
    DR_GPU_I16,
    DR_GPU_I32,
    DR_GPU_I64,
    DR_GPU_U8,
    DR_GPU_U16,
    DR_GPU_U32,
    DR_GPU_U64,
    DR_GPU_TYPE_COUNT
} dr_gpu_type_t;

/* Bytes per element (0 for an unknown type). */
size_t dr_gpu_type_size(int type);
/* "sum", "f32", ...: for log lines and test names. */
const char *dr_gpu_op_name(int op);
const char *dr_gpu_type_name(int type);
/* Whether the kernels implement (op, type): arithmetic on all, bitwise/logical on integers. */
int dr_gpu_op_valid(int op, int type);

typedef struct dr_mem_ops {
    const char *name; /* "cuda" or "standin" */
    /* 1 when a device can be used (cached after the first call), else 0. Never prints. */
    int (*available)(void);
    /* Where p points. Cheap when there is no GPU (a cached answer). */
    dr_mem_kind_t (*kind)(const void *p);

    dr_status_t (*stream_create)(void **stream);
    void (*stream_destroy)(void *stream);
    dr_status_t (*event_create)(void **event);
    void (*event_destroy)(void *event);
    /* The event completes when the work queued on stream so far has. */
    dr_status_t (*event_record)(void *event, void *stream);
    /* DR_OK once complete (or never recorded), DR_INPROGRESS, or an error. Never blocks. */
    dr_status_t (*event_query)(void *event);
    /* Work queued on stream after this waits for the event's last record. */
    dr_status_t (*stream_wait_event)(void *stream, void *event);
    /* Block until the stream's work is done: set-up, tests and error paths only. */
    dr_status_t (*stream_sync)(void *stream);

    /* Any direction (host or device on either side); ordered on stream. */
    dr_status_t (*copy_async)(void *dst, const void *src, size_t bytes, void *stream);
    /* inout[i] = in[i] op inout[i] on device (or managed/pinned) memory, ordered on stream. */
    dr_status_t (*reduce_async)(int op, int type, const void *in, void *inout, size_t count,
                                void *stream);

    /* Page-locked host memory for staging (DMA-able). */
    dr_status_t (*host_alloc)(void **p, size_t bytes);
    void (*host_free)(void *p);
    /* Device memory (tests, benchmarks, staging scratch). */
    dr_status_t (*device_alloc)(void **p, size_t bytes);
    void (*device_free)(void *p);

    /* Why the last call of this thread failed (never NULL). */
    const char *(*last_error)(void);

    /*
     * Devices. A table may leave these four NULL (a table written before
     * them): callers then treat it as one device, always current.
     */
    /* The device that holds p (device or managed memory); -1 for host memory or unknown. */
    int (*device_of)(const void *p);
    /* The thread's current device (0 for a thread that never chose one); -1 on error. */
    int (*device_current)(void);
    /*
     * Make device current on this thread; *saved: what the thread had (its
     * context, none included), for device_leave to put back exactly.
     */
    dr_status_t (*device_enter)(int device, void **saved);
    void (*device_leave)(void *saved);
} dr_mem_ops_t;

/* The CUDA implementation; available() is 0 in a build without CUDA or with no usable GPU. */
const dr_mem_ops_t *dr_mem_cuda(void);
/*
 * Pointer-attribute queries dr_mem_cuda()->kind() has made of the driver or
 * runtime in this process (0 in a build without CUDA): tests check that a
 * machine without a GPU answers from the cached "no GPU", not per pointer.
 */
uint64_t dr_mem_cuda_pointer_queries(void);
/*
 * 1 when no device buffer can exist in this process: a build without CUDA, or no
 * driver at all (neither a usable runtime nor libcuda). Then dr_mem_cuda()->kind()
 * answers DR_MEM_HOST for every pointer and a caller may skip asking it per call; 0
 * where a driver is present, even one too old for the runtime (whose device buffers
 * kind() must still see, to refuse them). Runs the detection on its first call.
 */
int dr_mem_cuda_no_device(void);
/* The host stand-in (always built). */
const dr_mem_ops_t *dr_mem_standin(void);

/*
 * The C entry of the reduction kernels: inout[i] = in[i] op inout[i] for
 * count elements on stream (a cudaStream_t; NULL: the default stream).
 * Pointers need no alignment. DR_ERR_INVALID for an (op, type) the kernels
 * do not implement; count 0 does nothing.
 */
dr_status_t dr_gpu_reduce(int op, int type, const void *in, void *inout, size_t count,
                          void *stream);

/* --- stand-in only: knobs for tests ------------------------------------ */

/*
 * Events complete only after this many polls (event_query) of their stream
 * beyond the queued work; 0: as soon as polled. Per process.
 */
void dr_mem_standin_set_lag(unsigned polls);
/* The next n copies (copy_async) fail with DR_ERR_GPU, in every copy of the stand-in in
 * this process (the count lives in the device window's header): a test program arms the
 * component's staging failures with it. 0 disarms. */
void dr_mem_standin_fail_copies(unsigned n);
/* Queued stand-in operations that have run so far (copies, reductions): tests count work. */
uint64_t dr_mem_standin_ops_run(void);
/* The stand-in has this many devices (0 .. n-1); each thread starts on device 0. */
#define DR_MEM_STANDIN_DEVICES 2

#ifdef __cplusplus
}
#endif

#endif
