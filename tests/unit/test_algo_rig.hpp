/*
 * What the collective tests over the in-memory transport (test_algo_fake.hpp) share
 * around their rank threads: the failure report at the end of a table, and the
 * Params of one rank. Include after cmocka.h: report() asserts.
 */
#ifndef DUALRAIL_TEST_ALGO_RIG_HPP
#define DUALRAIL_TEST_ALGO_RIG_HPP

#include <string>
#include <vector>

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

/*
 * The verdict of a link-failure run (out: each rank's outcome, with st, err and
 * correct): every rank either failed with a one-line reason naming its kind, its rank
 * and a peer, or has the right result; both ends of the failed link a - b failed; the
 * transport's contract held.
 */
template <class Outcome>
void check_link_outcomes(const std::vector<Outcome> &out, int kind, int algo, int n, int a, int b,
                         long after, Net &net)
{
    int errors = 0;
    for (int r = 0; r < n; ++r) {
        const Outcome &o = out[(size_t)r];
        if (o.st != DR_OK) {
            ++errors;
            assert_true(o.err.find('\n') == std::string::npos);
            assert_true(o.err.find(std::string(dualrail::coll::kind_name(kind)) + ", rank " +
                                   std::to_string(r)) != std::string::npos);
            assert_true(o.err.find("peer rank") != std::string::npos);
        } else {
            assert_true(o.correct);
        }
        if (r == a || r == b) {
            if (o.st == DR_OK) {
                print_error("%s algo %d n=%d link %d-%d after %ld: rank %d succeeded\n",
                            dualrail::coll::kind_name(kind), algo, n, a, b, after, r);
            }
            assert_int_not_equal(o.st, DR_OK);
        }
    }
    print_message("%s algo %d n=%d link %d-%d after %ld: %d of %d ranks failed; rank %d: %s\n",
                  dualrail::coll::kind_name(kind), algo, n, a, b, after, errors, n, b,
                  out[(size_t)b].err.c_str());
    for (const std::string &v : net.violations()) {
        print_error("transport contract: %s\n", v.c_str());
    }
    assert_int_equal(net.violations().size(), 0);
}

} // namespace fake

#endif
