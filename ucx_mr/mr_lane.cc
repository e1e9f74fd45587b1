/*
 * ucx_mr's direct lane: every whole message (a flat send, or any data segment that is a
 * whole message of up to kLaneWholeMax bytes) goes to its peer over a TCP connection of
 * ucx_mr's own between the two planes' addresses, one per (peer, plane) carrying both
 * directions, when it is up, instead of as a UCP tag or active message; everything else
 * (segments of striped messages, control messages, probes) stays on UCP.
 *
 * Why. On TCP planes a small exchange's time is the kernel's: each packet costs its
 * sender's system call the whole way through the peer's TCP receive (veth delivers in the
 * sender's context), and a pure acknowledgement is a packet. UCX's TCP transport keeps
 * its connections both ways, so a back-to-back exchange's acknowledgements ride the next
 * message: about 1.1 packets per exchange (a 2-rank allreduce's, on the lab). A bare TCP
 * socket does the same with 1.0 and is read with one recv() per poll where UCX pays an
 * epoll_wait first. A lane per direction (tried first) doubled the packets, every message
 * drawing a pure acknowledgement on its own connection, and gained nothing: one connection
 * both ways is what makes the lane cheaper (README, ucx_mr, The direct lane).
 *
 * What stays the same. A lane frame is the tag message's bytes (WireHdr, data,
 * acknowledgements; its `offset`, 0 in every whole message, carries the frame's length)
 * and goes through tag_deliver to on_am like one: the flat send's copy, acknowledgements,
 * the duplicate filter and re-routing see no difference. A lane is only a faster way onto
 * the same plane, so its failure is the plane's (to that peer):
 *   - a send that fails (reset, broken pipe), a read that finds the end or an error, or a
 *     malformed frame takes the link down through handle_deferred as an endpoint error
 *     does (unless the peer said goodbye), and the re-routing sends what the lane may
 *     have lost (flat_to_reqs, every unacknowledged segment);
 *   - frames the kernel takes and the network then drops (a black hole) are the stall
 *     watchdog's, exactly as UCP's are;
 *   - the lane closes with its link's endpoint (ep_close: a declaration, a re-registered
 *     peer, the end), and is made again once the link is back.
 * A message that finds the lane not connected yet, or its socket buffer full, takes UCP:
 * whole messages are matched by key and message number, never by order, so the two paths
 * may overtake each other. A peer whose address has no port for a plane (direct_lane 0
 * there, a plane without an IPv4 address) gets UCP on it; so does every peer of a process
 * whose own plane has no lane.
 *
 * Connections. Each process listens on each plane's address (an ephemeral port, sent in
 * the address blob). Of two processes the one with the lower id connects (so two never
 * race to make one connection each), at its first whole message to the peer or from it
 * (lane_want), no sooner than kLaneRetryUs after an earlier attempt; its first bytes name
 * it and its plane (LaneHello), the listener attaches the connection to that link and
 * answers in kind, and only then does a frame go on it (an accept that failed, out of
 * descriptors, would otherwise have the peer write where nobody reads).
 * Accepting, hellos, connects completing and held frames draining are handled by
 * lane_service, once per kColdPollUs (dr_mr_progress) through one epoll set per plane;
 * the hot path is lane_send and lane_recv.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "health_rules.hpp"
#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

namespace {

/* epoll data of a plane's ctl_ep: what the descriptor is, in the upper half */
constexpr uint64_t kCtlListen = 1ull << 32;
constexpr uint64_t kCtlHello = 2ull << 32; /* | fd */
constexpr uint64_t kCtlLane = 3ull << 32;  /* | peer id: connecting, or a held frame */
constexpr uint64_t kCtlKind = ~0ull << 32;

constexpr size_t kHdrOffsetAt = offsetof(WireHdr, offset);

/* An RDMA device behind the network device (InfiniBand, RoCE): UCX would not use TCP on
 * that plane, and a lane there would be slower than UCX, not faster. */
bool rdma_behind(const std::string &device)
{
    const std::string base = device.substr(0, device.find(':'));
    const std::string path = "/sys/class/net/" + base + "/device/infiniband";
    return access(path.c_str(), F_OK) == 0;
}

void close_abort(int fd)
{
    /* An abortive close (RST): no frame of a failed lane may arrive late, and the peer's
     * end of it fails at once rather than after its kernel gives up. */
    linger lg{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

int so_error(int fd)
{
    int e = 0;
    socklen_t n = sizeof(e);
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &n) == 0 ? e : errno;
}

/* A lane's options, both ends: no delay for small frames; data the peer's kernel has not
 * acknowledged for the peer timeout ends the connection (a backstop: Mr::lane_watch is the
 * lane's stall rule). Not the stall timeout: since Linux 5.11 the timer also ends a
 * connection whose receive window stays shut that long, which a peer that computes while
 * a broadcast root runs ahead is, healthy. */
void lane_options(int fd, double peer_timeout)
{
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (peer_timeout > 0) {
        const unsigned ms = (unsigned)(peer_timeout * 1000.0);
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
    }
}

bool lane_buffers(Lane &n)
{
    if (!n.buf) {
        n.buf.reset(new (std::nothrow) char[kLaneRxBuf]);
    }
    return n.buf != nullptr; /* pend: made by the first frame the kernel cuts */
}

/* The hello this process sends on its plane's lane: the connect's, and the answer. */
LaneHello hello_of(uint32_t self, int plane)
{
    return LaneHello{kLaneMagic, kWireVersion, (uint16_t)plane, self, 0};
}

/* The hello from the other end is one for this plane. */
bool hello_fits(const LaneHello &h, int plane)
{
    return h.magic == kLaneMagic && h.version == kWireVersion && h.plane == (uint16_t)plane;
}

/* Reads what is left of a hello into `into` (have bytes of it so far), never past it:
 * frames follow on the same connection. 1: complete, 0: more to come, -1: the connection
 * ended or failed. */
int hello_recv(int fd, LaneHello *into, size_t *have)
{
    char *to = reinterpret_cast<char *>(into) + *have;
    const ssize_t r = recv(fd, to, sizeof(LaneHello) - *have, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return 0;
    }
    if (r <= 0) {
        return -1;
    }
    *have += (size_t)r;
    return *have == sizeof(LaneHello) ? 1 : 0;
}

} // namespace

/* Watch l's lane in its plane's ctl_ep for events (EPOLLOUT: connected, room for a held
 * frame; EPOLLIN: the listener's answer), once: lane_ctl_event takes it out again. */
static bool ctl_watch(Mr *mr, Link *l, uint32_t events)
{
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = kCtlLane | l->peer;
    return epoll_ctl(mr->planes[l->plane]->lane.ctl_ep, EPOLL_CTL_ADD, l->lane.fd, &ev) == 0;
}

void Mr::lane_open(Plane *pl)
{
    PlaneLane &pn = pl->lane;
    in_addr a;
    if (cfg.direct_lane == 0 || pl->ip.empty() || inet_pton(AF_INET, pl->ip.c_str(), &a) != 1 ||
        (cfg.direct_lane < 0 && rdma_behind(pl->device))) {
        return; /* no lane on this plane: every peer takes UCP here */
    }
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = a;
    socklen_t sl = sizeof(sa);
    const int ep = fd >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
    const int rx_ep = ep >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
    epoll_event ev{}, wk{};
    ev.events = EPOLLIN;
    ev.data.u64 = kCtlListen;
    wk.events = EPOLLIN;
    wk.data.u32 = (uint32_t)pl->index; /* dr_mr_wait_event: this plane has data */
    if (fd < 0 || ep < 0 || rx_ep < 0 ||
        (epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, rx_ep, &wk) != 0) ||
        bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &sl) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        log(DR_LOG_INFO, "plane %d (%s): no direct lane (%s): whole messages take UCP", pl->index,
            pl->device.c_str(), strerror(errno));
        for (int d : {fd, ep, rx_ep}) {
            if (d >= 0) {
                close(d);
            }
        }
        return;
    }
    pn.listen_fd = fd;
    pn.ctl_ep = ep;
    /* A waiter sleeping on the planes' descriptors (cfg.wakeup) wakes for the lanes too:
     * epfd holds this set. */
    pn.rx_ep = rx_ep;
    pn.port = ntohs(sa.sin_port);
    log(DR_LOG_DEBUG, "plane %d (%s): direct lane on %s:%u", pl->index, pl->device.c_str(),
        pl->ip.c_str(), pn.port);
}

void Mr::lane_plane_close(Plane *pl)
{
    PlaneLane &pn = pl->lane;
    for (const LaneHelloWait &h : pn.hello) {
        close(h.fd);
    }
    pn.hello.clear();
    for (int *fd : {&pn.listen_fd, &pn.ctl_ep, &pn.rx_ep}) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
    pn.port = 0;
}

/* l's lane joins its plane's ready lanes (Mr::poll reads them). */
static bool lane_ready(Mr *mr, Link *l)
{
    Lane &n = l->lane;
    PlaneLane &pn = mr->planes[l->plane]->lane;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = l->peer;
    if (epoll_ctl(pn.rx_ep, EPOLL_CTL_ADD, n.fd, &ev) != 0) {
        return false;
    }
    try {
        pn.rx.push_back(l);
    } catch (const std::bad_alloc &) {
        return false;
    }
    n.st = Lane::St::kReady;
    n.have = 0;
    n.sent = 0;
    ++n.gen;
    n.pend_off = n.pend_len = 0;
    pn.at = mr->clock; /* its frames follow at once: read it at every poll */
    return true;
}

/* Drops l's lane: the descriptor (abort: RST), its place among the plane's ready lanes. */
static void lane_drop(Mr *mr, Link *l, bool abort)
{
    Lane &n = l->lane;
    if (n.fd >= 0) {
        abort ? close_abort(n.fd) : (void)close(n.fd); /* leaves every epoll set with it */
        n.fd = -1;
    }
    if (n.st == Lane::St::kReady) {
        std::vector<Link *> &rx = mr->planes[l->plane]->lane.rx;
        for (size_t i = 0; i < rx.size(); ++i) {
            if (rx[i] == l) {
                rx[i] = rx.back();
                rx.pop_back();
                break;
            }
        }
    }
    n.st = Lane::St::kNone;
    n.have = 0;
    n.pend_len = 0;
}

void Mr::lane_want(Link *l)
{
    Lane &n = l->lane;
    if (n.st == Lane::St::kConnecting || n.st == Lane::St::kHello) {
        if (clock - n.since > kLaneConnectUs) {
            /* Its answer may be waiting unread (this process did not progress for a
             * while): take it first. Dropping a lane the peer has taken makes it fail
             * there. */
            lane_service(planes[l->plane].get());
        }
        if (n.st != Lane::St::kReady && clock - n.since > kLaneConnectUs) {
            log(DR_LOG_INFO,
                "peer %u plane %d: direct lane not made after %.1f s: trying again later", l->peer,
                l->plane, (double)(clock - n.since) / 1e6);
            lane_drop(this, l, true);
        }
        return;
    }
    const Peer *p = peers[l->peer].get();
    Plane *pl = planes[l->plane].get();
    in_addr local, remote;
    if (n.st != Lane::St::kNone || self > l->peer || pl->lane.port == 0 ||
        p->lane_ports.size() <= (size_t)l->plane || p->lane_ports[l->plane] == 0 ||
        clock < n.retry_at || l->state != DR_LINK_UP || !link_addrs(l, &local, &remote)) {
        return; /* not ours to make (the peer's id is lower), none there, or not now */
    }
    n.retry_at = clock + kLaneRetryUs; /* for a failure below or later */
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || !lane_buffers(n)) {
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    lane_options(fd, cfg.peer_timeout);
    sockaddr_in me{}, to{};
    me.sin_family = to.sin_family = AF_INET;
    me.sin_addr = local; /* from this plane's address: the lane rides this plane only */
    to.sin_addr = remote;
    to.sin_port = htons(p->lane_ports[l->plane]);
    n.fd = fd;
    if (bind(fd, reinterpret_cast<sockaddr *>(&me), sizeof(me)) != 0 ||
        (connect(fd, reinterpret_cast<sockaddr *>(&to), sizeof(to)) != 0 && errno != EINPROGRESS) ||
        !ctl_watch(this, l, EPOLLOUT)) {
        log(DR_LOG_DEBUG, "peer %u plane %d: direct lane connect: %s", l->peer, l->plane,
            strerror(errno));
        close(fd);
        n.fd = -1;
        return;
    }
    n.st = Lane::St::kConnecting;
    n.since = clock;
}

/* The rest of a frame the kernel took only part of; true once nothing is left. */
static bool lane_flush(Mr *mr, Link *l)
{
    Lane &n = l->lane;
    while (n.pend_len != 0) {
        const ssize_t s =
            send(n.fd, n.pend.get() + n.pend_off, n.pend_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (s > 0) {
            n.pend_off += (uint32_t)s;
            n.pend_len -= (uint32_t)s;
            continue;
        }
        if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            mr->lane_fail(l, errno);
        }
        return false;
    }
    return true;
}

/* One frame of n bytes in iov[0..cnt) on l's ready lane: true once the kernel has taken
 * some of it (the rest held, sent before any other frame), false if none went (UCP then). */
static bool lane_sendv(Mr *mr, Link *l, const iovec *iov, int cnt, size_t n)
{
    Lane &ln = l->lane;
    if (ln.pend_len != 0 && !lane_flush(mr, l)) {
        return false;
    }
    msghdr m{};
    m.msg_iov = const_cast<iovec *>(iov);
    m.msg_iovlen = (size_t)cnt;
    const ssize_t s = cnt == 1 ? send(ln.fd, iov[0].iov_base, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                               : sendmsg(ln.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    const int e = errno;
    if (s > 0) {
        ++mr->planes[l->plane]->stats.lane_tx;
        ++ln.sent; /* before anything below may fail the lane: this frame may be lost */
    }
    if (s > 0 && (size_t)s < n) {
        /* the rest before any other frame (lane_flush); lane_service waits for room */
        if (!ln.pend) {
            ln.pend.reset(new (std::nothrow) char[kLaneFrameMax]);
            if (!ln.pend) {
                mr->lane_fail(l, ENOMEM); /* a cut frame cannot be finished: as lost */
                return true;              /* (the kernel has part of it: not UCP's) */
            }
        }
        size_t skip = (size_t)s, at = 0;
        for (int i = 0; i < cnt; ++i) {
            const char *b = static_cast<const char *>(iov[i].iov_base);
            size_t len = iov[i].iov_len;
            const size_t k = skip < len ? skip : len;
            skip -= k;
            memcpy(ln.pend.get() + at, b + k, len - k);
            at += len - k;
        }
        ln.pend_off = 0;
        ln.pend_len = (uint32_t)at;
        ctl_watch(mr, l, EPOLLOUT);
    }
    if (s > 0) {
        return true;
    }
    if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR) {
        mr->lane_fail(l, e);
    }
    return false;
}

bool Mr::lane_send(Link *l, char *wire, size_t n)
{
    if (l->lane.st != Lane::St::kReady) {
        lane_want(l);
        return false; /* UCP this time */
    }
    const uint64_t len = n;
    memcpy(wire + kHdrOffsetAt, &len, sizeof(len));
    const iovec iov{wire, n};
    const bool sent = lane_sendv(this, l, &iov, 1, n);
    const uint64_t zero = 0; /* a whole message's offset, should UCP send this wire after all */
    memcpy(wire + kHdrOffsetAt, &zero, sizeof(zero));
    return sent;
}

bool Mr::lane_send_whole(Link *l, Op *op, const char *data, uint64_t len)
{
    if (l->lane.st != Lane::St::kReady) {
        lane_want(l);
        return false; /* UCP this time */
    }
    if (len > kLaneWholeMax) {
        return false; /* a min_stripe above the lane's longest frame */
    }
    const size_t n = sizeof(WireHdr) + len + sizeof(uint32_t) * op->acks.n;
    op->hdr.offset = n; /* the frame's length (a whole message's offset is 0) */
    const iovec iov[3] = {{&op->hdr, sizeof(WireHdr)},
                          {const_cast<char *>(data), len},
                          {op->acks.id, sizeof(uint32_t) * op->acks.n}};
    const bool sent = lane_sendv(this, l, iov, op->acks.n != 0 ? 3 : 2, n);
    op->hdr.offset = 0;
    return sent;
}

void Mr::lane_fail(Link *l, int err)
{
    /* Only a lane that carried frames of ours can have lost one: the peer's frames are its
     * own lane failure's to send again. A lane the peer dropped before it ever read our
     * answer (its connect timed out meanwhile) lost nothing, and is no failure. */
    const bool was_ready = l->lane.st == Lane::St::kReady && l->lane.sent != 0;
    lane_drop(this, l, true);
    l->lane.retry_at = clock + kLaneRetryUs;
    const Peer *p = peers[l->peer].get();
    if (was_ready && l->state == DR_LINK_UP && !p->gone) {
        /* Frames either way may be lost with the connection: the link goes down, our
         * unacknowledged messages are sent again, and the peer, whose end fails too, does
         * the same (handle_deferred). */
        l->lane.failed = true;
        l->lane.err = err;
        deferred = true;
    }
}

/* The kernel's TCP state of a lane's socket (lane_watch, lane_text). */
static bool lane_tcp_info(int fd, tcp_info *ti)
{
    socklen_t len = sizeof(*ti);
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0;
}

void Mr::lane_watch(Link *l, uint64_t now)
{
    /* The watchdog's pings travel on UCP's connection and are answered while a lane frame
     * sits in TCP's retransmission backoff (seconds after a few flaps of the link: a call of
     * 3.1 s and a first down 6 s after the fault in failover_flap_whole, before this rule),
     * or unsent in this host's TCP (health_rules.hpp, lane_stuck). */
    Lane &n = l->lane;
    if (n.st != Lane::St::kReady || n.sent == 0 || now - n.watched_at < kLaneWatchUs) {
        return;
    }
    n.watched_at = now;
    tcp_info ti{};
    if (!lane_tcp_info(n.fd, &ti)) {
        return;
    }
    int queued = 0; /* bytes not yet acknowledged, sent or not (asked only when none is sent) */
    if (ti.tcpi_unacked == 0 && ti.tcpi_backoff >= 1 && ioctl(n.fd, SIOCOUTQ, &queued) != 0) {
        queued = 0;
    }
    if (lane_stuck(ti.tcpi_unacked, queued > 0 ? (uint64_t)queued : 0, ti.tcpi_backoff,
                   ti.tcpi_rto / 1000, ti.tcpi_last_ack_recv, stall_us)) {
        log(DR_LOG_INFO,
            "peer %u plane %d: direct lane: data %s, no acknowledgement for %u ms, %u timeouts",
            l->peer, l->plane, ti.tcpi_unacked != 0 ? "unacknowledged" : "unsent",
            ti.tcpi_last_ack_recv, ti.tcpi_backoff);
        lane_fail(l, ETIMEDOUT);
    }
}

std::string Mr::lane_text(const Link *l) const
{
    const Lane &n = l->lane;
    switch (n.st) {
    case Lane::St::kNone:
        return "lane none";
    case Lane::St::kConnecting:
        return "lane connecting";
    case Lane::St::kHello:
        return "lane awaiting hello";
    case Lane::St::kReady:
        break;
    }
    /* What the kernel holds either way: frames unread here, ours unacknowledged or unsent. */
    int unread = -1, queued = -1;
    (void)ioctl(n.fd, FIONREAD, &unread);
    (void)ioctl(n.fd, SIOCOUTQ, &queued);
    tcp_info ti{};
    if (!lane_tcp_info(n.fd, &ti)) {
        ti = tcp_info{};
    }
    char text[256];
    snprintf(text, sizeof(text),
             "lane ready (%llu frame(s) sent), %d B unread, %d B not acknowledged (%u "
             "segment(s) out, last ack %u ms ago, %u timeout(s), rto %u ms), %u B held",
             (unsigned long long)n.sent, unread, queued, ti.tcpi_unacked, ti.tcpi_last_ack_recv,
             ti.tcpi_backoff, ti.tcpi_rto / 1000, n.pend_len - n.pend_off);
    return text;
}

void Mr::lane_close(Link *l)
{
    /* with its link's endpoint: a link declared down aborts (nothing of it arrives late),
     * an orderly end lets what the kernel holds go out */
    lane_drop(this, l, l->state != DR_LINK_UP || l->lane.pend_len != 0);
    l->lane.failed = false;
}

/* Reads l's lane and hands every whole frame to on_am; frames delivered, or -1 when the
 * lane ended (the peer closed it, an error, a malformed frame). */
static int lane_read(Mr *mr, Plane *pl, Link *l)
{
    Lane &n = l->lane;
    const ssize_t r = recv(n.fd, n.buf.get() + n.have, kLaneRxBuf - n.have, MSG_DONTWAIT);
    if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return 0;
        }
        const int e = r == 0 ? 0 : errno;
        mr->log(DR_LOG_DEBUG, "peer %u plane %d: direct lane: %s", l->peer, l->plane,
                e == 0 ? "closed by the peer" : strerror(e));
        mr->lane_fail(l, e);
        return -1;
    }
    n.have += (size_t)r;
    size_t off = 0;
    int k = 0;
    while (n.have - off >= sizeof(WireHdr)) {
        char *f = n.buf.get() + off;
        uint64_t flen;
        memcpy(&flen, f + kHdrOffsetAt, sizeof(flen));
        if (flen < sizeof(WireHdr) || flen > kLaneFrameMax) {
            mr->log(DR_LOG_WARN, "peer %u plane %d: direct lane: a frame of %llu bytes: closed",
                    l->peer, l->plane, (unsigned long long)flen);
            mr->lane_fail(l, EPROTO);
            return -1;
        }
        if (n.have - off < flen) {
            break;
        }
        uint32_t src;
        memcpy(&src, f + offsetof(WireHdr, src), sizeof(src));
        if (src != l->peer) {
            mr->log(DR_LOG_WARN, "peer %u plane %d: direct lane: a frame from process %u: closed",
                    l->peer, l->plane, src);
            mr->lane_fail(l, EPROTO);
            return -1;
        }
        memset(f + kHdrOffsetAt, 0, sizeof(uint64_t));
        ++pl->stats.lane_rx;
        off += flen;
        ++k;
        const uint32_t gen = n.gen;
        mr->tag_deliver(pl, f, flen, UCS_OK, kLaneFrameMax);
        if (n.st != Lane::St::kReady || n.gen != gen) {
            return -1; /* closed or replaced by what the message set off */
        }
    }
    if (off != 0) {
        memmove(n.buf.get(), n.buf.get() + off, n.have - off);
        n.have -= off;
    }
    return k;
}

unsigned Mr::lane_recv(Plane *pl)
{
    PlaneLane &pn = pl->lane;
    unsigned got = 0;
    if (pn.rx.size() <= kLaneDirectMax) {
        for (size_t i = 0; i < pn.rx.size();) {
            const int k = lane_read(this, pl, pn.rx[i]);
            if (k >= 0) {
                got += (unsigned)k;
                ++i;
            } /* else dropped: pn.rx[i] is another lane now (or past the end) */
        }
        return got;
    }
    epoll_event ev[32];
    const int m = epoll_wait(pn.rx_ep, ev, 32, 0);
    for (int i = 0; i < m; ++i) {
        Peer *p = peer_get(ev[i].data.u32, false);
        Link *l = p != nullptr ? p->links[pl->index].get() : nullptr;
        if (l != nullptr && l->lane.st == Lane::St::kReady) {
            const int k = lane_read(this, pl, l);
            got += k > 0 ? (unsigned)k : 0;
        }
    }
    return got;
}

/* A connection accepted on pl's plane named its sender: it becomes that link's lane. */
static void lane_attach(Mr *mr, Plane *pl, const LaneHelloWait &h)
{
    /* A process not registered yet is taken as on_am takes its messages (its peer made
     * now): a connection that beats our dr_mr_add_peer is no failure. Only a lower id
     * connects (mr_lane.cc, Connections). */
    Peer *p = hello_fits(h.hello, pl->index) && h.hello.src < mr->self
                  ? mr->peer_get(h.hello.src, true)
                  : nullptr;
    if (p == nullptr) {
        mr->log(DR_LOG_INFO,
                "plane %d (%s): direct lane from a foreign or mis-wired process "
                "(process %u, plane %u): closed",
                pl->index, pl->device.c_str(), h.hello.src, h.hello.plane);
        close(h.fd);
        return;
    }
    Link *l = p->links[pl->index].get();
    if (l->state != DR_LINK_UP) {
        /* declared down here: the lane would go with the link's next close, and fail at
         * the peer; it connects again once the link is back here too */
        close(h.fd);
        return;
    }
    if (l->lane.st != Lane::St::kNone) {
        /* The peer made a new one: its end of the old one is gone, and with it what it
         * had not read of ours (lane_fail: the link goes down if it is up). */
        mr->lane_fail(l, ECONNRESET);
    }
    l->lane.fd = h.fd;
    const LaneHello answer = hello_of(mr->self, pl->index);
    if (!lane_buffers(l->lane) || !lane_ready(mr, l) ||
        send(h.fd, &answer, sizeof(answer), MSG_DONTWAIT | MSG_NOSIGNAL) !=
            (ssize_t)sizeof(answer)) {
        lane_drop(mr, l, true); /* the peer gives up on it, and takes UCP meanwhile */
    }
}

/* A readable hello-pending connection: reads what is left of its hello. Whether it is
 * done with (attached or closed). */
static bool lane_hello_read(Mr *mr, Plane *pl, LaneHelloWait &h)
{
    const int got = hello_recv(h.fd, &h.hello, &h.have);
    if (got == 0) {
        return false;
    }
    if (got < 0) {
        close(h.fd);
        return true;
    }
    epoll_ctl(pl->lane.ctl_ep, EPOLL_CTL_DEL, h.fd, nullptr);
    lane_attach(mr, pl, h);
    return true;
}

/* An event on a lane in ctl_ep: its connect finished, the listener's answer came, or room
 * for a held frame. */
static void lane_ctl_event(Mr *mr, Plane *pl, Link *l, uint32_t events)
{
    Lane &n = l->lane;
    if (n.fd < 0) {
        return;
    }
    epoll_ctl(pl->lane.ctl_ep, EPOLL_CTL_DEL, n.fd, nullptr); /* in it for this one event */
    if (n.st == Lane::St::kReady) {
        if (!lane_flush(mr, l) && n.st == Lane::St::kReady) {
            ctl_watch(mr, l, EPOLLOUT); /* still held: wait again */
        }
        return;
    }
    if (n.st == Lane::St::kHello) {
        /* the listener's answer: it has the connection */
        const int got = hello_recv(n.fd, &n.answer, &n.have);
        if (got == 0) {
            ctl_watch(mr, l, EPOLLIN);
            return;
        }
        if (got < 0 || !hello_fits(n.answer, l->plane) || n.answer.src != l->peer ||
            !lane_ready(mr, l)) {
            mr->log(DR_LOG_DEBUG, "peer %u plane %d: direct lane not taken by the peer", l->peer,
                    l->plane);
            lane_drop(mr, l, true); /* UCP meanwhile, another try kLaneRetryUs on */
        }
        return;
    }
    const int e = so_error(n.fd);
    const LaneHello hello = hello_of(mr->self, l->plane);
    if (e != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0 ||
        send(n.fd, &hello, sizeof(hello), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(hello) ||
        !ctl_watch(mr, l, EPOLLIN) /* the listener's answer */) {
        /* not made: UCP meanwhile, another try kLaneRetryUs after this one began */
        mr->log(DR_LOG_DEBUG, "peer %u plane %d: direct lane not connected: %s", l->peer, l->plane,
                strerror(e != 0 ? e : errno));
        lane_drop(mr, l, true);
        return;
    }
    n.st = Lane::St::kHello;
    n.have = 0;
}

void Mr::lane_service(Plane *pl)
{
    PlaneLane &pn = pl->lane;
    if (pn.ctl_ep < 0) {
        return;
    }
    epoll_event ev[16];
    const int m = epoll_wait(pn.ctl_ep, ev, 16, 0);
    for (int i = 0; i < m; ++i) {
        const uint64_t kind = ev[i].data.u64 & kCtlKind;
        const uint32_t low = (uint32_t)ev[i].data.u64;
        if (kind == kCtlListen) {
            for (int k = 0; k < 16; ++k) {
                const int fd =
                    accept4(pn.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                    break;
                }
                lane_options(fd, cfg.peer_timeout);
                epoll_event he{};
                he.events = EPOLLIN | EPOLLRDHUP;
                he.data.u64 = kCtlHello | (uint32_t)fd;
                try {
                    pn.hello.push_back(LaneHelloWait{fd, clock, 0, LaneHello{}});
                } catch (const std::bad_alloc &) {
                    close(fd);
                    continue;
                }
                if (epoll_ctl(pn.ctl_ep, EPOLL_CTL_ADD, fd, &he) != 0) {
                    close(fd);
                    pn.hello.pop_back();
                }
            }
        } else if (kind == kCtlHello) {
            for (size_t k = 0; k < pn.hello.size(); ++k) {
                if (pn.hello[k].fd == (int)low) {
                    if (lane_hello_read(this, pl, pn.hello[k])) {
                        pn.hello[k] = pn.hello.back();
                        pn.hello.pop_back();
                    }
                    break;
                }
            }
        } else if (kind == kCtlLane) {
            Peer *p = peer_get(low, false);
            if (p != nullptr) {
                lane_ctl_event(this, pl, p->links[pl->index].get(), ev[i].events);
            }
        }
    }
    /* Connections whose hello never comes (not a ucx_mr process): bounded */
    for (size_t k = 0; k < pn.hello.size();) {
        if (clock - pn.hello[k].since > kLaneConnectUs) {
            close(pn.hello[k].fd);
            pn.hello[k] = pn.hello.back();
            pn.hello.pop_back();
        } else {
            ++k;
        }
    }
}

} // namespace mr
} // namespace dualrail
