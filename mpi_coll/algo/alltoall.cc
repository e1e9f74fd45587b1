/*
 * Entries of alltoall and alltoallv (alltoall.hpp): argument checks, the
 * trivial cases, MPI_IN_PLACE, algorithm choice. As for the other kinds,
 * every check that can reject a call depends only on what all ranks pass
 * alike, so a rejected call is rejected everywhere and nobody is left
 * waiting; alltoallv's per-pair sizes are each rank's own, and a pair whose
 * two ends disagree fails at that pair (DR_ERR_TRUNCATED) and aborts the
 * call on every rank through the engine.
 */
#include "algo/alltoall.hpp"

#include <cstdint>
#include <cstring>

namespace dualrail {
namespace coll {

namespace {

size_t small_max(const Params &p)
{
    return p.small_max_bytes == 0 ? kDefaultAlltoallSmallMaxBytes : p.small_max_bytes;
}

Params defaults(const Params &in)
{
    Params p = in;
    p.seq &= kSeqMask;
    if (p.segment_size == 0) {
        p.segment_size = kDefaultSegmentBytes;
    }
    return p;
}

int window_of(int window)
{
    return window <= 0 ? kDefaultAlltoallWindow : window;
}

dr_status_t check_size(const Params &p, std::string *err)
{
    if (p.size > kAlltoallMaxRanks) {
        return reject(err, p.kind,
                      "at most %d ranks (the pairwise steps must fit the key), this "
                      "communicator has %d",
                      kAlltoallMaxRanks, p.size);
    }
    return DR_OK;
}

} // namespace

int alltoall_choose(const Params &p)
{
    if (p.algorithm == kAlltoallPairwise || p.algorithm == kAlltoallBruck) {
        return p.algorithm;
    }
    /* Bruck's rounds forward ~n/2 blocks log2 n times; with small blocks its log2 n
     * messages beat n - 1, with large ones the extra bytes cost more. */
    return p.count <= small_max(p) ? kAlltoallBruck : kAlltoallPairwise;
}

dr_status_t alltoall(Transport &t, const Params &in, int window, Scratch *scratch, std::string *err)
{
    if (in.kind != kKindAlltoall) {
        return reject(err, in.kind, "not an alltoall");
    }
    dr_status_t st = check_common(in, err);
    if (st != DR_OK || (st = check_size(in, err)) != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kAlltoallPairwise &&
        in.algorithm != kAlltoallBruck) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (in.count > SIZE_MAX / (size_t)in.size) {
        return reject(err, in.kind, "%d blocks of %zu bytes overflow size_t", in.size, in.count);
    }
    if (in.count == 0) {
        clear_err(err);
        return DR_OK;
    }
    if (in.recvbuf == nullptr) {
        return reject(err, in.kind, "no receive buffer");
    }
    Params p = defaults(in);
    if (p.sendbuf == p.recvbuf) {
        p.sendbuf = nullptr; /* in place */
    }
    if (p.size == 1) {
        if (p.sendbuf != nullptr) {
            memcpy(p.recvbuf, p.sendbuf, p.count);
        }
        clear_err(err);
        return DR_OK;
    }
    Scratch local;
    Scratch &s = scratch != nullptr ? *scratch : local;
    return alltoall_choose(p) == kAlltoallBruck
               ? alltoall_bruck(t, p, s, err)
               : alltoall_pairwise(t, p, window_of(window), s, err);
}

dr_status_t alltoallv(Transport &t, const Params &in, const VLayout &v, int window,
                      Scratch *scratch, std::string *err)
{
    if (in.kind != kKindAlltoallv) {
        return reject(err, in.kind, "not an alltoallv");
    }
    dr_status_t st = check_common(in, err);
    if (st != DR_OK || (st = check_size(in, err)) != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kAlltoallPairwise) {
        return reject(err, in.kind, "unknown algorithm %d (alltoallv runs pairwise)", in.algorithm);
    }
    Params p = defaults(in);
    if (p.sendbuf == p.recvbuf) {
        p.sendbuf = nullptr; /* in place */
    }
    const bool inplace = p.sendbuf == nullptr;
    if (v.rcounts == nullptr || v.rdispls == nullptr ||
        (!inplace && (v.scounts == nullptr || v.sdispls == nullptr))) {
        return reject(err, in.kind, "no counts or displacements");
    }
    bool any = false;
    for (int q = 0; q < p.size; ++q) {
        const size_t sc = inplace ? 0 : v.scounts[q];
        if (v.rcounts[q] > SIZE_MAX - v.rdispls[q] || (!inplace && sc > SIZE_MAX - v.sdispls[q])) {
            return reject(err, in.kind, "displacement + count overflows size_t for rank %d", q);
        }
        any = any || v.rcounts[q] != 0 || sc != 0;
    }
    /* No early return for "nothing to move here": another rank may still send to this one
     * (its counts are its own), and the schedule skips empty pairs on both sides anyway. */
    if (any && (p.recvbuf == nullptr || (!inplace && p.sendbuf == nullptr))) {
        return reject(err, in.kind, "no buffer");
    }
    if (p.size == 1) {
        if (!inplace && v.scounts[0] != v.rcounts[0]) {
            return reject(err, in.kind, "sends itself %zu bytes but expects %zu", v.scounts[0],
                          v.rcounts[0]);
        }
        if (!inplace && v.rcounts[0] != 0) {
            memcpy(static_cast<char *>(p.recvbuf) + v.rdispls[0],
                   static_cast<const char *>(p.sendbuf) + v.sdispls[0], v.rcounts[0]);
        }
        clear_err(err);
        return DR_OK;
    }
    Scratch local;
    return alltoallv_pairwise(t, p, v, window_of(window), scratch != nullptr ? *scratch : local,
                              err);
}

} // namespace coll
} // namespace dualrail
