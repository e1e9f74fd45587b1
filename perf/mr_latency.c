/*
 * dualrail-mr-latency — small-message latency of ucx_mr alone, without MPI, for
 * the per-call breakdown of a small allreduce (README, "Small messages").
 *
 *   dualrail-mr-latency DIR SELF PEER PLANES [SIZE [ITERS [MODE [IDLE_PEERS [WEIGHTS]]]]]
 *
 * Two processes (ids 0 and 1) exchange addresses through files in DIR (the
 * lab's nodes share a filesystem), then, for ITERS iterations (default 20000)
 * of SIZE bytes (default 8):
 *   MODE exchange (default): both post a receive and a send of iteration i and
 *        wait for both, as a 2-rank recursive-doubling allreduce does: the time
 *        per iteration is the transport's share of such a call;
 *   MODE pingpong: 0 sends, 1 echoes; half the round trip, ucx_perftest's
 *        tag_lat convention, comparable with `ucx_perftest -t ucp_am_lat`.
 * IDLE_PEERS (default 0) more peers are registered before the run and never used, as an
 * MPI job registers every rank of MPI_COMM_WORLD and talks to a few at a time: this
 * process's own address under the ids 1000.. (never connected; perf/peer_scaling.sh).
 * WEIGHTS (default adaptive): this process's weights setting ("adaptive", "equal" or
 * ratios "r0:r1"), so that the two ends can weigh their planes differently
 * (perf/small_plane.sh).
 * Prints "SIZE usec" (process 0; exchange mode adds the split of an iteration into
 * posting the receive, the send call and the wait for the peer's message). Bounded: 60 s overall;
 * any transfer error exits 2 with the reason on stderr.
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int wait_req(dr_mr_t *mr, dr_mr_req_t *r, double end)
{
    dr_status_t st;
    while ((st = dr_mr_test(mr, r, NULL)) == DR_INPROGRESS) {
        if (now_s() > end) {
            fprintf(stderr, "dualrail-mr-latency: timed out\n");
            return -1;
        }
        dr_mr_progress(mr);
    }
    dr_mr_req_free(mr, r);
    if (st != DR_OK) {
        fprintf(stderr, "dualrail-mr-latency: %s: %s\n", dr_status_str(st), dr_mr_last_error(mr));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 10) {
        fprintf(stderr, "usage: dualrail-mr-latency DIR SELF PEER PLANES [SIZE [ITERS "
                        "[exchange|pingpong [IDLE_PEERS [WEIGHTS]]]]]\n");
        return 1;
    }
    const unsigned self = (unsigned)atoi(argv[2]), peer = (unsigned)atoi(argv[3]);
    const size_t size = argc > 5 ? (size_t)atol(argv[5]) : 8;
    const long iters = argc > 6 ? atol(argv[6]) : 20000;
    const int pingpong = argc > 7 && strcmp(argv[7], "pingpong") == 0;
    const long idle = argc > 8 ? atol(argv[8]) : 0;
    if (size > (64u << 20) || iters <= 0 ||
        (argc > 7 && !pingpong && strcmp(argv[7], "exchange")) || idle < 0 || idle > 65536) {
        fprintf(stderr, "dualrail-mr-latency: bad size, count or mode\n");
        return 1;
    }
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = argv[4];
    cfg.name = "mr-latency";
    /* dr_mr_config_t.direct_lane for an A/B of the direct lane (default: ucx_mr's) */
    const char *lane = getenv("DUALRAIL_DIRECT_LANE");
    if (lane != NULL && *lane != '\0') {
        cfg.direct_lane = atoi(lane);
    }
    if (argc > 9) {
        cfg.weights = argv[9];
    }
    char err[512];
    dr_mr_t *mr;
    if (dr_mr_create(&cfg, self, &mr, err, sizeof(err)) != DR_OK ||
        dr_oob_connect(mr, argv[1], self, peer, 60, err, sizeof(err)) != 0) {
        fprintf(stderr, "dualrail-mr-latency: %s\n", err);
        return 2;
    }
    if (idle > 0) {
        const void *addr;
        size_t len;
        unsigned char *blob = NULL;
        snprintf(err, sizeof(err), "no address to copy");
        int ok = dr_mr_address(mr, &addr, &len) == DR_OK && len >= 12 && (blob = malloc(len));
        for (long k = 0; ok && k < idle; ++k) {
            /* the address's third word is the process id, which dr_mr_add_peer checks */
            const uint32_t id = 1000 + (uint32_t)k;
            memcpy(blob, addr, len);
            memcpy(blob + 8, &id, sizeof(id));
            ok = dr_mr_add_peer(mr, id, blob, len, err, sizeof(err)) == DR_OK;
        }
        free(blob);
        if (!ok) {
            fprintf(stderr, "dualrail-mr-latency: idle peers: %s\n", err);
            return 2;
        }
    }
    char *out = calloc(1, size + 1), *in = calloc(1, size + 1);
    const double end = now_s() + 60;
    const long warm = iters / 10 + 10;
    double t0 = 0, t_post_recv = 0, t_send = 0, t_wait = 0;
    int rc = 0;
    for (long i = 0; i < warm + iters && rc == 0; ++i) {
        if (i == warm) {
            t0 = now_s();
        }
        dr_mr_req_t *s = NULL, *r = NULL;
        const uint64_t k = (uint64_t)i;
        if (pingpong && self == 1) {
            rc = dr_mr_irecv(mr, peer, k, in, size, &r) != DR_OK || wait_req(mr, r, end) ||
                 dr_mr_isend(mr, peer, k, in, size, &s) != DR_OK || wait_req(mr, s, end);
        } else if (pingpong) {
            rc = dr_mr_irecv(mr, peer, k, in, size, &r) != DR_OK ||
                 dr_mr_isend(mr, peer, k, out, size, &s) != DR_OK || wait_req(mr, s, end) ||
                 wait_req(mr, r, end);
        } else {
            const double a = now_s();
            rc = dr_mr_irecv(mr, peer, k, in, size, &r) != DR_OK;
            const double b = now_s();
            rc = rc || dr_mr_isend(mr, peer, k, out, size, &s) != DR_OK;
            const double c = now_s();
            rc = rc || wait_req(mr, r, end);
            const double d = now_s();
            rc = rc || wait_req(mr, s, end);
            if (i >= warm) {
                t_post_recv += b - a;
                t_send += c - b;
                t_wait += d - c;
            }
        }
    }
    const double per = (now_s() - t0) / (double)iters / (pingpong ? 2 : 1);
    if (rc == 0 && self == 0) {
        printf("%zu %.2f", size, per * 1e6);
        if (!pingpong) {
            /* Where an exchange's time goes: posting the receive, the send call (for a
             * small message the kernel's whole TCP path, delivery into the peer's socket
             * included, runs inside it), and waiting for the peer's message. */
            printf("  post-receive %.2f  send %.2f  wait %.2f", t_post_recv / iters * 1e6,
                   t_send / iters * 1e6, t_wait / iters * 1e6);
        }
        printf("\n");
    }
    dr_mr_destroy(mr);
    free(out);
    free(in);
    return rc ? 2 : 0;
}
