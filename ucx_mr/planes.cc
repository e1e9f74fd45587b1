/*
 * Plane-list parsing and device checks. See include/dualrail/planes.h.
 */
#include "dualrail/planes.h"

#include "errbuf.hpp"

#include <dirent.h>
#include <net/if.h>
#include <sys/stat.h>

#include <cstdlib>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

using dualrail::set_err;

std::string trim(const std::string &s)
{
    const char *ws = " \t\r\n";
    size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) {
        return "";
    }
    size_t e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

bool valid_device_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.' || c == ':' || c == '@';
}

/* Device name without a ":port" suffix. */
std::string device_base(const char *dev)
{
    std::string s(dev);
    size_t colon = s.find(':');
    return colon == std::string::npos ? s : s.substr(0, colon);
}

} // namespace

extern "C" dr_status_t dr_plane_list_parse(const char *text, dr_plane_list_t *out, char *err,
                                           size_t errlen)
{
    if (text == nullptr || trim(text).empty()) {
        set_err(err, errlen, "plane list is empty (expected e.g. \"ethA,ethB\")");
        return DR_ERR_CONFIG;
    }
    dr_plane_list_t list;
    memset(&list, 0, sizeof(list));
    std::string all(text);
    size_t pos = 0;
    for (;;) {
        size_t comma = all.find(',', pos);
        std::string plane = all.substr(pos, comma == std::string::npos ? std::string::npos
                                                                       : comma - pos);
        if (list.nplanes == DR_MAX_PLANES) {
            set_err(err, errlen, "too many planes in \"%s\" (at most %d)", text, DR_MAX_PLANES);
            return DR_ERR_CONFIG;
        }
        dr_plane_spec_t *spec = &list.planes[list.nplanes];
        size_t dpos = 0;
        for (;;) {
            size_t bar = plane.find('|', dpos);
            std::string dev = trim(plane.substr(dpos, bar == std::string::npos ? std::string::npos
                                                                               : bar - dpos));
            if (dev.empty()) {
                set_err(err, errlen, "plane %d has an empty device name in \"%s\"", list.nplanes,
                        text);
                return DR_ERR_CONFIG;
            }
            if (dev.size() >= DR_DEVICE_NAME_MAX) {
                set_err(err, errlen, "device name \"%s\" in plane %d is too long (max %d)",
                        dev.c_str(), list.nplanes, DR_DEVICE_NAME_MAX - 1);
                return DR_ERR_CONFIG;
            }
            for (char c : dev) {
                if (!valid_device_char(c)) {
                    set_err(err, errlen, "device name \"%s\" in plane %d has a bad character '%c'",
                            dev.c_str(), list.nplanes, c);
                    return DR_ERR_CONFIG;
                }
            }
            if (spec->ndevices == DR_MAX_PLANE_DEVICES) {
                set_err(err, errlen, "plane %d lists more than %d devices", list.nplanes,
                        DR_MAX_PLANE_DEVICES);
                return DR_ERR_CONFIG;
            }
            /* A device may serve one plane only: two planes sharing a NIC are one plane. */
            for (int p = 0; p <= list.nplanes; ++p) {
                int nd = p == list.nplanes ? spec->ndevices : list.planes[p].ndevices;
                for (int d = 0; d < nd; ++d) {
                    if (device_base(list.planes[p].devices[d]) == device_base(dev.c_str())) {
                        if (p == list.nplanes) {
                            set_err(err, errlen, "device \"%s\" is listed twice in plane %d",
                                    dev.c_str(), p);
                        } else {
                            set_err(err, errlen, "device \"%s\" is in plane %d and plane %d",
                                    dev.c_str(), p, list.nplanes);
                        }
                        return DR_ERR_CONFIG;
                    }
                }
            }
            snprintf(spec->devices[spec->ndevices++], DR_DEVICE_NAME_MAX, "%s", dev.c_str());
            if (bar == std::string::npos) {
                break;
            }
            dpos = bar + 1;
        }
        ++list.nplanes;
        if (comma == std::string::npos) {
            break;
        }
        pos = comma + 1;
    }
    *out = list;
    return DR_OK;
}

extern "C" int dr_device_exists_system(const char *device, void * /*arg*/)
{
    std::string base = device_base(device);
    if (base.empty()) {
        return 0;
    }
    if (if_nametoindex(base.c_str()) != 0) {
        return 1;
    }
    struct stat st;
    std::string ib = "/sys/class/infiniband/" + base;
    return stat(ib.c_str(), &st) == 0;
}

extern "C" dr_status_t dr_plane_list_check(const dr_plane_list_t *list, dr_device_exists_fn exists,
                                           void *arg, char *err, size_t errlen)
{
    if (exists == nullptr) {
        exists = dr_device_exists_system;
    }
    for (int p = 0; p < list->nplanes; ++p) {
        for (int d = 0; d < list->planes[p].ndevices; ++d) {
            if (!exists(list->planes[p].devices[d], arg)) {
                set_err(err, errlen, "unknown device \"%s\" in plane %d (no such network "
                        "interface or RDMA device on this host)",
                        list->planes[p].devices[d], p);
                return DR_ERR_NO_DEVICE;
            }
        }
    }
    return DR_OK;
}

extern "C" const char *dr_plane_ucx_device(const char *device, const char *sysfs, char *out,
                                           size_t outlen)
{
    snprintf(out, outlen, "%s", device);
    struct stat st;
    const std::string root = sysfs != nullptr ? sysfs : "/sys";
    if (strchr(device, ':') != nullptr || device[0] == '\0' ||
        stat((root + "/class/net/" + device).c_str(), &st) == 0) {
        return out; /* a port given, or a network interface */
    }
    const std::string ports = root + "/class/infiniband/" + device + "/ports";
    DIR *d = opendir(ports.c_str());
    if (d == nullptr) {
        return out; /* not an RDMA device: UCX will say what it thinks of the name */
    }
    long lowest = 0, active = 0;
    while (struct dirent *e = readdir(d)) {
        char *end = nullptr;
        const long port = strtol(e->d_name, &end, 10);
        if (port <= 0 || end == e->d_name || *end != '\0') {
            continue;
        }
        lowest = lowest == 0 || port < lowest ? port : lowest;
        char state[64] = "";
        FILE *f = fopen((ports + "/" + e->d_name + "/state").c_str(), "r");
        if (f != nullptr) {
            if (fgets(state, sizeof(state), f) == nullptr) {
                state[0] = '\0';
            }
            fclose(f);
        }
        if (strstr(state, "ACTIVE") != nullptr && (active == 0 || port < active)) {
            active = port; /* "4: ACTIVE" */
        }
    }
    closedir(d);
    const long port = active != 0 ? active : lowest != 0 ? lowest : 1;
    snprintf(out, outlen, "%s:%ld", device, port);
    return out;
}

/* NUMA/PCIe-affine choice: ucx_mr/topo.cc. */
extern "C" const char *dr_plane_select_device(const dr_plane_spec_t *plane)
{
    return dr_plane_select_device_why(plane, nullptr, 0);
}
