/*
 * Topology: which NIC a process uses on each plane, and which NICs make up
 * the planes when no plane list is given.
 *
 * Selection. For each plane, the device nearest to the process's GPU (when it
 * has one) or else to its CPU binding, by hwloc locality:
 *
 *     same PCIe switch < same host bridge < same NUMA node < same package
 *                      < across sockets < unknown (not in the topology)
 *
 * Within the switch and host-bridge levels fewer PCIe bridges between GPU and
 * NIC win. Devices still equal are ties; processes sharing a plane are spread
 * over them evenly and deterministically: by the GPU's place among the GPUs
 * that see the same equally near devices, else by the position of the CPU
 * binding among the cores of its NUMA node(s), else by local rank.
 *
 * Discovery. Devices are grouped into planes by the network they attach to:
 * the IPv4 subnet of their interface (Ethernet, RoCE, IPoIB), or the subnet
 * prefix of an InfiniBand port's GID. Planes are numbered by sorting those
 * identities and the devices of a plane by PCI address, so every node numbers
 * them the same way whatever the enumeration order. When the node has RDMA
 * devices that can be placed, only they form planes (a plain Ethernet port is
 * then a management network, not a plane).
 *
 * Every function is pure: it takes a topology (an hwloc XML file, an hwloc
 * topology object, or this machine's) and explicit inputs (CPU set, GPU PCI
 * bus id, interface addresses), so all of it is tested with committed XML
 * topologies. Only dr_topo_system(), dr_topo_where_self() and
 * dr_topo_ifaddrs_system() look at the running process.
 */
#ifndef DUALRAIL_TOPO_H
#define DUALRAIL_TOPO_H

#include <stddef.h>

#include "dualrail/planes.h"
#include "dualrail/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

struct hwloc_topology; /* hwloc_topology_t is a pointer to it */

typedef struct dr_topo dr_topo_t;

/* How near a device is to the GPU or CPU set, nearest first. */
typedef enum dr_topo_level {
    DR_TOPO_SWITCH = 0,     /* GPU and NIC below one PCIe switch */
    DR_TOPO_HOSTBRIDGE = 1, /* below one PCIe host bridge (root complex) */
    DR_TOPO_NUMA = 2,       /* on the NUMA node(s) of the CPU set / GPU */
    DR_TOPO_PACKAGE = 3,    /* in the same package (socket) */
    DR_TOPO_SYSTEM = 4,     /* across the inter-socket link */
    DR_TOPO_UNKNOWN = 5     /* not in the topology (e.g. a virtual interface) */
} dr_topo_level_t;

/* "switch", "hostbridge", "numa", "package", "system", "unknown". */
const char *dr_topo_level_name(dr_topo_level_t level);

/*
 * Load an hwloc XML file (xml_path != NULL) or this machine (NULL), with
 * PCI devices, bridges and network/OpenFabrics devices. Errors: a missing or
 * unreadable file, or one hwloc cannot parse (DR_ERR_CONFIG, err names the
 * file); hwloc failing on this machine (DR_ERR_NO_DEVICE).
 */
dr_status_t dr_topo_load(const char *xml_path, dr_topo_t **out, char *err, size_t errlen);

/* Use a topology the caller loaded (with I/O objects kept). It must outlive *out. */
dr_status_t dr_topo_wrap(struct hwloc_topology *topology, dr_topo_t **out, char *err,
                         size_t errlen);

void dr_topo_free(dr_topo_t *t);

struct hwloc_topology *dr_topo_hwloc(const dr_topo_t *t);

/* The machine in one line: "2 packages, 2 NUMA nodes, 64 PUs, 8 GPUs, 9 NICs". */
void dr_topo_summary(const dr_topo_t *t, char *buf, size_t len);

#define DR_TOPO_BUSID_MAX 16 /* "0000:16:00.0" */
#define DR_TOPO_ID_MAX    48 /* a plane identity */

/* A network device (one per RDMA port, or a network interface without RDMA). */
typedef struct dr_topo_nic {
    char name[DR_DEVICE_NAME_MAX];   /* as in plane lists: "mlx5_0:1" (RDMA port) or "eno1" */
    char rdma[DR_DEVICE_NAME_MAX];   /* "mlx5_0", or "" */
    int port;                        /* RDMA port (1..), 0 for an interface */
    char netdev[DR_DEVICE_NAME_MAX]; /* its network interface ("ibp22s0", "ens1f0np0"), or "" */
    char pci_busid[DR_TOPO_BUSID_MAX];
    int infiniband;     /* 1: InfiniBand link layer, 0: Ethernet */
    int port_active;    /* 1 active, 0 not, -1 unknown */
    char ib_subnet[24]; /* "fec0:0000:0000:000a": GID subnet prefix, or "" */
    int numa;           /* OS index of its first local NUMA node, -1 unknown */
    int package;        /* OS index of its package, -1 unknown */
    char cpus[64];      /* local CPUs, hwloc list syntax ("0-15,32-47") */
} dr_topo_nic_t;

/* NICs sorted by PCI address (then name): the same order on every node. */
int dr_topo_num_nics(const dr_topo_t *t);
const dr_topo_nic_t *dr_topo_nic_at(const dr_topo_t *t, int i);
/* Index of the NIC a plane-list device names ("mlx5_0", "mlx5_0:1", "ibp22s0"), or -1. */
int dr_topo_find_nic(const dr_topo_t *t, const char *device);

typedef struct dr_topo_gpu {
    char pci_busid[DR_TOPO_BUSID_MAX];
    char model[64];
    int numa;
    int package;
} dr_topo_gpu_t;

/* GPUs and accelerators (PCI class 3D/display of a GPU vendor, or processing accelerator). */
int dr_topo_num_gpus(const dr_topo_t *t);
const dr_topo_gpu_t *dr_topo_gpu_at(const dr_topo_t *t, int i);

/* Where a process is: the inputs of selection. */
typedef struct dr_topo_where {
    const char *cpus; /* CPU set, hwloc list syntax ("0-15,32-47"); NULL or "": unbound */
    const char *gpu;  /* PCI bus id of its GPU ("0000:15:00.0" or "15:00.0"); NULL or "": none */
    int local_rank;   /* rank among the processes on this node; -1: unknown */
} dr_topo_where_t;

typedef struct dr_topo_choice {
    int device;            /* index in plane->devices */
    dr_topo_level_t level; /* how near the chosen device is */
    int hops;              /* PCIe bridges between GPU and NIC (switch/hostbridge levels), else 0 */
    int ties;              /* equally near devices the choice was spread over (1: none) */
    char reason[256];      /* one line: "nearest to GPU 0000:15:00.0 (same PCIe switch, 4 hops)" */
} dr_topo_choice_t;

/*
 * Choose the device of one plane. exists (may be NULL) says whether a device
 * absent from the topology is on this node anyway (a virtual interface); such
 * a device has DR_TOPO_UNKNOWN locality. Errors: no device of the plane on
 * this node (DR_ERR_NO_DEVICE, err lists them), a bad CPU set, a GPU not in
 * the topology (DR_ERR_CONFIG).
 */
dr_status_t dr_topo_select(const dr_topo_t *t, const dr_plane_spec_t *plane,
                           const dr_topo_where_t *where, dr_device_exists_fn exists, void *arg,
                           dr_topo_choice_t *out, char *err, size_t errlen);

/*
 * This process: its CPU binding (the calling thread's; "" when bound to the
 * whole machine), its GPU from DUALRAIL_GPU_BUSID, its local rank from
 * DUALRAIL_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or
 * SLURM_LOCALID. where's strings point into cpus and gpu.
 */
void dr_topo_where_self(const dr_topo_t *t, dr_topo_where_t *where, char *cpus, size_t cpuslen,
                        char *gpu, size_t gpulen);

/*
 * This machine's topology, loaded once per process and kept (thread-safe).
 * NULL when hwloc cannot load it; err (may be NULL) then says why.
 */
const dr_topo_t *dr_topo_system(char *err, size_t errlen);

/* ------------------------------------------------------------------ discovery */

/* One IPv4 address of a network interface. */
typedef struct dr_topo_ifaddr {
    char name[DR_DEVICE_NAME_MAX];
    char ipv4[16]; /* dotted quad */
    int prefix;    /* 0..32 */
    int up;        /* administratively up and running */
    int loopback;
} dr_topo_ifaddr_t;

/* This machine's IPv4 addresses (at most max); *n gets the count. */
dr_status_t dr_topo_ifaddrs_system(dr_topo_ifaddr_t *out, int max, int *n);

typedef struct dr_topo_discover_opts {
    /* Both lists: comma-separated shell patterns of device names, or IPv4 networks
     * ("10.0.0.0/24", as Open MPI's if_include takes them) that match the devices with an
     * address inside. */
    const char *include; /* when set only matching devices count */
    const char *exclude; /* added to the built-in exclusions
                            (lo, docker*, virbr*, veth*, br-*, tun*, tap*) */
} dr_topo_discover_opts_t;

typedef struct dr_topo_discovery {
    dr_plane_list_t list;                    /* devices per plane, by PCI address */
    char ids[DR_MAX_PLANES][DR_TOPO_ID_MAX]; /* "ipv4:10.209.1.0/24", "ib:fec0:0000:0000:000a" */
    char note[512];                          /* what was left out and why; may be "" */
} dr_topo_discovery_t;

/*
 * Group this node's devices into planes. t may be NULL (no RDMA devices
 * known: interfaces only); ifs are the node's addresses (nifs may be 0).
 * A device is matched against include/exclude by its plane-list name, RDMA
 * name and interface name. DR_ERR_NO_DEVICE when nothing forms a plane
 * (err says what was seen), DR_ERR_CONFIG for more than DR_MAX_PLANES.
 */
dr_status_t dr_topo_discover(const dr_topo_t *t, const dr_topo_ifaddr_t *ifs, int nifs,
                             const dr_topo_discover_opts_t *opts, dr_topo_discovery_t *out,
                             char *err, size_t errlen);

/*
 * The environment variables that name the interfaces of Open MPI's runtime (oob) and its
 * point-to-point traffic (btl tcp): the management network, never a plane. Discovery leaves
 * them out in coll/dualrail and in dualrail-check alike; an initializer for an array of
 * const char *, oob first.
 */
#define DR_TOPO_RUNTIME_IF_ENVS {"OMPI_MCA_oob_tcp_if_include", "OMPI_MCA_btl_tcp_if_include"}

/* A plane list as text ("mlx5_0:1|mlx5_2:1,mlx5_1:1|mlx5_3:1"); returns the length needed. */
size_t dr_topo_planes_format(const dr_plane_list_t *list, char *buf, size_t len);

/*
 * What must agree across nodes: every plane's identity and device count,
 * "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1". Returns the length needed.
 */
size_t dr_topo_discovery_signature(const dr_topo_discovery_t *d, char *buf, size_t len);

/*
 * Compare the signatures of n nodes (names may be NULL: "node <i>"). The
 * most common signature is the reference; every node that differs is named
 * with what differs (plane count, a plane's identity, a device count) in err.
 * DR_OK when all agree, DR_ERR_PEER_MISMATCH otherwise.
 */
dr_status_t dr_topo_signatures_check(const char *const *sigs, const char *const *names, int n,
                                     char *err, size_t errlen);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
