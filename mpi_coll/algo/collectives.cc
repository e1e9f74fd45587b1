/*
 * Entries of bcast, barrier and allgather (collectives.hpp): argument checks,
 * the trivial cases, algorithm choice. As for the allreduce, every check
 * depends only on what all ranks pass alike, so a rejected call is rejected
 * everywhere and nobody is left waiting.
 */
#include "algo/collectives.hpp"

#include <cstdint>
#include <cstring>

#include "algo/barrier_dissemination.hpp"
#include "algo/chain_math.hpp"
#include "algo/ring_math.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

namespace {

size_t total_bytes(const Params &p)
{
    return p.size > 0 && p.count > SIZE_MAX / (size_t)p.size ? SIZE_MAX : p.count * (size_t)p.size;
}

size_t small_max(const Params &p)
{
    return p.small_max_bytes == 0 ? kDefaultSmallMaxBytes : p.small_max_bytes;
}

Params defaults(const Params &in)
{
    Params p = in;
    p.seq &= kSeqMask;
    p.small_max_bytes = small_max(in);
    if (p.segment_size == 0) {
        p.segment_size = kDefaultSegmentBytes;
    }
    return p;
}

} // namespace

int bcast_choose(const Params &p)
{
    if (p.algorithm == kBcastBinomial || p.algorithm == kBcastScatterAllgather ||
        p.algorithm == kBcastChain) {
        return p.algorithm;
    }
    /* The tree sends the whole message log2(n) times along its deepest path; scatter +
     * allgather moves about 2x the message through every rank's link whatever n, and the
     * chain once plus its pipe's fill (n - 2 segments), which wins from n segments on
     * (chain_wins). With fewer bytes than ranks most blocks would be empty, and past
     * kRingMaxRanks the ring's steps do not fit a key. */
    if (p.count <= small_max(p) || p.count < (size_t)p.size) {
        return kBcastBinomial;
    }
    if (chain_wins(p.count, 1, p.size,
                   p.segment_size == 0 ? kDefaultSegmentBytes : p.segment_size)) {
        return kBcastChain;
    }
    return p.size > kRingMaxRanks ? kBcastBinomial : kBcastScatterAllgather;
}

int allgather_choose(const Params &p)
{
    if (p.algorithm == kAllgatherRing || p.algorithm == kAllgatherRd ||
        p.algorithm == kAllgatherBruck) {
        return p.algorithm;
    }
    /* log2(n) rounds against n - 1 for the ring: the small cases are latency-bound.
     * Recursive doubling needs no scratch but a power of two; Bruck copies once. */
    if (total_bytes(p) <= small_max(p) || p.size > kRingMaxRanks) {
        return is_pow2(p.size) ? kAllgatherRd : kAllgatherBruck;
    }
    return kAllgatherRing;
}

dr_status_t bcast(Transport &t, const Params &in, std::string *err)
{
    if (in.kind != kKindBcast) {
        return reject(err, in.kind, "not a bcast");
    }
    dr_status_t st = check_common(in, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kBcastBinomial &&
        in.algorithm != kBcastScatterAllgather && in.algorithm != kBcastChain) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (in.count == 0 || in.size == 1) {
        clear_err(err);
        return DR_OK;
    }
    if (in.recvbuf == nullptr) {
        return reject(err, in.kind, "no buffer");
    }
    const Params p = defaults(in);
    const int algo = bcast_choose(p);
    if (algo == kBcastScatterAllgather && p.size > kRingMaxRanks) {
        return reject(err, in.kind,
                      "scatter-allgather supports at most %d ranks (its ring steps must fit "
                      "the key), this communicator has %d",
                      kRingMaxRanks, p.size);
    }
    return algo == kBcastBinomial ? bcast_binomial(t, p, err)
           : algo == kBcastChain  ? bcast_chain(t, p, err)
                                  : bcast_scatter_allgather(t, p, err);
}

dr_status_t barrier(Transport &t, const Params &in, std::string *err)
{
    return barrier_on(t, in, err);
}

dr_status_t allgather(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    if (in.kind != kKindAllgather) {
        return reject(err, in.kind, "not an allgather");
    }
    dr_status_t st = check_common(in, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kAllgatherRing &&
        in.algorithm != kAllgatherRd && in.algorithm != kAllgatherBruck) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (total_bytes(in) == SIZE_MAX) {
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
    char *mine = static_cast<char *>(p.recvbuf) + (size_t)p.rank * p.count;
    if (p.sendbuf == mine) {
        p.sendbuf = nullptr; /* in place: this rank's block is already where it belongs */
    }
    const int algo = allgather_choose(p);
    if (algo == kAllgatherRd && !is_pow2(p.size)) {
        return reject(err, p.kind, "recursive doubling needs a power-of-two size, not %d", p.size);
    }
    if (algo == kAllgatherRing && p.size > kRingMaxRanks) {
        return reject(err, p.kind, "ring supports at most %d ranks, this communicator has %d",
                      kRingMaxRanks, p.size);
    }
    if (p.size == 1) {
        if (p.sendbuf != nullptr) {
            memcpy(p.recvbuf, p.sendbuf, p.count);
        }
        clear_err(err);
        return DR_OK;
    }
    if (algo == kAllgatherBruck) {
        Scratch local;
        return allgather_bruck(t, p, scratch != nullptr ? *scratch : local, err);
    }
    /* Ring and recursive doubling gather in recvbuf: this rank's block goes there first. */
    if (p.sendbuf != nullptr && p.fail == DR_OK) {
        memmove(mine, p.sendbuf, p.count);
    }
    return algo == kAllgatherRing ? allgather_ring(t, p, err) : allgather_rd(t, p, err);
}

} // namespace coll
} // namespace dualrail
