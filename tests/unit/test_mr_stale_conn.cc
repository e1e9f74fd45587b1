/*
 * A new endpoint is not made over a dead connection from the peer (Mr::stale_connection,
 * ucx_mr/mr_ep.cc).
 *
 * UCX's TCP transport gives a new endpoint the connection the peer opened to us under the
 * same connection number, when one is there and not yet taken. If that connection is dead
 * and UCX has not polled since, the connection request sent on it fails (EPIPE), the
 * transport connects afresh but leaves the endpoint out of its connection matching, and
 * destroying it once connected aborts the process: tcp_cm.c:408, "Assertion `ep->flags &
 * UCT_TCP_EP_FLAG_ON_MATCH_CTX' failed" (seen in CI under flapping planes, from a forced
 * close and from MPI_Finalize).
 *
 * Made here on loopback, in a child process (an abort is the failure): context a's link to
 * peer 1 (its one plane) is down (its endpoint could not be made, as in
 * unit_mr_ep_create_fail), its probes held back. A raw UCP worker x connects to a's plane
 * (connection number 0, a's first to x's address will be 0 too); a reads the request and
 * keeps the connection for its own endpoint to x. a's end of that connection is then shut
 * down (as ucx_mr's sever_sockets does, or as a reset leaves it), x's address becomes peer
 * 1's, and a probes at once, without a poll between. Then a and x run for 1.5 s (a's probe
 * goes unanswered and its endpoint is closed, a probe again) and a is destroyed, every
 * endpoint closed. Checks: the child exits 0; a's probe endpoint waited for the dead
 * connection (the plane's stale_waits), and probes were sent. Without the wait the child
 * aborts (checked).
 */
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include <dirent.h>
#include <netinet/in.h>

#include "../support/check.hpp"
#include "../support/mr_pair.hpp"
#include "mr_internal.hpp"

using dualrail::mr::Link;
using dualrail::mr::Mr;
using dualrail::test::mr_pair_open;
using dualrail::test::now_s;
using dualrail::test::worker_address;

namespace {

struct Sock {
    int fd;
    uint16_t local_port;
    bool listening;
};

/* This process's IPv4 TCP sockets on loopback. */
std::vector<Sock> sockets()
{
    std::vector<Sock> out;
    DIR *d = opendir("/proc/self/fd");
    if (d == nullptr) {
        return out;
    }
    while (struct dirent *e = readdir(d)) {
        const int fd = atoi(e->d_name);
        sockaddr_in a;
        socklen_t la = sizeof(a);
        int acc = 0;
        socklen_t lacc = sizeof(acc);
        if (fd <= 2 || fd == dirfd(d) ||
            getsockname(fd, reinterpret_cast<sockaddr *>(&a), &la) != 0 ||
            a.sin_family != AF_INET || a.sin_addr.s_addr != htonl(INADDR_LOOPBACK) ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &lacc) != 0) {
            continue;
        }
        out.push_back(Sock{fd, ntohs(a.sin_port), acc != 0});
    }
    closedir(d);
    return out;
}

/* The sockets a listening socket of this process accepted that are not in `before`. */
std::vector<int> accepted_since(const std::set<int> &before)
{
    const std::vector<Sock> now = sockets();
    std::set<uint16_t> listen_ports;
    for (const Sock &s : now) {
        if (s.listening) {
            listen_ports.insert(s.local_port);
        }
    }
    std::vector<int> out;
    for (const Sock &s : now) {
        if (!s.listening && before.count(s.fd) == 0 && listen_ports.count(s.local_port) != 0) {
            out.push_back(s.fd);
        }
    }
    return out;
}

int scenario()
{
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    cfg.readmit_min = 0.05;
    cfg.readmit_max = 0.2;
    dr_mr_t *a = nullptr, *b = nullptr;
    ucp_context_h self_ctx = nullptr;
    ucp_worker_h self_w = nullptr;
    if (mr_pair_open(&a, &b, &cfg) != 0 ||
        !dualrail::test::ucp_open(UCP_FEATURE_AM, "self", nullptr, &self_ctx, &self_w)) {
        std::printf("FAIL: cannot open two contexts and a self-only worker\n");
        return 1;
    }
    Mr *ma = a;
    Link *l = ma->peers[1]->links[0].get();

    /* The link down: its endpoint cannot be made (unit_mr_ep_create_fail). */
    ma->peers[1]->addrs[0] = worker_address(self_w);
    CHECK(dualrail::test::mr_send_big(a, 1) == DR_ERR_PEER_UNREACHABLE, "a send fails");
    CHECK(l->state == DR_LINK_DOWN, "the link is down");
    l->next_probe = UINT64_MAX; /* no probe until the dead connection is in place */

    /* x connects to a's plane; a reads its request and keeps the connection. */
    std::set<int> before;
    for (const Sock &k : sockets()) {
        before.insert(k.fd);
    }
    /* As ucx_mr's own endpoints: a peer's error handling (UCP refuses a mismatch). */
    dualrail::test::RawEndpoint x;
    CHECK(dualrail::test::ucp_open(UCP_FEATURE_AM | UCP_FEATURE_TAG, "tcp", "lo", &x.ctx, &x.w),
          "a raw UCP worker");
    ucp_am_handler_param_t hp;
    std::memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    hp.id = dualrail::mr::kAmId;
    hp.cb = [](void *, const void *, size_t, void *, size_t, const ucp_am_recv_param_t *) {
        return UCS_OK; /* a's probes: never answered */
    };
    CHECK(ucp_worker_set_am_recv_handler(x.w, &hp) == UCS_OK, "x drops a's messages");
    ucp_ep_params_t ep_params;
    std::memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = ma->planes[0]->address;
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = [](void *, ucp_ep_h, ucs_status_t) {};
    CHECK(ucp_ep_create(x.w, &ep_params, &x.ep) == UCS_OK, "its endpoint to a's plane");
    for (double end = now_s() + 0.05; now_s() < end;) {
        ucp_worker_progress(x.w); /* x's connection made and its request sent */
    }
    std::vector<int> acc;
    for (double end = now_s() + 2; acc.empty() && now_s() < end;) {
        dr_mr_progress(a); /* from here not x: its end of the connection stays as it is */
        acc = accepted_since(before);
    }
    for (double end = now_s() + 0.1; now_s() < end;) {
        dr_mr_progress(a); /* the request read, the connection kept for a's endpoint */
    }
    std::printf("a accepted %zu connection(s) from x\n", acc.size());
    CHECK(acc.size() == 1, "a accepted x's connection");

    /* Its end dead, x's address peer 1's, and a probe due now: no poll in between. */
    for (int fd : acc) {
        shutdown(fd, SHUT_RDWR);
    }
    ma->peers[1]->addrs[0] = worker_address(x.w);
    l->next_probe = 0;
    /* The next progress call runs the watchdog (the probe) and leaves the cold plane unpolled
     * (a call within kColdPollUs of the last poll of every plane: one in two calls or so of
     * a real job's progress), so UCX has not read the connection's end when the probe's
     * endpoint is made. */
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* ucx_mr's clock (now_us, not exported) */
    const uint64_t t = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    ma->progress_at = t;
    ma->cold_polled_at = t;
    ma->planes[0]->active_at = 0;
    ma->planes[0]->ops_out = 0;
    ma->last_watchdog = 0;
    for (double end = now_s() + 1.5; now_s() < end;) {
        dr_mr_progress(a);
        ucp_worker_progress(x.w);
    }
    const dualrail::mr::Plane *pl = ma->planes[0].get();
    std::printf("probes %lu, endpoints made %u, stale waits %u (%u expired)\n",
                (unsigned long)pl->stats.probes, l->eps_made, pl->stale_waits,
                pl->stale_waits_expired);
    CHECK(pl->stale_waits >= 1, "the probe's endpoint waited for the dead connection");
    CHECK(pl->stale_waits_expired == 0, "UCX cleared it away within the wait");
    CHECK(pl->stats.probes >= 1 && l->eps_made >= 1, "then a probed x");
    dr_mr_destroy(a); /* every endpoint closed: where the abort came */
    dr_mr_destroy(b);
    x.close();
    ucp_worker_destroy(self_w);
    ucp_cleanup(self_ctx);
    return dualrail::test::check_report();
}

} // namespace

int main()
{
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        const int rc = scenario();
        std::fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "the scenario's process ran");
    std::printf("the scenario's process: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the scenario ends without an abort and its checks hold");
    return dualrail::test::check_report();
}
