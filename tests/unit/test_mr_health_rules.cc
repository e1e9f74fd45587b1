/*
 * The watchdog's time arithmetic (ucx_mr/health_rules.hpp): a link stamped after the
 * watchdog read its clock (messages that arrived while an endpoint close progressed the
 * plane, inside the same progress call) is not silent. Before, `now - last_progress`
 * wrapped to about 2^64 us: the link asked for a ping and, waited on, counted as silent
 * past the peer timeout, so a peer whose only live plane had just delivered was failed.
 *
 * The direct lane's stall rule (lane_stuck): a frame the kernel never sent (written while
 * the plane's device was down: nothing unacknowledged, only bytes queued, the zero-window
 * probe timer backing off) counts as stuck. Before, the rule looked at unacknowledged
 * segments alone, and such a frame stalled a call for 3-4 s in failover_flap_whole.
 */
#include <cstdint>
#include <cstdio>

#include "../support/check.hpp"
#include "health_rules.hpp"

using dualrail::mr::age_us;
using dualrail::mr::lane_stuck;
using dualrail::mr::LinkWatch;
using dualrail::mr::watch_link;

namespace {

constexpr uint64_t kProbe = 100000, kPeerTimeout = 3000000; /* us, as the defaults' order */

} // namespace

int main()
{
    CHECK(age_us(5000, 2000) == 3000, "age of an earlier time");
    CHECK(age_us(5000, 5000) == 0, "age of the same time");
    CHECK(age_us(5000, 7000) == 0, "age of a later time");

    const uint64_t now = 50000000; /* the watchdog's clock, read at the progress call's start */
    const uint64_t busy = 1000000; /* the peer has been in a call for 49 s */

    /* Delivered 40 ms after the watchdog's clock (during an endpoint close in this call). */
    LinkWatch w = watch_link(now, now + 40000, busy, false, true, kProbe, kPeerTimeout);
    CHECK(!w.silent, "a link stamped after the clock reading counts as silent");
    CHECK(!w.ping, "a link stamped after the clock reading is pinged");

    /* Busy since after the clock reading (a request posted inside the same call). */
    w = watch_link(now, 0, now + 10, false, true, kProbe, kPeerTimeout);
    CHECK(!w.silent && !w.ping, "a peer busy since after the clock reading is judged silent");

    /* The rules themselves. */
    w = watch_link(now, now - 50000, busy, false, true, kProbe, kPeerTimeout);
    CHECK(!w.ping && !w.silent, "a link that delivered 50 ms ago");
    w = watch_link(now, now - 200000, busy, false, true, kProbe, kPeerTimeout);
    CHECK(w.ping && !w.silent, "a link quiet for 200 ms: ping, not yet silent");
    w = watch_link(now, now - 200000, busy, true, true, kProbe, kPeerTimeout);
    CHECK(!w.ping, "a second ping while one is out");
    w = watch_link(now, now - 4000000, busy, true, true, kProbe, kPeerTimeout);
    CHECK(w.silent, "a waited-on link quiet past the peer timeout is not silent");
    w = watch_link(now, now - 4000000, busy, true, false, kProbe, kPeerTimeout);
    CHECK(!w.silent, "a peer owing only acknowledgements counts as silent");
    w = watch_link(now, now - 4000000, busy, true, true, kProbe, 0);
    CHECK(!w.silent, "silent with the peer timeout off");
    w = watch_link(now, 0, now - 4000000, false, true, kProbe, kPeerTimeout);
    CHECK(w.silent && w.ping, "a link never heard from since the call began 4 s ago");

    /* The lane: (unacknowledged segments, bytes queued, timeouts, rto ms, last ack ms, stall
     * us). */
    const uint64_t kStall = 500000;
    CHECK(lane_stuck(0, 1960, 3, 1600, 2708, kStall),
          "a frame never sent (0 unacknowledged, 1960 B queued, 3 timeouts, no ack for 2.7 s)");
    CHECK(lane_stuck(2, 1960, 2, 800, 720, kStall), "frames unacknowledged, 2 timeouts, 0.72 s");
    CHECK(!lane_stuck(0, 0, 3, 1600, 2708, kStall), "an idle lane after an old backoff");
    CHECK(!lane_stuck(1, 1960, 1, 400, 900, kStall), "one timeout only (a single loss)");
    CHECK(!lane_stuck(1, 1960, 1, 999, 900, kStall),
          "one timeout, the next retransmission under two stall timeouts away");
    CHECK(lane_stuck(2, 1992, 1, 1400, 2000, kStall),
          "one timeout, but the next retransmission 1.4 s away (RTO grown by earlier "
          "backoffs; failover_flap_whole under a busy CPU: a call of 2.9 s)");
    CHECK(!lane_stuck(2, 1992, 1, 1400, 400, kStall), "that, acknowledged within the stall");
    CHECK(!lane_stuck(0, 1960, 4, 3200, 100, kStall),
          "bytes queued behind a shut window whose probes are answered");
    CHECK(!lane_stuck(1, 1960, 2, 800, 400, kStall), "acknowledged within the stall timeout");

    return dualrail::test::check_report();
}
