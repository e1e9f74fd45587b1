/*
 * The device-buffer C API (dr_coll_gpu.h): argument conversion and the
 * exception boundary around algo/staged.hpp.
 */
#include "dr_coll_gpu.h"

#include <cstdio>
#include <new>
#include <string>

#include "algo/allreduce.hpp"
#include "algo/staged.hpp"
#include "mr_transport.hpp"

using namespace dualrail::coll;

struct dr_staging {
    Staging staging;
    Scratch scratch;
    dr_staging(const dr_mem_ops_t *mem, size_t budget) : staging(mem, budget) {}
};

extern "C" int dr_buffers_on_device(const dr_mem_ops_t *mem, const void *sendbuf,
                                    const void *recvbuf)
{
    if (mem == nullptr) {
        mem = dr_mem_cuda();
    }
    /*
     * kind() even without a usable GPU: cached "host" (one load and a branch)
     * where there is no driver, but a device buffer is still seen where the
     * driver is too old for our runtime, and then refused, not read by the CPU.
     */
    return (sendbuf != nullptr && mem->kind(sendbuf) != DR_MEM_HOST) ||
           (recvbuf != nullptr && mem->kind(recvbuf) != DR_MEM_HOST);
}

extern "C" dr_status_t dr_staging_create(const dr_mem_ops_t *mem, size_t budget, dr_staging_t **out,
                                         char *err, size_t errlen)
{
    *out = nullptr;
    if (mem == nullptr) {
        mem = dr_mem_cuda();
    }
    if (!mem->available()) {
        set_err(err, errlen,
                "staging: no usable GPU (none, or a driver older than this build's CUDA runtime "
                "needs)");
        return DR_ERR_NO_DEVICE;
    }
    /* Streams and events come with the first call: they belong to its buffers' device. */
    dr_staging_t *s = new (std::nothrow)
        dr_staging(mem, budget == 0 ? (size_t)DR_STAGING_BUDGET_DEFAULT : budget);
    if (s == nullptr) {
        set_err(err, errlen, "staging: out of memory");
        return DR_ERR_NO_MEMORY;
    }
    *out = s;
    return DR_OK;
}

extern "C" void dr_staging_destroy(dr_staging_t *s)
{
    delete s;
}

extern "C" dr_status_t dr_allreduce_device(dr_mr_t *mr, const dr_allreduce_args_t *a, int gpu_op,
                                           int gpu_type, dr_staging_t *s, char *err, size_t errlen)
{
    if (a == nullptr || s == nullptr) {
        set_err(err, errlen, "allreduce: no arguments or no staging");
        return DR_ERR_INVALID;
    }
    StagedArgs sa;
    sa.gpu_op = gpu_op;
    sa.gpu_type = gpu_type;
    return c_api_run(mr, a, err, errlen, [&](Transport &t, const Params &p, std::string *why) {
        return allreduce_staged(t, p, sa, s->staging, &s->scratch, why);
    });
}

extern "C" unsigned long dr_staging_fallbacks(const dr_staging_t *s, const char **reason)
{
    if (reason != nullptr) {
        *reason = s != nullptr ? s->staging.fallback_reason().c_str() : "";
    }
    return s != nullptr ? s->staging.fallbacks() : 0;
}

extern "C" const char *dr_allreduce_device_path(const dr_allreduce_args_t *a, int gpu_op,
                                                int gpu_type, const dr_staging_t *s)
{
    if (a == nullptr || s == nullptr) {
        return "host";
    }
    StagedArgs sa;
    sa.gpu_op = gpu_op;
    sa.gpu_type = gpu_type;
    switch (staged_path(to_params(a), sa, s->staging)) {
    case kPathRing:
        return "staged ring";
    case kPathWhole:
        return "staged whole message";
    default:
        return "host";
    }
}
