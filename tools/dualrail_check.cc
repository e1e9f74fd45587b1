/*
 * dualrail-check: verify a dual-plane fabric's wiring before trusting it.
 * An MPI program; one process per node does the work (the first rank of each
 * host), the others wait. Run it with one rank per node:
 *
 *     mpirun --map-by ppr:1:node dualrail-check [options]
 *
 * Checks, each bounded in count and time:
 *
 *  planes        every node has the same planes (identity: IPv4 subnet or IB
 *                subnet prefix) with the same number of devices ("rails").
 *  reachability  every pair of nodes reaches each other on every rail of every
 *                plane: a ping through ucx_mr (one context per rail, so UCX
 *                can use nothing else) that completes only when the peer has
 *                acknowledged it. Bounded by --timeout.
 *  isolation     no port reaches another plane: from each Ethernet port, RFC
 *                5227 ARP probes (sender address 0, so no host's routing or
 *                reverse-path filter interferes) for the peers' addresses on
 *                every plane. A reply from another plane's address means the
 *                segments touch; a port that hears only another plane's
 *                addresses is plugged into that plane (mis-cabled). Probes go
 *                to at most --isolation-peers peers (the next ones by rank),
 *                3 rounds of 0.2 s. Needs CAP_NET_RAW; skipped otherwise.
 *  bandwidth     per plane and rail, every directed link measured for
 *                --bw-time seconds, pairs disjoint within a round
 *                (round-robin tournament: n-1 rounds for n nodes). A link
 *                slower than the plane's median by more than --bw-tolerance
 *                is reported; when all of a node's links on a rail are slow
 *                in one direction the node's port is named. With one rail per
 *                plane, the links that ucx_mr's adaptive weights would stripe
 *                unevenly for these rates are listed with their shares (the
 *                estimator's own arithmetic, dr_weights_shares_for_rates).
 *
 * Output: one section per check, then every finding on a line of its own
 * ("finding: ..."). Exit status: 0 clean, 1 findings, 2 usage or setup error.
 */
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/if_ether.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* the C API only: no C++ bindings to link */
#define OMPI_SKIP_MPICXX  1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <boost/program_options.hpp>
#include <ucs/config/global_opts.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dualrail/planes.h"
#include "dualrail/weights.h"
#include "dualrail/topo.h"
#include "dualrail/ucx_mr.h"

namespace po = boost::program_options;

namespace {

constexpr int kNameMax = 64;
constexpr int kSigMax = 1024;
constexpr uint64_t kPingKey = 1;
constexpr size_t kPingSize = 64;

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nap()
{
    struct timespec ts = {0, 50000};
    nanosleep(&ts, nullptr);
}

std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

std::string rate_text(double bps)
{
    if (bps >= 1e9) {
        return strf("%.2f Gbit/s", bps / 1e9);
    }
    return strf("%.1f Mbit/s", bps / 1e6);
}

struct Options {
    std::string planes, include, exclude;
    double timeout = 5.0;
    double bw_time = 0.3;
    size_t bw_size = 1 << 20;
    int bw_window = 4;
    double tolerance = 0.25;
    int iso_peers = 8;
    bool no_bw = false, no_iso = false;
    int verbose = 0;
};

/* One rail of one plane on this node. */
struct Link {
    int plane = 0, rail = 0;
    std::string device, netdev, ipv4;
    dr_mr_t *mr = nullptr;
    std::vector<std::string> log;
};

/* What every node publishes about one of its links. */
struct LinkPub {
    char device[kNameMax];
    char netdev[kNameMax];
    char ipv4[16];
};

struct Env {
    Options o;
    MPI_Comm comm = MPI_COMM_NULL; /* one rank per node */
    int me = 0, n = 0;
    std::vector<std::string> names; /* node names by index */
    std::vector<Link> links;        /* this node's */
    int nplanes = 0;
    std::vector<std::vector<LinkPub>> pub; /* [node][link] */
    std::vector<std::string> findings;     /* root only */
};

/* ------------------------------------------------------------------ helpers */

void mr_log(int level, const char *msg, void *arg)
{
    (void)level;
    auto *v = static_cast<std::vector<std::string> *>(arg);
    if (v->size() < 200) {
        v->push_back(msg);
    }
}

void progress_all(Env &e)
{
    for (Link &l : e.links) {
        if (l.mr != nullptr) {
            dr_mr_progress(l.mr);
        }
    }
}

/* A barrier that keeps every plane progressing while it waits (a peer may still
 * need our acknowledgements); bounded. */
bool barrier(Env &e, double limit)
{
    MPI_Request r;
    MPI_Ibarrier(e.comm, &r);
    const double end = now_s() + limit;
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) {
            return true;
        }
        if (now_s() > end) {
            return false;
        }
        progress_all(e);
        nap();
    }
}

/* "plane 1 (ethB)" or "plane 1 rail 2 (mlx5_3:1)" */
std::string plane_text(const Env &e, int l)
{
    const Link &k = e.links[l];
    int rails = 0;
    for (const Link &x : e.links) {
        rails += x.plane == k.plane;
    }
    if (rails > 1) {
        return strf("plane %d rail %d (%s)", k.plane, k.rail, k.device.c_str());
    }
    return strf("plane %d (%s)", k.plane, k.device.c_str());
}

/* ------------------------------------------------------------------ planes */

/* Interfaces the MPI runtime is pinned to are the management network, never a plane. */
std::vector<std::string> runtime_interfaces(const std::vector<dr_topo_ifaddr_t> &ifs)
{
    std::vector<std::string> out;
    static const char *const vars[] = DR_TOPO_RUNTIME_IF_ENVS;
    for (const char *var : vars) {
        const char *v = getenv(var);
        if (v == nullptr) {
            continue;
        }
        std::string all(v);
        size_t pos = 0;
        while (pos <= all.size()) {
            size_t c = all.find(',', pos);
            std::string item =
                all.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
            size_t slash = item.find('/');
            if (slash != std::string::npos) {
                in_addr net, a;
                int len = atoi(item.c_str() + slash + 1);
                if (inet_pton(AF_INET, item.substr(0, slash).c_str(), &net) == 1 && len >= 0 &&
                    len <= 32) {
                    uint32_t mask = len == 0 ? 0 : 0xffffffffu << (32 - len);
                    for (const dr_topo_ifaddr_t &f : ifs) {
                        if (inet_pton(AF_INET, f.ipv4, &a) == 1 &&
                            (ntohl(a.s_addr) & mask) == (ntohl(net.s_addr) & mask)) {
                            out.push_back(f.name);
                        }
                    }
                }
            } else if (!item.empty()) {
                out.push_back(item);
            }
            if (c == std::string::npos) {
                break;
            }
            pos = c + 1;
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

/* The identity of the network a device is on ("ipv4:10.209.1.0/24"), or "". */
std::string device_identity(const dr_topo_t *t, const std::vector<dr_topo_ifaddr_t> &ifs,
                            const std::string &dev, std::string *netdev, std::string *ipv4)
{
    std::string nd = dev.substr(0, dev.find(':'));
    const dr_topo_nic_t *nic = nullptr;
    int ni = t != nullptr ? dr_topo_find_nic(t, dev.c_str()) : -1;
    if (ni >= 0) {
        nic = dr_topo_nic_at(t, ni);
        nd = nic->netdev;
    }
    *netdev = nd;
    for (const dr_topo_ifaddr_t &f : ifs) {
        if (nd == f.name) {
            *ipv4 = f.ipv4;
            in_addr a;
            inet_pton(AF_INET, f.ipv4, &a);
            uint32_t mask = f.prefix == 0 ? 0 : 0xffffffffu << (32 - f.prefix);
            in_addr net;
            net.s_addr = htonl(ntohl(a.s_addr) & mask);
            char buf[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &net, buf, sizeof(buf));
            if (nic != nullptr && nic->infiniband && nic->ib_subnet[0] != 0 &&
                strcmp(nic->ib_subnet, "fe80:0000:0000:0000") != 0) {
                return std::string("ib:") + nic->ib_subnet;
            }
            return strf("ipv4:%s/%d", buf, f.prefix);
        }
    }
    if (nic != nullptr && nic->ib_subnet[0] != 0) {
        return std::string("ib:") + nic->ib_subnet;
    }
    return "";
}

/* Returns false (and has printed why on rank 0 of the node set) when the check cannot go on. */
bool setup_planes(Env &e, std::string &header, int *rc)
{
    char err[1024] = "";
    const dr_topo_t *t = dr_topo_system(nullptr, 0);
    std::vector<dr_topo_ifaddr_t> ifs(256);
    int nifs = 0;
    dr_topo_ifaddrs_system(ifs.data(), (int)ifs.size(), &nifs);
    ifs.resize((size_t)nifs);

    dr_plane_list_t list;
    std::vector<std::string> ids;
    bool ok = true;
    std::string what;
    if (!e.o.planes.empty()) {
        if (dr_plane_list_parse(e.o.planes.c_str(), &list, err, sizeof(err)) != DR_OK ||
            dr_plane_list_check(&list, nullptr, nullptr, err, sizeof(err)) != DR_OK) {
            ok = false;
            what = err;
        }
        /* An interface that is down would only fail later, less clearly. */
        for (int p = 0; ok && p < list.nplanes; ++p) {
            for (int d = 0; d < list.planes[p].ndevices; ++d) {
                std::string nd, ip, dev = list.planes[p].devices[d];
                device_identity(t, ifs, dev, &nd, &ip);
                for (const dr_topo_ifaddr_t &f : ifs) {
                    if (nd == f.name && !f.up) {
                        what += strf("%s%s (plane %d) is down", what.empty() ? "" : ", ",
                                     dev.c_str(), p);
                        break;
                    }
                }
            }
        }
        ok = ok && what.empty();
        header = "given";
    } else {
        std::vector<std::string> rt = runtime_interfaces(ifs);
        std::string exclude = e.o.exclude;
        for (const std::string &r : rt) {
            exclude += (exclude.empty() ? "" : ",") + r;
        }
        dr_topo_discover_opts_t dopts{e.o.include.empty() ? nullptr : e.o.include.c_str(),
                                      exclude.empty() ? nullptr : exclude.c_str()};
        dr_topo_discovery_t d;
        if (dr_topo_discover(t, ifs.data(), (int)ifs.size(), &dopts, &d, err, sizeof(err)) !=
            DR_OK) {
            ok = false;
            what = err;
        } else {
            list = d.list;
        }
        header = "discovered";
        if (!rt.empty()) {
            std::string r;
            for (const std::string &x : rt) {
                r += (r.empty() ? "" : ", ") + x;
            }
            header += "; the MPI runtime's network (" + r + ") left out";
        }
    }
    /* Signature: every plane's identity (all of its devices') and device count. */
    char sig[kSigMax] = "";
    std::vector<std::string> pids;
    if (ok) {
        std::string s;
        for (int p = 0; p < list.nplanes; ++p) {
            std::set<std::string> pid;
            for (int d = 0; d < list.planes[p].ndevices; ++d) {
                Link l;
                l.plane = p;
                l.rail = d;
                l.device = list.planes[p].devices[d];
                /* UCX names an RDMA device by port: mlx5_0 -> mlx5_0:1 */
                int ni = t != nullptr ? dr_topo_find_nic(t, l.device.c_str()) : -1;
                if (ni >= 0 && dr_topo_nic_at(t, ni)->rdma[0] != 0) {
                    l.device = dr_topo_nic_at(t, ni)->name;
                }
                std::string id = device_identity(t, ifs, l.device, &l.netdev, &l.ipv4);
                pid.insert(id.empty() ? "?" : id);
                e.links.push_back(l);
            }
            std::string id;
            for (const std::string &x : pid) {
                id += (id.empty() ? "" : "+") + x;
            }
            s += strf("%s%s*%d", p ? "," : "", id.c_str(), list.planes[p].ndevices);
            pids.push_back(id);
        }
        snprintf(sig, sizeof(sig), "%s", s.c_str());
        e.nplanes = list.nplanes;
    } else {
        snprintf(sig, sizeof(sig), "!%s", what.c_str());
    }
    std::vector<char> all((size_t)e.n * kSigMax);
    MPI_Allgather(sig, kSigMax, MPI_CHAR, all.data(), kSigMax, MPI_CHAR, e.comm);
    std::vector<std::string> sigs;
    std::vector<const char *> sp, np;
    bool any_error = false;
    std::vector<std::pair<std::string, std::string>> errors; /* reason, nodes: in node order */
    for (int i = 0; i < e.n; ++i) {
        std::string s(&all[(size_t)i * kSigMax], strnlen(&all[(size_t)i * kSigMax], kSigMax));
        if (!s.empty() && s[0] == '!') {
            any_error = true;
            auto it = std::find_if(errors.begin(), errors.end(),
                                   [&](const std::pair<std::string, std::string> &x) {
                                       return x.first == s.substr(1);
                                   });
            if (it == errors.end()) {
                errors.emplace_back(s.substr(1), e.names[i]);
            } else {
                it->second += ", " + e.names[i];
            }
            s.clear();
        }
        sigs.push_back(s);
    }
    if (e.me == 0) {
        for (auto &x : errors) {
            e.findings.push_back(x.second + ": " + x.first);
        }
    }
    for (int i = 0; i < e.n; ++i) {
        sp.push_back(sigs[i].c_str());
        np.push_back(e.names[i].c_str());
    }
    if (dr_topo_signatures_check(sp.data(), np.data(), e.n, err, sizeof(err)) != DR_OK) {
        if (e.me == 0 && !any_error) {
            e.findings.push_back(err);
        }
        any_error = true;
    }
    if (e.me == 0) {
        printf("dualrail-check: %d node%s, planes %s\n", e.n, e.n == 1 ? "" : "s", header.c_str());
        if (!any_error) {
            for (int p = 0; p < e.nplanes; ++p) {
                std::string devs;
                for (const Link &l : e.links) {
                    if (l.plane == p) {
                        devs += (devs.empty() ? "" : " ") + l.device;
                    }
                }
                printf("  plane %d  %-26s %s\n", p, pids[p].c_str(), devs.c_str());
            }
            printf("[planes]        ok: every node has the same %d plane%s\n", e.nplanes,
                   e.nplanes == 1 ? "" : "s");
        } else {
            printf("[planes]        FAIL\n");
            for (const std::string &f : e.findings) {
                printf("  %s\n", f.c_str());
            }
        }
    }
    if (any_error) {
        *rc = 1;
        return false;
    }
    return true;
}

/* Open one ucx_mr context per link and exchange addresses. */
bool setup_contexts(Env &e, int *rc)
{
    const int L = (int)e.links.size();
    std::vector<int> status(L, 0);
    std::vector<std::string> errs(L);
    for (int l = 0; l < L; ++l) {
        Link &k = e.links[l];
        dr_mr_config_t cfg;
        dr_mr_config_default(&cfg);
        std::string name = e.names[e.me] + " " + k.device;
        cfg.planes = k.device.c_str();
        cfg.name = name.c_str();
        cfg.verbose = e.o.verbose > 1 ? 2 : e.o.verbose;
        cfg.log = mr_log;
        cfg.log_arg = &k.log;
        /* One rail per context: a failure here is this rail's, never re-routed. No
         * re-admission: a link found down stays down for this run. */
        cfg.peer_timeout = e.o.timeout;
        cfg.readmit_min = cfg.readmit_max = 3600.0;
        /* A reachability ping must complete only when the peer acknowledges it: a copied
         * small send (the default) completes at once, and every link would look alive. */
        cfg.copy_max = 0;
        char err[512] = "";
        if (dr_mr_create(&cfg, (uint32_t)e.me, &k.mr, err, sizeof(err)) != DR_OK) {
            status[l] = 1;
            errs[l] = err;
            k.mr = nullptr;
        }
    }
    /* Everyone learns which contexts failed anywhere. */
    std::vector<int> all((size_t)e.n * L);
    MPI_Allgather(status.data(), L, MPI_INT, all.data(), L, MPI_INT, e.comm);
    bool failed = false;
    for (int i = 0; i < e.n; ++i) {
        for (int l = 0; l < L; ++l) {
            failed |= all[(size_t)i * L + l] != 0;
        }
    }
    if (failed) {
        if (e.me == 0) {
            printf("[transport]     FAIL: cannot open a UCX context on every link\n");
        }
        /* Gather the reasons to rank 0 for the report. */
        for (int l = 0; l < L; ++l) {
            char buf[512] = "";
            snprintf(buf, sizeof(buf), "%s", errs[l].c_str());
            std::vector<char> reasons(e.me == 0 ? (size_t)e.n * 512 : 1);
            MPI_Gather(buf, 512, MPI_CHAR, reasons.data(), 512, MPI_CHAR, 0, e.comm);
            if (e.me == 0) {
                for (int i = 0; i < e.n; ++i) {
                    if (all[(size_t)i * L + l] != 0) {
                        e.findings.push_back(strf("%s %s: cannot open: %s", e.names[i].c_str(),
                                                  plane_text(e, l).c_str(),
                                                  &reasons[(size_t)i * 512]));
                        printf("  %s\n", e.findings.back().c_str());
                    }
                }
            }
        }
        *rc = 1;
        return false;
    }
    for (int l = 0; l < L; ++l) {
        const void *addr;
        size_t len;
        dr_mr_address(e.links[l].mr, &addr, &len);
        int mylen = (int)len;
        std::vector<int> lens(e.n), offs(e.n);
        MPI_Allgather(&mylen, 1, MPI_INT, lens.data(), 1, MPI_INT, e.comm);
        int total = 0;
        for (int i = 0; i < e.n; ++i) {
            offs[i] = total;
            total += lens[i];
        }
        std::vector<char> blobs((size_t)total);
        MPI_Allgatherv(addr, mylen, MPI_BYTE, blobs.data(), lens.data(), offs.data(), MPI_BYTE,
                       e.comm);
        for (int i = 0; i < e.n; ++i) {
            if (i == e.me) {
                continue;
            }
            char err[512];
            if (dr_mr_add_peer(e.links[l].mr, (uint32_t)i, &blobs[(size_t)offs[i]], (size_t)lens[i],
                               err, sizeof(err)) != DR_OK) {
                fprintf(stderr, "dualrail-check %s: peer %s: %s\n", e.names[e.me].c_str(),
                        e.names[i].c_str(), err);
                *rc = 2;
                return false;
            }
        }
    }
    /* Everyone's link addresses, for isolation probes and messages. */
    std::vector<LinkPub> mine(L);
    for (int l = 0; l < L; ++l) {
        memset(&mine[l], 0, sizeof(LinkPub));
        snprintf(mine[l].device, sizeof(mine[l].device), "%s", e.links[l].device.c_str());
        snprintf(mine[l].netdev, sizeof(mine[l].netdev), "%s", e.links[l].netdev.c_str());
        snprintf(mine[l].ipv4, sizeof(mine[l].ipv4), "%s", e.links[l].ipv4.c_str());
    }
    std::vector<LinkPub> allpub((size_t)e.n * L);
    MPI_Allgather(mine.data(), (int)(L * sizeof(LinkPub)), MPI_BYTE, allpub.data(),
                  (int)(L * sizeof(LinkPub)), MPI_BYTE, e.comm);
    e.pub.assign(e.n, std::vector<LinkPub>(L));
    for (int i = 0; i < e.n; ++i) {
        for (int l = 0; l < L; ++l) {
            e.pub[i][l] = allpub[(size_t)i * L + l];
        }
    }
    return true;
}

/* ------------------------------------------------------------------ reachability */

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

/* ------------------------------------------------------------------ isolation */

struct __attribute__((packed)) ArpFrame {
    struct ether_header eh;
    struct ether_arp arp;
};

struct Port {
    int link;
    int fd = -1;
    int ifindex = 0;
    uint8_t mac[6];
    std::string skip; /* why this port is not probed */
};

/* obs[src_link][peer*L + dst_link]: an ARP probe from our src_link port for the
 * peer's dst_link address was answered. */
struct IsoResult {
    std::vector<std::vector<uint8_t>> obs;
    std::vector<std::string> skip; /* per link */
};

IsoResult probe_isolation(Env &e)
{
    const int L = (int)e.links.size(), n = e.n;
    IsoResult res;
    res.obs.assign(L, std::vector<uint8_t>((size_t)n * L, 0));
    res.skip.assign(L, "");
    if (e.o.no_iso) {
        for (int l = 0; l < L; ++l) {
            res.skip[l] = "not asked for (--no-isolation)";
        }
        return res;
    }
    /* The peers probed: the next iso_peers nodes by index (all of them on a small
     * fabric); each port is then also probed by as many others. */
    std::vector<int> peers;
    for (int k = 1; k < n && k <= e.o.iso_peers; ++k) {
        peers.push_back((e.me + k) % n);
    }
    std::vector<Port> ports(L);
    for (int l = 0; l < L; ++l) {
        Port &p = ports[l];
        p.link = l;
        const Link &k = e.links[l];
        if (peers.empty()) {
            p.skip = "no peer to probe";
            continue;
        }
        if (k.netdev.empty() || k.ipv4.empty()) {
            p.skip = "no IPv4 interface";
            continue;
        }
        p.ifindex = (int)if_nametoindex(k.netdev.c_str());
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", k.netdev.c_str());
        bool ether = s >= 0 && ioctl(s, SIOCGIFHWADDR, &ifr) == 0 &&
                     ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER;
        if (s >= 0) {
            close(s);
        }
        if (p.ifindex == 0 || !ether) {
            p.skip = p.ifindex == 0
                         ? "interface not found"
                         : "not Ethernet (InfiniBand planes are told apart by subnet prefix)";
            continue;
        }
        memcpy(p.mac, ifr.ifr_hwaddr.sa_data, 6);
        p.fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ARP));
        if (p.fd < 0) {
            p.skip = errno == EPERM ? "needs CAP_NET_RAW (run as root)" : strerror(errno);
            continue;
        }
        struct sockaddr_ll sll;
        memset(&sll, 0, sizeof(sll));
        sll.sll_family = AF_PACKET;
        sll.sll_protocol = htons(ETH_P_ARP);
        sll.sll_ifindex = p.ifindex;
        if (bind(p.fd, reinterpret_cast<sockaddr *>(&sll), sizeof(sll)) != 0) {
            p.skip = strerror(errno);
            close(p.fd);
            p.fd = -1;
        }
    }
    /* Targets: every probed peer's address on every link. */
    struct Target {
        int peer, link;
        in_addr ip;
    };
    std::vector<Target> targets;
    for (int j : peers) {
        for (int l = 0; l < L; ++l) {
            Target t{j, l, {}};
            if (inet_pton(AF_INET, e.pub[j][l].ipv4, &t.ip) == 1) {
                targets.push_back(t);
            }
        }
    }
    for (int round = 0; round < 3; ++round) {
        for (Port &p : ports) {
            if (p.fd < 0) {
                continue;
            }
            for (const Target &t : targets) {
                if (res.obs[p.link][(size_t)t.peer * L + t.link]) {
                    continue;
                }
                ArpFrame f;
                memset(&f, 0, sizeof(f));
                memset(f.eh.ether_dhost, 0xff, 6);
                memcpy(f.eh.ether_shost, p.mac, 6);
                f.eh.ether_type = htons(ETHERTYPE_ARP);
                f.arp.arp_hrd = htons(ARPHRD_ETHER);
                f.arp.arp_pro = htons(ETHERTYPE_IP);
                f.arp.arp_hln = 6;
                f.arp.arp_pln = 4;
                f.arp.arp_op = htons(ARPOP_REQUEST);
                memcpy(f.arp.arp_sha, p.mac, 6);
                /* sender IP 0.0.0.0: an RFC 5227 probe, answered without any route check */
                memcpy(f.arp.arp_tpa, &t.ip, 4);
                if (send(p.fd, &f, sizeof(f), 0) < 0 && e.o.verbose) {
                    fprintf(stderr, "dualrail-check %s: arp probe on %s: %s\n",
                            e.names[e.me].c_str(), e.links[p.link].netdev.c_str(), strerror(errno));
                }
            }
        }
        const double end = now_s() + 0.2;
        while (now_s() < end) {
            std::vector<pollfd> pfd;
            for (Port &p : ports) {
                if (p.fd >= 0) {
                    pfd.push_back({p.fd, POLLIN, 0});
                }
            }
            if (pfd.empty()) {
                break;
            }
            poll(pfd.data(), pfd.size(), 20);
            for (Port &p : ports) {
                if (p.fd < 0) {
                    continue;
                }
                for (int k = 0; k < 256; ++k) {
                    uint8_t buf[256];
                    struct sockaddr_ll from;
                    socklen_t fl = sizeof(from);
                    ssize_t got = recvfrom(p.fd, buf, sizeof(buf), 0,
                                           reinterpret_cast<sockaddr *>(&from), &fl);
                    if (got < 0) {
                        break;
                    }
                    if (from.sll_pkttype == PACKET_OUTGOING || got < (ssize_t)sizeof(ArpFrame)) {
                        continue;
                    }
                    ArpFrame f;
                    memcpy(&f, buf, sizeof(f));
                    if (ntohs(f.arp.arp_op) != ARPOP_REPLY ||
                        memcmp(f.arp.arp_tha, p.mac, 6) != 0) {
                        continue;
                    }
                    for (const Target &t : targets) {
                        if (memcmp(f.arp.arp_spa, &t.ip, 4) == 0) {
                            res.obs[p.link][(size_t)t.peer * L + t.link] = 1;
                        }
                    }
                }
            }
        }
    }
    for (Port &p : ports) {
        if (p.fd >= 0) {
            close(p.fd);
        }
        res.skip[p.link] = p.skip;
    }
    return res;
}

void report_isolation(Env &e, const IsoResult &mine)
{
    const int L = (int)e.links.size(), n = e.n;
    /* Everything to rank 0: obs[node][src][peer*L+dst], and the reasons for skipping. */
    std::vector<uint8_t> flat((size_t)L * n * L);
    for (int l = 0; l < L; ++l) {
        std::copy(mine.obs[l].begin(), mine.obs[l].end(), flat.begin() + (size_t)l * n * L);
    }
    std::vector<uint8_t> all(e.me == 0 ? (size_t)n * flat.size() : 1);
    MPI_Gather(flat.data(), (int)flat.size(), MPI_BYTE, all.data(), (int)flat.size(), MPI_BYTE, 0,
               e.comm);
    std::vector<char> skips((size_t)L * 128, 0), allskips(e.me == 0 ? (size_t)n * L * 128 : 1);
    for (int l = 0; l < L; ++l) {
        snprintf(&skips[(size_t)l * 128], 128, "%s", mine.skip[l].c_str());
    }
    MPI_Gather(skips.data(), L * 128, MPI_CHAR, allskips.data(), L * 128, MPI_CHAR, 0, e.comm);
    if (e.me != 0) {
        return;
    }
    auto obs = [&](int node, int src, int peer, int dst) {
        return all[(size_t)node * L * n * L + (size_t)src * n * L + (size_t)peer * L + dst] != 0;
    };
    auto skip = [&](int node, int l) {
        return std::string(&allskips[((size_t)node * L + l) * 128]);
    };
    auto plane_of = [&](int l) { return e.links[l].plane; };

    std::vector<std::string> lines, notes;
    /* 1. Which plane's segment each probed port is on: the plane whose addresses answered
     *    it most (its own when tied); no answer at all: unknown. */
    std::vector<std::vector<int>> seg(n, std::vector<int>(L, -2)); /* -2 skipped, -1 silent */
    for (int x = 0; x < n; ++x) {
        for (int l = 0; l < L; ++l) {
            if (!skip(x, l).empty()) {
                continue;
            }
            std::vector<int> votes(e.nplanes, 0);
            for (int j = 0; j < n; ++j) {
                for (int d = 0; d < L; ++d) {
                    if (j != x && obs(x, l, j, d)) {
                        ++votes[plane_of(d)];
                    }
                }
            }
            int best = plane_of(l);
            for (int q = 0; q < e.nplanes; ++q) {
                if (votes[q] > votes[best]) {
                    best = q;
                }
            }
            seg[x][l] = votes[best] > 0 ? best : -1;
        }
    }
    for (int x = 0; x < n; ++x) {
        std::vector<int> wrong;
        std::vector<std::string> evidence;
        for (int l = 0; l < L; ++l) {
            if (seg[x][l] >= 0 && seg[x][l] != plane_of(l)) {
                wrong.push_back(l);
                std::string own, other;
                for (int j = 0; j < n; ++j) {
                    bool o = false, c = false;
                    for (int d = 0; d < L; ++d) {
                        if (j != x && obs(x, l, j, d)) {
                            (plane_of(d) == plane_of(l) ? o : c) = true;
                        }
                    }
                    if (c) {
                        other += (other.empty() ? "" : " ") + e.names[j];
                    }
                    if (o) {
                        own += (own.empty() ? "" : " ") + e.names[j];
                    }
                }
                evidence.push_back(
                    strf("%s %s (plane %d) is cabled to plane %d: answered on plane %d "
                         "by %s, on plane %d by %s",
                         e.names[x].c_str(), e.pub[x][l].netdev, plane_of(l), seg[x][l], seg[x][l],
                         other.c_str(), plane_of(l), own.empty() ? "none" : own.c_str()));
            }
        }
        if (wrong.size() == 2 && seg[x][wrong[0]] == plane_of(wrong[1]) &&
            seg[x][wrong[1]] == plane_of(wrong[0])) {
            /* one finding, the fix; the evidence under it */
            lines.push_back(strf("%s: %s and %s are swapped (%s is on plane %d's segment, %s on "
                                 "plane %d's)",
                                 e.names[x].c_str(), e.pub[x][wrong[0]].netdev,
                                 e.pub[x][wrong[1]].netdev, e.pub[x][wrong[0]].netdev,
                                 seg[x][wrong[0]], e.pub[x][wrong[1]].netdev, seg[x][wrong[1]]));
            for (const std::string &v : evidence) {
                notes.push_back(v);
            }
        } else {
            lines.insert(lines.end(), evidence.begin(), evidence.end());
        }
    }
    /* 2. Leaks not explained by a mis-cabled port: the planes touch somewhere. */
    std::set<std::string> leak_pairs;
    for (int x = 0; x < n; ++x) {
        for (int l = 0; l < L; ++l) {
            for (int j = 0; j < n; ++j) {
                for (int d = 0; d < L; ++d) {
                    if (j == x || !obs(x, l, j, d) || plane_of(d) == plane_of(l)) {
                        continue;
                    }
                    /* explained: our port sits on d's plane, or the peer's port sits on ours */
                    if (seg[x][l] == plane_of(d) || seg[j][d] == plane_of(l)) {
                        continue;
                    }
                    int a = std::min(plane_of(l), plane_of(d)),
                        b = std::max(plane_of(l), plane_of(d));
                    std::string key = strf("%d-%d", a, b);
                    if (leak_pairs.insert(key).second) {
                        lines.push_back(strf("planes %d and %d are not isolated: %s %s (plane %d) "
                                             "reaches %s's plane-%d address %s",
                                             a, b, e.names[x].c_str(), e.pub[x][l].netdev,
                                             plane_of(l), e.names[j].c_str(), plane_of(d),
                                             e.pub[j][d].ipv4));
                    }
                }
            }
        }
    }
    /* 3. Ports that heard nothing at all (their reachability findings say more). */
    for (int x = 0; x < n; ++x) {
        for (int l = 0; l < L; ++l) {
            if (seg[x][l] == -1 && n > 1) {
                notes.push_back(strf("note: %s %s (plane %d): no ARP answer from any probed peer",
                                     e.names[x].c_str(), e.pub[x][l].netdev, plane_of(l)));
            }
        }
    }
    std::map<std::string, std::string> skipped; /* reason -> ports */
    for (int x = 0; x < n; ++x) {
        for (int l = 0; l < L; ++l) {
            std::string s = skip(x, l);
            if (!s.empty()) {
                skipped[s] +=
                    (skipped[s].empty() ? "" : " ") + e.names[x] + ":" + e.pub[x][l].device;
            }
        }
    }
    int probed = 0;
    for (int x = 0; x < n; ++x) {
        for (int l = 0; l < L; ++l) {
            probed += seg[x][l] != -2;
        }
    }
    if (lines.empty()) {
        printf("[isolation]     %s: %d port%s probed at layer 2, no plane reaches another\n",
               probed > 0 ? "ok" : "not checked", probed, probed == 1 ? "" : "s");
    } else {
        printf("[isolation]     FAIL\n");
    }
    for (const std::string &s : lines) {
        printf("  %s\n", s.c_str());
        e.findings.push_back(s);
    }
    for (const std::string &s : notes) {
        printf("    %s\n", s.c_str());
    }
    for (auto &kv : skipped) {
        printf("  not probed (%s): %s\n", kv.first.c_str(), kv.second.c_str());
    }
}

/* ------------------------------------------------------------------ bandwidth */

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

/* The verdict leaves through world rank 0 only (the rank that printed it); the
 * others exit 0. mpirun still returns the non-zero status, and the launcher sees one
 * failing process instead of a job-wide burst of them: Debian 13's prterun (PRRTE 3.0)
 * sometimes crashed with SIGSEGV while tearing down a job whose ranks all exited 1 at
 * once (lab_check: 1 of 12 runs under load), turning the documented status 1 into 139. */
int exit_status(int wrank, int rc)
{
    return wrank == 0 ? rc : 0;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wrank = 0, wsize = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    Env e;
    Options &o = e.o;
    po::options_description desc(
        "usage: mpirun --map-by ppr:1:node dualrail-check [options]\n\n"
        "Verifies a dual-plane fabric: planes agree, every pair reachable on every plane,\n"
        "planes isolated from each other, every link's bandwidth near its plane's median.\n"
        "Exit status: 0 clean, 1 findings, 2 usage or setup error.\n\noptions");
    desc.add_options()("help,h", "this text")(
        "planes,p", po::value(&o.planes),
        "plane list, e.g. ethA,ethB or mlx5_0|mlx5_2,mlx5_1|mlx5_3 (default: discovered, "
        "leaving out the interfaces the MPI runtime uses)")(
        "include", po::value(&o.include), "discovery: only devices matching these patterns")(
        "exclude", po::value(&o.exclude), "discovery: also leave out these patterns")(
        "timeout", po::value(&o.timeout)->default_value(5.0),
        "seconds a ping may take on a link before it counts as unreachable")(
        "bw-time", po::value(&o.bw_time)->default_value(0.3),
        "seconds of traffic per directed link")(
        "bw-size", po::value(&o.bw_size)->default_value(1 << 20), "bytes per message")(
        "bw-window", po::value(&o.bw_window)->default_value(4), "messages in flight")(
        "bw-tolerance", po::value(&o.tolerance)->default_value(0.25),
        "a link below the plane's median by more than this fraction is reported")(
        "isolation-peers", po::value(&o.iso_peers)->default_value(8),
        "peers each port ARP-probes for isolation (the next ones by rank)")(
        "no-bw", "skip the bandwidth check")("no-isolation", "skip the isolation check")(
        "verbose,v", "per-link detail and transport log lines");
    po::variables_map vm;
    int rc = 0;
    try {
        po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
        po::notify(vm);
        if (o.timeout <= 0 || o.timeout > 600 || o.bw_time <= 0 || o.bw_time > 60 ||
            o.bw_size < 4096 || o.bw_size > ((size_t)1 << 30) || o.bw_window < 1 ||
            o.bw_window > 64 || o.tolerance <= 0 || o.tolerance >= 1 || o.iso_peers < 0) {
            throw po::error("out-of-range value (timeout 0..600 s, bw-time 0..60 s, bw-size "
                            "4 KiB..1 GiB, bw-window 1..64, bw-tolerance 0..1)");
        }
        dr_plane_list_t list;
        char perr[256];
        if (!o.planes.empty() &&
            dr_plane_list_parse(o.planes.c_str(), &list, perr, sizeof(perr)) != DR_OK) {
            throw po::error(std::string("--planes: ") + perr);
        }
    } catch (const po::error &ex) {
        if (wrank == 0) {
            std::cerr << "dualrail-check: " << ex.what() << "\n" << desc;
        }
        MPI_Finalize();
        return exit_status(wrank, 2);
    }
    if (vm.count("help")) {
        if (wrank == 0) {
            std::cout << desc;
        }
        MPI_Finalize();
        return 0;
    }
    o.no_bw = vm.count("no-bw") > 0;
    o.no_iso = vm.count("no-isolation") > 0;
    o.verbose = (int)vm.count("verbose");
    /* UCX's own error line for every link that cannot connect would bury the report,
     * which names those links itself; UCX read its environment when it was loaded, so
     * the level is set here (a level the user set, or --verbose, keeps UCX's lines). */
    if (getenv("UCX_LOG_LEVEL") == nullptr && o.verbose == 0) {
        ucs_global_opts_set_value("LOG_LEVEL", "fatal");
    }

    /* One process per node: the first rank of each host name. */
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    std::vector<char> hosts((size_t)wsize * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, MPI_COMM_WORLD);
    bool leader = true;
    for (int i = 0; i < wrank; ++i) {
        if (strncmp(&hosts[(size_t)i * MPI_MAX_PROCESSOR_NAME], host, MPI_MAX_PROCESSOR_NAME) ==
            0) {
            leader = false;
        }
    }
    MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, wrank, &e.comm);
    if (leader) {
        MPI_Comm_rank(e.comm, &e.me);
        MPI_Comm_size(e.comm, &e.n);
        std::vector<char> names((size_t)e.n * kNameMax);
        char mine[kNameMax];
        snprintf(mine, sizeof(mine), "%s", host);
        MPI_Allgather(mine, kNameMax, MPI_CHAR, names.data(), kNameMax, MPI_CHAR, e.comm);
        for (int i = 0; i < e.n; ++i) {
            e.names.emplace_back(&names[(size_t)i * kNameMax],
                                 strnlen(&names[(size_t)i * kNameMax], kNameMax));
        }
        if (e.me == 0 && wsize > e.n) {
            printf("note: %d ranks on %d nodes; one per node works, the others wait\n", wsize, e.n);
        }
        std::string header;
        const double t0 = now_s();
        double t_setup = 0, t_reach = 0, t_iso = 0, t_bw = 0;
        if (setup_planes(e, header, &rc) && setup_contexts(e, &rc)) {
            t_setup = now_s();
            auto reach = check_reach(e);
            report_reach(e, reach);
            t_reach = now_s();
            IsoResult iso = probe_isolation(e);
            report_isolation(e, iso);
            t_iso = now_s();
            check_bandwidth(e, reach);
            t_bw = now_s();
            if (e.me == 0) {
                rc = e.findings.empty() ? 0 : 1;
                printf("\nchecks took %.1f s: set-up %.1f, reachability %.1f, isolation %.1f, "
                       "bandwidth %.1f\n",
                       t_bw - t0, t_setup - t0, t_reach - t_setup, t_iso - t_reach, t_bw - t_iso);
            }
        }
        if (e.o.verbose) {
            for (Link &k : e.links) {
                for (const std::string &s : k.log) {
                    fprintf(stderr, "dualrail-check %s: %s\n", e.names[e.me].c_str(), s.c_str());
                }
            }
        }
        if (e.me == 0) {
            if (e.findings.empty() && rc == 0) {
                printf("OK: no findings\n");
            } else {
                printf("FAIL: %zu finding%s\n", e.findings.size(),
                       e.findings.size() == 1 ? "" : "s");
                for (const std::string &f : e.findings) {
                    printf("finding: %s\n", f.c_str());
                }
            }
            fflush(stdout);
        }
        /* Contexts go before MPI: their goodbyes need no peer to progress. */
        barrier(e, 60.0);
        for (Link &k : e.links) {
            dr_mr_destroy(k.mr);
            k.mr = nullptr;
        }
        MPI_Comm_free(&e.comm);
    }
    MPI_Finalize();
    return exit_status(wrank, rc); /* rank 0's verdict: the others' rc is not read */
}
