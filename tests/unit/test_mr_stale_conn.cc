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
 * Made here on loopback, in a child process (an abort is the failure): a raw UCP worker x
 * connects to context a's plane (connection number 0; a's first to x's address will be 0
 * too), a reads the request and keeps the connection for its own endpoint to x. a's end of
 * it is then shut down (as ucx_mr's sever_sockets does, or a reset leaves it), x's address
 * becomes peer 1's, and a sends to peer 1 at once: the endpoint is made inside
 * dr_mr_isend, before any poll of the plane. Then a and x run for 1 s and a is destroyed,
 * every endpoint closed. Checks: the endpoint waited for the dead connection (the plane's
 * endpoint_waits) and was made once UCX had read its end; the child exits 0. Without the wait
 * the child aborts in tcp_cm.c:408 (checked on UCX 1.13.1 and 1.18.1).
 */
#include <sys/socket.h>
#include <sys/wait.h>
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
    dr_mr_t *a = nullptr, *b = nullptr;
    if (mr_pair_open(&a, &b) != 0) {
        std::printf("FAIL: cannot open two contexts\n");
        return 1;
    }
    Mr *ma = a;
    Link *l = ma->peers[1]->links[0].get();

    /* x connects to a's plane (a UCP worker of its own on lo, errors handled as ucx_mr's
     * peers do) and sends its request; a reads it and keeps the connection for its own
     * endpoint to x (x's first connection number is 0, and so is a's first to x). */
    std::set<int> before;
    for (const Sock &k : sockets()) {
        before.insert(k.fd);
    }
    dualrail::test::RawEndpoint x;
    CHECK(x.open(a, UCP_FEATURE_AM | UCP_FEATURE_TAG, true),
          "a raw UCP worker's endpoint to a's plane");
    ucp_am_handler_param_t hp;
    std::memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    hp.id = dualrail::mr::kAmId;
    hp.cb = [](void *, const void *, size_t, void *, size_t, const ucp_am_recv_param_t *) {
        return UCS_OK;
    };
    CHECK(ucp_worker_set_am_recv_handler(x.w, &hp) == UCS_OK, "x drops a's messages");
    for (double end = now_s() + 0.05; now_s() < end;) {
        ucp_worker_progress(x.w);
    }
    std::vector<int> acc;
    for (double end = now_s() + 2; acc.empty() && now_s() < end;) {
        dr_mr_progress(a); /* from here not x: its end of the connection stays as it is */
        acc = accepted_since(before);
    }
    for (double end = now_s() + 0.1; now_s() < end;) {
        dr_mr_progress(a);
    }
    std::printf("a accepted %zu connection(s) from x\n", acc.size());
    CHECK(acc.size() == 1, "a accepted x's connection");

    /* a's end of it dead, x's address peer 1's, and a send at once: the endpoint is made
     * inside dr_mr_isend, with no poll of the plane in between. Peer 1's link is taken for
     * one that had an endpoint before (a new endpoint's first look is skipped). */
    for (int fd : acc) {
        shutdown(fd, SHUT_RDWR);
    }
    ma->peers[1]->addrs[0] = worker_address(x.w);
    l->eps_made = 1;
    const uint64_t v = 42;
    dr_mr_req_t *s = nullptr;
    CHECK(dr_mr_isend(a, 1, 7, &v, sizeof(v), &s) == DR_OK, "a's send to x");
    dr_mr_plane_stats_t st;
    dr_mr_plane_stats(a, 0, &st);
    std::printf("at the send: endpoint %s, endpoint waits %llu\n", l->ep ? "made" : "not made",
                (unsigned long long)st.endpoint_waits);
    CHECK(st.endpoint_waits == 1 && l->ep == nullptr, "the endpoint waits for the dead connection");
    for (double end = now_s() + 1; now_s() < end;) {
        dr_mr_progress(a);
        ucp_worker_progress(x.w);
    }
    dr_mr_plane_stats(a, 0, &st);
    std::printf("then: endpoints made %u, endpoint waits %llu (%llu expired)\n", l->eps_made,
                (unsigned long long)st.endpoint_waits,
                (unsigned long long)st.endpoint_waits_expired);
    CHECK(l->ep != nullptr && l->eps_made == 2, "and is made once UCX has read that end");
    if (s != nullptr) {
        dr_mr_req_free(a, s);
    }
    dr_mr_destroy(a); /* every endpoint closed: where the abort came */
    dr_mr_destroy(b);
    x.close();
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
