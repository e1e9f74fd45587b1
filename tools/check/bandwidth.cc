/* dualrail-check: the bandwidth check: every directed link of every plane and rail
 * measured, pairs disjoint within a round, slow links and ports named. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "dualrail/weights.h"

#include "check.hpp"

namespace drcheck {

namespace {

/* Partner of node `me` in round r (0..m-2, m = n rounded up to even) of a
 * round-robin tournament (circle method): node m-1 stays put and meets r; the
 * others pair up as (r+k, r-k) mod (m-1). -1: a bye (odd n). */
int partner(int me, int n, int r)
{
    const int m = n + (n & 1), c = m - 1;
    int p;
    if (me == c) {
        p = r;
    } else {
        p = ((2 * r - me) % c + c) % c;
        if (p == me) {
            p = c;
        }
    }
    return p < n ? p : -1;
}

struct Stale {
    dr_mr_t *mr;
    dr_mr_req_t *req;
    std::shared_ptr<std::vector<char>> buf;
};

/* One direction of one link between two nodes; both sides call it. Returns the
 * sender's measured bits per second, 0 when it could not complete. */
double measure(Env &e, Link &k, int peer, bool sending, uint64_t base, std::vector<Stale> &stale,
               std::string *why)
{
    const size_t size = e.o.bw_size;
    const int W = e.o.bw_window;
    const double hard = e.o.bw_time + e.o.timeout + 2.0;
    const uint64_t max_msgs = 100000;
    auto buf = std::make_shared<std::vector<char>>((size_t)W * size, 'b');
    std::vector<dr_mr_req_t *> req(W, nullptr);
    dr_mr_t *mr = k.mr;
    const double start = now_s();
    auto expired = [&] { return now_s() - start > hard; };
    auto wait = [&](dr_mr_req_t *r) {
        while (!expired()) {
            dr_status_t st = dr_mr_test(mr, r, nullptr);
            if (st != DR_INPROGRESS) {
                return st;
            }
            if (!dr_mr_progress(mr)) {
                nap();
            }
        }
        return DR_ERR_TIMEOUT;
    };
    if (sending) {
        /* warm-up: connections up, windows open */
        dr_mr_req_t *w = nullptr;
        const size_t wsize = size; /* a full message: TCP windows open before timing */
        (*buf)[0] = 0;
        if (dr_mr_isend(mr, (uint32_t)peer, base, buf->data(), wsize, &w) != DR_OK) {
            *why = "send refused";
            return 0;
        }
        dr_status_t wst = wait(w);
        if (wst != DR_OK) {
            *why = strf("warm-up: %s", dr_status_str(wst));
            if (wst == DR_ERR_TIMEOUT) {
                stale.push_back({mr, w, buf});
            } else {
                dr_mr_req_free(mr, w);
            }
            return 0;
        }
        dr_mr_req_free(mr, w);
        const double t0 = now_s();
        uint64_t issued = 0, done = 0;
        bool last_out = false;
        while (!expired()) {
            for (int s = 0; s < W && !last_out; ++s) {
                if (req[s] != nullptr) {
                    continue;
                }
                bool last = now_s() - t0 >= e.o.bw_time || issued + 1 == max_msgs;
                char *b = buf->data() + (size_t)s * size;
                b[0] = last ? 1 : 0;
                if (dr_mr_isend(mr, (uint32_t)peer, base + 1 + issued, b, size, &req[s]) != DR_OK) {
                    *why = "send refused";
                    last_out = true;
                    break;
                }
                ++issued;
                last_out = last;
            }
            bool any = dr_mr_progress(mr) != 0;
            for (int s = 0; s < W; ++s) {
                if (req[s] == nullptr) {
                    continue;
                }
                dr_status_t st = dr_mr_test(mr, req[s], nullptr);
                if (st == DR_INPROGRESS) {
                    continue;
                }
                dr_mr_req_free(mr, req[s]);
                req[s] = nullptr;
                any = true;
                if (st != DR_OK) {
                    *why = dr_status_str(st);
                    last_out = true;
                } else {
                    ++done;
                }
            }
            if (last_out &&
                std::all_of(req.begin(), req.end(), [](dr_mr_req_t *r) { return r == nullptr; })) {
                break;
            }
            if (!any) {
                nap();
            }
        }
        const double t1 = now_s();
        bool clean = why->empty() && done == issued && issued > 0;
        for (int s = 0; s < W; ++s) {
            if (req[s] != nullptr) {
                stale.push_back({mr, req[s], buf});
                clean = false;
                if (why->empty()) {
                    *why = strf("no completion within %.1f s", hard);
                }
            }
        }
        return clean ? (double)done * (double)size * 8.0 / (t1 - t0) : 0;
    }
    /* receiving: keep W receives posted; stop after the message marked last */
    dr_mr_req_t *w = nullptr;
    if (dr_mr_irecv(mr, (uint32_t)peer, base, buf->data(), size, &w) != DR_OK || wait(w) != DR_OK) {
        if (w != nullptr && dr_mr_cancel(mr, w) == DR_OK) {
            dr_mr_req_free(mr, w);
        }
        return 0;
    }
    dr_mr_req_free(mr, w);
    std::vector<uint64_t> seq(W, 0);
    uint64_t next = 0;
    for (int s = 0; s < W; ++s) {
        seq[s] = next;
        if (dr_mr_irecv(mr, (uint32_t)peer, base + 1 + next, buf->data() + (size_t)s * size, size,
                        &req[s]) != DR_OK) {
            req[s] = nullptr;
        }
        ++next;
    }
    bool finished = false;
    while (!finished && !expired()) {
        bool any = dr_mr_progress(mr) != 0;
        for (int s = 0; s < W && !finished; ++s) {
            if (req[s] == nullptr) {
                continue;
            }
            dr_status_t st = dr_mr_test(mr, req[s], nullptr);
            if (st == DR_INPROGRESS) {
                continue;
            }
            dr_mr_req_free(mr, req[s]);
            req[s] = nullptr;
            any = true;
            if (st != DR_OK || (*buf)[(size_t)s * size] == 1 || next >= max_msgs + W) {
                finished = true;
                break;
            }
            seq[s] = next;
            if (dr_mr_irecv(mr, (uint32_t)peer, base + 1 + next, buf->data() + (size_t)s * size,
                            size, &req[s]) != DR_OK) {
                req[s] = nullptr;
            }
            ++next;
        }
        if (!any) {
            nap();
        }
    }
    for (int s = 0; s < W; ++s) {
        if (req[s] != nullptr) {
            if (dr_mr_cancel(mr, req[s]) == DR_OK) {
                dr_mr_req_free(mr, req[s]);
            }
        }
    }
    return 0;
}

} // namespace

void check_bandwidth(Env &e, const std::vector<std::vector<uint8_t>> &reach)
{
    const int L = (int)e.links.size(), n = e.n;
    /* bw[l][i*n+j]: i -> j, bits/s; -1 not measured, 0 failed */
    std::vector<std::vector<double>> mine(L, std::vector<double>(n, -1.0));
    std::vector<std::vector<std::string>> why(L, std::vector<std::string>(n));
    std::vector<Stale> stale;
    const int m = n + (n & 1);
    const int rounds = e.o.no_bw || n < 2 ? 0 : m - 1;
    for (int r = 0; r < rounds; ++r) {
        int p = partner(e.me, n, r);
        if (p >= 0) {
            for (int l = 0; l < L; ++l) {
                auto ok = [&](int i, int j) { return reach[l][(size_t)i * n + j] != 0; };
                if (!ok(e.me, p) || !ok(p, e.me)) {
                    continue;
                }
                /* the lower index sends first, then the other way */
                for (int dir = 0; dir < 2; ++dir) {
                    int sender = dir == 0 ? std::min(e.me, p) : std::max(e.me, p);
                    uint64_t base =
                        ((uint64_t)(r + 1) << 40) | ((uint64_t)l << 32) | ((uint64_t)dir << 31);
                    std::string w;
                    double bps = measure(e, e.links[l], p, sender == e.me, base, stale, &w);
                    if (sender == e.me) {
                        mine[l][p] = bps;
                        why[l][p] = w;
                    }
                }
            }
        }
        if (!barrier(e, 120.0)) {
            fprintf(stderr,
                    "dualrail-check %s: a node did not finish bandwidth round %d in 120 s\n",
                    e.names[e.me].c_str(), r);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    /* Unfinished sends keep their buffers until they end (bounded by peer_timeout). */
    const double end = now_s() + e.o.timeout + 2.0;
    while (!stale.empty() && now_s() < end) {
        for (size_t i = 0; i < stale.size();) {
            dr_mr_progress(stale[i].mr);
            if (dr_mr_test(stale[i].mr, stale[i].req, nullptr) != DR_INPROGRESS) {
                dr_mr_req_free(stale[i].mr, stale[i].req);
                stale[i] = stale.back();
                stale.pop_back();
            } else {
                ++i;
            }
        }
        nap();
    }
    static std::vector<Stale> keep; /* still running: their buffers live until exit */
    keep.swap(stale);

    std::vector<std::vector<double>> bw(L, std::vector<double>((size_t)n * n, -1.0));
    for (int l = 0; l < L; ++l) {
        MPI_Allgather(mine[l].data(), n, MPI_DOUBLE, bw[l].data(), n, MPI_DOUBLE, e.comm);
    }
    if (e.me != 0) {
        return;
    }
    if (rounds == 0) {
        printf("[bandwidth]     not measured%s\n", e.o.no_bw ? " (--no-bw)" : " (one node)");
        return;
    }
    std::vector<std::string> lines, info;
    int unmeasured = 0;
    for (int l = 0; l < L; ++l) {
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                unmeasured +=
                    i != j && (!reach[l][(size_t)i * n + j] || !reach[l][(size_t)j * n + i]);
            }
        }
    }
    if (unmeasured > 0) {
        info.push_back(strf("not measured: %d directed link%s without a round trip both ways",
                            unmeasured, unmeasured == 1 ? "" : "s"));
    }
    for (int l = 0; l < L; ++l) {
        auto at = [&](int i, int j) { return bw[l][(size_t)i * n + j]; };
        std::vector<double> vals;
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                if (i != j && at(i, j) > 0) {
                    vals.push_back(at(i, j));
                }
            }
        }
        if (vals.empty()) {
            info.push_back(strf("%s: no link measured", plane_text(e, l).c_str()));
            continue;
        }
        std::sort(vals.begin(), vals.end());
        size_t h = vals.size() / 2;
        double med = vals.size() % 2 ? vals[h] : (vals[h - 1] + vals[h]) / 2;
        double lo = med * (1.0 - e.o.tolerance);
        info.push_back(strf("%s: median %s over %zu links, min %s, max %s",
                            plane_text(e, l).c_str(), rate_text(med).c_str(), vals.size(),
                            rate_text(vals.front()).c_str(), rate_text(vals.back()).c_str()));
        auto slow = [&](int i, int j) { return at(i, j) > 0 && at(i, j) < lo; };
        std::vector<std::vector<bool>> told(n, std::vector<bool>(n, false));
        /* A node whose every measured link in one direction is slow: its port. */
        for (int x = 0; x < n && n > 2; ++x) {
            int out = 0, outslow = 0, in = 0, inslow = 0;
            double outsum = 0, insum = 0;
            for (int j = 0; j < n; ++j) {
                if (j == x) {
                    continue;
                }
                if (at(x, j) > 0) {
                    ++out;
                    outsum += at(x, j);
                    outslow += slow(x, j);
                }
                if (at(j, x) > 0) {
                    ++in;
                    insum += at(j, x);
                    inslow += slow(j, x);
                }
            }
            bool tx = out >= 2 && outslow == out, rx = in >= 2 && inslow == in;
            if (!tx && !rx) {
                continue;
            }
            std::string s = strf("%s %s: ", e.names[x].c_str(), plane_text(e, l).c_str());
            if (tx && rx) {
                s += strf("slow both ways on all %d links (sends %s, receives %s, median %s)", out,
                          rate_text(outsum / out).c_str(), rate_text(insum / in).c_str(),
                          rate_text(med).c_str());
            } else if (tx) {
                s += strf("transmit slow on all %d links (%s vs median %s); receive normal "
                          "(%s): asymmetric",
                          out, rate_text(outsum / out).c_str(), rate_text(med).c_str(),
                          rate_text(in ? insum / in : 0).c_str());
            } else {
                s += strf("receive slow on all %d links (%s vs median %s); transmit normal "
                          "(%s): asymmetric",
                          in, rate_text(insum / in).c_str(), rate_text(med).c_str(),
                          rate_text(out ? outsum / out : 0).c_str());
            }
            lines.push_back(s);
            for (int j = 0; j < n; ++j) {
                if (tx) {
                    told[x][j] = true;
                }
                if (rx) {
                    told[j][x] = true;
                }
            }
        }
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                if (i == j || told[i][j]) {
                    continue;
                }
                if (slow(i, j)) {
                    lines.push_back(strf("slow link %s -> %s on %s: %s, %.0f%% below the median %s",
                                         e.names[i].c_str(), e.names[j].c_str(),
                                         plane_text(e, l).c_str(), rate_text(at(i, j)).c_str(),
                                         100.0 * (1.0 - at(i, j) / med), rate_text(med).c_str()));
                } else if (at(i, j) == 0) {
                    lines.push_back(strf("link %s -> %s on %s: measurement failed",
                                         e.names[i].c_str(), e.names[j].c_str(),
                                         plane_text(e, l).c_str()));
                }
            }
        }
        /* Pairs whose two directions differ although neither is below the median. */
        for (int i = 0; i < n; ++i) {
            for (int j = i + 1; j < n; ++j) {
                double a = at(i, j), b = at(j, i);
                if (a <= 0 || b <= 0 || slow(i, j) || slow(j, i) || told[i][j] || told[j][i]) {
                    continue;
                }
                if (std::min(a, b) < std::max(a, b) * (1.0 - e.o.tolerance)) {
                    lines.push_back(
                        strf("asymmetric link %s <-> %s on %s: %s one way, %s the other",
                             e.names[i].c_str(), e.names[j].c_str(), plane_text(e, l).c_str(),
                             rate_text(a).c_str(), rate_text(b).c_str()));
                }
            }
        }
        if (e.o.verbose) {
            for (int i = 0; i < n; ++i) {
                for (int j = 0; j < n; ++j) {
                    if (i != j && at(i, j) >= 0) {
                        info.push_back(strf("  %s -> %s: %s", e.names[i].c_str(),
                                            e.names[j].c_str(), rate_text(at(i, j)).c_str()));
                    }
                }
            }
        }
    }
    /* What ucx_mr's adaptive weights (coll_dualrail_weights adaptive) settle at for the
     * rates measured: the same estimator arithmetic, per directed link, shown where one
     * plane would carry under three quarters of an even share; it names the same slow
     * links as the findings above, and what striping does about them. */
    if (L == e.nplanes && L >= 2 && L <= DR_MAX_PLANES) {
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                double rates[DR_MAX_PLANES], shares[DR_MAX_PLANES];
                bool all = i != j;
                for (int l = 0; all && l < L; ++l) {
                    rates[l] = bw[l][(size_t)i * n + j];
                    all = rates[l] > 0;
                }
                if (!all) {
                    continue;
                }
                dr_weights_shares_for_rates(rates, L, shares);
                int lo = 0;
                for (int l = 1; l < L; ++l) {
                    lo = shares[l] < shares[lo] ? l : lo;
                }
                if (shares[lo] >= 0.75 / L) {
                    continue;
                }
                std::string s =
                    strf("adaptive weights %s -> %s: %s %.2f of each message", e.names[i].c_str(),
                         e.names[j].c_str(), plane_text(e, lo).c_str(), shares[lo]);
                for (int l = 0; l < L; ++l) {
                    if (l != lo) {
                        s += strf(", %s %.2f", plane_text(e, l).c_str(), shares[l]);
                    }
                }
                info.push_back(s);
            }
        }
    }
    if (lines.empty()) {
        printf("[bandwidth]     ok: every link within %.0f%% of its plane's median\n",
               100.0 * e.o.tolerance);
    } else {
        printf("[bandwidth]     FAIL\n");
    }
    for (const std::string &s : info) {
        printf("  %s\n", s.c_str());
    }
    for (const std::string &s : lines) {
        printf("  %s\n", s.c_str());
        e.findings.push_back(s);
    }
}

} // namespace drcheck
