/*
 * Plane discovery (include/dualrail/topo.h): which interfaces and RDMA ports are the
 * planes when none are named, from the interfaces' IPv4 subnets and the ports' InfiniBand
 * subnet prefixes, leaving out what filters and the MPI runtime's own interfaces exclude;
 * the plane list's text form and the signatures that let the nodes of a job compare what
 * each discovered. The inventory it reads (NICs, their ports and netdevs) is topo.cc's,
 * through the public dr_topo_* calls.
 */
#include "dualrail/topo.h"

#include "errbuf.hpp"
#include "text.hpp"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

using dualrail::copy_str;
using dualrail::set_err;
using dualrail::strf;

extern "C" dr_status_t dr_topo_ifaddrs_system(dr_topo_ifaddr_t *out, int max, int *n)
{
    *n = 0;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) != 0) {
        return DR_ERR_NO_DEVICE;
    }
    for (struct ifaddrs *i = ifs; i != nullptr && *n < max; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || i->ifa_name == nullptr) {
            continue;
        }
        dr_topo_ifaddr_t *a = &out[*n];
        memset(a, 0, sizeof(*a));
        snprintf(a->name, sizeof(a->name), "%s", i->ifa_name);
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, a->ipv4,
                  sizeof(a->ipv4));
        a->prefix = 32;
        if (i->ifa_netmask != nullptr) {
            uint32_t m = ntohl(reinterpret_cast<sockaddr_in *>(i->ifa_netmask)->sin_addr.s_addr);
            a->prefix = __builtin_popcount(m);
        }
        a->up = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING);
        a->loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
        ++*n;
    }
    freeifaddrs(ifs);
    return DR_OK;
}

namespace {

const char kDefaultIbPrefix[] = "fe80:0000:0000:0000";

/* An entry "a.b.c.d/len" (Open MPI's if_include form): whether one of name's IPv4 addresses
 * in ifs is inside that network. *is_net: the entry has that form (a malformed one, such as
 * a length over 32, is a shell pattern, which no device name matches). */
bool in_network(const std::string &entry, const std::string &name, const dr_topo_ifaddr_t *ifs,
                int nifs, bool *is_net)
{
    *is_net = false;
    const size_t slash = entry.find('/');
    in_addr net;
    char *end = nullptr;
    if (slash == std::string::npos ||
        inet_pton(AF_INET, entry.substr(0, slash).c_str(), &net) != 1) {
        return false;
    }
    const long len = strtol(entry.c_str() + slash + 1, &end, 10);
    if (end == entry.c_str() + slash + 1 || *end != 0 || len < 0 || len > 32) {
        return false;
    }
    *is_net = true;
    const uint32_t mask = len == 0 ? 0 : 0xffffffffu << (32 - len);
    for (int i = 0; i < nifs; ++i) {
        in_addr a;
        if (name == ifs[i].name && inet_pton(AF_INET, ifs[i].ipv4, &a) == 1 &&
            (ntohl(a.s_addr) & mask) == (ntohl(net.s_addr) & mask)) {
            return true;
        }
    }
    return false;
}

/* patterns: comma-separated shell patterns of device names, or IPv4 networks that stand for
 * the devices with an address in them (ifs: the addresses). */
bool match_list(const char *patterns, const std::string &name,
                const dr_topo_ifaddr_t *ifs = nullptr, int nifs = 0)
{
    if (patterns == nullptr || name.empty()) {
        return false;
    }
    std::string all(patterns);
    size_t pos = 0;
    while (pos <= all.size()) {
        size_t c = all.find(',', pos);
        std::string p = all.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        p.erase(0, p.find_first_not_of(" \t"));
        p.erase(p.find_last_not_of(" \t") + 1);
        bool is_net = false;
        if (!p.empty() && (in_network(p, name, ifs, nifs, &is_net) ||
                           (!is_net && fnmatch(p.c_str(), name.c_str(), 0) == 0))) {
            return true;
        }
        if (c == std::string::npos) {
            break;
        }
        pos = c + 1;
    }
    return false;
}

struct Filter {
    const dr_topo_discover_opts_t *opts;
    const dr_topo_ifaddr_t *ifs; /* the addresses that IPv4-network entries are matched on */
    int nifs;
    /* Containers, bridges and tunnels are never planes. */
    bool builtin(const std::string &n) const
    {
        return match_list("lo,docker*,virbr*,veth*,br-*,tun*,tap*", n);
    }
    bool excluded(std::initializer_list<const char *> names) const
    {
        const char *inc = opts != nullptr ? opts->include : nullptr;
        const char *exc = opts != nullptr ? opts->exclude : nullptr;
        bool included = inc == nullptr || *inc == 0;
        for (const char *n : names) {
            if (n == nullptr || *n == 0) {
                continue;
            }
            if (builtin(n) || match_list(exc, n, ifs, nifs)) {
                return true;
            }
            if (!included && match_list(inc, n, ifs, nifs)) {
                included = true;
            }
        }
        return !included;
    }
};

struct Plane {
    std::string id;
    int kind;       /* 0: InfiniBand subnet prefix, 1: IPv4 subnet */
    uint64_t a = 0; /* sort keys: prefix / network address */
    uint32_t b = 0; /* IPv4 prefix length */
    std::vector<std::pair<std::string, std::string>> devs; /* (order key, name) */
};

bool ipv4_subnet(const dr_topo_ifaddr_t &ifa, std::string *id, uint64_t *net, uint32_t *len)
{
    in_addr a;
    if (inet_pton(AF_INET, ifa.ipv4, &a) != 1 || ifa.prefix < 0 || ifa.prefix > 32) {
        return false;
    }
    uint32_t mask = ifa.prefix == 0 ? 0 : 0xffffffffu << (32 - ifa.prefix);
    uint32_t n = ntohl(a.s_addr) & mask;
    in_addr na;
    na.s_addr = htonl(n);
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &na, buf, sizeof(buf));
    *id = strf("ipv4:%s/%d", buf, ifa.prefix);
    *net = n;
    *len = (uint32_t)ifa.prefix;
    return true;
}

const dr_topo_ifaddr_t *find_ifaddr(const dr_topo_ifaddr_t *ifs, int nifs, const char *name)
{
    for (int i = 0; i < nifs && name != nullptr && *name != 0; ++i) {
        if (strcmp(ifs[i].name, name) == 0) {
            return &ifs[i];
        }
    }
    return nullptr;
}

void note_add(std::string &note, const std::string &s)
{
    note += note.empty() ? s : "; " + s;
}

} // namespace

extern "C" dr_status_t dr_topo_discover(const dr_topo_t *t, const dr_topo_ifaddr_t *ifs, int nifs,
                                        const dr_topo_discover_opts_t *opts,
                                        dr_topo_discovery_t *out, char *err, size_t errlen)
{
    if (out == nullptr || (nifs > 0 && ifs == nullptr) || nifs < 0) {
        set_err(err, errlen, "dr_topo_discover: bad argument");
        return DR_ERR_INVALID;
    }
    try {
        Filter filter{opts, ifs, nifs};
        std::string note;
        std::map<std::string, Plane> planes;
        bool default_prefix = false;
        auto add = [&](const std::string &id, int kind, uint64_t a, uint32_t b,
                       const std::string &order, const std::string &name) {
            Plane &p = planes[id];
            p.id = id;
            p.kind = kind;
            p.a = a;
            p.b = b;
            p.devs.emplace_back(order, name);
        };

        /* RDMA ports first: when any of them can be placed, they are the planes. */
        if (t != nullptr) {
            for (int i = 0; i < dr_topo_num_nics(t); ++i) {
                const dr_topo_nic_t &n = *dr_topo_nic_at(t, i);
                if (n.rdma[0] == 0 || filter.excluded({n.name, n.rdma, n.netdev})) {
                    continue;
                }
                if (n.port_active == 0) {
                    note_add(note, strf("%s: port not active", n.name));
                    continue;
                }
                const dr_topo_ifaddr_t *ifa = find_ifaddr(ifs, nifs, n.netdev);
                if (ifa != nullptr && !ifa->up) {
                    ifa = nullptr;
                }
                std::string order = std::string(n.pci_busid[0] ? n.pci_busid : "~") + " " + n.name;
                std::string id;
                uint64_t a = 0;
                uint32_t b = 0;
                if (n.infiniband && n.ib_subnet[0] != 0 &&
                    strcmp(n.ib_subnet, kDefaultIbPrefix) != 0) {
                    id = std::string("ib:") + n.ib_subnet;
                    std::string hex;
                    for (const char *c = n.ib_subnet; *c != 0; ++c) {
                        if (*c != ':') {
                            hex += *c;
                        }
                    }
                    a = strtoull(hex.c_str(), nullptr, 16);
                    add(id, 0, a, 0, order, n.name);
                } else if (ifa != nullptr && ipv4_subnet(*ifa, &id, &a, &b)) {
                    add(id, 1, a, b, order, n.name);
                } else if (n.infiniband && n.ib_subnet[0] != 0) {
                    id = std::string("ib:") + n.ib_subnet;
                    default_prefix = true;
                    add(id, 0, 0xfe80000000000000ull, 0, order, n.name);
                } else {
                    note_add(note, strf("%s: %s%s has no IPv4 address, plane unknown", n.name,
                                        n.infiniband ? "no GID and " : "RoCE interface ",
                                        n.netdev[0] ? n.netdev : "(none)"));
                }
            }
        }
        const bool rdma_mode = !planes.empty();
        if (!rdma_mode) {
            std::vector<std::string> seen;
            for (int i = 0; i < nifs; ++i) {
                const dr_topo_ifaddr_t &ifa = ifs[i];
                if (ifa.loopback || std::find(seen.begin(), seen.end(), ifa.name) != seen.end()) {
                    continue;
                }
                seen.push_back(ifa.name);
                int ni = t != nullptr ? dr_topo_find_nic(t, ifa.name) : -1;
                const dr_topo_nic_t *n = ni >= 0 ? dr_topo_nic_at(t, ni) : nullptr;
                if (filter.excluded({ifa.name})) {
                    continue;
                }
                if (!ifa.up) {
                    note_add(note, strf("%s: down", ifa.name));
                    continue;
                }
                std::string id;
                uint64_t a = 0;
                uint32_t b = 0;
                if (!ipv4_subnet(ifa, &id, &a, &b)) {
                    continue;
                }
                std::string order =
                    std::string(n != nullptr && n->pci_busid[0] ? n->pci_busid : "~") + " " +
                    ifa.name;
                add(id, 1, a, b, order, ifa.name);
            }
        }
        if (planes.empty()) {
            set_err(err, errlen, "no network plane found on this node (%s)",
                    note.empty() ? "no RDMA device with a known subnet and no interface that is up "
                                   "with an IPv4 address"
                                 : note.c_str());
            return DR_ERR_NO_DEVICE;
        }
        if (planes.size() > DR_MAX_PLANES) {
            std::string ids;
            for (auto &kv : planes) {
                ids += (ids.empty() ? "" : ", ") + kv.first;
            }
            set_err(err, errlen, "%zu networks found (at most %d planes): %s; use include/exclude",
                    planes.size(), DR_MAX_PLANES, ids.c_str());
            return DR_ERR_CONFIG;
        }
        std::vector<Plane *> sorted;
        for (auto &kv : planes) {
            sorted.push_back(&kv.second);
        }
        std::sort(sorted.begin(), sorted.end(), [](const Plane *x, const Plane *y) {
            if (x->kind != y->kind) {
                return x->kind < y->kind;
            }
            if (x->a != y->a) {
                return x->a < y->a;
            }
            if (x->b != y->b) {
                return x->b < y->b;
            }
            return x->id < y->id;
        });
        dr_topo_discovery_t d;
        memset(&d, 0, sizeof(d));
        size_t ndev = 0;
        for (Plane *p : sorted) {
            std::sort(p->devs.begin(), p->devs.end());
            if (p->devs.size() > DR_MAX_PLANE_DEVICES) {
                set_err(err, errlen, "network %s has %zu devices (at most %d per plane)",
                        p->id.c_str(), p->devs.size(), DR_MAX_PLANE_DEVICES);
                return DR_ERR_CONFIG;
            }
            dr_plane_spec_t &s = d.list.planes[d.list.nplanes];
            for (auto &dv : p->devs) {
                copy_str(s.devices[s.ndevices++], dv.second);
            }
            ndev += p->devs.size();
            copy_str(d.ids[d.list.nplanes], p->id);
            ++d.list.nplanes;
        }
        if (default_prefix) {
            note_add(note,
                     d.list.nplanes == 1 && ndev > 1
                         ? "every InfiniBand port reports the default GID subnet prefix "
                           "fe80:: and no IPoIB address: they form one plane; give each "
                           "plane's subnet manager its own prefix, or list the planes"
                         : "some InfiniBand ports report the default GID subnet prefix fe80::");
        }
        copy_str(d.note, note);
        *out = d;
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    return DR_OK;
}

extern "C" size_t dr_topo_planes_format(const dr_plane_list_t *list, char *buf, size_t len)
{
    std::string s;
    for (int p = 0; p < list->nplanes; ++p) {
        if (p) {
            s += ',';
        }
        for (int d = 0; d < list->planes[p].ndevices; ++d) {
            if (d) {
                s += '|';
            }
            s += list->planes[p].devices[d];
        }
    }
    if (buf != nullptr && len > 0) {
        snprintf(buf, len, "%s", s.c_str());
    }
    return s.size();
}

extern "C" size_t dr_topo_discovery_signature(const dr_topo_discovery_t *d, char *buf, size_t len)
{
    std::string s;
    for (int p = 0; p < d->list.nplanes; ++p) {
        s += strf("%s%s*%d", p ? "," : "", d->ids[p], d->list.planes[p].ndevices);
    }
    if (buf != nullptr && len > 0) {
        snprintf(buf, len, "%s", s.c_str());
    }
    return s.size();
}

namespace {

struct SigPlane {
    std::string id;
    int count;
};

std::vector<SigPlane> parse_sig(const std::string &s)
{
    std::vector<SigPlane> v;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t c = s.find(',', pos);
        std::string e = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        size_t star = e.rfind('*');
        SigPlane p{e, 1};
        if (star != std::string::npos) {
            p.id = e.substr(0, star);
            p.count = atoi(e.c_str() + star + 1);
        }
        v.push_back(p);
        if (c == std::string::npos) {
            break;
        }
        pos = c + 1;
    }
    return v;
}

std::string ids_text(const std::vector<SigPlane> &v)
{
    std::string s;
    for (const SigPlane &p : v) {
        s += (s.empty() ? "" : ", ") + p.id;
    }
    return s;
}

} // namespace

extern "C" dr_status_t dr_topo_signatures_check(const char *const *sigs, const char *const *names,
                                                int n, char *err, size_t errlen)
{
    if (n <= 0 || sigs == nullptr) {
        return DR_OK;
    }
    try {
        /* The most common layout is the reference (ties: the first node's). */
        std::map<std::string, int> votes;
        for (int i = 0; i < n; ++i) {
            ++votes[sigs[i] != nullptr ? sigs[i] : ""];
        }
        std::string ref;
        int best = 0, ref_node = 0;
        for (int i = 0; i < n; ++i) {
            std::string s = sigs[i] != nullptr ? sigs[i] : "";
            if (votes[s] > best) {
                best = votes[s];
                ref = s;
                ref_node = i;
            }
        }
        if (best == n) {
            return DR_OK;
        }
        const std::vector<SigPlane> rp = parse_sig(ref);
        auto name_of = [&](int i) {
            return names != nullptr && names[i] != nullptr ? std::string(names[i])
                                                           : strf("node %d", i);
        };
        const std::string others =
            best == 1 ? name_of(ref_node) + " has" : strf("%d other nodes have", best);
        std::string msg = "plane layouts differ between nodes:";
        int listed = 0;
        for (int i = 0; i < n; ++i) {
            std::string s = sigs[i] != nullptr ? sigs[i] : "";
            if (s == ref) {
                continue;
            }
            std::string who = name_of(i);
            std::vector<SigPlane> v = parse_sig(s);
            std::string what;
            if (v.size() != rp.size()) {
                what = v.empty() ? strf("%s has no plane", who.c_str())
                                 : strf("%s has %zu plane%s (%s)", who.c_str(), v.size(),
                                        v.size() == 1 ? "" : "s", ids_text(v).c_str());
                what += strf(" where %s %zu (%s)", others.c_str(), rp.size(), ids_text(rp).c_str());
            } else {
                for (size_t p = 0; p < v.size(); ++p) {
                    if (v[p].id != rp[p].id) {
                        what +=
                            strf("%s%s plane %zu is %s where %s %s", what.empty() ? "" : ", ",
                                 who.c_str(), p, v[p].id.c_str(), others.c_str(), rp[p].id.c_str());
                    } else if (v[p].count != rp[p].count) {
                        what += strf("%s%s has %d device%s on plane %zu (%s) where %s %d",
                                     what.empty() ? "" : ", ", who.c_str(), v[p].count,
                                     v[p].count == 1 ? "" : "s", p, v[p].id.c_str(), others.c_str(),
                                     rp[p].count);
                    }
                }
            }
            msg += (listed++ ? "; " : " ") + what;
        }
        set_err(err, errlen, "%s", msg.c_str());
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "plane layouts differ between nodes (out of memory describing how)");
    }
    return DR_ERR_PEER_MISMATCH;
}
