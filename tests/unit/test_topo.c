/*
 * NUMA/PCIe-affine device selection and plane discovery (include/dualrail/topo.h),
 * on the committed hwloc XML topologies in tests/topo/ (see gen_topologies.py):
 *
 *   dgx-2s8g8n.xml  2 sockets x 16 cores x 2 threads (PUs c and c+32), 8 GPUs and 8 IB
 *                   NICs in 4 switch complexes; complex c: GPUs 2c, 2c+1, NICs mlx5_2c
 *                   (plane A, fec0::a) and mlx5_2c+1 (plane B, fec0::b); GPU 2c shares a
 *                   leaf switch with mlx5_2c, GPU 2c+1 with mlx5_2c+1.
 *   1s2n.xml        1 socket x 8 cores, GPU 81:00.0, RoCE mlx5_0 (41:00.0), mlx5_1 (c1:00.0)
 *   2s4n-skew.xml   2 sockets x 8 cores; plane A = mlx5_0 (05:00.0) + mlx5_1 (24:00.0), both
 *                   on socket 0; plane B = mlx5_2 (25:00.0, socket 0) + mlx5_3 (a4:00.0,
 *                   socket 1); GPUs 23:00.0 (switch with mlx5_1, mlx5_2), 41:00.0 (socket 0),
 *                   81:00.0 (socket 1), a3:00.0 (switch with mlx5_3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hwloc.h>

#include "dualrail/planes.h"
#include "dualrail/topo.h"

#ifndef DR_TOPO_DIR
#error "DR_TOPO_DIR must name tests/topo"
#endif

#define DGX  DR_TOPO_DIR "/dgx-2s8g8n.xml"
#define ONE  DR_TOPO_DIR "/1s2n.xml"
#define SKEW DR_TOPO_DIR "/2s4n-skew.xml"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static dr_topo_t *load(const char *path)
{
    dr_topo_t *t = NULL;
    char err[512] = "";
    dr_status_t st = dr_topo_load(path, &t, err, sizeof(err));
    if (st != DR_OK) {
        print_error("load %s: %s\n", path, err);
    }
    assert_int_equal(st, DR_OK);
    assert_non_null(t);
    return t;
}

static dr_plane_list_t planes(const char *text)
{
    dr_plane_list_t list;
    char err[256] = "";
    assert_int_equal(dr_plane_list_parse(text, &list, err, sizeof(err)), DR_OK);
    return list;
}

/* The device chosen on plane p of `text` for (cpus, gpu, rank); fails the test on error. */
static const char *pick(const dr_topo_t *t, const dr_plane_list_t *list, int p, const char *cpus,
                        const char *gpu, int rank, dr_topo_choice_t *choice)
{
    dr_topo_where_t w = {cpus, gpu, rank};
    dr_topo_choice_t c;
    char err[256] = "";
    dr_status_t st = dr_topo_select(t, &list->planes[p], &w, NULL, NULL, &c, err, sizeof(err));
    if (st != DR_OK) {
        print_error("select plane %d cpus=%s gpu=%s rank=%d: %s\n", p, cpus ? cpus : "-",
                    gpu ? gpu : "-", rank, err);
    }
    assert_int_equal(st, DR_OK);
    if (choice != NULL) {
        *choice = c;
    }
    return list->planes[p].devices[c.device];
}

static const char *const kDgxPlanes = "mlx5_0|mlx5_2|mlx5_4|mlx5_6,mlx5_1|mlx5_3|mlx5_5|mlx5_7";

/* ------------------------------------------------------------------ loading */

static void test_load_errors(void **state)
{
    (void)state;
    dr_topo_t *t = (dr_topo_t *)(uintptr_t)1;
    char err[512] = "";
    assert_int_equal(dr_topo_load(DR_TOPO_DIR "/no-such-file.xml", &t, err, sizeof(err)),
                     DR_ERR_CONFIG);
    assert_null(t);
    assert_non_null(strstr(err, "no-such-file.xml"));
    assert_non_null(strstr(err, "No such file"));

    assert_int_equal(dr_topo_load(DR_TOPO_DIR, &t, err, sizeof(err)), DR_ERR_CONFIG);
    assert_non_null(strstr(err, "not a regular file"));

    /* Not XML at all, and XML that is no hwloc topology. */
    static const char *const bad[] = {
        "this is not xml\n",
        "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Machine\"",
        "<?xml version=\"1.0\"?>\n<html><body>hello</body></html>\n",
    };
    for (size_t i = 0; i < N_ELEMS(bad); ++i) {
        char path[] = "/tmp/dr_topo_badXXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, bad[i], strlen(bad[i])), (ssize_t)strlen(bad[i]));
        close(fd);
        err[0] = 0;
        assert_int_equal(dr_topo_load(path, &t, err, sizeof(err)), DR_ERR_CONFIG);
        assert_null(t);
        assert_non_null(strstr(err, path));
        assert_non_null(strstr(err, "parse"));
        unlink(path);
    }
    assert_int_equal(dr_topo_load(DGX, NULL, err, sizeof(err)), DR_ERR_INVALID);
}

static void test_inventory(void **state)
{
    (void)state;
    dr_topo_t *t = load(DGX);
    char sum[256];
    dr_topo_summary(t, sum, sizeof(sum));
    assert_string_equal(sum, "2 packages, 2 NUMA nodes, 64 PUs, 8 GPUs, 9 NICs");
    /* By PCI address: eno1 (02:00.0), then mlx5_0 (16:00.0), mlx5_1 (1a:00.0), ... */
    static const struct {
        const char *name, *pci, *netdev;
        int numa, ib;
    } want[] = {
        {"eno1", "0000:02:00.0", "eno1", 0, 0},
        {"mlx5_0:1", "0000:16:00.0", "ibp22s0", 0, 1},
        {"mlx5_1:1", "0000:1a:00.0", "ibp26s0", 0, 1},
        {"mlx5_2:1", "0000:36:00.0", "ibp54s0", 0, 1},
        {"mlx5_3:1", "0000:3a:00.0", "ibp58s0", 0, 1},
        {"mlx5_4:1", "0000:96:00.0", "ibp150s0", 1, 1},
        {"mlx5_5:1", "0000:9a:00.0", "ibp154s0", 1, 1},
        {"mlx5_6:1", "0000:b6:00.0", "ibp182s0", 1, 1},
        {"mlx5_7:1", "0000:ba:00.0", "ibp186s0", 1, 1},
    };
    assert_int_equal(dr_topo_num_nics(t), (int)N_ELEMS(want));
    for (size_t i = 0; i < N_ELEMS(want); ++i) {
        const dr_topo_nic_t *n = dr_topo_nic_at(t, (int)i);
        assert_string_equal(n->name, want[i].name);
        assert_string_equal(n->pci_busid, want[i].pci);
        assert_string_equal(n->netdev, want[i].netdev);
        assert_int_equal(n->numa, want[i].numa);
        assert_int_equal(n->package, want[i].numa);
        assert_int_equal(n->infiniband, want[i].ib);
    }
    assert_string_equal(dr_topo_nic_at(t, 1)->ib_subnet, "fec0:0000:0000:000a");
    assert_string_equal(dr_topo_nic_at(t, 2)->ib_subnet, "fec0:0000:0000:000b");
    assert_int_equal(dr_topo_nic_at(t, 1)->port_active, 1);
    assert_string_equal(dr_topo_nic_at(t, 1)->cpus, "0-15,32-47");
    assert_null(dr_topo_nic_at(t, 9));
    assert_null(dr_topo_nic_at(t, -1));
    /* Plane-list names: RDMA device, device:port, interface. */
    assert_int_equal(dr_topo_find_nic(t, "mlx5_3"), 4);
    assert_int_equal(dr_topo_find_nic(t, "mlx5_3:1"), 4);
    assert_int_equal(dr_topo_find_nic(t, "ibp58s0"), 4);
    assert_int_equal(dr_topo_find_nic(t, "mlx5_3:2"), -1);
    assert_int_equal(dr_topo_find_nic(t, "mlx5_9"), -1);
    /* GPUs (the BMC's VGA is none). */
    assert_int_equal(dr_topo_num_gpus(t), 8);
    static const char *const gpus[] = {"0000:15:00.0", "0000:19:00.0", "0000:35:00.0",
                                       "0000:39:00.0", "0000:95:00.0", "0000:99:00.0",
                                       "0000:b5:00.0", "0000:b9:00.0"};
    for (int g = 0; g < 8; ++g) {
        assert_string_equal(dr_topo_gpu_at(t, g)->pci_busid, gpus[g]);
        assert_int_equal(dr_topo_gpu_at(t, g)->numa, g / 4);
    }
    dr_topo_free(t);
}

/* ------------------------------------------------------------------ selection */

static void test_dgx_gpu(void **state)
{
    (void)state;
    dr_topo_t *t = load(DGX);
    dr_plane_list_t list = planes(kDgxPlanes);
    static const struct {
        const char *gpu, *a, *b;
        int hops_a, hops_b;
    } cases[] = {
        {"0000:15:00.0", "mlx5_0", "mlx5_1", 4, 8},
        {"0000:19:00.0", "mlx5_0", "mlx5_1", 8, 4},
        {"0000:35:00.0", "mlx5_2", "mlx5_3", 4, 8},
        {"0000:39:00.0", "mlx5_2", "mlx5_3", 8, 4},
        {"0000:95:00.0", "mlx5_4", "mlx5_5", 4, 8},
        {"0000:99:00.0", "mlx5_4", "mlx5_5", 8, 4},
        {"0000:b5:00.0", "mlx5_6", "mlx5_7", 4, 8},
        {"0000:b9:00.0", "mlx5_6", "mlx5_7", 8, 4},
        /* short bus id and nvidia-smi's 8-digit domain */
        {"15:00.0", "mlx5_0", "mlx5_1", 4, 8},
        {"00000000:b9:00.0", "mlx5_6", "mlx5_7", 8, 4},
    };
    for (size_t i = 0; i < N_ELEMS(cases); ++i) {
        dr_topo_choice_t c;
        /* The GPU wins over a CPU binding on the other socket and over the local rank. */
        assert_string_equal(pick(t, &list, 0, "31", cases[i].gpu, 3, &c), cases[i].a);
        assert_int_equal(c.level, DR_TOPO_SWITCH);
        assert_int_equal(c.hops, cases[i].hops_a);
        assert_int_equal(c.ties, 1);
        assert_non_null(strstr(c.reason, "same PCIe switch"));
        assert_string_equal(pick(t, &list, 1, NULL, cases[i].gpu, -1, &c), cases[i].b);
        assert_int_equal(c.level, DR_TOPO_SWITCH);
        assert_int_equal(c.hops, cases[i].hops_b);
    }
    dr_topo_free(t);
}

static void test_dgx_cpu(void **state)
{
    (void)state;
    dr_topo_t *t = load(DGX);
    dr_plane_list_t list = planes(kDgxPlanes);
    static const struct {
        const char *cpus;
        int rank;
        const char *a, *b;
        dr_topo_level_t level;
        int ties;
    } cases[] = {
        /* one core: its half of the socket's cores picks one of the socket's two NICs */
        {"3", -1, "mlx5_0", "mlx5_1", DR_TOPO_NUMA, 2},
        {"35", -1, "mlx5_0", "mlx5_1", DR_TOPO_NUMA, 2}, /* core 3's second thread */
        {"3,35", 5, "mlx5_0", "mlx5_1", DR_TOPO_NUMA, 2},
        {"11", -1, "mlx5_2", "mlx5_3", DR_TOPO_NUMA, 2},
        {"8-15,40-47", -1, "mlx5_2", "mlx5_3", DR_TOPO_NUMA, 2},
        {"20", -1, "mlx5_4", "mlx5_5", DR_TOPO_NUMA, 2},
        {"30", 0, "mlx5_6", "mlx5_7", DR_TOPO_NUMA, 2},
        /* the whole socket: too wide to tell, the local rank spreads */
        {"0-15,32-47", -1, "mlx5_0", "mlx5_1", DR_TOPO_NUMA, 2},
        {"0-15,32-47", 1, "mlx5_2", "mlx5_3", DR_TOPO_NUMA, 2},
        {"16-31,48-63", 2, "mlx5_4", "mlx5_5", DR_TOPO_NUMA, 2},
        {"16-31,48-63", 3, "mlx5_6", "mlx5_7", DR_TOPO_NUMA, 2},
        /* across sockets, mostly on socket 1: its NICs have more of the binding */
        {"15-31", 0, "mlx5_4", "mlx5_5", DR_TOPO_SYSTEM, 2},
        /* unbound: all four NICs of a plane are equal */
        {NULL, 0, "mlx5_0", "mlx5_1", DR_TOPO_SYSTEM, 4},
        {"0-63", 6, "mlx5_4", "mlx5_5", DR_TOPO_SYSTEM, 4},
        {"", 7, "mlx5_6", "mlx5_7", DR_TOPO_SYSTEM, 4},
    };
    for (size_t i = 0; i < N_ELEMS(cases); ++i) {
        dr_topo_choice_t c;
        const char *a = pick(t, &list, 0, cases[i].cpus, NULL, cases[i].rank, &c);
        if (strcmp(a, cases[i].a) != 0) {
            print_error("case %zu: cpus %s rank %d: got %s (%s)\n", i,
                        cases[i].cpus ? cases[i].cpus : "-", cases[i].rank, a, c.reason);
        }
        assert_string_equal(a, cases[i].a);
        assert_int_equal(c.level, cases[i].level);
        assert_int_equal(c.ties, cases[i].ties);
        assert_int_equal(c.hops, 0);
        assert_string_equal(pick(t, &list, 1, cases[i].cpus, NULL, cases[i].rank, &c), cases[i].b);
    }
    dr_topo_free(t);
}

/* Ties spread: every core of a socket, and every local rank of an unbound job. */
static void test_dgx_spread(void **state)
{
    (void)state;
    dr_topo_t *t = load(DGX);
    dr_plane_list_t list = planes(kDgxPlanes);
    for (int plane = 0; plane < 2; ++plane) {
        int per_nic[8] = {0};
        for (int core = 0; core < 32; ++core) {
            char cpus[32];
            snprintf(cpus, sizeof(cpus), "%d,%d", core, core + 32);
            const char *d = pick(t, &list, plane, cpus, NULL, -1, NULL);
            int n = d[5] - '0';
            assert_int_equal(n % 2, plane);
            assert_int_equal(n / 4, core / 16); /* the socket's own NICs */
            ++per_nic[n];
        }
        for (int n = plane; n < 8; n += 2) {
            assert_int_equal(per_nic[n], 8);
        }
        int per_rank[8] = {0};
        for (int rank = 0; rank < 16; ++rank) {
            const char *d = pick(t, &list, plane, NULL, NULL, rank, NULL);
            ++per_rank[d[5] - '0'];
        }
        for (int n = plane; n < 8; n += 2) {
            assert_int_equal(per_rank[n], 4);
        }
    }
    dr_topo_free(t);
}

static void test_skew(void **state)
{
    (void)state;
    dr_topo_t *t = load(SKEW);
    dr_plane_list_t list = planes("mlx5_0|mlx5_1,mlx5_2|mlx5_3");
    static const struct {
        const char *cpus, *gpu;
        int rank;
        const char *a, *b;
        dr_topo_level_t la, lb;
    } cases[] = {
        /* GPUs: each in PCI order takes the least used of its equally near devices */
        {NULL, "0000:23:00.0", -1, "mlx5_1", "mlx5_2", DR_TOPO_SWITCH, DR_TOPO_SWITCH},
        {NULL, "0000:41:00.0", -1, "mlx5_0", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
        {NULL, "0000:81:00.0", -1, "mlx5_0", "mlx5_3", DR_TOPO_SYSTEM, DR_TOPO_NUMA},
        {NULL, "0000:a3:00.0", -1, "mlx5_1", "mlx5_3", DR_TOPO_SYSTEM, DR_TOPO_SWITCH},
        /* socket 0 cores: plane A's two local NICs split the cores, plane B has one */
        {"0", NULL, -1, "mlx5_0", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
        {"3,19", NULL, -1, "mlx5_0", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
        {"4", NULL, -1, "mlx5_1", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
        {"7", NULL, -1, "mlx5_1", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
        /* socket 1 cores: plane A is remote (both NICs equal), plane B local */
        {"8", NULL, -1, "mlx5_0", "mlx5_3", DR_TOPO_SYSTEM, DR_TOPO_NUMA},
        {"13", NULL, -1, "mlx5_1", "mlx5_3", DR_TOPO_SYSTEM, DR_TOPO_NUMA},
        {"8-15,24-31", NULL, 1, "mlx5_1", "mlx5_3", DR_TOPO_SYSTEM, DR_TOPO_NUMA},
        /* whole socket 0: the rank decides on plane A */
        {"0-7,16-23", NULL, 0, "mlx5_0", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
        {"0-7,16-23", NULL, 1, "mlx5_1", "mlx5_2", DR_TOPO_NUMA, DR_TOPO_NUMA},
    };
    for (size_t i = 0; i < N_ELEMS(cases); ++i) {
        dr_topo_choice_t c;
        const char *a = pick(t, &list, 0, cases[i].cpus, cases[i].gpu, cases[i].rank, &c);
        if (strcmp(a, cases[i].a) != 0) {
            print_error("case %zu: got %s (%s)\n", i, a, c.reason);
        }
        assert_string_equal(a, cases[i].a);
        assert_int_equal(c.level, cases[i].la);
        assert_string_equal(pick(t, &list, 1, cases[i].cpus, cases[i].gpu, cases[i].rank, &c),
                            cases[i].b);
        assert_int_equal(c.level, cases[i].lb);
    }
    /* Every GPU of the box, plane A: two NICs, four GPUs, two each. */
    int per[2] = {0, 0};
    for (int g = 0; g < dr_topo_num_gpus(t); ++g) {
        ++per[pick(t, &list, 0, NULL, dr_topo_gpu_at(t, g)->pci_busid, -1, NULL)[5] - '0'];
    }
    assert_int_equal(per[0], 2);
    assert_int_equal(per[1], 2);
    dr_topo_free(t);
}

static void test_one_socket(void **state)
{
    (void)state;
    dr_topo_t *t = load(ONE);
    dr_topo_choice_t c;
    /* Two planes of one NIC each: nothing to choose. */
    dr_plane_list_t two = planes("mlx5_0,mlx5_1");
    assert_string_equal(pick(t, &two, 0, "2", "81:00.0", 0, &c), "mlx5_0");
    assert_int_equal(c.ties, 1);
    assert_non_null(strstr(c.reason, "only device"));
    assert_string_equal(pick(t, &two, 1, NULL, NULL, 3, NULL), "mlx5_1");
    /* One plane of both NICs (also named by interface): both are local to the socket. */
    dr_plane_list_t one = planes("ens2f0np0|mlx5_0:1");
    assert_string_equal(pick(t, &one, 0, "0", NULL, -1, &c), "mlx5_0:1");
    assert_int_equal(c.level, DR_TOPO_NUMA);
    assert_int_equal(c.ties, 2);
    assert_string_equal(pick(t, &one, 0, "7,15", NULL, -1, NULL), "ens2f0np0");
    assert_string_equal(pick(t, &one, 0, NULL, NULL, 0, NULL), "mlx5_0:1");
    assert_string_equal(pick(t, &one, 0, NULL, NULL, 1, NULL), "ens2f0np0");
    /* The GPU hangs off its own host bridge: both NICs are "same NUMA node" to it. */
    assert_string_equal(pick(t, &one, 0, NULL, "0000:81:00.0", -1, &c), "mlx5_0:1");
    assert_int_equal(c.level, DR_TOPO_NUMA);
    assert_int_equal(c.ties, 2);
    dr_topo_free(t);
}

static int exists_if_v(const char *dev, void *arg)
{
    (void)arg;
    return dev[0] == 'v';
}

static void test_select_errors(void **state)
{
    (void)state;
    dr_topo_t *t = load(DGX);
    dr_plane_list_t list = planes("mlx5_9|ib7,mlx5_0");
    dr_topo_where_t w = {NULL, NULL, -1};
    dr_topo_choice_t c;
    char err[256] = "";
    assert_int_equal(dr_topo_select(t, &list.planes[0], &w, NULL, NULL, &c, err, sizeof(err)),
                     DR_ERR_NO_DEVICE);
    assert_non_null(strstr(err, "mlx5_9, ib7"));
    assert_non_null(strstr(err, "on this node"));
    static const struct {
        const char *cpus, *gpu, *mention;
    } bad[] = {
        {"abc", NULL, "bad CPU set"}, {"0-999", NULL, "not within"},
        {"64", NULL, "not within"},   {NULL, "42:00.0", "not a PCI device"},
        {NULL, "zz", "bad GPU"},      {NULL, "0000:15:00", "bad GPU"},
    };
    for (size_t i = 0; i < N_ELEMS(bad); ++i) {
        dr_topo_where_t bw = {bad[i].cpus, bad[i].gpu, -1};
        err[0] = 0;
        assert_int_equal(dr_topo_select(t, &list.planes[1], &bw, NULL, NULL, &c, err, sizeof(err)),
                         DR_ERR_CONFIG);
        assert_non_null(strstr(err, bad[i].mention));
    }
    /* A device hwloc does not know but the node has (a virtual interface): unknown
     * locality, so a known local NIC wins; alone it is still usable. */
    dr_plane_list_t mixed = planes("veth0|mlx5_4,veth1|vx");
    assert_int_equal(
        dr_topo_select(t, &mixed.planes[0], &w, exists_if_v, NULL, &c, err, sizeof(err)), DR_OK);
    assert_int_equal(c.device, 1);
    assert_int_equal(
        dr_topo_select(t, &mixed.planes[1], &w, exists_if_v, NULL, &c, err, sizeof(err)), DR_OK);
    assert_int_equal(c.device, 0);
    assert_int_equal(c.level, DR_TOPO_UNKNOWN);
    assert_int_equal(c.ties, 2);
    assert_int_equal(dr_topo_select(NULL, &mixed.planes[0], &w, NULL, NULL, &c, err, sizeof(err)),
                     DR_ERR_INVALID);
    dr_topo_free(t);
}

/* The hwloc-object entry point: a topology the caller loaded. */
static void test_wrap(void **state)
{
    (void)state;
    hwloc_topology_t h;
    assert_int_equal(hwloc_topology_init(&h), 0);
    hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_ALL);
    assert_int_equal(hwloc_topology_set_xml(h, SKEW), 0);
    assert_int_equal(hwloc_topology_load(h), 0);
    dr_topo_t *t = NULL;
    char err[256];
    assert_int_equal(dr_topo_wrap(h, &t, err, sizeof(err)), DR_OK);
    assert_ptr_equal(dr_topo_hwloc(t), h);
    dr_plane_list_t list = planes("mlx5_0|mlx5_1,mlx5_2|mlx5_3");
    assert_string_equal(pick(t, &list, 1, NULL, "a3:00.0", -1, NULL), "mlx5_3");
    dr_topo_free(t); /* not the caller's topology */
    assert_int_equal(hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE), 2);
    hwloc_topology_destroy(h);
    assert_int_equal(dr_topo_wrap(NULL, &t, err, sizeof(err)), DR_ERR_INVALID);
}

/* The live hook keeps the old contract where hwloc has nothing to say. */
static void test_live_hook(void **state)
{
    (void)state;
    dr_plane_list_t list = planes("lo,a|b|c");
    char why[256] = "";
    assert_string_equal(dr_plane_select_device_why(&list.planes[0], why, sizeof(why)), "lo");
    assert_non_null(strstr(why, "only device"));
    /* no such devices: the first listed (dr_plane_list_check reports them) */
    assert_string_equal(dr_plane_select_device(&list.planes[1]), "a");
    /* only one of them exists (not in hwloc: no PCI device): that one */
    dr_plane_list_t some = planes("nonexistent0|lo");
    assert_string_equal(dr_plane_select_device_why(&some.planes[0], why, sizeof(why)), "lo");
    char err[256] = "";
    const dr_topo_t *sys = dr_topo_system(err, sizeof(err));
    assert_non_null(sys);
    assert_ptr_equal(dr_topo_system(NULL, 0), sys); /* loaded once */
}

/* ------------------------------------------------------------------ discovery */

static dr_topo_ifaddr_t ifa(const char *name, const char *ip, int prefix, int up)
{
    dr_topo_ifaddr_t a;
    memset(&a, 0, sizeof(a));
    snprintf(a.name, sizeof(a.name), "%s", name);
    snprintf(a.ipv4, sizeof(a.ipv4), "%s", ip);
    a.prefix = prefix;
    a.up = up;
    a.loopback = strcmp(name, "lo") == 0;
    return a;
}

static void discover_ok(const dr_topo_t *t, const dr_topo_ifaddr_t *ifs, int n, const char *include,
                        const char *exclude, const char *want_list, const char *want_sig,
                        dr_topo_discovery_t *out)
{
    dr_topo_discover_opts_t o = {include, exclude};
    dr_topo_discovery_t d;
    char err[512] = "", text[1024], sig[1024];
    dr_status_t st = dr_topo_discover(t, ifs, n, &o, &d, err, sizeof(err));
    if (st != DR_OK) {
        print_error("discover: %s\n", err);
    }
    assert_int_equal(st, DR_OK);
    dr_topo_planes_format(&d.list, text, sizeof(text));
    dr_topo_discovery_signature(&d, sig, sizeof(sig));
    assert_string_equal(text, want_list);
    assert_string_equal(sig, want_sig);
    if (out != NULL) {
        *out = d;
    }
}

static void test_discover_ib(void **state)
{
    (void)state;
    dr_topo_t *t = load(DGX);
    dr_topo_discovery_t d;
    /* By GID subnet prefix; eno1 (no RDMA) is management, not a plane. */
    dr_topo_ifaddr_t ifs[] = {ifa("eno1", "192.168.10.5", 24, 1), ifa("lo", "127.0.0.1", 8, 1)};
    discover_ok(t, ifs, 2, NULL, NULL,
                "mlx5_0:1|mlx5_2:1|mlx5_4:1|mlx5_6:1,mlx5_1:1|mlx5_3:1|mlx5_5:1|mlx5_7:1",
                "ib:fec0:0000:0000:000a*4,ib:fec0:0000:0000:000b*4", &d);
    assert_string_equal(d.ids[0], "ib:fec0:0000:0000:000a");
    assert_string_equal(d.note, "");
    /* The result parses as a plane list. */
    char text[1024], err[256];
    dr_plane_list_t back;
    dr_topo_planes_format(&d.list, text, sizeof(text));
    assert_int_equal(dr_plane_list_parse(text, &back, err, sizeof(err)), DR_OK);
    assert_int_equal(back.nplanes, 2);
    /* Exclusions by RDMA name or interface name; include narrows. */
    discover_ok(t, NULL, 0, NULL, "mlx5_6,ibp186s0",
                "mlx5_0:1|mlx5_2:1|mlx5_4:1,mlx5_1:1|mlx5_3:1|mlx5_5:1",
                "ib:fec0:0000:0000:000a*3,ib:fec0:0000:0000:000b*3", NULL);
    discover_ok(t, NULL, 0, "mlx5_[0-3]", NULL, "mlx5_0:1|mlx5_2:1,mlx5_1:1|mlx5_3:1",
                "ib:fec0:0000:0000:000a*2,ib:fec0:0000:0000:000b*2", NULL);
    dr_topo_free(t);
}

/* The same box with the default subnet prefix everywhere: IPoIB subnets tell the planes. */
static void test_discover_default_prefix(void **state)
{
    (void)state;
    FILE *in = fopen(DGX, "r");
    assert_non_null(in);
    char path[] = "/tmp/dr_topo_defpfxXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "w");
    char line[4096];
    while (fgets(line, sizeof(line), in) != NULL) {
        char *p;
        while ((p = strstr(line, "fec0:0000:0000:000")) != NULL) {
            memcpy(p, "fe80:0000:0000:0000", 19);
        }
        fputs(line, out);
    }
    fclose(in);
    fclose(out);
    dr_topo_t *t = load(path);
    unlink(path);
    dr_topo_discovery_t d;
    discover_ok(t, NULL, 0, NULL, NULL,
                "mlx5_0:1|mlx5_1:1|mlx5_2:1|mlx5_3:1|mlx5_4:1|mlx5_5:1|mlx5_6:1|mlx5_7:1",
                "ib:fe80:0000:0000:0000*8", &d);
    assert_non_null(strstr(d.note, "default GID subnet prefix"));
    /* IPoIB addresses, given in no particular order. */
    dr_topo_ifaddr_t ifs[] = {
        ifa("ibp186s0", "10.11.3.1", 16, 1), ifa("ibp22s0", "10.10.0.1", 16, 1),
        ifa("ibp26s0", "10.11.0.1", 16, 1),  ifa("ibp54s0", "10.10.1.1", 16, 1),
        ifa("ibp58s0", "10.11.1.1", 16, 1),  ifa("ibp150s0", "10.10.2.1", 16, 1),
        ifa("ibp154s0", "10.11.2.1", 16, 1), ifa("ibp182s0", "10.10.3.1", 16, 1),
    };
    discover_ok(t, ifs, (int)N_ELEMS(ifs), NULL, NULL,
                "mlx5_0:1|mlx5_2:1|mlx5_4:1|mlx5_6:1,mlx5_1:1|mlx5_3:1|mlx5_5:1|mlx5_7:1",
                "ipv4:10.10.0.0/16*4,ipv4:10.11.0.0/16*4", NULL);
    dr_topo_free(t);
}

static void test_discover_roce(void **state)
{
    (void)state;
    dr_topo_t *t = load(ONE);
    /* mlx5_0 (lower PCI address) is on the higher subnet: planes sort by subnet. */
    dr_topo_ifaddr_t ifs[] = {ifa("eno1", "192.168.0.7", 24, 1),
                              ifa("ens1f0np0", "10.2.0.7", 16, 1),
                              ifa("ens2f0np0", "10.1.0.7", 16, 1)};
    discover_ok(t, ifs, 3, NULL, NULL, "mlx5_1:1,mlx5_0:1", "ipv4:10.1.0.0/16*1,ipv4:10.2.0.0/16*1",
                NULL);
    /* Without addresses a RoCE port's plane is unknown. */
    dr_topo_discover_opts_t o = {NULL, NULL};
    dr_topo_discovery_t d;
    char err[512] = "";
    assert_int_equal(dr_topo_discover(t, NULL, 0, &o, &d, err, sizeof(err)), DR_ERR_NO_DEVICE);
    assert_non_null(strstr(err, "no network plane"));
    assert_non_null(strstr(err, "ens1f0np0 has no IPv4 address"));
    /* One RoCE port down (not running): the other stays, and the note says why. */
    ifs[1].up = 0;
    discover_ok(t, ifs, 3, NULL, NULL, "mlx5_1:1", "ipv4:10.1.0.0/16*1", &d);
    assert_non_null(strstr(d.note, "mlx5_0:1"));
    dr_topo_free(t);

    /* Skew box: both plane-A ports in one /16, listed out of order. */
    t = load(SKEW);
    dr_topo_ifaddr_t sk[] = {
        ifa("ens7f0np0", "10.2.1.9", 16, 1), ifa("ens3f0np0", "10.1.0.9", 16, 1),
        ifa("ens6f0np0", "10.2.0.9", 16, 1), ifa("ens5f0np0", "10.1.1.9", 16, 1)};
    discover_ok(t, sk, 4, NULL, NULL, "mlx5_0:1|mlx5_1:1,mlx5_2:1|mlx5_3:1",
                "ipv4:10.1.0.0/16*2,ipv4:10.2.0.0/16*2", NULL);
    dr_topo_free(t);
}

/* No RDMA device (the lab): interfaces by subnet. */
static void test_discover_interfaces(void **state)
{
    (void)state;
    dr_topo_ifaddr_t ifs[] = {
        ifa("ethB", "10.209.2.3", 24, 1), ifa("lo", "127.0.0.1", 8, 1),
        ifa("ethM", "10.209.0.3", 24, 1), ifa("docker0", "172.17.0.1", 16, 1),
        ifa("ethA", "10.209.1.3", 24, 1),
    };
    discover_ok(NULL, ifs, 5, NULL, "ethM", "ethA,ethB",
                "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    discover_ok(NULL, ifs, 5, "eth[AB]", NULL, "ethA,ethB",
                "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    discover_ok(NULL, ifs, 5, NULL, NULL, "ethM,ethA,ethB",
                "ipv4:10.209.0.0/24*1,ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    /* A topology without RDMA devices changes nothing. */
    dr_topo_t *t = load(ONE);
    discover_ok(t, ifs, 5, NULL, " ethM , eno1", "ethA,ethB",
                "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    dr_topo_free(t);
    /* An IPv4 network (Open MPI's if_include form: coll/dualrail and dualrail-check pass
     * the runtime's interfaces as they are) stands for the interfaces with an address in it. */
    discover_ok(NULL, ifs, 5, NULL, "10.209.0.0/24", "ethA,ethB",
                "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    discover_ok(NULL, ifs, 5, NULL, "nosuch, 10.209.0.3/32", "ethA,ethB",
                "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    discover_ok(NULL, ifs, 5, "10.209.1.0/24,10.209.2.128/25", NULL, "ethA",
                "ipv4:10.209.1.0/24*1", NULL);
    discover_ok(NULL, ifs, 5, NULL, "10.209.0.0/33,10.209.0.0/x", "ethM,ethA,ethB",
                "ipv4:10.209.0.0/24*1,ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1", NULL);
    /* Two interfaces on one subnet are one plane; a down one is left out. */
    dr_topo_ifaddr_t two[] = {ifa("p1", "10.0.0.1", 24, 1), ifa("p0", "10.0.0.2", 24, 1),
                              ifa("q0", "10.0.1.1", 24, 0)};
    dr_topo_discovery_t d;
    discover_ok(NULL, two, 3, NULL, NULL, "p0|p1", "ipv4:10.0.0.0/24*2", &d);
    assert_non_null(strstr(d.note, "q0: down"));
    /* Nothing at all. */
    dr_topo_discover_opts_t o = {NULL, "eth*"};
    char err[512] = "";
    assert_int_equal(dr_topo_discover(NULL, ifs, 5, &o, &d, err, sizeof(err)), DR_ERR_NO_DEVICE);
    assert_non_null(strstr(err, "no network plane"));
    assert_int_equal(dr_topo_discover(NULL, NULL, 0, NULL, &d, err, sizeof(err)), DR_ERR_NO_DEVICE);
    /* More networks than planes. */
    dr_topo_ifaddr_t many[DR_MAX_PLANES + 1];
    for (int i = 0; i <= DR_MAX_PLANES; ++i) {
        char n[16], ip[16];
        snprintf(n, sizeof(n), "p%d", i);
        snprintf(ip, sizeof(ip), "10.0.%d.1", i);
        many[i] = ifa(n, ip, 24, 1);
    }
    assert_int_equal(dr_topo_discover(NULL, many, DR_MAX_PLANES + 1, NULL, &d, err, sizeof(err)),
                     DR_ERR_CONFIG);
    assert_non_null(strstr(err, "at most"));
}

static void test_signatures(void **state)
{
    (void)state;
    char err[1024];
    const char *same[] = {"ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1",
                          "ipv4:10.209.1.0/24*1,ipv4:10.209.2.0/24*1"};
    assert_int_equal(dr_topo_signatures_check(same, NULL, 2, err, sizeof(err)), DR_OK);
    assert_int_equal(dr_topo_signatures_check(same, NULL, 1, err, sizeof(err)), DR_OK);
    assert_int_equal(dr_topo_signatures_check(same, NULL, 0, err, sizeof(err)), DR_OK);

    static const struct {
        const char *sigs[4];
        int n;
        const char *mention[3];
    } cases[] = {
        /* unequal plane count: the odd node out is named */
        {{"a*1,b*1", "a*1,b*1", "a*1", "a*1,b*1"},
         4,
         {"node2 has 1 plane (a) where 3 other nodes have 2 (a, b)", NULL, NULL}},
        /* a plane's identity differs */
        {{"a*1,b*1", "a*1,c*1", "a*1,b*1", "a*1,b*1"},
         4,
         {"node1 plane 1 is c where 3 other nodes have b", NULL, NULL}},
        /* a device count differs (a missing NIC) */
        {{"a*4,b*4", "a*4,b*4", "a*4,b*3", NULL},
         3,
         {"node2 has 3 devices on plane 1 (b) where 2 other nodes have 4", NULL, NULL}},
        /* a node found nothing; two nodes differ */
        {{"", "a*1,b*1", "a*1,b*1", "b*1,a*1"},
         4,
         {"node0 has no plane", "node3 plane 0 is b", "node3 plane 1 is a"}},
        /* two nodes, two layouts: the first is the reference */
        {{"a*1,b*1", "a*1", NULL, NULL},
         2,
         {"node1 has 1 plane (a) where node0 has 2 (a, b)", NULL, NULL}},
    };
    const char *names[] = {"node0", "node1", "node2", "node3"};
    for (size_t i = 0; i < N_ELEMS(cases); ++i) {
        err[0] = 0;
        assert_int_equal(
            dr_topo_signatures_check(cases[i].sigs, names, cases[i].n, err, sizeof(err)),
            DR_ERR_PEER_MISMATCH);
        for (int m = 0; m < 3 && cases[i].mention[m] != NULL; ++m) {
            if (strstr(err, cases[i].mention[m]) == NULL) {
                print_error("case %zu: \"%s\" not in \"%s\"\n", i, cases[i].mention[m], err);
            }
            assert_non_null(strstr(err, cases[i].mention[m]));
        }
    }
    /* Without names: "node <i>". */
    const char *two[] = {"a*1", "b*1", "b*1"};
    assert_int_equal(dr_topo_signatures_check(two, NULL, 3, err, sizeof(err)),
                     DR_ERR_PEER_MISMATCH);
    assert_non_null(strstr(err, "node 0 plane 0 is a where 2 other nodes have b"));
}

static void test_levels(void **state)
{
    (void)state;
    assert_string_equal(dr_topo_level_name(DR_TOPO_SWITCH), "switch");
    assert_string_equal(dr_topo_level_name(DR_TOPO_HOSTBRIDGE), "hostbridge");
    assert_string_equal(dr_topo_level_name(DR_TOPO_NUMA), "numa");
    assert_string_equal(dr_topo_level_name(DR_TOPO_PACKAGE), "package");
    assert_string_equal(dr_topo_level_name(DR_TOPO_SYSTEM), "system");
    assert_string_equal(dr_topo_level_name(DR_TOPO_UNKNOWN), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),   cmocka_unit_test(test_inventory),
        cmocka_unit_test(test_dgx_gpu),       cmocka_unit_test(test_dgx_cpu),
        cmocka_unit_test(test_dgx_spread),    cmocka_unit_test(test_skew),
        cmocka_unit_test(test_one_socket),    cmocka_unit_test(test_select_errors),
        cmocka_unit_test(test_wrap),          cmocka_unit_test(test_live_hook),
        cmocka_unit_test(test_discover_ib),   cmocka_unit_test(test_discover_default_prefix),
        cmocka_unit_test(test_discover_roce), cmocka_unit_test(test_discover_interfaces),
        cmocka_unit_test(test_signatures),    cmocka_unit_test(test_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
