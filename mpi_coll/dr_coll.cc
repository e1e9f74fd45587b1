/*
 * The C API of the algorithm layer (dr_coll.h) over ucx_mr: argument
 * conversion, the Transport adapter (comm rank -> ucx_mr process id), and the
 * exception boundary.
 */
#include "dr_coll.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "algo/allreduce.hpp"
#include "algo/transport.hpp"
#include "mr_transport.hpp"

namespace dualrail {
namespace coll {
namespace {

static_assert((int)DR_ALGO_AUTO == (int)kAlgoAuto && (int)DR_ALGO_RING == (int)kAlgoRing &&
                  (int)DR_ALGO_RD == (int)kAlgoRd,
              "algorithm ids");
static_assert(DR_ALLREDUCE_RD_MAX_DEFAULT == kDefaultRdMaxBytes &&
                  DR_ALLREDUCE_SEGMENT_DEFAULT == kDefaultSegmentBytes &&
                  DR_ALLREDUCE_MAX_ELEM_SIZE == kMaxElemSize,
              "defaults");

} // namespace
} // namespace coll
} // namespace dualrail

using namespace dualrail::coll;

extern "C" dr_status_t dr_allreduce(dr_mr_t *mr, const dr_allreduce_args_t *a, char *err,
                                    size_t errlen)
{
    if (a == nullptr) {
        set_err(err, errlen, "allreduce: no arguments");
        return DR_ERR_INVALID;
    }
    return c_api_run(mr, a, err, errlen, [](Transport &t, const Params &p, std::string *why) {
        /* Kept between calls, so a small allreduce allocates nothing: one per thread (a
         * communicator is used by one thread at a time), and only up to kKeepScratch
         * (recursive doubling needs two vectors of at most rd_max_bytes; a ring's larger
         * scratch is given back after its call). */
        static thread_local Scratch scratch;
        const dr_status_t st = allreduce(t, p, &scratch, why);
        if (scratch.capacity() > kKeepScratch) {
            scratch.release();
        }
        return st;
    });
}

extern "C" int dr_allreduce_choose(const dr_allreduce_args_t *a)
{
    if (a == nullptr) {
        return DR_ALGO_RD;
    }
    return allreduce_choose(to_params(a));
}
