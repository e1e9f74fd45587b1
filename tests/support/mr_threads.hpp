/*
 * Rank threads over ucx_mr contexts in one process (the tests that run the C API of a
 * collective end to end on loopback). A rank that returned from its collective keeps
 * driving its context until every rank has, as an MPI process does in its next MPI
 * calls (coll/dualrail progresses ucx_mr from opal_progress): its last small sends are
 * complete for it once copied, but on a fresh endpoint they may still wait in UCX for
 * the connection, which needs this side's progress too. A thread that stopped at once
 * left a peer waiting for them until its timeout (a flaky first call).
 * And the four contexts themselves (MrWorld), made and connected as a cmocka group
 * set-up. Include after cmocka.h.
 */
#ifndef DUALRAIL_TESTS_SUPPORT_MR_THREADS_HPP
#define DUALRAIL_TESTS_SUPPORT_MR_THREADS_HPP

#include <sched.h>

#include <atomic>
#include <chrono>

#include "loopback_config.h"
#include "dualrail/ucx_mr.h"

namespace dualrail {
namespace test {

constexpr int kWorldRanks = 4;

/* kWorldRanks ucx_mr contexts on the loopback device, each a peer of the others, with
 * process ids unlike their ranks (so the rank -> process id mapping is exercised). */
struct MrWorld {
    dr_mr_t *mr[kWorldRanks] = {};
    uint32_t ids[kWorldRanks] = {};
};

/* A cmocka group set-up: rank r gets process id id_base + id_step * (kWorldRanks - r). */
inline int world_setup(void **state, uint32_t id_base, uint32_t id_step)
{
    MrWorld *w = new MrWorld;
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    char err[256];
    for (int r = 0; r < kWorldRanks; ++r) {
        w->ids[r] = id_base + id_step * (uint32_t)(kWorldRanks - r);
        if (dr_mr_create(&cfg, w->ids[r], &w->mr[r], err, sizeof(err)) != DR_OK) {
            print_error("create: %s\n", err);
            return -1;
        }
    }
    for (int a = 0; a < kWorldRanks; ++a) {
        for (int b = 0; b < kWorldRanks; ++b) {
            if (a == b) {
                continue;
            }
            const void *addr;
            size_t len;
            dr_mr_address(w->mr[b], &addr, &len);
            if (dr_mr_add_peer(w->mr[a], w->ids[b], addr, len, err, sizeof(err)) != DR_OK) {
                print_error("add peer: %s\n", err);
                return -1;
            }
        }
    }
    *state = w;
    return 0;
}

inline int world_teardown(void **state)
{
    MrWorld *w = static_cast<MrWorld *>(*state);
    for (dr_mr_t *m : w->mr) {
        dr_mr_destroy(m);
    }
    delete w;
    return 0;
}

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
