/* dualrail-check: the reachability check: a ping on every link between every pair of
 * nodes, acknowledged by the peer. */
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "check.hpp"

namespace drcheck {

namespace {

constexpr uint64_t kPingKey = 1;
constexpr size_t kPingSize = 64;

} // namespace

/* reach[l][i*n+j]: i's ping to j on link l was acknowledged (a round trip on that link). */
std::vector<std::vector<uint8_t>> check_reach(Env &e)
{
    const int L = (int)e.links.size(), n = e.n;
    struct Pending {
        int link, peer;
        bool send;
        dr_mr_req_t *req;
    };
    std::vector<Pending> pend;
    std::vector<std::vector<char>> rbuf((size_t)L * n, std::vector<char>(kPingSize));
    std::vector<char> sbuf(kPingSize, 'p');
    std::vector<uint8_t> sent((size_t)L * n, 0), got((size_t)L * n, 0);
    std::vector<std::string> why((size_t)L * n);
    for (int l = 0; l < L; ++l) {
        for (int j = 0; j < n; ++j) {
            if (j == e.me) {
                continue;
            }
            dr_mr_req_t *r = nullptr;
            if (dr_mr_irecv(e.links[l].mr, (uint32_t)j, kPingKey, rbuf[(size_t)l * n + j].data(),
                            kPingSize, &r) == DR_OK) {
                pend.push_back({l, j, false, r});
            }
            if (dr_mr_isend(e.links[l].mr, (uint32_t)j, kPingKey, sbuf.data(), kPingSize, &r) ==
                DR_OK) {
                pend.push_back({l, j, true, r});
            } else {
                why[(size_t)l * n + j] = "send refused";
            }
        }
    }
    const double end = now_s() + e.o.timeout;
    while (!pend.empty() && now_s() < end) {
        bool any = false;
        for (Link &k : e.links) {
            any |= dr_mr_progress(k.mr) != 0;
        }
        for (size_t i = 0; i < pend.size();) {
            Pending &p = pend[i];
            dr_status_t st = dr_mr_test(e.links[p.link].mr, p.req, nullptr);
            if (st == DR_INPROGRESS) {
                ++i;
                continue;
            }
            size_t idx = (size_t)p.link * n + p.peer;
            if (st == DR_OK) {
                (p.send ? sent : got)[idx] = 1;
            } else if (p.send) {
                why[idx] = dr_status_str(st);
            }
            dr_mr_req_free(e.links[p.link].mr, p.req);
            pend[i] = pend.back();
            pend.pop_back();
            any = true;
        }
        if (!any) {
            nap();
        }
    }
    /* Receives still open are cancelled; sends still open stay with their context
     * (sbuf lives until the contexts are gone) and fail by peer_timeout. */
    for (Pending &p : pend) {
        if (!p.send && dr_mr_cancel(e.links[p.link].mr, p.req) == DR_OK) {
            dr_mr_req_free(e.links[p.link].mr, p.req);
        } else if (p.send) {
            why[(size_t)p.link * n + p.peer] = strf("no answer within %.1f s", e.o.timeout);
        }
    }
    static std::vector<char> keep; /* the unfinished sends' buffer outlives this call */
    keep.swap(sbuf);
    if (e.o.verbose) {
        for (int l = 0; l < L; ++l) {
            for (int j = 0; j < n; ++j) {
                size_t idx = (size_t)l * n + j;
                if (j != e.me && !sent[idx]) {
                    fprintf(stderr, "dualrail-check %s: %s to %s: %s\n", e.names[e.me].c_str(),
                            plane_text(e, l).c_str(), e.names[j].c_str(), why[idx].c_str());
                }
            }
        }
    }
    std::vector<std::vector<uint8_t>> reach(L, std::vector<uint8_t>((size_t)n * n, 0));
    for (int l = 0; l < L; ++l) {
        MPI_Allgather(&sent[(size_t)l * n], n, MPI_BYTE, reach[l].data(), n, MPI_BYTE, e.comm);
    }
    return reach;
}

void report_reach(Env &e, const std::vector<std::vector<uint8_t>> &reach)
{
    const int L = (int)e.links.size(), n = e.n;
    int bad = 0, total = 0;
    std::vector<std::string> lines;
    for (int l = 0; l < L; ++l) {
        const std::vector<uint8_t> &r = reach[l];
        auto ok = [&](int i, int j) { return r[(size_t)i * n + j] != 0; };
        /* A node that reaches no peer and that no peer reaches is the one to look at. */
        std::vector<bool> cut(n, false);
        for (int i = 0; i < n; ++i) {
            int out = 0, in = 0;
            for (int j = 0; j < n; ++j) {
                if (j != i) {
                    out += ok(i, j);
                    in += ok(j, i);
                }
            }
            cut[i] = n > 2 && out == 0 && in == 0;
        }
        int ncut = (int)std::count(cut.begin(), cut.end(), true);
        if (ncut * 2 >= n) {
            std::fill(cut.begin(), cut.end(), false); /* the plane is down, not one node */
        }
        for (int i = 0; i < n; ++i) {
            if (cut[i]) {
                lines.push_back(strf("%s %s: reaches none of its %d peers and none reaches it",
                                     e.names[i].c_str(), plane_text(e, l).c_str(), n - 1));
            }
        }
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                if (i == j) {
                    continue;
                }
                ++total;
                if (ok(i, j)) {
                    continue;
                }
                ++bad;
                if (cut[i] || cut[j]) {
                    continue;
                }
                lines.push_back(strf("%s -> %s on %s: no round trip within %.1f s",
                                     e.names[i].c_str(), e.names[j].c_str(),
                                     plane_text(e, l).c_str(), e.o.timeout));
            }
        }
    }
    if (e.me != 0) {
        return;
    }
    if (bad == 0) {
        printf("[reachability]  ok: %d directed links, every pair on every plane\n", total);
    } else {
        printf("[reachability]  FAIL: %d of %d directed links fail\n", bad, total);
        for (const std::string &s : lines) {
            printf("  %s\n", s.c_str());
            e.findings.push_back(s);
        }
    }
}

} // namespace drcheck
