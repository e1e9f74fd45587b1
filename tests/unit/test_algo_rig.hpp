/*
 * What the collective tests over the in-memory transport (test_algo_fake.hpp) share
 * around their rank threads: the failure report at the end of a table, and the
 * Params of one rank. Include after cmocka.h: report() asserts.
 */
#ifndef DUALRAIL_TEST_ALGO_RIG_HPP
#define DUALRAIL_TEST_ALGO_RIG_HPP

#include <string>

#include "../support/test_helpers.hpp"
#include "algo/coll.hpp"
#include "test_algo_fake.hpp"

namespace fake {

/* Failures from rank threads and the transport's contract violations: printed, then one
 * assertion on the main thread (cmocka's asserts belong to it). */
inline void report(dualrail::test::Failures &f, Net &net)
{
    for (const std::string &v : net.violations()) {
        f.add("transport contract: " + v);
    }
    for (const std::string &l : f.lines) {
        print_error("%s\n", l.c_str());
    }
    assert_int_equal(f.lines.size(), 0);
}

/* One rank's Params of a collective of this kind over t, waits bounded at 60 s. */
inline dualrail::coll::Params rank_params(int kind, int rank, int n, FakeTransport &t,
                                          uint32_t comm)
{
    dualrail::coll::Params p;
    p.kind = kind;
    p.rank = rank;
    p.size = n;
    p.comm_id = comm;
    p.timeout = 60;
    p.idle = FakeTransport::idle;
    p.idle_arg = &t;
    return p;
}

} // namespace fake

#endif
