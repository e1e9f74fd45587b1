/* What every collective shares (coll.hpp): scratch memory and the first argument checks. */
#include "algo/coll.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace dualrail {
namespace coll {

const char *kind_name(int kind)
{
    switch (kind) {
    case kKindAllreduce:
        return "allreduce";
    case kKindBcast:
        return "bcast";
    case kKindBarrier:
        return "barrier";
    case kKindAllgather:
        return "allgather";
    case kKindReduce:
        return "reduce";
    case kKindReduceScatterBlock:
        return "reduce_scatter_block";
    case kKindReduceScatter:
        return "reduce_scatter";
    case kKindAllgatherv:
        return "allgatherv";
    case kKindGather:
        return "gather";
    case kKindGatherv:
        return "gatherv";
    case kKindScatter:
        return "scatter";
    case kKindScatterv:
        return "scatterv";
    case kKindAlltoall:
        return "alltoall";
    case kKindAlltoallv:
        return "alltoallv";
    default:
        return "collective";
    }
}

namespace {
std::atomic<size_t> g_keep_scratch{kDefaultKeepScratch};
} // namespace

size_t keep_scratch()
{
    return g_keep_scratch.load(std::memory_order_relaxed);
}

void set_keep_scratch(size_t bytes)
{
    g_keep_scratch.store(bytes, std::memory_order_relaxed);
}

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

dr_status_t reject(std::string *err, int kind, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (err != nullptr) {
        try {
            *err = std::string(kind_name(kind)) + ": " + line;
        } catch (const std::bad_alloc &) {
        }
    }
    return DR_ERR_INVALID;
}

void clear_err(std::string *err)
{
    if (err != nullptr) {
        err->clear();
    }
}

dr_status_t check_common(const Params &p, std::string *err)
{
    if (p.kind < 0 || p.kind >= DR_KIND_COUNT) {
        return reject(err, p.kind, "unknown collective kind %d", p.kind);
    }
    if (p.size < 1 || p.rank < 0 || p.rank >= p.size) {
        return reject(err, p.kind, "rank %d out of range for a communicator of %d", p.rank, p.size);
    }
    if (p.comm_id > kMaxCommId) {
        return reject(err, p.kind, "communicator id %u does not fit the key's 16 bits", p.comm_id);
    }
    if (p.kind == kKindBcast && (p.root < 0 || p.root >= p.size)) {
        return reject(err, p.kind, "root %d out of range for a communicator of %d", p.root, p.size);
    }
    return DR_OK;
}

} // namespace coll
} // namespace dualrail
