/*
 * Rank threads over ucx_mr contexts in one process (the tests that run the C API of a
 * collective end to end on loopback). A rank that returned from its collective keeps
 * driving its context until every rank has, as an MPI process does in its next MPI
 * calls (coll/dualrail progresses ucx_mr from opal_progress): its last small sends are
 * complete for it once copied, but on a fresh endpoint they may still wait in UCX for
 * the connection, which needs this side's progress too. A thread that stopped at once
 * left a peer waiting for them until its timeout (a flaky first call).
 */
#ifndef DUALRAIL_TESTS_SUPPORT_MR_THREADS_HPP
#define DUALRAIL_TESTS_SUPPORT_MR_THREADS_HPP

#include <sched.h>

#include <atomic>
#include <chrono>

#include "dualrail/ucx_mr.h"

namespace dualrail {
namespace test {

class RanksLeft {
  public:
    explicit RanksLeft(int ranks) : left_(ranks) {}
    /* This rank is done: progress mr until every rank is, at most limit_s seconds. */
    void done_then_progress(dr_mr_t *mr, double limit_s = 60)
    {
        left_.fetch_sub(1);
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
        while (left_.load() > 0 && std::chrono::steady_clock::now() < end) {
            if (dr_mr_progress(mr) == 0) {
                sched_yield();
            }
        }
    }

  private:
    std::atomic<int> left_;
};

} // namespace test
} // namespace dualrail

#endif
