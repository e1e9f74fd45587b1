/*
 * ucx_mr's direct lane: whole messages (up to 16 KiB) over one TCP connection of ucx_mr's
 * own per (peer, plane), both directions, beside the plane's UCP endpoint (mr_lane.cc has
 * the why and the rules).
 *
 *   lower process id ──connects, plane address to plane address──> higher id's PlaneLane
 *   both ends: Link::lane, read in Mr::poll, written by lane_send
 *
 * Frames are the tag message's layout (kWholeTag in mr_internal.hpp) with the header's
 * `offset` (always 0 for a whole message) holding the frame's length on the wire.
 */
#ifndef DUALRAIL_MR_LANE_HPP
#define DUALRAIL_MR_LANE_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dualrail {
namespace mr {

/* The first bytes on a lane, from the process that connects (who it is, which plane), and
 * the listener's answer in the same form once it has taken the connection. */
struct LaneHello {
    uint32_t magic;   /* kLaneMagic */
    uint16_t version; /* kWireVersion */
    uint16_t plane;   /* the sender's plane index: must be the listening plane's */
    uint32_t src;     /* the sender's process id: lower than the listener's */
    uint32_t pad;
};
constexpr uint32_t kLaneMagic = 0x44524c4e; /* "DRLN" */

/* The longest whole message a lane carries (every message ucx_mr sends whole with its
 * defaults: min_stripe 16 KiB), and its frame with header and acknowledgements. */
constexpr size_t kLaneWholeMax = 16 * 1024;
constexpr size_t kLaneFrameMax = kLaneWholeMax + 128;
/* Receive buffer of a lane: a whole frame at least; many small ones per recv() when a peer
 * sends faster than we poll. */
constexpr size_t kLaneRxBuf = 32 * 1024;
static_assert(kLaneRxBuf >= kLaneFrameMax, "a lane's buffer holds its longest frame");
/* No new connection on a link sooner than this after one failed or could not be made. */
constexpr uint64_t kLaneRetryUs = 100000;
/* A connection not made within this long is given up; an accepted one whose hello has not
 * come within this long is closed. */
constexpr uint64_t kLaneConnectUs = 1000000;
/* A plane's lanes are read with one recv() each per poll up to this many; beyond, an epoll
 * set tells which have data (one system call for all of them). */
constexpr size_t kLaneDirectMax = 2;
/* Of a plane's lanes and its UCP worker, the one that carried nothing for kHotUs while the
 * other did is polled at most once per this long (Mr::poll): UCP's acknowledgements and
 * pings beside a lane's small messages, a lane's beside UCP's large ones, wait that much
 * more at most. */
constexpr uint64_t kQuietPollUs = 20;
/* Mr::lane_watch looks at a busy lane's TCP state at most this often (a system call). */
constexpr uint64_t kLaneWatchUs = 50000;

/* A link's lane. */
struct Lane {
    /* kHello: connected, our hello sent, the listener's answer (its own hello, sent once
     * it has attached the connection) not yet here: nothing goes on a lane the peer may
     * never read (an accept that failed) */
    enum class St : uint8_t { kNone, kConnecting, kHello, kReady } st = St::kNone;
    int fd = -1;
    uint64_t since = 0;    /* connect() began */
    uint64_t retry_at = 0; /* no connect() before */
    /* The part of a frame the kernel did not take (a full socket buffer): sent before any
     * other frame (lane_flush); meanwhile frames take the UCP path. */
    uint32_t pend_off = 0, pend_len = 0;
    std::unique_ptr<char[]> pend; /* kLaneFrameMax, made by the first frame the kernel cuts */
    std::unique_ptr<char[]> buf;  /* kLaneRxBuf: frames read, not yet whole */
    size_t have = 0;              /* of buf; kHello: of answer */
    LaneHello answer{};           /* kHello: the listener's, as it arrives */
    uint64_t sent = 0; /* frames sent on it: one that fails with none lost nothing of ours */
    uint32_t gen = 0;  /* lane_ready's count: a lane replaced while its frames were handed on */
    uint64_t watched_at = 0; /* Mr::lane_watch's last look */
    /* ended or failed while the link was up: handle_deferred declares it down (frames may
     * be lost with the connection, either way; the re-routing sends ours again) */
    bool failed = false;
    int err = 0; /* errno of the failure (0: the peer closed it) */
};

/* A connection accepted whose hello has not fully arrived yet. */
struct LaneHelloWait {
    int fd;
    uint64_t since;
    size_t have;
    LaneHello hello;
};

struct Link;

/* A plane's listening socket and its lanes. */
struct PlaneLane {
    int listen_fd = -1;
    uint16_t port = 0;      /* in the address blob; 0: this plane has no lane */
    int ctl_ep = -1;        /* epoll: listen_fd, hellos pending, connects, held frames */
    int rx_ep = -1;         /* epoll of the ready lanes (read through it past kLaneDirectMax) */
    std::vector<Link *> rx; /* links whose lane on this plane is ready */
    std::vector<LaneHelloWait> hello; /* accepted, hello incomplete */
    /* Mr::poll's choice (Mr::clock): the last frame read, the last UCP event, and when
     * each was last looked at. */
    uint64_t at = 0, ucp_at = 0, polled_at = 0, ucp_polled_at = 0;
};

} // namespace mr
} // namespace dualrail

#endif
