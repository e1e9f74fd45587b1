/*
 * The dissemination barrier's entry over any Transport and its slow-call
 * counter; the algorithm (purpose, accepts, limits, round table) is the
 * template in barrier_dissemination.hpp.
 */
#include "algo/barrier_dissemination.hpp"

#include <atomic>

#include "algo/collectives.hpp"

namespace dualrail {
namespace coll {

namespace {
std::atomic<uint64_t> g_slow_calls{0};
} // namespace

void barrier_note_slow()
{
    g_slow_calls.fetch_add(1, std::memory_order_relaxed);
}

uint64_t barrier_slow_calls()
{
    return g_slow_calls.load(std::memory_order_relaxed);
}

dr_status_t barrier_dissemination(Transport &t, const Params &p, std::string *err)
{
    return barrier_dissemination_on(t, p, err);
}

} // namespace coll
} // namespace dualrail
