/*
 * A plane whose connections are refused (a `reset` fault: every TCP segment answered by a
 * reset) is probed for re-admission after the backoff, not at every watchdog pass.
 *
 * A probe makes a fresh UCX endpoint and pings on it. When the endpoint fails at once
 * (connection refused), the failure was handled as "drop the probe endpoint" without
 * moving the next probe's time, so the watchdog (every 2 ms) probed again at once:
 * hundreds of endpoints a second for as long as the outage lasted (on the lab some 1500
 * probes in 3 s), where an unanswered probe waits out the backoff (0.25 s doubling to
 * 1.5 s: a handful).
 *
 * Two ucx_mr contexts on lab nodes 0 and 1, both planes, exchange 8-byte messages back and
 * forth for --seconds (default 10, counted by rank 0, whose last message says stop);
 * run_cold_plane.sh --reset 2 5 resets node 1's plane A from 2 s to 5 s. At the end each
 * rank prints its plane A counters and exits 0 when plane A went down at least once, was
 * re-admitted, and sent at most --max-probes probes (default 60: liveness pings
 * included), else 1; 2 on bad arguments or a set-up failure. Every wait is bounded
 * (10 s), the loop by time and by 2,000,000 exchanges.
 *
 *   probe_backoff_check --rank 0|1 --dir DIR [--seconds S] [--max-probes N]
 */
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
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, long k, dr_status_t st)
{
    printf("probe_backoff_check: exchange %ld: %s: %s\n", k, what, dr_status_str(st));
    return 1;
}

int main(int argc, char **argv)
{
    const unsigned weights[2][2] = {{1, 1}, {1, 1}};
    double seconds = 10;
    long max_probes = 60;
    /* dr_lab_pair_open reads --rank and --dir; the options of this check are read here. */
    char *pass[8];
    int np = 0;
    for (int i = 0; i < argc; ++i) {
        if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0) {
            seconds = atof(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--max-probes") == 0) {
            max_probes = atol(argv[++i]);
        } else if (np < 7) {
            pass[np++] = argv[i];
        }
    }
    pass[np] = NULL;
    if (seconds < 1 || seconds > 60 || max_probes < 1) {
        fprintf(stderr, "probe_backoff_check: --seconds 1..60, --max-probes >= 1\n");
        return 2;
    }
    int rank = -1, unused = 1;
    dr_mr_t *mr = dr_lab_pair_open(np, pass, "probe_backoff_check", &rank, &unused, 1, 1, weights);
    if (mr == NULL) {
        return 2;
    }
    const uint32_t peer = (uint32_t)(1 - rank);
    /* Rank 0 keeps time and ends the loop: its last message carries kStop. */
    const uint64_t kStop = (uint64_t)1 << 63;
    const double end = now_s() + seconds;
    long k = 0;
    int rc = 0, stop = 0;
    for (; k < 2000000 && !stop; ++k) {
        uint64_t word = (uint64_t)k, got = 0;
        if (rank == 0 && (now_s() >= end || k + 1 == 2000000)) {
            word |= kStop;
            stop = 1;
        }
        dr_mr_req_t *req = NULL;
        dr_status_t st;
        /* rank 0 sends first, rank 1 answers: one exchange per round trip */
        for (int turn = 0; turn < 2; ++turn) {
            const int sending = (turn == 0) == (rank == 0);
            const uint64_t key = 2u * (uint64_t)k + (uint64_t)turn;
            st = sending ? dr_mr_isend(mr, peer, key, &word, 8, &req)
                         : dr_mr_irecv(mr, peer, key, &got, 8, &req);
            if (st != DR_OK || (st = dr_mr_wait(mr, req, 10, NULL)) != DR_OK) {
                rc = fail(sending ? "send" : "receive", k, st);
                break;
            }
            dr_mr_req_free(mr, req);
            if (!sending) {
                if ((got & ~kStop) != (uint64_t)k) {
                    printf("probe_backoff_check: exchange %ld: got %llu\n", k,
                           (unsigned long long)(got & ~kStop));
                    rc = 1;
                    break;
                }
                if (rank == 1) {
                    stop = (got & kStop) != 0;
                    word = got; /* the answer carries the same word back */
                }
            }
        }
        if (rc != 0) {
            break;
        }
    }
    /* Both ends keep progressing a little, so the last acknowledgements are delivered. */
    for (int i = 0; i < 200; ++i) {
        dr_mr_progress(mr);
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    dr_mr_plane_stats_t a;
    if (dr_mr_plane_stats(mr, 0, &a) != DR_OK) {
        memset(&a, 0, sizeof(a));
        rc = 2;
    }
    dr_mr_destroy(mr);
    printf("probe_backoff_check: rank %d: %ld exchanges; plane A: %llu down, %llu re-admitted, "
           "%llu probes (at most %ld)\n",
           rank, k, (unsigned long long)a.errors, (unsigned long long)a.readmissions,
           (unsigned long long)a.probes, max_probes);
    if (rc == 0 && (a.errors < 1 || a.readmissions < 1 || a.probes > (uint64_t)max_probes)) {
        rc = 1;
    }
    return rc;
}
