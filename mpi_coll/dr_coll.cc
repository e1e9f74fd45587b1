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
#include "algo/allreduce_rd_small.hpp"
#include "algo/barrier_dissemination.hpp"
#include "algo/collectives.hpp"
#include "algo/gathers.hpp"
#include "algo/reductions.hpp"
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
                  DR_COLL_KEEP_SCRATCH_DEFAULT == kDefaultKeepScratch &&
                  DR_ALLREDUCE_MAX_ELEM_SIZE == kMaxElemSize,
              "defaults");
static_assert((int)DR_REDUCE_BINOMIAL == (int)kReduceBinomial &&
                  (int)DR_REDUCE_RABENSEIFNER == (int)kReduceRabenseifner &&
                  (int)DR_REDUCE_CHAIN == (int)kReduceChain &&
                  (int)DR_REDUCE_SCATTER_RING == (int)kReduceScatterRing &&
                  (int)DR_REDUCE_SCATTER_HALVING == (int)kReduceScatterHalving,
              "reduce and reduce_scatter ids");
static_assert((int)DR_ALLGATHERV_RING == (int)kAllgathervRing &&
                  (int)DR_ALLGATHERV_BRUCK == (int)kAllgathervBruck,
              "allgatherv ids");
static_assert((int)DR_BCAST_BINOMIAL == (int)kBcastBinomial &&
                  (int)DR_BCAST_SCATTER_ALLGATHER == (int)kBcastScatterAllgather &&
                  (int)DR_BCAST_CHAIN == (int)kBcastChain &&
                  (int)DR_ALLGATHER_RING == (int)kAllgatherRing &&
                  (int)DR_ALLGATHER_RD == (int)kAllgatherRd &&
                  (int)DR_ALLGATHER_BRUCK == (int)kAllgatherBruck &&
                  DR_COLL_SMALL_MAX_DEFAULT == kDefaultSmallMaxBytes,
              "bcast and allgather ids");

/* The scratch of every kind but the allreduce and the alltoalls (the reduce-scatters'
 * partial results, Bruck's buffers), kept between calls as the allreduce's. */
thread_local Scratch data_scratch;

/* One C entry for the data-movement kinds: arguments, boundary, the kind's entry (the
 * barrier and the allreduce have their own, below). */
dr_status_t run_kind(dr_mr_t *mr, const dr_coll_args_t *a, int kind, char *err, size_t errlen)
{
    if (a == nullptr) {
        char line[64];
        snprintf(line, sizeof(line), "%s: no arguments", kind_name(kind));
        set_err(err, errlen, line);
        return DR_ERR_INVALID;
    }
    const Params p = to_params(a, kind);
    const bool moves = a->size > 1 && (a->bytes != 0 || a->counts != nullptr);
    return c_api_run(mr, a->peer_ids, p, moves, err, errlen,
                     [kind](Transport &t, const Params &q, std::string *why) {
                         dr_status_t st;
                         if (kind == kKindBcast) {
                             st = bcast(t, q, why);
                         } else if (kind == kKindReduce) {
                             st = reduce(t, q, &data_scratch, why);
                         } else if (kind == kKindReduceScatterBlock) {
                             st = reduce_scatter_block(t, q, &data_scratch, why);
                         } else if (kind == kKindReduceScatter) {
                             st = reduce_scatter(t, q, &data_scratch, why);
                         } else if (kind == kKindAllgatherv) {
                             st = allgatherv(t, q, &data_scratch, why);
                         } else if (kind == kKindGather) {
                             st = gather(t, q, &data_scratch, why);
                         } else if (kind == kKindScatter) {
                             st = scatter(t, q, &data_scratch, why);
                         } else if (kind == kKindGatherv) {
                             st = gatherv(t, q, why);
                         } else if (kind == kKindScatterv) {
                             st = scatterv(t, q, why);
                         } else {
                             st = allgather(t, q, &data_scratch, why);
                         }
                         data_scratch.trim(keep_scratch());
                         return st;
                     });
}

} // namespace
} // namespace coll
} // namespace dualrail

using namespace dualrail::coll;

namespace dualrail {
namespace coll {
namespace {

/* Kept between calls, so an allreduce allocates nothing once warm: one per thread (a
 * communicator is used by one thread at a time), and only up to keep_scratch() (recursive
 * doubling needs up to three vectors of at most rd_max_bytes, the ring its window of
 * segment slots; a larger scratch is given back after its call). */
thread_local Scratch allreduce_scratch;

} // namespace
} // namespace coll
} // namespace dualrail

extern "C" dr_status_t dr_allreduce(dr_mr_t *mr, const dr_allreduce_args_t *a, char *err,
                                    size_t errlen)
{
    if (a == nullptr) {
        set_err(err, errlen, "allreduce: no arguments");
        return DR_ERR_INVALID;
    }
    Params small = to_params(a);
    normalize(small);
    if (allreduce_small_direct(small)) {
        /* Without allreduce()'s chain of verdicts (its twin allreduce_small_direct is worth
         * it: that chain was about 200 of the 3700 instructions of an 8-byte call's own
         * work, all before the call's first send, perf/instr_count.sh); the generic lambda
         * gets c_api_run's MrTransport as itself, so the small path calls ucx_mr directly. */
        return c_api_run(mr, a->peer_ids, small, true, err, errlen,
                         [](auto &t, const Params &q, std::string *why) {
                             return allreduce_rd_small_on(t, q, allreduce_scratch, why);
                         });
    }
    return c_api_run(mr, a, err, errlen, [](Transport &t, const Params &p, std::string *why) {
        const dr_status_t st = allreduce(t, p, &allreduce_scratch, why);
        allreduce_scratch.trim(keep_scratch());
        return st;
    });
}

static int of_comm(uint64_t key, void *arg)
{
    return dr_key_unpack(key).comm == *static_cast<const uint32_t *>(arg);
}

extern "C" void dr_coll_forget_comm(dr_mr_t *mr, uint32_t comm_id)
{
    (void)dr_mr_drop_unexpected(mr, of_comm, &comm_id);
}

extern "C" void dr_coll_set_keep_scratch(size_t bytes)
{
    set_keep_scratch(bytes);
}

namespace dualrail {
namespace coll {
size_t alltoall_scratch_held(); /* dr_alltoall.cc */
} // namespace coll
} // namespace dualrail

extern "C" size_t dr_coll_scratch_held(void)
{
    return allreduce_scratch.capacity() + data_scratch.capacity() + alltoall_scratch_held();
}

extern "C" int dr_allreduce_choose(const dr_allreduce_args_t *a)
{
    if (a == nullptr) {
        return DR_ALGO_RD;
    }
    return allreduce_choose(to_params(a));
}

extern "C" dr_status_t dr_bcast(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindBcast, err, errlen);
}

extern "C" dr_status_t dr_barrier(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    if (a == nullptr) {
        set_err(err, errlen, "barrier: no arguments");
        return DR_ERR_INVALID;
    }
    /* As dr_allreduce's small calls: the generic lambda gets c_api_run's MrTransport as
     * itself, so the barrier's fast mode calls ucx_mr without the vtable. */
    return c_api_run(
        mr, a->peer_ids, to_params(a, kKindBarrier), a->size > 1, err, errlen,
        [](auto &t, const Params &q, std::string *why) { return barrier_on(t, q, why); });
}

extern "C" dr_status_t dr_allgather(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindAllgather, err, errlen);
}

extern "C" int dr_bcast_choose(const dr_coll_args_t *a)
{
    return a == nullptr ? DR_BCAST_BINOMIAL : bcast_choose(to_params(a, kKindBcast));
}

extern "C" int dr_allgather_choose(const dr_coll_args_t *a)
{
    return a == nullptr ? DR_ALLGATHER_RING : allgather_choose(to_params(a, kKindAllgather));
}

extern "C" dr_status_t dr_reduce(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindReduce, err, errlen);
}

extern "C" dr_status_t dr_reduce_scatter_block(dr_mr_t *mr, const dr_coll_args_t *a, char *err,
                                               size_t errlen)
{
    return run_kind(mr, a, kKindReduceScatterBlock, err, errlen);
}

extern "C" dr_status_t dr_reduce_scatter(dr_mr_t *mr, const dr_coll_args_t *a, char *err,
                                         size_t errlen)
{
    return run_kind(mr, a, kKindReduceScatter, err, errlen);
}

extern "C" int dr_reduce_choose(const dr_coll_args_t *a)
{
    return a == nullptr ? DR_REDUCE_BINOMIAL : reduce_choose(to_params(a, kKindReduce));
}

extern "C" int dr_reduce_scatter_block_choose(const dr_coll_args_t *a)
{
    if (a == nullptr) {
        return DR_REDUCE_SCATTER_HALVING;
    }
    const size_t total = a->size > 0 && a->bytes > SIZE_MAX / (size_t)a->size
                             ? SIZE_MAX
                             : a->bytes * (size_t)(a->size > 0 ? a->size : 0);
    return reduce_scatter_choose(to_params(a, kKindReduceScatterBlock), total);
}

extern "C" dr_status_t dr_allgatherv(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindAllgatherv, err, errlen);
}

extern "C" dr_status_t dr_gather(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindGather, err, errlen);
}

extern "C" dr_status_t dr_scatter(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindScatter, err, errlen);
}

extern "C" dr_status_t dr_gatherv(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindGatherv, err, errlen);
}

extern "C" dr_status_t dr_scatterv(dr_mr_t *mr, const dr_coll_args_t *a, char *err, size_t errlen)
{
    return run_kind(mr, a, kKindScatterv, err, errlen);
}
