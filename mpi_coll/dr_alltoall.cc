/*
 * The C API of alltoall and alltoallv (dr_alltoall.h) over ucx_mr: argument
 * conversion and the exception boundary, through mr_transport.hpp's shared
 * c_api_run.
 */
#include "dr_alltoall.h"

#include <cstdio>
#include <string>

#include "algo/alltoall.hpp"
#include "algo/transport.hpp"
#include "mr_transport.hpp"

namespace dualrail {
namespace coll {
namespace {

static_assert((int)DR_ALLTOALL_PAIRWISE == (int)kAlltoallPairwise &&
                  (int)DR_ALLTOALL_BRUCK == (int)kAlltoallBruck &&
                  DR_ALLTOALL_SMALL_MAX_DEFAULT == kDefaultAlltoallSmallMaxBytes &&
                  DR_ALLTOALL_WINDOW_DEFAULT == kDefaultAlltoallWindow,
              "alltoall ids and defaults");

/* Bruck's and in-place scratch kept between calls, as the allgather's. */
thread_local Scratch a2a_scratch;

dr_status_t no_args(int kind, char *err, size_t errlen)
{
    char line[64];
    snprintf(line, sizeof(line), "%s: no arguments", kind_name(kind));
    set_err(err, errlen, line);
    return DR_ERR_INVALID;
}

void trim_scratch()
{
    a2a_scratch.trim(keep_scratch());
}

} // namespace

/* dr_coll_scratch_held's share of the alltoalls (dr_coll.cc). */
size_t alltoall_scratch_held()
{
    return a2a_scratch.capacity();
}

} // namespace coll
} // namespace dualrail

using namespace dualrail::coll;

extern "C" dr_status_t dr_alltoall(dr_mr_t *mr, const dr_alltoall_args_t *a, char *err,
                                   size_t errlen)
{
    if (a == nullptr) {
        return no_args(kKindAlltoall, err, errlen);
    }
    const Params p = to_params(a, kKindAlltoall);
    const int window = a->window;
    return c_api_run(mr, a->c.peer_ids, p, a->c.size > 1 && a->c.bytes != 0, err, errlen,
                     [window](Transport &t, const Params &q, std::string *why) {
                         const dr_status_t st = alltoall(t, q, window, &a2a_scratch, why);
                         trim_scratch();
                         return st;
                     });
}

extern "C" dr_status_t dr_alltoallv(dr_mr_t *mr, const dr_alltoall_args_t *a, char *err,
                                    size_t errlen)
{
    if (a == nullptr) {
        return no_args(kKindAlltoallv, err, errlen);
    }
    const Params p = to_params(a, kKindAlltoallv);
    VLayout v;
    v.scounts = a->sendcounts;
    v.sdispls = a->sdispls;
    v.rcounts = a->recvcounts;
    v.rdispls = a->rdispls;
    const int window = a->window;
    return c_api_run(mr, a->c.peer_ids, p, a->c.size > 1, err, errlen,
                     [window, v](Transport &t, const Params &q, std::string *why) {
                         const dr_status_t st = alltoallv(t, q, v, window, &a2a_scratch, why);
                         trim_scratch();
                         return st;
                     });
}

extern "C" int dr_alltoall_choose(const dr_alltoall_args_t *a)
{
    return a == nullptr ? DR_ALLTOALL_PAIRWISE : alltoall_choose(to_params(a, kKindAlltoall));
}
