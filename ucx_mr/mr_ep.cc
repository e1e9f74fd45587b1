/*
 * ucx_mr endpoints: one UCP endpoint per (peer, plane), made on first use (after a dead
 * connection from the peer has been cleared away: stale_connection), its failures recorded
 * for progress to act on, closed (forcibly, after cutting a black-holed connection's
 * sockets) when its plane is declared down or the context goes.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    Link *l = static_cast<Link *>(arg);
    if (ep != l->ep) {
        return; /* an endpoint we already replaced */
    }
    l->ep_failed = true;
    l->ep_status = status;
    l->mr->deferred = true;
}

dr_status_t Mr::ep_ensure(Link *l)
{
    if (l->ep != nullptr) {
        return l->ep_failed ? DR_ERR_UCX : DR_OK;
    }
    Peer *p = peer_get(l->peer, false);
    if (p == nullptr || !p->known) {
        return DR_ERR_INVALID;
    }
    /* A new endpoint where one was before (a probe, or the link's first after its endpoint
     * went) waits until UCX has cleared away dead connections (stale_connection). A link's
     * first endpoint skips the look, a pass over every descriptor of the process (with
     * hundreds of peers, hundreds of passes over a thousand descriptors in the first
     * calls): a connection the peer made and let die before this process ever made an
     * endpoint to it is the case left uncovered. */
    if (l->state == DR_LINK_DOWN || l->eps_made != 0) {
        const uint64_t now = now_us();
        Plane *pl = planes[l->plane].get();
        if (l->stale_since != 0 && now - l->stale_since > 2 * kStaleWaitUs) {
            l->stale_since = 0; /* a wait its caller gave up (the peer left, a queue moved) */
        }
        if (l->stale_since != 0 && pl->polled_at == l->stale_polled &&
            now - l->stale_since < kStaleWaitUs) {
            return DR_INPROGRESS; /* the plane not polled since the last look: no new look */
        }
        if (stale_connection(l)) {
            l->stale_polled = pl->polled_at;
            if (l->stale_since == 0) {
                l->stale_since = now;
                ++pl->stats.endpoint_waits;
                log(DR_LOG_DEBUG,
                    "peer %u plane %d (%s): a dead connection is open on the plane: "
                    "the new endpoint waits until UCX has read its end",
                    l->peer, l->plane, pl->device.c_str());
            }
            if (now - l->stale_since < kStaleWaitUs) {
                return DR_INPROGRESS; /* the caller tries again after a poll of the plane */
            }
            /* Not cleared in kStaleWaitUs: not UCX's (or its worker is not progressed);
             * made anyway, as before. */
            ++pl->stats.endpoint_waits_expired;
            log(DR_LOG_INFO,
                "peer %u plane %d (%s): a dead connection stayed open %.0f ms: "
                "the endpoint is made anyway",
                l->peer, l->plane, pl->device.c_str(), kStaleWaitUs / 1e3);
        }
    }
    l->stale_since = 0;
    ucp_ep_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t *>(p->addrs[l->plane].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = ep_error_cb;
    params.err_handler.arg = l;
    ucp_ep_h ep;
    ucs_status_t st = ucp_ep_create(planes[l->plane]->worker, &params, &ep);
    if (st != UCS_OK) {
        log(DR_LOG_INFO, "peer %u plane %d (%s): cannot create endpoint: %s", l->peer, l->plane,
            planes[l->plane]->device.c_str(), ucs_status_string(st));
        return DR_ERR_UCX;
    }
    l->ep = ep;
    l->ep_failed = false;
    l->ep_status = UCS_OK;
    l->used = true;
    ++l->eps_made;
    return DR_OK;
}

/* The IPv4 addresses of l's plane here and at its peer; false when either is unknown. */
bool Mr::link_addrs(const Link *l, in_addr *local, in_addr *remote) const
{
    const Peer *p = peers[l->peer].get();
    const std::string &mine = planes[l->plane]->ip;
    return !mine.empty() && p->ips.size() > (size_t)l->plane && !p->ips[l->plane].empty() &&
           inet_pton(AF_INET, mine.c_str(), local) == 1 &&
           inet_pton(AF_INET, p->ips[l->plane].c_str(), remote) == 1;
}

/*
 * Calls fn(fd) for every socket of this process whose local IPv4 address is `local` and
 * whose peer is `remote`, and with `unconnected` also for those that have no peer (listening,
 * connecting, or reset: a reset connection's getpeername fails). Stops at the first fn that
 * returns true; returns whether one did.
 */
template <class Fn> static bool each_socket(in_addr local, in_addr remote, bool unconnected, Fn fn)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == nullptr) {
        return false;
    }
    bool hit = false;
    while (struct dirent *e = readdir(d)) {
        const int fd = atoi(e->d_name);
        if (fd <= 2 || fd == dirfd(d)) {
            continue;
        }
        sockaddr_in a, b;
        socklen_t la = sizeof(a), lb = sizeof(b);
        if (getsockname(fd, reinterpret_cast<sockaddr *>(&a), &la) != 0 ||
            a.sin_family != AF_INET || a.sin_addr.s_addr != local.s_addr) {
            continue;
        }
        const bool connected = getpeername(fd, reinterpret_cast<sockaddr *>(&b), &lb) == 0;
        if (connected ? b.sin_family == AF_INET && b.sin_addr.s_addr == remote.s_addr
                      : unconnected && errno == ENOTCONN) {
            if ((hit = fn(fd))) {
                break;
            }
        }
    }
    closedir(d);
    return hit;
}

/*
 * Shut down this process's TCP connections between the plane's address and
 * the peer's address on that plane. Why: destroying a connected UCX 1.13 TCP
 * endpoint whose send side is stuck (a black hole) leaves UCX's TCP transport
 * with half-torn-down state that later crashes inside uct_tcp_iface_progress.
 * A connection that has failed is torn down cleanly, so a stalled plane's
 * sockets are made to fail first. Runs only when a plane is declared down.
 * Still needed on UCX 1.13.1 and 1.18.1: without it a link-down fault of the
 * failover stream crashed the client in uct_tcp_iface_progress after the
 * re-admission (perf/ucx_workarounds.sh --workaround sever: 1 run of 10 on
 * 1.13.1, 1 of 4 on 1.18.1, none with it; 2026-12-06).
 */
int Mr::sever_sockets(Link *l)
{
    /* DUALRAIL_MR_SEVER=0 leaves the sockets alone: only for perf/ucx_workarounds.sh, which
     * measures whether a UCX version still needs this (README, Known limitations). */
    static const bool wanted = [] {
        const char *v = getenv("DUALRAIL_MR_SEVER");
        return v == nullptr || strcmp(v, "0") != 0;
    }();
    if (!wanted) {
        static std::atomic<bool> told{false}; /* once per process, whichever thread */
        if (!told.exchange(true)) {
            log(DR_LOG_WARN, "DUALRAIL_MR_SEVER=0: a plane declared down keeps its sockets "
                             "open while its endpoint closes (an experiment's setting)");
        }
        return 0;
    }
    in_addr local, remote;
    if (!link_addrs(l, &local, &remote)) {
        return 0;
    }
    int n = 0;
    each_socket(local, remote, false, [&n, this, l](int fd) {
        if (!lane_socket(fd, l->plane)) { /* UCX's: other peers' lanes are theirs */
            shutdown(fd, SHUT_RDWR);
            ++n;
        }
        return false;
    });
    return n;
}

/*
 * Whether a connection between l's plane here and the peer's is dead (reset, shut down, or
 * closed by the peer) and still open in this process: one UCX has not yet read the end of.
 *
 * Why: UCX's TCP transport (uct_tcp_ep_connect, UCX 1.13.1 and as of 1.18.1) gives a new
 * endpoint the connection the peer opened to us with the same connection number, if it has
 * one not yet taken. If that connection is dead, the connection request it sends there
 * fails (EPIPE, ECONNRESET), the transport connects afresh but leaves the endpoint out of
 * its connection matching, and destroying it once connected aborts the process:
 * tcp_cm.c:408, "Assertion `ep->flags & UCT_TCP_EP_FLAG_ON_MATCH_CTX' failed", from a
 * forced close (a probe that went unanswered) or from MPI_Finalize. Flapping planes make
 * such connections: the peer closes its endpoint (a plane it declared down, a probe of its
 * own) while ours is made again at once. One poll of the plane reads the connection's end
 * and takes it out of the matching; so the endpoint waits for that (ep_ensure).
 * unit_mr_stale_conn shows it.
 */
bool Mr::stale_connection(const Link *l) const
{
    in_addr local, remote;
    if (!link_addrs(l, &local, &remote)) {
        return false;
    }
    return each_socket(local, remote, true, [this, l](int fd) {
        pollfd p{fd, POLLIN | POLLRDHUP, 0};
        return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0 &&
               !lane_socket(fd, l->plane); /* a lane's end is ours to read, not UCX's */
    });
}

bool Mr::lane_socket(int fd, int plane) const
{
    const uint16_t port = planes[plane]->lane.port;
    if (port == 0) {
        return false; /* no lanes on this plane */
    }
    sockaddr_in a, b;
    socklen_t la = sizeof(a), lb = sizeof(b);
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&a), &la) == 0 && ntohs(a.sin_port) == port) {
        return true; /* accepted on our lane port (or the listening socket itself) */
    }
    if (getpeername(fd, reinterpret_cast<sockaddr *>(&b), &lb) != 0) {
        return false;
    }
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &b.sin_addr, ip, sizeof(ip));
    for (const auto &p : peers) { /* connected to a peer's lane port: ours */
        if (p && p->lane_ports.size() > (size_t)plane &&
            p->lane_ports[plane] == ntohs(b.sin_port) && p->ips.size() > (size_t)plane &&
            p->ips[plane] == ip) {
            return true;
        }
    }
    return false;
}

void Mr::ep_close(Link *l, bool sever)
{
    l->stale_since = 0; /* a wait for a new endpoint starts afresh */
    if (l->ep == nullptr) {
        /* An endpoint that could not be made (issue() flags it so that the link goes
         * down): nothing to close, and the flag must not outlive the declaration, or every
         * progress call took the link for a failed probe and moved its next probe one
         * backoff further: it was never probed again (unit_mr_ep_create_fail). */
        l->ep_failed = false;
        return;
    }
    if (sever && !l->ep_failed && sever_sockets(l) > 0) {
        /* Let UCX see the failure before the endpoint is destroyed; bounded. */
        for (uint64_t end = now_us() + 200000; !l->ep_failed && (clock = now_us()) < end;) {
            poll(planes[l->plane].get());
        }
    }
    ucp_ep_h ep = l->ep;
    l->ep = nullptr;
    l->ep_failed = false;
    l->proven = false; /* a new endpoint wires up anew */
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    /* FORCE: a failed or silent plane cannot be flushed; pending sends are cancelled. */
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t sp = ucp_ep_close_nbx(ep, &param);
    if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) {
        closing.push_back(sp);
    }
}

/* Free the endpoint close requests that have finished. */
void Mr::reap_closing()
{
    for (size_t i = 0; i < closing.size();) {
        if (ucp_request_check_status(closing[i]) != UCS_INPROGRESS) {
            ucp_request_free(closing[i]);
            closing[i] = closing.back();
            closing.pop_back();
        } else {
            ++i;
        }
    }
}

} // namespace mr
} // namespace dualrail
