/*
 * Plane lists: which devices make up each network plane.
 *
 * Syntax: planes are separated by ',', the devices of one plane by '|':
 *     "ethA,ethB"                      two planes, one device each
 *     "mlx5_0|mlx5_2,mlx5_1|mlx5_3"    two planes, two devices each
 * A device may carry a port suffix ("mlx5_0:1"); white space around names is
 * ignored. Parsing is pure (no system access) so every error is unit-tested;
 * dr_plane_list_check() then asks the system whether each device exists.
 */
#ifndef DUALRAIL_PLANES_H
#define DUALRAIL_PLANES_H

#include <stddef.h>

#include "dualrail/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

#define DR_MAX_PLANES 8
#define DR_MAX_PLANE_DEVICES 16
#define DR_DEVICE_NAME_MAX 64

typedef struct dr_plane_spec {
    int ndevices;
    char devices[DR_MAX_PLANE_DEVICES][DR_DEVICE_NAME_MAX];
} dr_plane_spec_t;

typedef struct dr_plane_list {
    int nplanes;
    dr_plane_spec_t planes[DR_MAX_PLANES];
} dr_plane_list_t;

/*
 * Parse text into out. On error returns DR_ERR_CONFIG, leaves out untouched
 * and writes a one-line reason into err (when err is not NULL).
 */
dr_status_t dr_plane_list_parse(const char *text, dr_plane_list_t *out, char *err,
                                size_t errlen);

/* Returns non-zero when the named device (port suffix allowed) exists. */
typedef int (*dr_device_exists_fn)(const char *device, void *arg);

/* The live check: a network interface or an InfiniBand/RoCE device by that name. */
int dr_device_exists_system(const char *device, void *arg);

/*
 * Every device of every plane must exist (DR_ERR_NO_DEVICE otherwise, with the
 * device and plane named in err). exists == NULL uses dr_device_exists_system.
 */
dr_status_t dr_plane_list_check(const dr_plane_list_t *list, dr_device_exists_fn exists,
                                void *arg, char *err, size_t errlen);

/*
 * The name UCX knows a plane device by (UCX_NET_DEVICES): an RDMA device
 * written without a port ("mlx5_0") gets its first ACTIVE port ("mlx5_0:1";
 * the lowest port when none is active), because UCX matches RDMA devices by
 * "device:port" only and would find no transport for "mlx5_0". Network
 * interfaces (also IPoIB ones) and names that carry a port are kept as
 * written. sysfs: the sysfs root ("/sys"; tests pass a tree of their own).
 * Returns out.
 */
const char *dr_plane_ucx_device(const char *device, const char *sysfs, char *out, size_t outlen);

/*
 * The device this process uses on the plane: the one nearest to its GPU
 * (DUALRAIL_GPU_BUSID) or else to its CPU binding, ties spread over the
 * processes of the node (see dualrail/topo.h). A plane with one device, or
 * whose devices hwloc cannot place, gets its first device.
 */
const char *dr_plane_select_device(const dr_plane_spec_t *plane);

/* The same, and why in one line (why may be NULL): for the verbose log. */
const char *dr_plane_select_device_why(const dr_plane_spec_t *plane, char *why, size_t whylen);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
