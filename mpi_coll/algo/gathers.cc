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
        if (p.sendbuf != mine && p.counts[p.rank] != 0 && p.fail == DR_OK) {
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

namespace {

/* The checks of the rooted kinds: kind, the common ones, root, algorithm. */
dr_status_t check_rooted(const Params &p, int kind, std::string *err)
{
    if (p.kind != kind) {
        return reject(err, p.kind, "not a %s", kind_name(kind));
    }
    dr_status_t st = check_common(p, err);
    if (st != DR_OK) {
        return st;
    }
    if (p.root < 0 || p.root >= p.size) {
        return reject(err, kind, "root %d out of range for a communicator of %d", p.root, p.size);
    }
    if (p.algorithm != kAlgoAuto && p.algorithm != kGatherBinomial) {
        return reject(err, kind, "unknown algorithm %d", p.algorithm);
    }
    return DR_OK;
}

Params rooted_defaults(const Params &in)
{
    Params p = in;
    p.seq &= kSeqMask;
    p.segment_size = in.segment_size == 0 ? kDefaultSegmentBytes : in.segment_size;
    return p;
}

/* gatherv/scatterv at the root: counts and displacements present and not overflowing. */
dr_status_t check_v_root(const Params &p, size_t *total, std::string *err)
{
    if (p.counts == nullptr || p.displs == nullptr) {
        return reject(err, p.kind, "no counts or displacements at the root");
    }
    *total = 0;
    for (int r = 0; r < p.size; ++r) {
        if (*total + p.counts[r] < *total || p.displs[r] + p.counts[r] < p.displs[r]) {
            return reject(err, p.kind, "the counts and displacements overflow size_t");
        }
        *total += p.counts[r];
    }
    return DR_OK;
}

} // namespace

dr_status_t gather(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    dr_status_t st = check_rooted(in, kKindGather, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.count > SIZE_MAX / (size_t)in.size) {
        return reject(err, in.kind, "%d blocks of %zu bytes overflow size_t", in.size, in.count);
    }
    if (in.count == 0) {
        clear_err(err);
        return DR_OK;
    }
    const bool root = in.rank == in.root;
    if ((root && in.recvbuf == nullptr) || (!root && in.sendbuf == nullptr)) {
        return reject(err, in.kind, root ? "no receive buffer at the root" : "no send buffer");
    }
    Params p = rooted_defaults(in);
    if (root && p.sendbuf == nullptr) {
        p.sendbuf = static_cast<char *>(p.recvbuf) + (size_t)p.rank * p.count; /* in place */
    }
    if (p.size == 1) {
        if (p.sendbuf != p.recvbuf) {
            memcpy(p.recvbuf, p.sendbuf, p.count);
        }
        clear_err(err);
        return DR_OK;
    }
    Scratch local;
    return gather_binomial(t, p, scratch != nullptr ? *scratch : local, err);
}

dr_status_t scatter(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    dr_status_t st = check_rooted(in, kKindScatter, err);
    if (st != DR_OK) {
        return st;
    }
    if (in.count > SIZE_MAX / (size_t)in.size) {
        return reject(err, in.kind, "%d blocks of %zu bytes overflow size_t", in.size, in.count);
    }
    if (in.count == 0) {
        clear_err(err);
        return DR_OK;
    }
    const bool root = in.rank == in.root;
    if ((root && in.sendbuf == nullptr) || (!root && in.recvbuf == nullptr)) {
        return reject(err, in.kind, root ? "no send buffer at the root" : "no receive buffer");
    }
    Params p = rooted_defaults(in);
    const char *mine = static_cast<const char *>(p.sendbuf) + (size_t)p.rank * p.count;
    if (root && p.recvbuf == mine) {
        p.recvbuf = nullptr; /* in place: the root's block stays where it is */
    }
    if (p.size == 1) {
        if (p.recvbuf != nullptr) {
            memcpy(p.recvbuf, p.sendbuf, p.count);
        }
        clear_err(err);
        return DR_OK;
    }
    Scratch local;
    return scatter_binomial(t, p, scratch != nullptr ? *scratch : local, err);
}

dr_status_t gatherv(Transport &t, const Params &in, std::string *err)
{
    dr_status_t st = check_rooted(in, kKindGatherv, err);
    if (st != DR_OK) {
        return st;
    }
    Params p = rooted_defaults(in);
    if (p.rank == p.root) {
        size_t total = 0;
        if ((st = check_v_root(p, &total, err)) != DR_OK) {
            return st;
        }
        if (total == 0) {
            clear_err(err);
            return DR_OK;
        }
        if (p.recvbuf == nullptr) {
            return reject(err, p.kind, "no receive buffer at the root");
        }
        if (p.sendbuf == nullptr) {
            p.sendbuf = static_cast<char *>(p.recvbuf) + p.displs[p.rank]; /* in place */
        }
    } else if (p.count == 0) {
        clear_err(err); /* nothing of ours: the root expects nothing from us */
        return DR_OK;
    } else if (p.sendbuf == nullptr) {
        return reject(err, p.kind, "no send buffer");
    }
    if (p.size == 1) {
        if (p.sendbuf != static_cast<char *>(p.recvbuf) + p.displs[0]) {
            memcpy(static_cast<char *>(p.recvbuf) + p.displs[0], p.sendbuf, p.counts[0]);
        }
        clear_err(err);
        return DR_OK;
    }
    return gatherv_linear(t, p, err);
}

dr_status_t scatterv(Transport &t, const Params &in, std::string *err)
{
    dr_status_t st = check_rooted(in, kKindScatterv, err);
    if (st != DR_OK) {
        return st;
    }
    Params p = rooted_defaults(in);
    if (p.rank == p.root) {
        size_t total = 0;
        if ((st = check_v_root(p, &total, err)) != DR_OK) {
            return st;
        }
        if (total == 0) {
            clear_err(err);
            return DR_OK;
        }
        if (p.sendbuf == nullptr) {
            return reject(err, p.kind, "no send buffer at the root");
        }
        if (p.recvbuf == static_cast<const char *>(p.sendbuf) + p.displs[p.rank]) {
            p.recvbuf = nullptr; /* in place */
        }
    } else if (p.count == 0) {
        clear_err(err);
        return DR_OK;
    } else if (p.recvbuf == nullptr) {
        return reject(err, p.kind, "no receive buffer");
    }
    if (p.size == 1) {
        if (p.recvbuf != nullptr && p.counts[0] != 0) {
            memcpy(p.recvbuf, static_cast<const char *>(p.sendbuf) + p.displs[0], p.counts[0]);
        }
        clear_err(err);
        return DR_OK;
    }
    return scatterv_linear(t, p, err);
}

} // namespace coll
} // namespace dualrail
