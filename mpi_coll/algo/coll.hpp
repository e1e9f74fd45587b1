/*
 * What every collective of the algorithm layer shares: the collective kinds,
 * the parameters of one call, scratch memory, and the argument checks every
 * entry makes before anything moves. No MPI and no UCX here.
 *
 * Params is one struct for every kind: each collective reads the fields it
 * needs (allreduce: count/elem_size/reduce/rd_max_bytes; bcast: root and
 * count bytes; allgather: count bytes per rank; barrier: none of them;
 * reduce: count elements, elem_size, reduce, root; reduce_scatter_block:
 * count elements per rank; reduce_scatter: counts), and
 * the engine reads kind/comm_id/seq (the key), rank/size (error lines),
 * timeout and idle (waits).
 */
#ifndef DUALRAIL_ALGO_COLL_HPP
#define DUALRAIL_ALGO_COLL_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "dualrail/key.h"
#include "dualrail/status.h"

namespace dualrail {
namespace coll {

/* The collective a schedule runs (the key's kind field, dualrail/key.h). */
enum Kind : int {
    kKindAllreduce = DR_KIND_ALLREDUCE,
    kKindBcast = DR_KIND_BCAST,
    kKindBarrier = DR_KIND_BARRIER,
    kKindAllgather = DR_KIND_ALLGATHER,
    kKindReduce = DR_KIND_REDUCE,
    kKindReduceScatterBlock = DR_KIND_REDUCE_SCATTER_BLOCK,
    kKindReduceScatter = DR_KIND_REDUCE_SCATTER,
    kKindAllgatherv = DR_KIND_ALLGATHERV,
    kKindGather = DR_KIND_GATHER,
    kKindGatherv = DR_KIND_GATHERV,
    kKindScatter = DR_KIND_SCATTER,
    kKindScatterv = DR_KIND_SCATTERV,
    kKindAlltoall = DR_KIND_ALLTOALL,
    kKindAlltoallv = DR_KIND_ALLTOALLV,
};

/* "allreduce", "bcast", ...: how error lines name the collective. */
const char *kind_name(int kind);

/* inout[i] = in[i] op inout[i] over count elements; the op is commutative. */
using ReduceFn = void (*)(const void *in, void *inout, size_t count, void *arg);

/* Algorithm ids per kind; 0 is always "choose". */
enum Algorithm : int { kAlgoAuto = 0, kAlgoRing = 1, kAlgoRd = 2 };
enum BcastAlgorithm : int { kBcastBinomial = 1, kBcastScatterAllgather = 2, kBcastChain = 3 };
enum AllgatherAlgorithm : int { kAllgatherRing = 1, kAllgatherRd = 2, kAllgatherBruck = 3 };
enum ReduceAlgorithm : int { kReduceBinomial = 1, kReduceRabenseifner = 2, kReduceChain = 3 };
/* reduce_scatter_block and reduce_scatter */
enum ReduceScatterAlgorithm : int { kReduceScatterRing = 1, kReduceScatterHalving = 2 };

constexpr size_t kDefaultRdMaxBytes = 64 * 1024;
constexpr size_t kDefaultSegmentBytes = 1024 * 1024;
/* bcast: binomial tree up to this many bytes; allgather: rd/Bruck up to this many in all. */
constexpr size_t kDefaultSmallMaxBytes = 64 * 1024;
constexpr size_t kMaxElemSize = 64;
constexpr uint32_t kMaxCommId = 0xffff;
constexpr uint32_t kSeqMask = (1u << DR_KEY_SEQ_BITS) - 1;

struct Params {
    int kind = kKindAllreduce;
    const void *sendbuf = nullptr; /* nullptr or == recvbuf: in place */
    void *recvbuf = nullptr;       /* bcast: the buffer */
    size_t count = 0;              /* allreduce: elements; bcast, allgather (per rank): bytes */
    size_t elem_size = 0;          /* allreduce */
    ReduceFn reduce = nullptr;
    void *reduce_arg = nullptr;
    int root = 0; /* bcast */
    int rank = 0;
    int size = 0;
    uint32_t comm_id = 0;
    uint32_t seq = 0; /* per communicator and kind, taken mod 2^16 */
    int algorithm = kAlgoAuto;
    size_t rd_max_bytes = kDefaultRdMaxBytes;       /* allreduce; 0: the default */
    size_t small_max_bytes = kDefaultSmallMaxBytes; /* bcast, allgather; 0: the default */
    size_t segment_size = kDefaultSegmentBytes;     /* 0: the default */
    double timeout = -1;                            /* s without progress; <= 0: none */
    void (*idle)(void *arg) = nullptr;
    void *idle_arg = nullptr;
    /* v variants: size entries, in bytes (reduce_scatter: each rank's block of the
     * result, a multiple of elem_size; allgatherv, gatherv, scatterv: each rank's block) */
    const size_t *counts = nullptr;
    const size_t *displs = nullptr; /* byte offsets of the blocks (allgatherv, gatherv, scatterv) */
    /* A non-blocking collective's task (dr_coll_nb.cc): called at every wait that saw
     * nothing of this call complete, instead of idling, to hand the thread back to the
     * progress callback that resumes the task. nullptr: the blocking waits as before. */
    void (*yield)(void *arg) = nullptr;
    void *yield_arg = nullptr;
    /* Not DR_OK: this rank cannot take part (the glue could not stage its buffers). The
     * schedule stops in Engine::init with this status and reason (fail_why), before any
     * transfer, and its finish() tells the peers the schedule would have exchanged with, so
     * they return an error instead of waiting for this rank. Nothing reads or writes the
     * buffers: they are only checked as on the other ranks (the caller's own pointers). */
    dr_status_t fail = DR_OK;
    const char *fail_why = nullptr;
};

/*
 * Scratch memory for incoming data, 64-byte aligned. Owned by the caller so
 * that it can be kept between calls (a per-communicator context); reserve()
 * only allocates when the buffer must grow. Not thread safe.
 */
/*
 * Scratch a blocking caller keeps between calls, at most (the per-thread scratch of
 * dr_coll.cc and dr_alltoall.cc; dr_coll_set_keep_scratch sets it). Memory given back is
 * mapped afresh by a later call, and its first write costs a page fault per 4 KiB, in the
 * call's critical path: on the lab's VM the ring reduce-scatter's 12 MiB of partial results
 * at 16 MiB on 4 ranks took ~3070 faults per call and rank, and its calls ran ~25 % slower
 * until glibc stopped mapping afresh, six calls on (README, "Kept scratch"). A larger call's
 * scratch is given back when it returns.
 */
constexpr size_t kDefaultKeepScratch = 64u << 20;
size_t keep_scratch();
void set_keep_scratch(size_t bytes);
/* A pooled non-blocking task keeps at most this much: the pool holds a task for every
 * call outstanding at once. */
constexpr size_t kKeepTaskScratch = 1u << 20;

class Scratch {
  public:
    Scratch() = default;
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    ~Scratch();
    /* nullptr when out of memory (the old buffer is gone then too). */
    void *reserve(size_t bytes);
    size_t capacity() const { return cap_; }
    /*
     * Give the buffer up without freeing it: after an error a send that
     * cannot be cancelled may still read it (the transport retries it). It is
     * parked for the life of the process; the next reserve() allocates anew.
     */
    void abandon();
    /* Free the buffer (the next reserve() allocates anew). */
    void release();
    /* release() when the buffer holds more than keep bytes. */
    void trim(size_t keep)
    {
        if (cap_ > keep) {
            release();
        }
    }

  private:
    void *buf_ = nullptr;
    size_t cap_ = 0;
};

/* DR_ERR_INVALID with "<kind>: <reason>" in *err (may be nullptr). */
dr_status_t reject(std::string *err, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));

/* The checks every kind makes first (rank, size, communicator id, kind, root). */
dr_status_t check_common(const Params &p, std::string *err);

/* *err = "" (a successful call leaves no reason). */
void clear_err(std::string *err);

} // namespace coll
} // namespace dualrail

#endif
