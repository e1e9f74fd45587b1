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

#include "algo/ring_math.hpp"

namespace dualrail {
namespace coll {

Scratch::~Scratch()
{
    free(buf_);
}

void Scratch::release()
{
    free(buf_);
    buf_ = nullptr;
    cap_ = 0;
}

void Scratch::abandon()
{
    if (buf_ == nullptr) {
        return;
    }
    /* Kept reachable, so leak checkers see a parked buffer, not a leak. */
    static std::mutex mu;
    static std::vector<void *> *parked = new std::vector<void *>;
    std::lock_guard<std::mutex> lk(mu);
    try {
        parked->push_back(buf_);
    } catch (const std::bad_alloc &) {
        /* unreachable then, but still never freed: that is what matters */
    }
    buf_ = nullptr;
    cap_ = 0;
}

void *Scratch::reserve(size_t bytes)
{
    if (bytes <= cap_ && buf_ != nullptr) {
        return buf_;
    }
    free(buf_);
    buf_ = nullptr;
    cap_ = 0;
    const size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded < bytes) {
        return nullptr;
    }
    buf_ = aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (buf_ != nullptr) {
        cap_ = rounded;
    }
    return buf_;
}

Params normalized(const Params &in)
{
    Params p = in;
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
    return p;
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

static dr_status_t reject(std::string *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static dr_status_t reject(std::string *err, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (err != nullptr) {
        try {
            *err = std::string("allreduce: ") + line;
        } catch (const std::bad_alloc &) {
        }
    }
    return DR_ERR_INVALID;
}

dr_status_t allreduce(Transport &t, const Params &in, Scratch *scratch, std::string *err)
{
    if (in.size < 1 || in.rank < 0 || in.rank >= in.size) {
        return reject(err, "rank %d out of range for a communicator of %d", in.rank, in.size);
    }
    if (in.elem_size < 1 || in.elem_size > kMaxElemSize) {
        return reject(err, "element size %zu outside 1..%zu", in.elem_size, kMaxElemSize);
    }
    if (in.reduce == nullptr) {
        return reject(err, "no reduction function");
    }
    if (in.comm_id > kMaxCommId) {
        return reject(err, "communicator id %u does not fit the key's 16 bits", in.comm_id);
    }
    if (in.algorithm != kAlgoAuto && in.algorithm != kAlgoRing && in.algorithm != kAlgoRd) {
        return reject(err, "unknown algorithm %d", in.algorithm);
    }
    if (in.count > SIZE_MAX / in.elem_size) {
        return reject(err, "%zu elements of %zu bytes overflow size_t", in.count, in.elem_size);
    }
    if (in.count == 0) {
        if (err != nullptr) {
            err->clear();
        }
        return DR_OK;
    }
    if (in.recvbuf == nullptr) {
        return reject(err, "no receive buffer");
    }
    Params p = normalized(in);
    if (p.size == 1) {
        if (p.sendbuf != nullptr) {
            memcpy(p.recvbuf, p.sendbuf, p.count * p.elem_size);
        }
        if (err != nullptr) {
            err->clear();
        }
        return DR_OK;
    }
    const int algo = allreduce_choose(p);
    if (algo == kAlgoRing && p.size > kRingMaxRanks) {
        return reject(err,
                      "ring allreduce supports at most %d ranks (2(n-1) steps must fit the key's "
                      "12-bit step field), this communicator has %d",
                      kRingMaxRanks, p.size);
    }
    Scratch local;
    Scratch &s = scratch != nullptr ? *scratch : local;
    return algo == kAlgoRing ? allreduce_ring(t, p, s, err) : allreduce_rd(t, p, s, err);
}

} // namespace coll
} // namespace dualrail
