/*
 * The quickstart's live failover demo: node 0 streams 4 MiB messages to node 1
 * over two planes; plane A of node 1 is cut mid-stream and later healed. Every
 * message is checked by the receiver. Prints what happened, phase by phase.
 *
 *   dualrail-failover-demo server DIR PLANES
 *   dualrail-failover-demo client DIR PLANES LAB_SH NODE KIND
 *
 * KIND is a lab.sh fault kind (down, blackhole, reset). Bounded: every phase
 * has a time limit and the whole run ends within about a minute.
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

#define MSG ((size_t)4 << 20)
#define WINDOW 4
#define QUIT_KEY UINT64_C(0xffffffffffffffff)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pattern(uint64_t *w, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; ++i) {
        w[i] = key * UINT64_C(0x9e3779b97f4a7c15) ^ i;
    }
}

static int check(const uint64_t *w, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; ++i) {
        if (w[i] != (key * UINT64_C(0x9e3779b97f4a7c15) ^ i)) {
            return -1;
        }
    }
    return 0;
}

static dr_mr_t *open_mr(const char *planes, unsigned self, unsigned peer, const char *dir)
{
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = planes;
    cfg.name = self == 0 ? "node0" : "node1";
    char err[512];
    dr_mr_t *mr;
    if (dr_mr_create(&cfg, self, &mr, err, sizeof(err)) != DR_OK ||
        dr_oob_connect(mr, dir, self, peer, 60, err, sizeof(err)) != 0) {
        fprintf(stderr, "failover_demo: %s\n", err);
        exit(2);
    }
    return mr;
}

static int server(const char *dir, const char *planes)
{
    dr_mr_t *mr = open_mr(planes, 1, 0, dir);
    uint64_t *buf[WINDOW];
    dr_mr_req_t *req[WINDOW];
    for (uint64_t k = 0; k < WINDOW; ++k) {
        buf[k] = malloc(MSG);
        dr_mr_irecv(mr, 0, k, buf[k], MSG, &req[k]);
    }
    char q;
    dr_mr_req_t *quit;
    dr_mr_irecv(mr, 0, QUIT_KEY, &q, 1, &quit);
    uint64_t next = 0;
    int rc = 0;
    for (double end = now_s() + 120; now_s() < end && dr_mr_test(mr, quit, NULL) == DR_INPROGRESS;) {
        dr_mr_progress(mr);
        int slot = (int)(next % WINDOW);
        size_t len;
        dr_status_t st = dr_mr_test(mr, req[slot], &len);
        if (st == DR_INPROGRESS) {
            continue;
        }
        if (st != DR_OK || len != MSG || check(buf[slot], MSG / 8, next) != 0) {
            fprintf(stderr, "failover_demo: message %" PRIu64 " %s: %s\n", next,
                    st != DR_OK ? dr_status_str(st) : "has wrong contents", dr_mr_last_error(mr));
            rc = 2;
            break;
        }
        dr_mr_req_free(mr, req[slot]);
        dr_mr_irecv(mr, 0, next + WINDOW, buf[slot], MSG, &req[slot]);
        ++next;
    }
    for (double t = now_s() + 0.2; now_s() < t;) {
        dr_mr_progress(mr);
    }
    dr_mr_destroy(mr);
    printf("%" PRIu64 " messages received and verified\n", next);
    return rc;
}

typedef struct phase {
    const char *name;
    double secs;
    uint64_t msgs;
    dr_mr_plane_stats_t a, b;
    char note[160];
} phase_t;

static struct {
    dr_mr_t *mr;
    uint64_t *buf[WINDOW];
    dr_mr_req_t *req[WINDOW];
    uint64_t sent, done;
} c;

/* Keep WINDOW messages in flight until done() says stop or `limit` seconds pass. */
static int stream(double limit, int (*stop)(void), uint64_t *msgs)
{
    uint64_t start = c.done;
    for (double end = now_s() + limit; now_s() < end && !(stop && stop());) {
        while (c.sent < c.done + WINDOW) {
            int slot = (int)(c.sent % WINDOW);
            pattern(c.buf[slot], MSG / 8, c.sent);
            dr_mr_isend(c.mr, 1, c.sent, c.buf[slot], MSG, &c.req[slot]);
            ++c.sent;
        }
        dr_mr_progress(c.mr);
        int slot = (int)(c.done % WINDOW);
        dr_status_t st = dr_mr_test(c.mr, c.req[slot], NULL);
        if (st == DR_INPROGRESS) {
            continue;
        }
        if (st != DR_OK) {
            fprintf(stderr, "failover_demo: send %" PRIu64 ": %s\n", c.done, dr_mr_last_error(c.mr));
            return -1;
        }
        dr_mr_req_free(c.mr, c.req[slot]);
        ++c.done;
    }
    *msgs = c.done - start;
    return 0;
}

static int plane_a_down(void)
{
    return dr_mr_link_state(c.mr, 1, 0) == DR_LINK_DOWN;
}

static int plane_a_up(void)
{
    return dr_mr_link_state(c.mr, 1, 0) == DR_LINK_UP;
}

static int run_phase(phase_t *ph, double limit, int (*stop)(void))
{
    dr_mr_plane_stats_t a0, b0;
    dr_mr_plane_stats(c.mr, 0, &a0);
    dr_mr_plane_stats(c.mr, 1, &b0);
    double t0 = now_s();
    if (stream(limit, stop, &ph->msgs) != 0) {
        return -1;
    }
    ph->secs = now_s() - t0;
    dr_mr_plane_stats(c.mr, 0, &ph->a);
    dr_mr_plane_stats(c.mr, 1, &ph->b);
    ph->a.tx_bytes -= a0.tx_bytes;
    ph->b.tx_bytes -= b0.tx_bytes;
    ph->a.reroutes -= a0.reroutes;
    ph->a.errors -= a0.errors;
    ph->a.readmissions -= a0.readmissions;
    return 0;
}

static int client(const char *dir, const char *planes, const char *lab, const char *node,
                  const char *kind)
{
    c.mr = open_mr(planes, 0, 1, dir);
    for (int i = 0; i < WINDOW; ++i) {
        c.buf[i] = malloc(MSG);
    }
    phase_t ph[5];
    memset(ph, 0, sizeof(ph));
    char cmd[1024];
    int rc = 0;
    ph[0].name = "both planes";
    rc |= run_phase(&ph[0], 3.0, NULL);
    snprintf(cmd, sizeof(cmd), "%s fault %s a %s", lab, node, kind);
    rc |= system(cmd) != 0;
    ph[1].name = "fault: until plane A is down";
    rc |= run_phase(&ph[1], 10.0, plane_a_down);
    snprintf(ph[1].note, sizeof(ph[1].note), "plane A %s: down after %.2f s, %" PRIu64
             " segments re-sent on B", kind, ph[1].secs, ph[1].a.reroutes);
    ph[2].name = "plane A cut";
    rc |= run_phase(&ph[2], 4.0, NULL);
    snprintf(cmd, sizeof(cmd), "%s fault %s a heal", lab, node);
    rc |= system(cmd) != 0;
    ph[3].name = "healed: until re-admitted";
    rc |= run_phase(&ph[3], 15.0, plane_a_up);
    snprintf(ph[3].note, sizeof(ph[3].note), "plane A %s %.2f s after heal",
             plane_a_up() ? "re-admitted" : "NOT re-admitted", ph[3].secs);
    ph[4].name = "both planes again";
    rc |= run_phase(&ph[4], 3.0, NULL);

    char q = 'q';
    dr_mr_req_t *s;
    for (int i = 0; i < WINDOW && c.sent > c.done; ++i) {
        dr_mr_wait(c.mr, c.req[c.done % WINDOW], 10, NULL);
        dr_mr_req_free(c.mr, c.req[c.done % WINDOW]);
        ++c.done;
    }
    dr_mr_isend(c.mr, 1, QUIT_KEY, &q, 1, &s);
    dr_mr_wait(c.mr, s, 10, NULL);
    dr_mr_plane_stats_t a;
    dr_mr_plane_stats(c.mr, 0, &a);
    dr_mr_destroy(c.mr);

    printf("\n%-30s %6s %8s %10s %10s  %s\n", "phase", "secs", "MB/s", "A MiB", "B MiB", "what happened");
    for (int i = 0; i < 5; ++i) {
        double mb = (double)ph[i].msgs * MSG / 1e6;
        printf("%-30s %6.2f %8.1f %10.1f %10.1f  %s\n", ph[i].name, ph[i].secs,
               ph[i].secs > 0 ? mb / ph[i].secs : 0.0, ph[i].a.tx_bytes / 1048576.0,
               ph[i].b.tx_bytes / 1048576.0, ph[i].note);
    }
    printf("\nplane A: %" PRIu64 " failure(s), detected %.3f s after its last sign of life; "
           "%" PRIu64 " re-admission(s); %" PRIu64 " segments re-routed\n", a.errors,
           a.last_detect_us / 1e6, a.readmissions, a.reroutes);
    printf("%" PRIu64 " messages of 4 MiB sent, every one acknowledged\n", c.done);
    return rc ? 2 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "server") == 0) {
        return server(argv[2], argv[3]);
    }
    if (argc == 7 && strcmp(argv[1], "client") == 0) {
        return client(argv[2], argv[3], argv[4], argv[5], argv[6]);
    }
    fprintf(stderr, "usage: dualrail-failover-demo server DIR PLANES\n"
                    "       dualrail-failover-demo client DIR PLANES LAB_SH NODE KIND\n");
    return 1;
}
