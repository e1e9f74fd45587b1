/*
 * The watchdog's arithmetic on times (mr_health.cc), pure so that it can be tested
 * without a network.
 *
 * Every time here is from now_us(). The watchdog reads its `now` once per progress call,
 * but work inside that call stamps links with later times: an endpoint close after a
 * plane failure progresses the plane's worker until UCX sees the severed socket (up to
 * 200 ms, mr_ep.cc), and every message that arrives meanwhile, from any peer on that
 * plane, stamps its link's last progress. `now - t` for such a t wrapped to about 2^64 us,
 * and a link that had just delivered read as silent for ever: a peer whose other plane was
 * already down was failed on the spot, while it was answering.
 */
#pragma once

#include <algorithm>
#include <cstdint>

namespace dualrail {
namespace mr {

/* How long before `now` the moment t was: 0 when t is later than now. */
inline uint64_t age_us(uint64_t now, uint64_t t)
{
    return now > t ? now - t : 0;
}

/* What the watchdog does about one live link of a busy peer. */
struct LinkWatch {
    bool ping;   /* silent for longer than probe_us, no ping out: ask */
    bool silent; /* waited on and silent for longer than the peer timeout (0: none) */
};

inline LinkWatch watch_link(uint64_t now, uint64_t last_progress, uint64_t busy_since,
                            bool ping_out, bool waited_on, uint64_t probe_us,
                            uint64_t peer_timeout_us)
{
    const uint64_t quiet = age_us(now, std::max(last_progress, busy_since));
    return LinkWatch{quiet > probe_us && !ping_out,
                     waited_on && peer_timeout_us != 0 && quiet > peer_timeout_us};
}

/*
 * The direct lane's stall rule (Mr::lane_watch), from its socket's TCP state: bytes of ours
 * the kernel holds (unacknowledged or not yet sent), at least two timeouts in a row (or one
 * with the next retransmission two stall timeouts away, rto_ms), and no
 * acknowledgement from the peer's kernel for the stall timeout: the path is broken, not the
 * peer busy (its kernel acknowledges for it; a shut receive window is probed, and the probes
 * are answered).
 *
 * Not yet sent counts too: a frame written while the plane's device was down never left
 * (the transmit failed in this host), so TCP holds it unsent, with nothing unacknowledged
 * and no retransmission timer; only its zero-window probe timer sends it, backing off as
 * the retransmissions would (the timeouts counted here). A plane flapping every 0.3 s left
 * such a frame unsent for 3-4 s with the lane's rule counting unacknowledged segments alone
 * (failover_flap_whole: a call of 4.1 s, the socket 0 unacknowledged, 3 timeouts, the last
 * acknowledgement 2.7 s old).
 */
inline bool lane_stuck(uint32_t unacked, uint64_t queued_bytes, uint32_t timeouts, uint32_t rto_ms,
                       uint32_t last_ack_ms, uint64_t stall_us)
{
    /* One timeout is enough where the next retransmission is two stall timeouts or more
     * away (the RTO grown by earlier backoffs): waiting for the second timeout would hold
     * the call longer than declaring the lane dead does. Seen under a flapping plane with a
     * busy CPU: 1 timeout, RTO 1.4 s, no ack for 2 s, the call 2.9 s. */
    const bool backed_off =
        timeouts >= 2 || (timeouts >= 1 && (uint64_t)rto_ms * 1000 >= 2 * stall_us);
    return (unacked != 0 || queued_bytes != 0) && backed_off &&
           (uint64_t)last_ack_ms * 1000 >= stall_us;
}

} // namespace mr
} // namespace dualrail
