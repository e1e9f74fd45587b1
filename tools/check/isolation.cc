/* dualrail-check: the isolation check: ARP probes from each port for the peers'
 * addresses on every plane (RFC 5227 probes: no host's routing interferes). */
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
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "check.hpp"

namespace drcheck {

namespace {

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

} // namespace

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

} // namespace drcheck
