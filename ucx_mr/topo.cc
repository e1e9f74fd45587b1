/*
 * Topology-aware NIC selection and plane discovery (include/dualrail/topo.h).
 *
 * The inventory (NICs, GPUs) is read once per topology from hwloc's I/O tree:
 * a NIC is a PCI function with an OpenFabrics OS device (one entry per RDMA
 * port) or, without one, with a network interface. Locality is hwloc's: the
 * common ancestor of two PCI objects tells switch / host bridge / CPU side;
 * the nodesets of the first non-I/O ancestors tell NUMA node and package.
 */
#include "dualrail/topo.h"

#include "errbuf.hpp"
#include "text.hpp"

#include <hwloc.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace {

using dualrail::copy_str;
using dualrail::set_err;
using dualrail::strf;

/* RAII for hwloc bitmaps. */
struct Bitmap {
    hwloc_bitmap_t b;
    Bitmap() : b(hwloc_bitmap_alloc()) {}
    ~Bitmap() { hwloc_bitmap_free(b); }
    Bitmap(const Bitmap &) = delete;
    Bitmap &operator=(const Bitmap &) = delete;
    operator hwloc_bitmap_t() const { return b; }
};

std::string list_of(hwloc_const_bitmap_t set)
{
    char *s = nullptr;
    if (hwloc_bitmap_list_asprintf(&s, set) < 0 || s == nullptr) {
        return "?";
    }
    std::string r = s;
    free(s);
    return r;
}

std::string busid_of(hwloc_obj_t pci)
{
    char buf[DR_TOPO_BUSID_MAX];
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain & 0xffffu,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    return buf;
}

/* "0000:15:00.0", "00000000:15:00.0" (nvidia-smi) or "15:00.0". */
bool parse_busid(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *func)
{
    char tail;
    if (sscanf(s, "%x:%x:%x.%x%c", domain, bus, dev, func, &tail) == 4) {
        return *bus <= 0xff && *dev <= 0x1f && *func <= 7;
    }
    *domain = 0;
    if (sscanf(s, "%x:%x.%x%c", bus, dev, func, &tail) == 3) {
        return *bus <= 0xff && *dev <= 0x1f && *func <= 7;
    }
    return false;
}

const char *info(hwloc_obj_t o, const char *name)
{
    const char *v = hwloc_obj_get_info_by_name(o, name);
    return v != nullptr ? v : "";
}

hwloc_obj_t package_of(hwloc_topology_t topo, hwloc_obj_t nonio)
{
    if (nonio->type == HWLOC_OBJ_PACKAGE) {
        return nonio;
    }
    return hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, nonio);
}

struct NicRec {
    dr_topo_nic_t pub;
    hwloc_obj_t pci = nullptr; /* its PCI function, or nullptr */
    hwloc_obj_t anchor =
        nullptr; /* where its locality is read: the PCI function or the OS device */
};

struct GpuRec {
    dr_topo_gpu_t pub;
    hwloc_obj_t pci = nullptr;
};

bool nic_order(const NicRec &a, const NicRec &b)
{
    /* PCI address first (fixed-width hex, so text order is numeric order); devices
     * without one after; then name, which orders the ports of one function. */
    const bool pa = a.pub.pci_busid[0] != 0, pb = b.pub.pci_busid[0] != 0;
    if (pa != pb) {
        return pa;
    }
    int c = strcmp(a.pub.pci_busid, b.pub.pci_busid);
    if (c != 0) {
        return c < 0;
    }
    return strcmp(a.pub.name, b.pub.name) < 0;
}

} // namespace

struct dr_topo {
    hwloc_topology_t topo = nullptr;
    bool owned = false;
    std::vector<NicRec> nics;
    std::vector<GpuRec> gpus;
};

namespace {

void fill_locality(dr_topo *t, hwloc_obj_t anchor, int *numa, int *package, char *cpus,
                   size_t cpuslen)
{
    *numa = -1;
    *package = -1;
    if (cpus != nullptr && cpuslen > 0) {
        cpus[0] = 0;
    }
    if (anchor == nullptr) {
        return;
    }
    hwloc_obj_t loc = hwloc_get_non_io_ancestor_obj(t->topo, anchor);
    if (loc == nullptr) {
        return;
    }
    if (loc->nodeset != nullptr && !hwloc_bitmap_iszero(loc->nodeset)) {
        *numa = hwloc_bitmap_first(loc->nodeset);
    }
    hwloc_obj_t pkg = package_of(t->topo, loc);
    if (pkg != nullptr) {
        *package = (int)pkg->os_index;
    }
    if (cpus != nullptr && loc->cpuset != nullptr) {
        snprintf(cpus, cpuslen, "%s", list_of(loc->cpuset).c_str());
    }
}

/* Highest port number that hwloc reported anything for (Port<N>State, ...); 0 if none. */
unsigned count_ports(hwloc_obj_t ofed)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ofed->infos_count; ++i) {
        unsigned p;
        if (sscanf(ofed->infos[i].name, "Port%u", &p) == 1 && p > n && p < 64) {
            n = p;
        }
    }
    return n;
}

void scan(dr_topo *t)
{
    t->nics.clear();
    t->gpus.clear();
    /* Group the network and OpenFabrics OS devices by their PCI function. */
    std::map<hwloc_obj_t, std::vector<hwloc_obj_t>> by_parent;
    std::vector<hwloc_obj_t> order;
    for (hwloc_obj_t o = hwloc_get_next_osdev(t->topo, nullptr); o != nullptr;
         o = hwloc_get_next_osdev(t->topo, o)) {
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK &&
            o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS) {
            continue;
        }
        hwloc_obj_t key =
            (o->parent != nullptr && o->parent->type == HWLOC_OBJ_PCI_DEVICE) ? o->parent : o;
        if (by_parent.find(key) == by_parent.end()) {
            order.push_back(key);
        }
        by_parent[key].push_back(o);
    }
    for (hwloc_obj_t key : order) {
        const std::vector<hwloc_obj_t> &devs = by_parent[key];
        hwloc_obj_t pci = key->type == HWLOC_OBJ_PCI_DEVICE ? key : nullptr;
        std::vector<hwloc_obj_t> rdma, net;
        for (hwloc_obj_t o : devs) {
            (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ? rdma : net).push_back(o);
        }
        const unsigned cls = pci != nullptr ? pci->attr->pcidev.class_id : 0;
        auto is_ib = [&](hwloc_obj_t netdev) {
            if (cls == 0x0207) {
                return true;
            }
            if (cls == 0x0200) {
                return false;
            }
            /* An IPoIB hardware address is 20 bytes ("xx:" x 20), an Ethernet one 6. */
            return netdev != nullptr && strlen(info(netdev, "Address")) > 17;
        };
        auto base = [&](NicRec &r, hwloc_obj_t anchor) {
            memset(&r.pub, 0, sizeof(r.pub));
            r.pci = pci;
            r.anchor = anchor;
            r.pub.port_active = -1;
            if (pci != nullptr) {
                copy_str(r.pub.pci_busid, busid_of(pci));
            }
            fill_locality(t, anchor, &r.pub.numa, &r.pub.package, r.pub.cpus, sizeof(r.pub.cpus));
        };
        if (!rdma.empty()) {
            for (size_t ri = 0; ri < rdma.size(); ++ri) {
                hwloc_obj_t ofed = rdma[ri];
                unsigned nports = std::max(1u, count_ports(ofed));
                for (unsigned p = 1; p <= nports; ++p) {
                    NicRec r;
                    base(r, pci != nullptr ? pci : ofed);
                    copy_str(r.pub.rdma, ofed->name);
                    r.pub.port = (int)p;
                    copy_str(r.pub.name, strf("%s:%u", ofed->name, p));
                    /* The interface of this port: with one RDMA device and one port the only
                     * one; otherwise the one whose dev_port ("Port", 0-based) matches. */
                    hwloc_obj_t nd = nullptr;
                    if (rdma.size() == 1 && nports == 1 && !net.empty()) {
                        nd = net[0];
                    } else {
                        for (hwloc_obj_t n : net) {
                            const char *dp = info(n, "Port");
                            if (*dp != 0 && (unsigned)atoi(dp) + 1 == p) {
                                nd = n;
                            }
                        }
                        if (nd == nullptr && rdma.size() == 1 && p - 1 < net.size()) {
                            nd = net[p - 1];
                        }
                    }
                    if (nd != nullptr) {
                        copy_str(r.pub.netdev, nd->name);
                    }
                    r.pub.infiniband = is_ib(nd) ? 1 : 0;
                    const char *st = info(ofed, strf("Port%uState", p).c_str());
                    if (*st != 0) {
                        r.pub.port_active = atoi(st) == 4 ? 1 : 0; /* 4: IB_PORT_ACTIVE */
                    }
                    const char *gid = info(ofed, strf("Port%uGID0", p).c_str());
                    if (strlen(gid) >= 19) {
                        copy_str(r.pub.ib_subnet, std::string(gid, 19));
                    }
                    t->nics.push_back(r);
                }
            }
        } else {
            for (hwloc_obj_t n : net) {
                NicRec r;
                base(r, pci != nullptr ? pci : n);
                copy_str(r.pub.name, n->name);
                copy_str(r.pub.netdev, n->name);
                r.pub.infiniband = is_ib(n) ? 1 : 0;
                t->nics.push_back(r);
            }
        }
    }
    std::stable_sort(t->nics.begin(), t->nics.end(), nic_order);

    for (hwloc_obj_t o = hwloc_get_next_pcidev(t->topo, nullptr); o != nullptr;
         o = hwloc_get_next_pcidev(t->topo, o)) {
        const unsigned cls = o->attr->pcidev.class_id, vendor = o->attr->pcidev.vendor_id;
        /* 3D controllers and accelerators always; VGA only from GPU vendors (not a BMC's). */
        bool gpu = cls == 0x0302 || (cls >> 8) == 0x12 ||
                   (cls == 0x0300 && (vendor == 0x10de || vendor == 0x1002));
        if (!gpu) {
            continue;
        }
        GpuRec g;
        memset(&g.pub, 0, sizeof(g.pub));
        g.pci = o;
        copy_str(g.pub.pci_busid, busid_of(o));
        copy_str(g.pub.model, info(o, "PCIDevice"));
        fill_locality(t, o, &g.pub.numa, &g.pub.package, nullptr, 0);
        t->gpus.push_back(g);
    }
    std::stable_sort(t->gpus.begin(), t->gpus.end(), [](const GpuRec &a, const GpuRec &b) {
        return strcmp(a.pub.pci_busid, b.pub.pci_busid) < 0;
    });
}

/* ------------------------------------------------------------------ selection */

struct Key {
    int level = DR_TOPO_UNKNOWN;
    int sub = 0;  /* tie-breaker within a level, smaller is nearer */
    int hops = 0; /* PCIe hops GPU <-> NIC (switch / host bridge levels) */
    bool operator==(const Key &o) const { return level == o.level && sub == o.sub; }
    bool operator<(const Key &o) const { return level != o.level ? level < o.level : sub < o.sub; }
};

/* hwloc_get_common_ancestor_obj() compares depths, which I/O objects do not
 * have (their depths are special negative values): walk the parent chains. */
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    std::vector<hwloc_obj_t> up;
    for (hwloc_obj_t p = a; p != nullptr; p = p->parent) {
        up.push_back(p);
    }
    for (hwloc_obj_t p = b; p != nullptr; p = p->parent) {
        if (std::find(up.begin(), up.end(), p) != up.end()) {
            return p;
        }
    }
    return nullptr;
}

/* PCIe links from an I/O object up to (not including) its ancestor `top`. */
int links_up(hwloc_obj_t o, hwloc_obj_t top)
{
    int n = 0;
    for (hwloc_obj_t p = o; p != nullptr && p != top; p = p->parent) {
        ++n;
    }
    return n;
}

Key gpu_key(const dr_topo *t, hwloc_obj_t gpu, const NicRec *nic)
{
    Key k;
    if (nic == nullptr || nic->pci == nullptr) {
        return k;
    }
    hwloc_obj_t common = common_ancestor(gpu, nic->pci);
    if (common != nullptr && common->type == HWLOC_OBJ_BRIDGE) {
        k.hops = links_up(gpu, common) + links_up(nic->pci, common);
        k.sub = k.hops;
        k.level = common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI ? DR_TOPO_SWITCH
                                                                             : DR_TOPO_HOSTBRIDGE;
        return k;
    }
    hwloc_obj_t lg = hwloc_get_non_io_ancestor_obj(t->topo, gpu);
    hwloc_obj_t ln = hwloc_get_non_io_ancestor_obj(t->topo, nic->pci);
    if (lg != nullptr && ln != nullptr && lg->nodeset != nullptr && ln->nodeset != nullptr &&
        hwloc_bitmap_intersects(lg->nodeset, ln->nodeset)) {
        k.level = DR_TOPO_NUMA;
        return k;
    }
    hwloc_obj_t pg = lg != nullptr ? package_of(t->topo, lg) : nullptr;
    hwloc_obj_t pn = ln != nullptr ? package_of(t->topo, ln) : nullptr;
    k.level = pg != nullptr && pg == pn ? DR_TOPO_PACKAGE : DR_TOPO_SYSTEM;
    return k;
}

Key cpu_key(const dr_topo *t, hwloc_const_bitmap_t bind, hwloc_const_bitmap_t bindnodes,
            const NicRec *nic)
{
    Key k;
    if (nic == nullptr || nic->anchor == nullptr) {
        return k;
    }
    hwloc_obj_t loc = hwloc_get_non_io_ancestor_obj(t->topo, nic->anchor);
    if (loc == nullptr) {
        return k;
    }
    if (!hwloc_bitmap_iszero(bindnodes) && loc->nodeset != nullptr &&
        hwloc_bitmap_isincluded(bindnodes, loc->nodeset)) {
        k.level = DR_TOPO_NUMA;
        return k;
    }
    hwloc_obj_t pkg = package_of(t->topo, loc);
    if (pkg != nullptr && hwloc_bitmap_isincluded(bind, pkg->cpuset)) {
        k.level = DR_TOPO_PACKAGE;
        return k;
    }
    /* Partly local (a binding across sockets): the more of it near the NIC, the better. */
    Bitmap both;
    hwloc_bitmap_and(both, bind, loc->cpuset);
    k.level = DR_TOPO_SYSTEM;
    k.sub = -hwloc_bitmap_weight(both);
    return k;
}

const char *level_phrase(int level)
{
    switch (level) {
    case DR_TOPO_SWITCH:
        return "same PCIe switch";
    case DR_TOPO_HOSTBRIDGE:
        return "same PCIe host bridge";
    case DR_TOPO_NUMA:
        return "same NUMA node";
    case DR_TOPO_PACKAGE:
        return "same package";
    case DR_TOPO_SYSTEM:
        return "other socket";
    default:
        return "locality unknown";
    }
}

struct Cand {
    int dev;           /* index in the plane */
    const NicRec *nic; /* nullptr: on the node but not in the topology */
    std::string order; /* canonical order of equals: PCI address, then name */
    Key key;
};

/* The candidates with the best key, in canonical order. */
std::vector<int> best_of(const std::vector<Cand> &c)
{
    std::vector<int> idx;
    Key best;
    bool have = false;
    for (size_t i = 0; i < c.size(); ++i) {
        if (!have || c[i].key < best) {
            best = c[i].key;
            have = true;
        }
    }
    for (size_t i = 0; i < c.size(); ++i) {
        if (c[i].key == best) {
            idx.push_back((int)i);
        }
    }
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return c[a].order < c[b].order; });
    return idx;
}

std::string nic_lookup_base(const char *device)
{
    std::string s(device);
    size_t c = s.find(':');
    return c == std::string::npos ? s : s.substr(0, c);
}

} // namespace

extern "C" const char *dr_topo_level_name(dr_topo_level_t level)
{
    switch (level) {
    case DR_TOPO_SWITCH:
        return "switch";
    case DR_TOPO_HOSTBRIDGE:
        return "hostbridge";
    case DR_TOPO_NUMA:
        return "numa";
    case DR_TOPO_PACKAGE:
        return "package";
    case DR_TOPO_SYSTEM:
        return "system";
    case DR_TOPO_UNKNOWN:
        return "unknown";
    }
    return "unknown";
}

extern "C" dr_status_t dr_topo_load(const char *xml_path, dr_topo_t **out, char *err, size_t errlen)
{
    if (out == nullptr) {
        set_err(err, errlen, "dr_topo_load: NULL argument");
        return DR_ERR_INVALID;
    }
    *out = nullptr;
    if (xml_path != nullptr) {
        struct stat st;
        if (stat(xml_path, &st) != 0) {
            set_err(err, errlen, "topology file %s: %s", xml_path, strerror(errno));
            return DR_ERR_CONFIG;
        }
        if (!S_ISREG(st.st_mode)) {
            set_err(err, errlen, "topology file %s: not a regular file", xml_path);
            return DR_ERR_CONFIG;
        }
        FILE *f = fopen(xml_path, "r");
        if (f == nullptr) {
            set_err(err, errlen, "topology file %s: %s", xml_path, strerror(errno));
            return DR_ERR_CONFIG;
        }
        fclose(f);
    }
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        set_err(err, errlen, "hwloc_topology_init failed");
        return DR_ERR_NO_MEMORY;
    }
    if (xml_path != nullptr) {
        /* Keep whatever the file holds: it was filtered when it was written. */
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
        if (hwloc_topology_set_xml(topo, xml_path) != 0) {
            /* hwloc parses the file here: it exists and is readable, so it is no topology. */
            set_err(err, errlen, "topology file %s: not an hwloc XML topology hwloc can parse",
                    xml_path);
            hwloc_topology_destroy(topo);
            return DR_ERR_CONFIG;
        }
    } else {
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        /* Caches play no part in the choice; reading them is most of the load time. */
        hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
        hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
        /* GPU plugins would initialise CUDA/ROCm/OpenCL in every process, for
         * nothing: GPUs are found as PCI devices. */
        static const char *const heavy[] = {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"};
        for (const char *c : heavy) {
            hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
        }
    }
    if (hwloc_topology_load(topo) != 0) {
        int e = errno;
        hwloc_topology_destroy(topo);
        if (xml_path != nullptr) {
            set_err(err, errlen, "topology file %s: not an hwloc XML topology hwloc can parse",
                    xml_path);
            return DR_ERR_CONFIG;
        }
        set_err(err, errlen, "hwloc cannot read this machine's topology: %s", strerror(e));
        return DR_ERR_NO_DEVICE;
    }
    dr_topo *t = new (std::nothrow) dr_topo();
    if (t == nullptr) {
        hwloc_topology_destroy(topo);
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    t->topo = topo;
    t->owned = true;
    try {
        scan(t);
    } catch (const std::bad_alloc &) {
        dr_topo_free(t);
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    *out = t;
    return DR_OK;
}

extern "C" dr_status_t dr_topo_wrap(struct hwloc_topology *topology, dr_topo_t **out, char *err,
                                    size_t errlen)
{
    if (out == nullptr || topology == nullptr) {
        set_err(err, errlen, "dr_topo_wrap: NULL argument");
        return DR_ERR_INVALID;
    }
    *out = nullptr;
    dr_topo *t = new (std::nothrow) dr_topo();
    if (t == nullptr) {
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    t->topo = topology;
    t->owned = false;
    try {
        scan(t);
    } catch (const std::bad_alloc &) {
        delete t;
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    *out = t;
    return DR_OK;
}

extern "C" void dr_topo_free(dr_topo_t *t)
{
    if (t == nullptr) {
        return;
    }
    if (t->owned && t->topo != nullptr) {
        hwloc_topology_destroy(t->topo);
    }
    delete t;
}

extern "C" struct hwloc_topology *dr_topo_hwloc(const dr_topo_t *t)
{
    return t != nullptr ? t->topo : nullptr;
}

extern "C" void dr_topo_summary(const dr_topo_t *t, char *buf, size_t len)
{
    int pk = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_PACKAGE);
    int nn = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_NUMANODE);
    int pu = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_PU);
    snprintf(buf, len, "%d package%s, %d NUMA node%s, %d PUs, %zu GPU%s, %zu NIC%s", pk,
             pk == 1 ? "" : "s", nn, nn == 1 ? "" : "s", pu, t->gpus.size(),
             t->gpus.size() == 1 ? "" : "s", t->nics.size(), t->nics.size() == 1 ? "" : "s");
}

extern "C" int dr_topo_num_nics(const dr_topo_t *t)
{
    return t != nullptr ? (int)t->nics.size() : 0;
}

extern "C" const dr_topo_nic_t *dr_topo_nic_at(const dr_topo_t *t, int i)
{
    if (t == nullptr || i < 0 || i >= (int)t->nics.size()) {
        return nullptr;
    }
    return &t->nics[i].pub;
}

extern "C" int dr_topo_find_nic(const dr_topo_t *t, const char *device)
{
    if (t == nullptr || device == nullptr) {
        return -1;
    }
    /* An exact plane-list name ("mlx5_0:1", "eno1") first, then an RDMA device without a
     * port (its first port), then an interface name. */
    for (size_t i = 0; i < t->nics.size(); ++i) {
        if (strcmp(t->nics[i].pub.name, device) == 0) {
            return (int)i;
        }
    }
    if (strchr(device, ':') == nullptr) {
        for (size_t i = 0; i < t->nics.size(); ++i) {
            if (strcmp(t->nics[i].pub.rdma, device) == 0) {
                return (int)i;
            }
        }
    }
    std::string base = nic_lookup_base(device);
    for (size_t i = 0; i < t->nics.size(); ++i) {
        if (base == t->nics[i].pub.netdev) {
            return (int)i;
        }
    }
    return -1;
}

extern "C" int dr_topo_num_gpus(const dr_topo_t *t)
{
    return t != nullptr ? (int)t->gpus.size() : 0;
}

extern "C" const dr_topo_gpu_t *dr_topo_gpu_at(const dr_topo_t *t, int i)
{
    if (t == nullptr || i < 0 || i >= (int)t->gpus.size()) {
        return nullptr;
    }
    return &t->gpus[i].pub;
}

extern "C" dr_status_t dr_topo_select(const dr_topo_t *t, const dr_plane_spec_t *plane,
                                      const dr_topo_where_t *where, dr_device_exists_fn exists,
                                      void *arg, dr_topo_choice_t *out, char *err, size_t errlen)
{
    if (t == nullptr || plane == nullptr || out == nullptr) {
        set_err(err, errlen, "dr_topo_select: NULL argument");
        return DR_ERR_INVALID;
    }
    if (plane->ndevices <= 0) {
        set_err(err, errlen, "plane has no device");
        return DR_ERR_CONFIG;
    }
    const char *cpus =
        where != nullptr && where->cpus != nullptr && *where->cpus != 0 ? where->cpus : nullptr;
    const char *gpu_text =
        where != nullptr && where->gpu != nullptr && *where->gpu != 0 ? where->gpu : nullptr;
    const int local_rank = where != nullptr ? where->local_rank : -1;

    try {
        /* The CPU side: the binding, or the whole machine when unbound. */
        hwloc_const_bitmap_t machine = hwloc_topology_get_topology_cpuset(t->topo);
        Bitmap bind, bindnodes;
        if (cpus != nullptr) {
            if (hwloc_bitmap_list_sscanf(bind, cpus) != 0 || hwloc_bitmap_iszero(bind)) {
                set_err(err, errlen, "bad CPU set \"%s\" (expected a list like 0-15,32-47)", cpus);
                return DR_ERR_CONFIG;
            }
            if (!hwloc_bitmap_isincluded(bind, machine)) {
                set_err(err, errlen, "CPU set %s is not within this machine's CPUs %s", cpus,
                        list_of(machine).c_str());
                return DR_ERR_CONFIG;
            }
        } else {
            hwloc_bitmap_copy(bind, machine);
        }
        const bool bound = !hwloc_bitmap_isequal(bind, machine);
        hwloc_cpuset_to_nodeset(t->topo, bind, bindnodes);

        hwloc_obj_t gpu = nullptr;
        std::string gpu_busid;
        if (gpu_text != nullptr) {
            unsigned dom, bus, dev, fn;
            if (!parse_busid(gpu_text, &dom, &bus, &dev, &fn)) {
                set_err(err, errlen, "bad GPU PCI bus id \"%s\" (expected e.g. 0000:15:00.0)",
                        gpu_text);
                return DR_ERR_CONFIG;
            }
            gpu = hwloc_get_pcidev_by_busid(t->topo, dom, bus, dev, fn);
            if (gpu == nullptr) {
                set_err(err, errlen, "GPU %s is not a PCI device of this topology", gpu_text);
                return DR_ERR_CONFIG;
            }
            gpu_busid = busid_of(gpu);
        }

        /* Candidates: the plane's devices present on this node. */
        std::vector<Cand> cands;
        std::string absent;
        for (int d = 0; d < plane->ndevices; ++d) {
            const char *name = plane->devices[d];
            int ni = dr_topo_find_nic(t, name);
            if (ni >= 0) {
                const NicRec *nic = &t->nics[ni];
                std::string order = nic->pub.pci_busid[0] != 0 ? nic->pub.pci_busid : "~";
                cands.push_back(Cand{d, nic, order + " " + nic->pub.name, Key()});
            } else if (exists != nullptr && exists(name, arg)) {
                cands.push_back(Cand{d, nullptr, std::string("~ ") + name, Key()});
            } else {
                absent += absent.empty() ? name : std::string(", ") + name;
            }
        }
        if (cands.empty()) {
            set_err(err, errlen, "none of the plane's devices (%s) is on this node",
                    absent.c_str());
            return DR_ERR_NO_DEVICE;
        }
        for (Cand &c : cands) {
            c.key = gpu != nullptr ? gpu_key(t, gpu, c.nic) : cpu_key(t, bind, bindnodes, c.nic);
        }
        std::vector<int> ties = best_of(cands);
        const int k = (int)ties.size();
        int slot = 0;
        std::string how;
        if (k > 1) {
            bool done = false;
            if (gpu != nullptr) {
                /* Every GPU of the node, in PCI order, takes the least used of its
                 * equally near devices (a device some GPU has to itself counts too):
                 * each process computes the same assignment for the whole node. */
                std::vector<int> load(cands.size(), 0);
                int before = 0;
                for (const GpuRec &g : t->gpus) {
                    std::vector<Cand> gc = cands;
                    for (Cand &c : gc) {
                        c.key = gpu_key(t, g.pci, c.nic);
                    }
                    std::vector<int> gt = best_of(gc);
                    int pick = 0;
                    for (int i = 1; i < (int)gt.size(); ++i) {
                        if (load[gt[i]] < load[gt[pick]]) {
                            pick = i;
                        }
                    }
                    if (g.pci == gpu) {
                        slot = pick;
                        how =
                            strf("spread by GPU: least used after %d GPU%s before it in PCI order",
                                 before, before == 1 ? "" : "s");
                        done = true;
                        break;
                    }
                    ++load[gt[pick]];
                    ++before;
                }
            }
            if (!done && gpu == nullptr && bound) {
                /* A narrow binding: its place among the cores of its NUMA node(s). */
                Bitmap domain;
                hwloc_cpuset_from_nodeset(t->topo, domain, bindnodes);
                hwloc_obj_type_t unit =
                    hwloc_get_nbobjs_inside_cpuset_by_type(t->topo, domain, HWLOC_OBJ_CORE) > 0
                        ? HWLOC_OBJ_CORE
                        : HWLOC_OBJ_PU;
                int total = 0, used = 0, first = -1;
                hwloc_obj_t o = nullptr;
                while ((o = hwloc_get_next_obj_inside_cpuset_by_type(t->topo, domain, unit, o)) !=
                       nullptr) {
                    if (hwloc_bitmap_intersects(o->cpuset, bind)) {
                        if (first < 0) {
                            first = total;
                        }
                        ++used;
                    }
                    ++total;
                }
                if (first >= 0 && total > 0 && used * k <= total) {
                    slot = (int)((long)first * k / total);
                    how = strf("spread by CPU position: %s %d of %d on NUMA node %s",
                               unit == HWLOC_OBJ_CORE ? "core" : "PU", first, total,
                               list_of(bindnodes).c_str());
                    done = true;
                }
            }
            if (!done) {
                int r = local_rank < 0 ? 0 : local_rank;
                slot = r % k;
                how = local_rank < 0 ? std::string("local rank unknown: first of them")
                                     : strf("spread by local rank %d", local_rank);
            }
        }
        const Cand &pick = cands[ties[slot]];
        out->device = pick.dev;
        out->level = (dr_topo_level_t)pick.key.level;
        out->hops = pick.key.hops;
        out->ties = k;
        std::string who = gpu != nullptr ? "GPU " + gpu_busid : "CPUs " + list_of(bind);
        std::string r;
        if (plane->ndevices == 1) {
            r = "the plane's only device";
        } else if (pick.key.level == DR_TOPO_UNKNOWN) {
            r = "no locality known for the plane's devices";
        } else if (gpu == nullptr && !bound) {
            r = "process not bound to CPUs";
        } else {
            r = strf("nearest to %s: %s", who.c_str(), level_phrase(pick.key.level));
            if (pick.key.hops > 0) {
                r += strf(" (%d PCIe hops)", pick.key.hops);
            }
        }
        if (k > 1) {
            r += strf("; %d equally near, %s", k, how.c_str());
        }
        copy_str(out->reason, r);
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    return DR_OK;
}

extern "C" void dr_topo_where_self(const dr_topo_t *t, dr_topo_where_t *where, char *cpus,
                                   size_t cpuslen, char *gpu, size_t gpulen)
{
    where->cpus = nullptr;
    where->gpu = nullptr;
    where->local_rank = -1;
    if (cpus != nullptr && cpuslen > 0) {
        cpus[0] = 0;
        Bitmap set;
        if (t != nullptr && hwloc_get_cpubind(t->topo, set, HWLOC_CPUBIND_THREAD) == 0 &&
            !hwloc_bitmap_iszero(set)) {
            hwloc_const_bitmap_t machine = hwloc_topology_get_topology_cpuset(t->topo);
            hwloc_bitmap_and(set, set, machine);
            if (!hwloc_bitmap_iszero(set) && !hwloc_bitmap_isequal(set, machine)) {
                snprintf(cpus, cpuslen, "%s", list_of(set).c_str());
                where->cpus = cpus;
            }
        }
    }
    const char *g = getenv("DUALRAIL_GPU_BUSID");
    if (g != nullptr && *g != 0 && gpu != nullptr && gpulen > 0) {
        snprintf(gpu, gpulen, "%s", g);
        where->gpu = gpu;
    }
    static const char *const rank_vars[] = {"DUALRAIL_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                            "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (const char *v : rank_vars) {
        const char *s = getenv(v);
        char *end = nullptr;
        if (s != nullptr && *s != 0) {
            long r = strtol(s, &end, 10);
            if (*end == 0 && r >= 0 && r < 1000000) {
                where->local_rank = (int)r;
                break;
            }
        }
    }
}

extern "C" const dr_topo_t *dr_topo_system(char *err, size_t errlen)
{
    static std::once_flag once;
    static dr_topo_t *topo = nullptr;
    static char why[256] = "";
    std::call_once(once, [] {
        if (dr_topo_load(nullptr, &topo, why, sizeof(why)) != DR_OK) {
            topo = nullptr;
        }
    });
    if (topo == nullptr) {
        set_err(err, errlen, "%s", why);
    }
    return topo;
}

/* ------------------------------------------------------------------ the plane hook */

extern "C" const char *dr_plane_select_device_why(const dr_plane_spec_t *plane, char *why,
                                                  size_t whylen)
{
    if (plane == nullptr || plane->ndevices <= 0) {
        set_err(why, whylen, "plane has no device");
        return nullptr;
    }
    if (plane->ndevices == 1) {
        set_err(why, whylen, "the plane's only device");
        return plane->devices[0];
    }
    char err[256] = "";
    const dr_topo_t *t = dr_topo_system(err, sizeof(err));
    if (t == nullptr) {
        set_err(why, whylen, "%s; using the first listed", err);
        return plane->devices[0];
    }
    dr_topo_where_t where;
    char cpus[256], gpu[64];
    dr_topo_where_self(t, &where, cpus, sizeof(cpus), gpu, sizeof(gpu));
    dr_topo_choice_t choice;
    dr_status_t st = dr_topo_select(t, plane, &where, dr_device_exists_system, nullptr, &choice,
                                    err, sizeof(err));
    if (st != DR_OK && where.gpu != nullptr) {
        /* A GPU hwloc does not see (a bad DUALRAIL_GPU_BUSID): decide by CPU instead. */
        std::string first = err;
        where.gpu = nullptr;
        st = dr_topo_select(t, plane, &where, dr_device_exists_system, nullptr, &choice, err,
                            sizeof(err));
        if (st == DR_OK) {
            set_err(why, whylen, "%s (ignored DUALRAIL_GPU_BUSID: %s)", choice.reason,
                    first.c_str());
            return plane->devices[choice.device];
        }
    }
    if (st != DR_OK) {
        set_err(why, whylen, "%s; using the first listed", err);
        return plane->devices[0];
    }
    set_err(why, whylen, "%s", choice.reason);
    return plane->devices[choice.device];
}
