/*
 * dualrail-info: the planes of this machine (or of an hwloc XML topology),
 * their devices and each device's PCI/NUMA locality, and the device a process
 * would use on each plane for a CPU set, a GPU or a local rank.
 *
 *     dualrail-info                                   this machine, this process
 *     dualrail-info --topology box.xml --cpus 0-7     another machine, a binding
 *     dualrail-info --topology box.xml --all-gpus     every GPU's choice
 *     dualrail-info --json                            for scripts
 *
 * Exit status: 0, 1 when the planes cannot be formed or a choice fails,
 * 2 on a bad command line.
 */
#include <boost/program_options.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "dualrail/planes.h"
#include "dualrail/topo.h"

namespace po = boost::program_options;

namespace {

std::string json_str(const std::string &s)
{
    std::string o = "\"";
    for (char c : s) {
        switch (c) {
        case '"':
            o += "\\\"";
            break;
        case '\\':
            o += "\\\\";
            break;
        case '\n':
            o += "\\n";
            break;
        case '\t':
            o += "\\t";
            break;
        default:
            if ((unsigned char)c < 0x20) {
                char b[8];
                snprintf(b, sizeof(b), "\\u%04x", c);
                o += b;
            } else {
                o += c;
            }
        }
    }
    return o + "\"";
}

bool parse_ifaddr(const std::string &s, dr_topo_ifaddr_t *out)
{
    /* NAME=A.B.C.D/N */
    size_t eq = s.find('='), slash = s.rfind('/');
    if (eq == std::string::npos || eq == 0 || slash == std::string::npos || slash < eq) {
        return false;
    }
    memset(out, 0, sizeof(*out));
    std::string name = s.substr(0, eq), ip = s.substr(eq + 1, slash - eq - 1);
    char *end = nullptr;
    long prefix = strtol(s.c_str() + slash + 1, &end, 10);
    if (*end != 0 || prefix < 0 || prefix > 32 || name.size() >= sizeof(out->name) ||
        ip.size() >= sizeof(out->ipv4)) {
        return false;
    }
    unsigned a, b, c, d;
    char tail;
    if (sscanf(ip.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 || b > 255 ||
        c > 255 || d > 255) {
        return false;
    }
    snprintf(out->name, sizeof(out->name), "%s", name.c_str());
    snprintf(out->ipv4, sizeof(out->ipv4), "%s", ip.c_str());
    out->prefix = (int)prefix;
    out->up = 1;
    out->loopback = name == "lo";
    return true;
}

struct Row {
    int plane;
    dr_topo_choice_t choice;
    std::string device;
    std::string error;
};

/* The device of every plane for one "where". */
std::vector<Row> choose(const dr_topo_t *t, const dr_plane_list_t &list, const dr_topo_where_t &w,
                        bool live)
{
    std::vector<Row> rows;
    for (int p = 0; p < list.nplanes; ++p) {
        Row r;
        r.plane = p;
        memset(&r.choice, 0, sizeof(r.choice));
        char err[256] = "";
        dr_status_t st =
            dr_topo_select(t, &list.planes[p], &w, live ? dr_device_exists_system : nullptr,
                           nullptr, &r.choice, err, sizeof(err));
        if (st == DR_OK) {
            r.device = list.planes[p].devices[r.choice.device];
        } else {
            r.error = err;
        }
        rows.push_back(r);
    }
    return rows;
}

const char *nic_link(const dr_topo_nic_t *n)
{
    if (n->port_active < 0) {
        return n->infiniband ? "IB" : "Ethernet";
    }
    if (n->infiniband) {
        return n->port_active ? "IB active" : "IB down";
    }
    return n->port_active ? "RoCE active" : "RoCE down";
}

std::string plane_of_device(const dr_plane_list_t &list, const dr_topo_t *t, int nic)
{
    for (int p = 0; p < list.nplanes; ++p) {
        for (int d = 0; d < list.planes[p].ndevices; ++d) {
            if (dr_topo_find_nic(t, list.planes[p].devices[d]) == nic) {
                return std::to_string(p);
            }
        }
    }
    return "";
}

} // namespace

int main(int argc, char **argv)
{
    std::string topo_file, planes_text, cpus, gpu, include, exclude;
    std::vector<std::string> ifaddr_args;
    int local_rank = -2;
    po::options_description opts(
        "usage: dualrail-info [options]\n\n"
        "Shows the planes, their devices' PCI/NUMA locality and the device "
        "a process would use on each plane.\n\noptions");
    opts.add_options()("help,h", "this text")(
        "topology,t", po::value(&topo_file),
        "hwloc XML topology (lstopo --of xml) to read instead of this machine")(
        "planes,p", po::value(&planes_text),
        "plane list, e.g. mlx5_0|mlx5_2,mlx5_1|mlx5_3 (default: discovered)")(
        "cpus", po::value(&cpus),
        "CPU set to choose for, e.g. 0-15,32-47 (default: this process's binding; with "
        "--topology: unbound)")(
        "gpu", po::value(&gpu),
        "PCI bus id of the GPU to choose for (default: $DUALRAIL_GPU_BUSID)")(
        "local-rank", po::value(&local_rank),
        "local rank, spreads ties (default: from the environment)")(
        "all-gpus", "show the choice for every GPU of the machine")(
        "ifaddr", po::value(&ifaddr_args)->composing(),
        "NAME=A.B.C.D/N, repeatable: an interface address for discovery (default: this machine's "
        "addresses; none with --topology)")("include", po::value(&include),
                                            "discovery: only devices matching these patterns")(
        "exclude", po::value(&exclude),
        "discovery: also leave out devices matching these patterns")("json",
                                                                     "machine-readable output");
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
        po::notify(vm);
    } catch (const po::error &e) {
        std::cerr << "dualrail-info: " << e.what() << "\n" << opts;
        return 2;
    }
    if (vm.count("help")) {
        std::cout << opts;
        return 0;
    }
    const bool json = vm.count("json") > 0, all_gpus = vm.count("all-gpus") > 0;
    const bool live = topo_file.empty();
    char err[512] = "";

    dr_topo_t *t = nullptr;
    if (dr_topo_load(live ? nullptr : topo_file.c_str(), &t, err, sizeof(err)) != DR_OK) {
        fprintf(stderr, "dualrail-info: %s\n", err);
        return 1;
    }

    std::vector<dr_topo_ifaddr_t> ifs;
    for (const std::string &a : ifaddr_args) {
        dr_topo_ifaddr_t ifa;
        if (!parse_ifaddr(a, &ifa)) {
            fprintf(stderr, "dualrail-info: bad --ifaddr '%s' (expected NAME=A.B.C.D/N)\n",
                    a.c_str());
            dr_topo_free(t);
            return 2;
        }
        ifs.push_back(ifa);
    }
    if (live && ifaddr_args.empty()) {
        ifs.resize(256);
        int n = 0;
        dr_topo_ifaddrs_system(ifs.data(), (int)ifs.size(), &n);
        ifs.resize((size_t)n);
    }

    /* Planes: the given list, or discovered. */
    dr_plane_list_t list;
    std::vector<std::string> ids;
    std::string note, source;
    if (!planes_text.empty()) {
        if (dr_plane_list_parse(planes_text.c_str(), &list, err, sizeof(err)) != DR_OK) {
            fprintf(stderr, "dualrail-info: %s\n", err);
            dr_topo_free(t);
            return 2;
        }
        source = "given";
    } else {
        dr_topo_discover_opts_t dopts{include.empty() ? nullptr : include.c_str(),
                                      exclude.empty() ? nullptr : exclude.c_str()};
        dr_topo_discovery_t d;
        if (dr_topo_discover(t, ifs.data(), (int)ifs.size(), &dopts, &d, err, sizeof(err)) !=
            DR_OK) {
            fprintf(stderr, "dualrail-info: %s\n", err);
            dr_topo_free(t);
            return 1;
        }
        list = d.list;
        for (int p = 0; p < list.nplanes; ++p) {
            ids.push_back(d.ids[p]);
        }
        note = d.note;
        source = "discovered";
    }
    char ptext[4096];
    dr_topo_planes_format(&list, ptext, sizeof(ptext));

    /* Where the process is. */
    dr_topo_where_t where;
    char self_cpus[512] = "", self_gpu[64] = "";
    if (live) {
        dr_topo_where_self(t, &where, self_cpus, sizeof(self_cpus), self_gpu, sizeof(self_gpu));
    } else {
        where.cpus = nullptr;
        where.gpu = nullptr;
        where.local_rank = -1; /* a file's GPUs and CPUs are not this process's */
    }
    if (vm.count("cpus")) {
        where.cpus = cpus.c_str();
    }
    if (vm.count("gpu")) {
        where.gpu = gpu.c_str();
    }
    if (local_rank != -2) {
        where.local_rank = local_rank;
    }
    std::vector<Row> rows = choose(t, list, where, live);
    bool failed = false;
    for (const Row &r : rows) {
        failed |= !r.error.empty();
    }
    std::string who = where.gpu != nullptr && *where.gpu     ? std::string("GPU ") + where.gpu
                      : where.cpus != nullptr && *where.cpus ? std::string("CPUs ") + where.cpus
                                                             : std::string("an unbound process");
    if (where.local_rank >= 0) {
        who += ", local rank " + std::to_string(where.local_rank);
    }

    std::vector<std::vector<Row>> per_gpu;
    if (all_gpus) {
        for (int g = 0; g < dr_topo_num_gpus(t); ++g) {
            dr_topo_where_t w{nullptr, dr_topo_gpu_at(t, g)->pci_busid, -1};
            per_gpu.push_back(choose(t, list, w, live));
        }
    }

    char summary[256];
    dr_topo_summary(t, summary, sizeof(summary));
    const std::string topo_name = live ? "this machine" : topo_file;

    if (json) {
        std::string o = "{\n";
        o += "  \"topology\": " + json_str(topo_name) + ",\n";
        o += "  \"summary\": " + json_str(summary) + ",\n";
        o += "  \"planes_source\": " + json_str(source) + ",\n";
        o += "  \"planes_text\": " + json_str(ptext) + ",\n";
        o += "  \"note\": " + json_str(note) + ",\n";
        o += "  \"planes\": [";
        for (int p = 0; p < list.nplanes; ++p) {
            o += p ? ",\n    {" : "\n    {";
            o += "\"index\": " + std::to_string(p) +
                 ", \"id\": " + json_str(p < (int)ids.size() ? ids[p] : "") + ", \"devices\": [";
            for (int d = 0; d < list.planes[p].ndevices; ++d) {
                const char *name = list.planes[p].devices[d];
                int ni = dr_topo_find_nic(t, name);
                const dr_topo_nic_t *n = ni >= 0 ? dr_topo_nic_at(t, ni) : nullptr;
                o += d ? ", {" : "{";
                o += "\"name\": " + json_str(name);
                if (n != nullptr) {
                    o += ", \"pci\": " + json_str(n->pci_busid) +
                         ", \"numa\": " + std::to_string(n->numa) +
                         ", \"package\": " + std::to_string(n->package) +
                         ", \"cpus\": " + json_str(n->cpus) +
                         ", \"netdev\": " + json_str(n->netdev) +
                         ", \"link\": " + json_str(nic_link(n));
                } else {
                    o += ", \"pci\": null";
                }
                o += "}";
            }
            o += "]}";
        }
        o += "\n  ],\n";
        o += "  \"nics\": [";
        for (int i = 0; i < dr_topo_num_nics(t); ++i) {
            const dr_topo_nic_t *n = dr_topo_nic_at(t, i);
            std::string pl = plane_of_device(list, t, i);
            o += i ? ",\n    {" : "\n    {";
            o += "\"name\": " + json_str(n->name) + ", \"pci\": " + json_str(n->pci_busid) +
                 ", \"numa\": " + std::to_string(n->numa) +
                 ", \"package\": " + std::to_string(n->package) +
                 ", \"netdev\": " + json_str(n->netdev) +
                 ", \"ib_subnet\": " + json_str(n->ib_subnet) +
                 ", \"link\": " + json_str(nic_link(n)) +
                 ", \"plane\": " + (pl.empty() ? std::string("null") : pl) + "}";
        }
        o += "\n  ],\n";
        auto choice_json = [&](const std::vector<Row> &rs) {
            std::string s = "[";
            for (size_t i = 0; i < rs.size(); ++i) {
                const Row &r = rs[i];
                s += i ? ", {" : "{";
                s += "\"plane\": " + std::to_string(r.plane);
                if (r.error.empty()) {
                    s += ", \"device\": " + json_str(r.device) +
                         ", \"level\": " + json_str(dr_topo_level_name(r.choice.level)) +
                         ", \"hops\": " + std::to_string(r.choice.hops) +
                         ", \"ties\": " + std::to_string(r.choice.ties) +
                         ", \"reason\": " + json_str(r.choice.reason);
                } else {
                    s += ", \"device\": null, \"error\": " + json_str(r.error);
                }
                s += "}";
            }
            return s + "]";
        };
        o += "  \"process\": {\"cpus\": " + json_str(where.cpus ? where.cpus : "") +
             ", \"gpu\": " + json_str(where.gpu ? where.gpu : "") +
             ", \"local_rank\": " + std::to_string(where.local_rank) +
             ", \"choice\": " + choice_json(rows) + "}";
        if (all_gpus) {
            o += ",\n  \"gpus\": [";
            for (int g = 0; g < dr_topo_num_gpus(t); ++g) {
                const dr_topo_gpu_t *gp = dr_topo_gpu_at(t, g);
                o += g ? ",\n    {" : "\n    {";
                o += "\"pci\": " + json_str(gp->pci_busid) + ", \"model\": " + json_str(gp->model) +
                     ", \"numa\": " + std::to_string(gp->numa) +
                     ", \"choice\": " + choice_json(per_gpu[g]) + "}";
            }
            o += "\n  ]";
        }
        o += "\n}\n";
        fputs(o.c_str(), stdout);
    } else {
        printf("topology  %s: %s\n", topo_name.c_str(), summary);
        printf("planes    %d, %s: %s\n", list.nplanes, source.c_str(), ptext);
        if (!note.empty()) {
            printf("note      %s\n", note.c_str());
        }
        for (int p = 0; p < list.nplanes; ++p) {
            printf("\nplane %d%s%s\n", p, p < (int)ids.size() ? "  " : "",
                   p < (int)ids.size() ? ids[p].c_str() : "");
            printf("  %-12s %-13s %-5s %-8s %-14s %-11s %s\n", "device", "PCI", "NUMA", "package",
                   "local CPUs", "interface", "link");
            for (int d = 0; d < list.planes[p].ndevices; ++d) {
                const char *name = list.planes[p].devices[d];
                int ni = dr_topo_find_nic(t, name);
                const dr_topo_nic_t *n = ni >= 0 ? dr_topo_nic_at(t, ni) : nullptr;
                if (n == nullptr) {
                    printf("  %-12s %-13s %-5s %-8s %-14s %-11s %s\n", name, "-", "-", "-", "-",
                           "-",
                           live && dr_device_exists_system(name, nullptr)
                               ? "(not in the hwloc topology: virtual?)"
                               : "(not on this node)");
                    continue;
                }
                printf("  %-12s %-13s %-5d %-8d %-14s %-11s %s\n", name, n->pci_busid, n->numa,
                       n->package, n->cpus, n->netdev[0] ? n->netdev : "-", nic_link(n));
            }
        }
        bool header = false;
        for (int i = 0; i < dr_topo_num_nics(t); ++i) {
            if (!plane_of_device(list, t, i).empty()) {
                continue;
            }
            const dr_topo_nic_t *n = dr_topo_nic_at(t, i);
            if (!header) {
                printf("\nnot in a plane\n");
                header = true;
            }
            printf("  %-12s %-13s %-5d %-8d %-14s %-11s %s\n", n->name, n->pci_busid, n->numa,
                   n->package, n->cpus, n->netdev[0] ? n->netdev : "-", nic_link(n));
        }
        printf("\nchoice for %s\n", who.c_str());
        for (const Row &r : rows) {
            if (r.error.empty()) {
                printf("  plane %d -> %-10s %s\n", r.plane, r.device.c_str(), r.choice.reason);
            } else {
                printf("  plane %d -> error: %s\n", r.plane, r.error.c_str());
            }
        }
        if (all_gpus) {
            printf(
                "\nper GPU (nearest device per plane: level, PCIe hops; * = spread over ties)\n");
            std::string hdr = "  GPU           NUMA ";
            for (int p = 0; p < list.nplanes; ++p) {
                std::string c = "plane " + std::to_string(p);
                hdr += " " + c + std::string(24 - c.size(), ' ');
            }
            hdr.erase(hdr.find_last_not_of(' ') + 1);
            printf("%s\n", hdr.c_str());
            for (int g = 0; g < dr_topo_num_gpus(t); ++g) {
                const dr_topo_gpu_t *gp = dr_topo_gpu_at(t, g);
                char head[64];
                snprintf(head, sizeof(head), "  %-13s %-5d", gp->pci_busid, gp->numa);
                std::string line = head;
                for (const Row &r : per_gpu[g]) {
                    std::string cell;
                    if (!r.error.empty()) {
                        cell = "error";
                    } else {
                        cell = r.device + " " + dr_topo_level_name(r.choice.level);
                        if (r.choice.hops > 0) {
                            cell += "/" + std::to_string(r.choice.hops);
                        }
                        if (r.choice.ties > 1) {
                            cell += "*";
                        }
                    }
                    line += " " + cell + std::string(cell.size() < 24 ? 24 - cell.size() : 0, ' ');
                }
                line.erase(line.find_last_not_of(' ') + 1);
                printf("%s\n", line.c_str());
            }
        }
    }
    dr_topo_free(t);
    return failed ? 1 : 0;
}
