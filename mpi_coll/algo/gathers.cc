/*
 * Entry of allgatherv (gathers.hpp): argument checks, the trivial cases,
 * algorithm choice. Every check depends only on what all ranks pass alike
 * (counts and displs are the same on every rank), so a rejected call is
 * rejected everywhere and nobody is left waiting.
 */
#include "algo/gathers.hpp"

#include <cstdint>
#include <cstring>

#include "algo/ring_math.hpp"

namespace dualrail {
namespace coll {

namespace {

size_t small_max(const Params &p)
{
    return p.small_max_bytes == 0 ? kDefaultSmallMaxBytes : p.small_max_bytes;
}

} // namespace

int allgatherv_choose(const Params &p, size_t total)
{
    if (p.algorithm == kAllgathervRing || p.algorithm == kAllgathervBruck) {
        return p.algorithm;
    }
    /* log2(n) rounds against n - 1: small results are latency-bound (as allgather). */
    if (total <= small_max(p) || p.size > kRingMaxRanks) {
        return kAllgathervBruck;
    }
    return kAllgathervRing;
}

dr_status_t allgatherv(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    if (in.kind != kKindAllgatherv) {
        return reject(err, in.kind, "not an allgatherv");
    }
    dr_status_t st = check_common(in, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kAllgathervRing &&
        in.algorithm != kAllgathervBruck) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (in.counts == nullptr || in.displs == nullptr) {
        return reject(err, in.kind, "no counts or displacements");
    }
    size_t total = 0;
    for (int r = 0; r < in.size; ++r) {
        if (total + in.counts[r] < total || in.displs[r] + in.counts[r] < in.displs[r]) {
            return reject(err, in.kind, "the counts and displacements overflow size_t");
        }
        total += in.counts[r];
    }
    if (total == 0) {
        clear_err(err);
        return DR_OK;
    }
    if (in.recvbuf == nullptr) {
        return reject(err, in.kind, "no receive buffer");
    }
    Params p = in;
    p.seq &= kSeqMask;
    p.small_max_bytes = small_max(in);
    p.segment_size = in.segment_size == 0 ? kDefaultSegmentBytes : in.segment_size;
    char *mine = static_cast<char *>(p.recvbuf) + p.displs[p.rank];
    if (p.sendbuf == nullptr) {
        p.sendbuf = mine; /* in place: this rank's block is already where it belongs */
    }
    const int algo = allgatherv_choose(p, total);
    if (algo == kAllgathervRing && p.size > kRingMaxRanks) {
        return reject(err, p.kind, "ring supports at most %d ranks, this communicator has %d",
                      kRingMaxRanks, p.size);
    }
    if (p.size == 1 || algo == kAllgathervRing) {
        /* the ring gathers in recvbuf: this rank's block goes there first */
        if (p.sendbuf != mine && p.counts[p.rank] != 0) {
            memmove(mine, p.sendbuf, p.counts[p.rank]);
        }
        if (p.size == 1) {
            clear_err(err);
            return DR_OK;
        }
        return allgatherv_ring(t, p, err);
    }
    Scratch local;
    return allgatherv_bruck(t, p, scratch != nullptr ? *scratch : local, err);
}

} // namespace coll
} // namespace dualrail
