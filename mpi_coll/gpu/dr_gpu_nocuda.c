/*
 * dr_mem_cuda() in a build without CUDA: a table that reports no GPU, so
 * every pointer is host memory and callers take the host path unchanged.
 */
#include "gpu/dr_gpu.h"

static int none_available(void)
{
    return 0;
}

static dr_mem_kind_t none_kind(const void *p)
{
    (void)p;
    return DR_MEM_HOST;
}

static dr_status_t none_ptr(void **p)
{
    (void)p;
    return DR_ERR_NO_DEVICE;
}

static void none_free(void *p)
{
    (void)p;
}

static dr_status_t none_record(void *e, void *s)
{
    (void)e;
    (void)s;
    return DR_ERR_NO_DEVICE;
}

static dr_status_t none_one(void *p)
{
    (void)p;
    return DR_ERR_NO_DEVICE;
}

static dr_status_t none_copy(void *d, const void *s, size_t n, void *st)
{
    (void)d;
    (void)s;
    (void)n;
    (void)st;
    return DR_ERR_NO_DEVICE;
}

static dr_status_t none_reduce(int op, int type, const void *in, void *io, size_t n, void *st)
{
    return dr_gpu_reduce(op, type, in, io, n, st);
}

static dr_status_t none_alloc(void **p, size_t n)
{
    (void)n;
    return none_ptr(p);
}

static const char *none_error(void)
{
    return "built without CUDA";
}

static int none_device_of(const void *p)
{
    (void)p;
    return -1;
}

static int none_device_current(void)
{
    return -1;
}

static dr_status_t none_device_enter(int device, void **saved)
{
    (void)device;
    *saved = NULL;
    return DR_ERR_NO_DEVICE;
}

static const dr_mem_ops_t none_ops = {
    "cuda",         none_available,      none_kind,         none_ptr,    none_free, none_ptr,
    none_free,      none_record,         none_one,          none_record, none_one,  none_copy,
    none_reduce,    none_alloc,          none_free,         none_alloc,  none_free, none_error,
    none_device_of, none_device_current, none_device_enter, none_free,
};

const dr_mem_ops_t *dr_mem_cuda(void)
{
    return &none_ops;
}

uint64_t dr_mem_cuda_pointer_queries(void)
{
    return 0;
}

int dr_mem_cuda_no_device(void)
{
    return 1;
}

dr_status_t dr_gpu_reduce(int op, int type, const void *in, void *inout, size_t count, void *stream)
{
    (void)op;
    (void)type;
    (void)in;
    (void)inout;
    (void)count;
    (void)stream;
    return DR_ERR_NO_DEVICE;
}
