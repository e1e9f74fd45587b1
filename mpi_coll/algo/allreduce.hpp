/*
 * Allreduce over a Transport: the C++ entry of the algorithm layer. No MPI
 * and no UCX here; dr_coll.cc wraps it in the C API the Open MPI glue calls.
 *
 *   allreduce()        checks and normalizes the arguments, handles count 0
 *                      and one rank, picks ring or recursive doubling;
 *   allreduce_ring()   allreduce_ring.cc
 *   allreduce_rd()     allreduce_rd.cc
 *
 * Every rank of the communicator calls allreduce() with the same count,
 * elem_size, algorithm, rd_max_bytes, segment_size, comm_id and seq; the
 * checks depend on those alone (and on rank/size), so all ranks agree on
 * whether to run and which algorithm.
 */
#ifndef DUALRAIL_ALGO_ALLREDUCE_HPP
#define DUALRAIL_ALGO_ALLREDUCE_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/transport.hpp"
#include "dualrail/status.h"

namespace dualrail {
namespace coll {

/* inout[i] = in[i] op inout[i] over count elements; the op is commutative. */
using ReduceFn = void (*)(const void *in, void *inout, size_t count, void *arg);

enum Algorithm : int { kAlgoAuto = 0, kAlgoRing = 1, kAlgoRd = 2 };

constexpr size_t kDefaultRdMaxBytes = 64 * 1024;
constexpr size_t kDefaultSegmentBytes = 1024 * 1024;
constexpr size_t kMaxElemSize = 64;
constexpr uint32_t kMaxCommId = 0xffff;
constexpr uint32_t kSeqMask = 0xfffff;

struct Params {
    const void *sendbuf = nullptr; /* nullptr or == recvbuf: in place */
    void *recvbuf = nullptr;
    size_t count = 0;
    size_t elem_size = 0;
    ReduceFn reduce = nullptr;
    void *reduce_arg = nullptr;
    int rank = 0;
    int size = 0;
    uint32_t comm_id = 0;
    uint32_t seq = 0; /* taken mod 2^20 */
    int algorithm = kAlgoAuto;
    size_t rd_max_bytes = kDefaultRdMaxBytes;   /* 0: the default */
    size_t segment_size = kDefaultSegmentBytes; /* 0: the default */
    double timeout = -1;                        /* s without progress; <= 0: none */
    void (*idle)(void *arg) = nullptr;
    void *idle_arg = nullptr;
};

/*
 * Scratch memory for incoming data, 64-byte aligned. Owned by the caller so
 * that it can be kept between calls (a per-communicator context); reserve()
 * only allocates when the buffer must grow. Not thread safe.
 */
/* Scratch a caller keeps between calls, at most (dr_allreduce's per-thread scratch). */
constexpr size_t kKeepScratch = 1u << 20;

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

  private:
    void *buf_ = nullptr;
    size_t cap_ = 0;
};

/* p with the sequence number masked, sendbuf == recvbuf turned into nullptr (in place),
 * and zero rd_max_bytes / segment_size replaced by the defaults. */
Params normalized(const Params &in);

/* What allreduce() runs for p: kAlgoRing or kAlgoRd (a forced choice is returned as is). */
int allreduce_choose(const Params &p);

/*
 * Blocking allreduce. DR_OK, or an error with a one-line reason in *err
 * (which names the peer rank involved). scratch may be nullptr (a buffer is
 * allocated for the call). Never throws.
 */
dr_status_t allreduce(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/* The algorithms, for arguments allreduce() has checked and normalized (size >= 2, count >= 1). */
dr_status_t allreduce_ring(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t allreduce_rd(Transport &t, const Params &p, Scratch &scratch, std::string *err);

} // namespace coll
} // namespace dualrail

#endif
