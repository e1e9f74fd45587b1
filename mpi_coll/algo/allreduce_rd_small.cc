/*
 * Recursive doubling for small messages without the engine's set-up: the algorithm is
 * the template in allreduce_rd_small.hpp (purpose, accepts, limits, step table, buffer
 * rules); here its entry over any Transport, the check of what it takes and its counter.
 */
#include <atomic>

#include "algo/allreduce_rd_small.hpp"

namespace dualrail {
namespace coll {

namespace {
std::atomic<uint64_t> g_slow_calls{0};
} // namespace

void allreduce_rd_small_note_slow()
{
    g_slow_calls.fetch_add(1, std::memory_order_relaxed);
}

bool allreduce_rd_small_fits(const Params &p)
{
    return p.size >= 2 && rd_rounds(p.size) <= kRdSmallMaxRounds && p.count >= 1 &&
           p.count * p.elem_size <= kRdSmallMaxBytes && p.yield == nullptr && p.fail == DR_OK;
}

uint64_t allreduce_rd_small_slow_calls()
{
    return g_slow_calls.load(std::memory_order_relaxed);
}

dr_status_t allreduce_rd_small(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    return allreduce_rd_small_on(t, p, scratch, err);
}

} // namespace coll
} // namespace dualrail
