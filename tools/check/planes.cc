/* dualrail-check: the planes check (every node has the same planes, with as many
 * rails each) and the ucx_mr context of each link. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "dualrail/planes.h"
#include "dualrail/topo.h"

#include "check.hpp"

namespace drcheck {

namespace {

constexpr int kSigMax = 1024;

/* The interfaces the MPI runtime is pinned to, as the variables give them (names, patterns
 * or IPv4 networks, which discovery resolves), each once: the management network, never a
 * plane; coll/dualrail leaves them out the same way. */
std::vector<std::string> runtime_interfaces()
{
    std::vector<std::string> out;
    static const char *const vars[] = DR_TOPO_RUNTIME_IF_ENVS;
    for (const char *var : vars) {
        const char *v = getenv(var);
        for (const char *p = v; p != nullptr && *p != 0;) {
            const char *c = strchr(p, ',');
            std::string item(p, c != nullptr ? (size_t)(c - p) : strlen(p));
            if (!item.empty()) {
                out.push_back(item);
            }
            p = c != nullptr ? c + 1 : nullptr;
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

} // namespace

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
        const std::vector<std::string> rt = runtime_interfaces();
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

} // namespace drcheck
