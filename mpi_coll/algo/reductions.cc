/*
 * Entries of reduce, reduce_scatter_block and reduce_scatter
 * (reductions.hpp): argument checks, the trivial cases, algorithm choice.
 * As for the allreduce, every check depends only on what all ranks pass
 * alike, so a rejected call is rejected everywhere and nobody is left
 * waiting.
 */
#include "algo/reductions.hpp"

#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "algo/chain_math.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

namespace {

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

/* The checks of every reducing kind: element size, op, kind, the common ones. */
dr_status_t check_reducing(const Params &p, int kind, std::string *err)
{
    if (p.kind != kind) {
        return reject(err, p.kind, "not a %s", kind_name(kind));
    }
    dr_status_t st = check_common(p, err);
    if (st != DR_OK) {
        return st;
    }
    if (p.elem_size < 1 || p.elem_size > kMaxElemSize) {
        return reject(err, kind, "element size %zu outside 1..%zu", p.elem_size, kMaxElemSize);
    }
    if (p.reduce == nullptr) {
        return reject(err, kind, "no reduction function");
    }
    return DR_OK;
}

/* reduce_scatter(_block) over checked blocks: choice, one rank, the algorithms. */
dr_status_t run_scatter(Transport &t, const Params &in, const Blocks &b, Scratch *scratch,
                        std::string *err)
{
    Params p = defaults(in);
    const size_t esz = p.elem_size;
    if (p.sendbuf == nullptr) {
        p.sendbuf = p.recvbuf; /* in place: the input is in recvbuf, the result goes to its start */
    }
    const int algo = reduce_scatter_choose(p, b.total * esz);
    if (algo == kReduceScatterRing && p.size > kRingMaxRanks) {
        return reject(err, p.kind, "ring supports at most %d ranks, this communicator has %d",
                      kRingMaxRanks, p.size);
    }
    if (p.size == 1) {
        if (p.sendbuf != p.recvbuf) {
            memcpy(p.recvbuf, p.sendbuf, b.total * esz);
        }
        clear_err(err);
        return DR_OK;
    }
    Scratch local;
    Scratch &s = scratch != nullptr ? *scratch : local;
    return algo == kReduceScatterRing ? reduce_scatter_ring(t, p, b, p.recvbuf, s, err)
                                      : reduce_scatter_halving(t, p, b, p.recvbuf, s, err);
}

} // namespace

int reduce_choose(const Params &p)
{
    if (p.algorithm == kReduceBinomial || p.algorithm == kReduceRabenseifner ||
        p.algorithm == kReduceChain) {
        return p.algorithm;
    }
    const size_t bytes =
        p.elem_size != 0 && p.count > SIZE_MAX / p.elem_size ? SIZE_MAX : p.count * p.elem_size;
    /* The tree sends the message log2(n) times along its deepest path; Rabenseifner
     * puts 1.5-2x the message through the root's link whatever n, the chain once plus
     * its pipe's fill (n - 2 segments), which wins from n segments on (chain_wins).
     * With fewer elements than ranks most blocks would be empty, and past kRingMaxRanks
     * the ring's steps do not fit a key. */
    if (bytes <= small_max(p) || p.count < (size_t)p.size) {
        return kReduceBinomial;
    }
    if (p.elem_size != 0 &&
        chain_wins(p.count, p.elem_size, p.size,
                   p.segment_size == 0 ? kDefaultSegmentBytes : p.segment_size)) {
        return kReduceChain;
    }
    return p.size > kRingMaxRanks ? kReduceBinomial : kReduceRabenseifner;
}

int reduce_scatter_choose(const Params &p, size_t total_bytes)
{
    if (p.algorithm == kReduceScatterRing || p.algorithm == kReduceScatterHalving) {
        return p.algorithm;
    }
    /* log2(n) rounds (+2 folding) against n - 1 for the ring, for about the same volume
     * on power-of-two sizes: small inputs are latency-bound. The ring keeps every link
     * busy with segments for large ones. */
    if (total_bytes <= small_max(p) || p.size > kRingMaxRanks) {
        return kReduceScatterHalving;
    }
    return kReduceScatterRing;
}

dr_status_t reduce(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    dr_status_t st = check_reducing(in, kKindReduce, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.root < 0 || in.root >= in.size) {
        return reject(err, in.kind, "root %d out of range for a communicator of %d", in.root,
                      in.size);
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kReduceBinomial &&
        in.algorithm != kReduceRabenseifner && in.algorithm != kReduceChain) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (in.count > SIZE_MAX / in.elem_size) {
        return reject(err, in.kind, "%zu elements of %zu bytes overflow size_t", in.count,
                      in.elem_size);
    }
    if (in.count == 0) {
        clear_err(err);
        return DR_OK;
    }
    const bool root = in.rank == in.root;
    if (root && in.recvbuf == nullptr) {
        return reject(err, in.kind, "no receive buffer at the root");
    }
    if (!root && in.sendbuf == nullptr) {
        return reject(err, in.kind, "no send buffer (MPI_IN_PLACE is for the root only)");
    }
    Params p = defaults(in);
    if (root && p.sendbuf == nullptr) {
        p.sendbuf = p.recvbuf; /* in place: the root's input is in recvbuf */
    }
    const int algo = reduce_choose(p);
    if (algo == kReduceRabenseifner && p.size > kRingMaxRanks) {
        return reject(err, p.kind,
                      "rabenseifner supports at most %d ranks, this communicator has %d",
                      kRingMaxRanks, p.size);
    }
    if (p.size == 1) {
        if (p.sendbuf != p.recvbuf) {
            memcpy(p.recvbuf, p.sendbuf, p.count * p.elem_size);
        }
        clear_err(err);
        return DR_OK;
    }
    Scratch local;
    Scratch &s = scratch != nullptr ? *scratch : local;
    return algo == kReduceBinomial ? reduce_binomial(t, p, s, err)
           : algo == kReduceChain  ? reduce_chain(t, p, s, err)
                                   : reduce_rabenseifner(t, p, s, err);
}

dr_status_t reduce_scatter_block(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    dr_status_t st = check_reducing(in, kKindReduceScatterBlock, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kReduceScatterRing &&
        in.algorithm != kReduceScatterHalving) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (in.count > SIZE_MAX / in.elem_size / (size_t)in.size) {
        return reject(err, in.kind, "%d blocks of %zu elements of %zu bytes overflow size_t",
                      in.size, in.count, in.elem_size);
    }
    if (in.count == 0) {
        clear_err(err);
        return DR_OK;
    }
    if (in.recvbuf == nullptr) {
        return reject(err, in.kind, "no receive buffer");
    }
    std::vector<Span> span((size_t)in.size);
    for (int r = 0; r < in.size; ++r) {
        span[(size_t)r] = Span{(size_t)r * in.count, in.count};
    }
    const Blocks b{span.data(), in.size, in.count * (size_t)in.size, in.count};
    return run_scatter(t, in, b, scratch, err);
}

dr_status_t reduce_scatter(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    dr_status_t st = check_reducing(in, kKindReduceScatter, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kReduceScatterRing &&
        in.algorithm != kReduceScatterHalving) {
        return reject(err, in.kind, "unknown algorithm %d", in.algorithm);
    }
    if (in.counts == nullptr) {
        return reject(err, in.kind, "no counts");
    }
    std::vector<Span> span((size_t)in.size);
    size_t total = 0, max = 0;
    for (int r = 0; r < in.size; ++r) {
        const size_t c = in.counts[r];
        if (c % in.elem_size != 0) {
            return reject(err, in.kind, "rank %d's %zu bytes are not whole elements of %zu", r, c,
                          in.elem_size);
        }
        if (total + c < total) {
            return reject(err, in.kind, "the counts overflow size_t");
        }
        span[(size_t)r] = Span{total / in.elem_size, c / in.elem_size};
        total += c;
        max = c / in.elem_size > max ? c / in.elem_size : max;
    }
    if (total == 0) {
        clear_err(err);
        return DR_OK;
    }
    if (in.recvbuf == nullptr && in.counts[in.rank] != 0) {
        return reject(err, in.kind, "no receive buffer");
    }
    if (in.sendbuf == nullptr && in.recvbuf == nullptr) {
        return reject(err, in.kind, "in place without a buffer");
    }
    const Blocks b{span.data(), in.size, total / in.elem_size, max};
    return run_scatter(t, in, b, scratch, err);
}

} // namespace coll
} // namespace dualrail
