/*
 * ucx_mr on the lab: two processes on two lab nodes, two planes (ethA, ethB).
 * This process runs inside node 0 (`lab.sh exec 0 ...`); it starts the echo
 * peer in node DR_PEER_NODE and injects faults with `lab.sh fault`.
 *
 *   sizes      0 B .. 64 MiB round trips, contents verified; the interface
 *              counters show the bytes on ethA and ethB and not on ethM
 *   faults     down, blackhole, reset on plane A of the peer's node during a
 *              stream: every transfer completes with correct contents, plane B
 *              carries the rest, and after heal plane A is re-admitted and
 *              carries traffic again
 *
 * Environment: DR_LAB (lab.sh), DR_ECHO (xfer_echo binary), DR_PEER_NODE (1).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

#define QUIT_KEY UINT64_C(0xffffffffffffffff)
#define PLANES "ethA,ethB"

static struct {
    dr_mr_t *mr;
    pid_t echo;
    char dir[256];
    const char *lab;
    int peer_node;
    uint64_t seq; /* message pairs exchanged: the echo expects keys 2i in order */
    unsigned char *src, *dst;
} g;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t counter(const char *ifname, const char *what)
{
    char path[256];
    snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", ifname, what);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (f == NULL || fscanf(f, "%llu", &v) != 1) {
        fail_msg("cannot read %s (is this running inside a lab node?)", path);
    }
    fclose(f);
    return v;
}

static void lab(const char *fmt, ...)
{
    char args[256], cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "%s %s", g.lab, args);
    int rc = system(cmd);
    if (rc != 0) {
        fail_msg("'%s' failed (%d)", cmd, rc);
    }
}

static void fill(unsigned char *buf, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
}

/* One verified round trip of n bytes; fails the test (never hangs) on any error. */
static void round_trip(size_t n)
{
    const uint64_t i = g.seq++;
    fill(g.src, n, i);
    memset(g.dst, 0xa5, n + 1);
    dr_mr_req_t *r, *s;
    assert_int_equal(dr_mr_irecv(g.mr, 1, 2 * i + 1, g.dst, n + 1, &r), DR_OK);
    assert_int_equal(dr_mr_isend(g.mr, 1, 2 * i, g.src, n, &s), DR_OK);
    size_t got = 0;
    dr_status_t ss = dr_mr_wait(g.mr, s, 30, NULL);
    dr_status_t rs = dr_mr_wait(g.mr, r, 30, &got);
    if (ss != DR_OK || rs != DR_OK) {
        fail_msg("round trip %llu (%zu B): send %s, receive %s: %s", (unsigned long long)i, n,
                 dr_status_str(ss), dr_status_str(rs), dr_mr_last_error(g.mr));
    }
    assert_int_equal(got, n);
    if (memcmp(g.src, g.dst, n) != 0) {
        fail_msg("round trip %llu (%zu B): contents differ", (unsigned long long)i, n);
    }
    assert_int_equal(g.dst[n], 0xa5);
    dr_mr_req_free(g.mr, s);
    dr_mr_req_free(g.mr, r);
}

static int group_setup(void **state)
{
    (void)state;
    g.lab = getenv("DR_LAB");
    const char *echo = getenv("DR_ECHO");
    g.peer_node = getenv("DR_PEER_NODE") ? atoi(getenv("DR_PEER_NODE")) : 1;
    if (g.lab == NULL || echo == NULL) {
        print_error("DR_LAB and DR_ECHO must be set\n");
        return -1;
    }
    snprintf(g.dir, sizeof(g.dir), "/tmp/dualrail-xfer-XXXXXX");
    if (mkdtemp(g.dir) == NULL) {
        return -1;
    }
    g.echo = fork();
    if (g.echo == 0) {
        char node[16];
        snprintf(node, sizeof(node), "%d", g.peer_node);
        execl(g.lab, g.lab, "exec", node, echo, g.dir, "1", "0", PLANES, (char *)NULL);
        _exit(127);
    }
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.verbose = getenv("DR_VERBOSE") ? atoi(getenv("DR_VERBOSE")) : 0;
    cfg.planes = PLANES;
    cfg.name = "client";
    char err[512];
    if (dr_mr_create(&cfg, 0, &g.mr, err, sizeof(err)) != DR_OK) {
        print_error("dr_mr_create: %s\n", err);
        return -1;
    }
    if (dr_oob_connect(g.mr, g.dir, 0, 1, 60, err, sizeof(err)) != 0) {
        print_error("%s\n", err);
        return -1;
    }
    g.src = malloc((72u << 20) + 1);
    g.dst = malloc((72u << 20) + 1);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = 0;
    if (g.mr != NULL) {
        char q = 'q';
        dr_mr_req_t *s;
        if (dr_mr_isend(g.mr, 1, QUIT_KEY, &q, 1, &s) == DR_OK) {
            dr_mr_wait(g.mr, s, 10, NULL);
        }
        dr_mr_destroy(g.mr);
    }
    if (g.echo > 0) {
        int status = 0;
        for (double end = now_s() + 15; now_s() < end;) {
            if (waitpid(g.echo, &status, WNOHANG) == g.echo) {
                g.echo = 0;
                break;
            }
            usleep(50000);
        }
        if (g.echo > 0) {
            print_error("echo peer did not exit; killing it\n");
            kill(g.echo, SIGKILL);
            waitpid(g.echo, &status, 0);
            rc = -1;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_error("echo peer failed (status %d)\n", status);
            rc = -1;
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g.dir);
    if (system(cmd) != 0) {
        rc = -1;
    }
    free(g.src);
    free(g.dst);
    return rc;
}

static void test_sizes_and_wire(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 7, 4096, 16384, 16385, 65537, (1u << 20) + 3, 8u << 20};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
        round_trip(sizes[k]);
    }
    /* The wire proof: 64 MiB each way, counted on the interfaces of this node. */
    const uint64_t a0 = counter("ethA", "tx_bytes"), b0 = counter("ethB", "tx_bytes");
    const uint64_t m0 = counter("ethM", "tx_bytes") + counter("ethM", "rx_bytes");
    const uint64_t ar0 = counter("ethA", "rx_bytes"), br0 = counter("ethB", "rx_bytes");
    dr_mr_plane_stats_t s0[2], s1[2];
    dr_mr_plane_stats(g.mr, 0, &s0[0]);
    dr_mr_plane_stats(g.mr, 1, &s0[1]);
    const size_t n = 64u << 20;
    round_trip(n);
    dr_mr_plane_stats(g.mr, 0, &s1[0]);
    dr_mr_plane_stats(g.mr, 1, &s1[1]);
    const uint64_t da = counter("ethA", "tx_bytes") - a0, db = counter("ethB", "tx_bytes") - b0;
    const uint64_t dra = counter("ethA", "rx_bytes") - ar0, drb = counter("ethB", "rx_bytes") - br0;
    const uint64_t dm = counter("ethM", "tx_bytes") + counter("ethM", "rx_bytes") - m0;
    print_message("64 MiB each way: ethA tx %.1f MiB rx %.1f MiB, ethB tx %.1f MiB rx %.1f MiB, "
                  "ethM %.3f MiB\n", da / 1048576.0, dra / 1048576.0, db / 1048576.0,
                  drb / 1048576.0, dm / 1048576.0);
    /* Equal weights: each plane carries about half, in both directions. */
    assert_true(da > n * 4 / 10 && da < n * 7 / 10);
    assert_true(db > n * 4 / 10 && db < n * 7 / 10);
    assert_true(dra > n * 4 / 10 && drb > n * 4 / 10);
    assert_true(dm < (1u << 20));
    assert_int_equal(s1[0].tx_bytes - s0[0].tx_bytes + s1[1].tx_bytes - s0[1].tx_bytes, n);
    assert_true(s1[0].tx_bytes - s0[0].tx_bytes >= n / 2 - 64);
}

/* Stream round trips of n bytes for `seconds`; returns how many. */
static int stream(double seconds, size_t n)
{
    int count = 0;
    for (double end = now_s() + seconds; now_s() < end; ++count) {
        round_trip(n);
    }
    return count;
}

static void fault_case(const char *kind)
{
    const size_t n = 2u << 20;
    dr_mr_plane_stats_t a0, b0, a1, b1, a2, b2;
    stream(0.5, n);
    assert_int_equal(dr_mr_link_state(g.mr, 1, 0), DR_LINK_UP);
    dr_mr_plane_stats(g.mr, 0, &a0);
    dr_mr_plane_stats(g.mr, 1, &b0);
    const double t_fault = now_s();
    lab("fault %d a %s", g.peer_node, kind);
    int during = stream(3.0, n);
    dr_mr_plane_stats(g.mr, 0, &a1);
    dr_mr_plane_stats(g.mr, 1, &b1);
    print_message("%s: %d verified round trips of 2 MiB with plane A cut; plane A errors +%llu, "
                  "reroutes +%llu, detection %.3f s; plane B carried %.1f MiB\n",
                  kind, during, (unsigned long long)(a1.errors - a0.errors),
                  (unsigned long long)(a1.reroutes - a0.reroutes), a1.last_detect_us / 1e6,
                  (b1.tx_bytes - b0.tx_bytes) / 1048576.0);
    assert_int_equal(dr_mr_link_state(g.mr, 1, 0), DR_LINK_DOWN);
    assert_true(a1.errors > a0.errors);
    assert_true(b1.tx_bytes - b0.tx_bytes >= (uint64_t)during * n / 2);
    assert_int_equal(dr_mr_link_state(g.mr, 1, 1), DR_LINK_UP);

    lab("fault %d a heal", g.peer_node);
    const double t_heal = now_s();
    while (dr_mr_link_state(g.mr, 1, 0) != DR_LINK_UP && now_s() - t_heal < 20) {
        round_trip(n);
    }
    assert_int_equal(dr_mr_link_state(g.mr, 1, 0), DR_LINK_UP);
    const double readmit = now_s() - t_heal;
    dr_mr_plane_stats(g.mr, 0, &a2);
    dr_mr_plane_stats(g.mr, 1, &b2);
    stream(1.0, n);
    dr_mr_plane_stats_t a3;
    dr_mr_plane_stats(g.mr, 0, &a3);
    print_message("%s: plane A re-admitted %.2f s after heal (%.2f s after the fault), then "
                  "carried %.1f MiB\n", kind, readmit, now_s() - t_fault,
                  (a3.tx_bytes - a2.tx_bytes) / 1048576.0);
    assert_true(a3.readmissions > a0.readmissions);
    assert_true(a3.tx_bytes - a2.tx_bytes > n);
    (void)b2;
}

/* Whatever happened, leave plane A healed for the next case. */
static int heal_teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s fault %d a heal", g.lab, g.peer_node);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_fault_down(void **state)
{
    (void)state;
    fault_case("down");
}

static void test_fault_blackhole(void **state)
{
    (void)state;
    fault_case("blackhole");
}

static void test_fault_reset(void **state)
{
    (void)state;
    fault_case("reset");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_and_wire),
        cmocka_unit_test_teardown(test_fault_down, heal_teardown),
        cmocka_unit_test_teardown(test_fault_blackhole, heal_teardown),
        cmocka_unit_test_teardown(test_fault_reset, heal_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
