/*
 * Allreduce entry: argument checks, the trivial cases, algorithm choice
 * (allreduce.hpp). The checks use only what every rank passes alike, so a
 * rejected call is rejected everywhere and nobody is left waiting.
 */
#include "algo/allreduce.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "algo/engine.hpp"
#include "algo/rd_math.hpp"
#include "algo/ring_math.hpp"

namespace dualrail {
namespace coll {

void normalize(Params &p)
{
    p.seq &= kSeqMask;
    if (p.sendbuf == p.recvbuf) {
        p.sendbuf = nullptr;
    }
    if (p.rd_max_bytes == 0) {
        p.rd_max_bytes = kDefaultRdMaxBytes;
    }
    if (p.segment_size == 0) {
        p.segment_size = kDefaultSegmentBytes;
    }
}

Params normalized(const Params &in)
{
    Params p = in;
    normalize(p);
    return p;
}

/* Whether normalized() would leave p as it is. */
static bool is_normalized(const Params &p)
{
    return p.seq == (p.seq & kSeqMask) && p.sendbuf != p.recvbuf && p.rd_max_bytes != 0 &&
           p.segment_size != 0;
}

int allreduce_choose(const Params &p)
{
    if (p.algorithm == kAlgoRing || p.algorithm == kAlgoRd) {
        return p.algorithm;
    }
    const size_t rd_max = p.rd_max_bytes == 0 ? kDefaultRdMaxBytes : p.rd_max_bytes;
    const size_t bytes =
        p.elem_size != 0 && p.count > SIZE_MAX / p.elem_size ? SIZE_MAX : p.count * p.elem_size;
    /*
     * Ring wins once bandwidth dominates; with fewer elements than ranks most
     * of its blocks are empty, and past kRingMaxRanks its steps do not fit a
     * key, so recursive doubling takes those.
     */
    if (bytes <= rd_max || p.count < (size_t)p.size || p.size > kRingMaxRanks) {
        return kAlgoRd;
    }
    return kAlgoRing;
}

static dr_status_t allreduce_run(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/* allreduce()'s verdict on its arguments, the same on every rank: DR_INPROGRESS for a call
 * that goes on (count >= 1), DR_OK for one with nothing to do, an error for one it rejects
 * (with the reason in *err). */
static dr_status_t allreduce_verdict(const Params &in, std::string *err)
{
    if (in.kind != kKindAllreduce) {
        return reject(err, in.kind, "not an allreduce");
    }
    dr_status_t common = check_common(in, err);
    if (common != DR_OK) {
        return common;
    }
    if (in.elem_size < 1 || in.elem_size > kMaxElemSize) {
        return reject(err, kKindAllreduce, "element size %zu outside 1..%zu", in.elem_size, kMaxElemSize);
    }
    if (in.reduce == nullptr) {
        return reject(err, kKindAllreduce, "no reduction function");
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kAlgoRing && in.algorithm != kAlgoRd) {
        return reject(err, kKindAllreduce, "unknown algorithm %d", in.algorithm);
    }
    if (in.count > SIZE_MAX / in.elem_size) {
        return reject(err, kKindAllreduce, "%zu elements of %zu bytes overflow size_t", in.count, in.elem_size);
    }
    if (in.count == 0) {
        if (err != nullptr) {
            err->clear();
        }
        return DR_OK;
    }
    if (in.recvbuf == nullptr) {
        return reject(err, kKindAllreduce, "no receive buffer");
    }
    if (in.size > kRingMaxRanks && allreduce_choose(in) == kAlgoRing) {
        return reject(err, kKindAllreduce,
                      "ring allreduce supports at most %d ranks (2(n-1) steps must fit the key's "
                      "12-bit step field), this communicator has %d",
                      kRingMaxRanks, in.size);
    }
    return DR_INPROGRESS;
}

bool allreduce_small_direct(const Params &p)
{
    /* allreduce_verdict's checks that can fail (a check added there belongs here too:
     * test_small_direct_checks in unit_algo_mr gives the C API every rejected argument),
     * then allreduce_run's choice. count is bounded first, so that no product overflows. */
    if (p.kind != kKindAllreduce || p.recvbuf == nullptr || p.reduce == nullptr || p.rank < 0 ||
        p.rank >= p.size || p.comm_id > kMaxCommId || p.elem_size < 1 ||
        p.elem_size > kMaxElemSize || p.count > kRdSmallMaxBytes ||
        (p.algorithm != kAlgoAuto && p.algorithm != kAlgoRd)) {
        return false;
    }
    return allreduce_rd_small_fits(p) && allreduce_choose(p) == kAlgoRd;
}

dr_status_t allreduce(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    const dr_status_t verdict = allreduce_verdict(in, err);
    if (verdict != DR_INPROGRESS) {
        return verdict;
    }
    /* The C API hands over normalized arguments: no copy of them then. */
    if (!is_normalized(in)) {
        const Params p = normalized(in);
        return allreduce_run(t, p, scratch, err);
    }
    return allreduce_run(t, in, scratch, err);
}

/* Checked and normalized arguments, count >= 1. */
static dr_status_t allreduce_run(Transport &t, const Params &p, Scratch *scratch, std::string *err)
{
    if (p.size == 1) {
        if (p.sendbuf != nullptr) {
            memcpy(p.recvbuf, p.sendbuf, p.count * p.elem_size);
        }
        if (err != nullptr) {
            err->clear();
        }
        return DR_OK;
    }
    const int algo = allreduce_choose(p); /* within kRingMaxRanks (allreduce_verdict) */
    Scratch local;
    Scratch &s = scratch != nullptr ? *scratch : local;
    if (algo == kAlgoRing) {
        return allreduce_ring(t, p, s, err);
    }
    return allreduce_rd_small_fits(p) ? allreduce_rd_small(t, p, s, err)
                                      : allreduce_rd(t, p, s, err);
}

dr_status_t allreduce_fail_early(Transport &t, const Params &in, dr_status_t st,
                                 const std::string &why, std::string *err)
{
    /* Params::fail: the schedule allreduce() picks stops in Engine::init and its finish()
     * tells the schedule's peers. Only where a schedule would run at all: peers that
     * rejected the call (the same verdict everywhere), one rank or count 0 listen for
     * nothing, and an abort nobody takes would wait in their transport for a later call of
     * the same key. */
    Params p = in;
    p.fail = st;
    p.fail_why = why.c_str();
    if (p.size >= 2 && allreduce_verdict(p, nullptr) == DR_INPROGRESS) {
        (void)allreduce(t, p, nullptr, nullptr);
    }
    if (err != nullptr) {
        try {
            *err = why;
        } catch (const std::bad_alloc &) {
        }
    }
    return st;
}

} // namespace coll
} // namespace dualrail
