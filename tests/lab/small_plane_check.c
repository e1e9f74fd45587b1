/*
 * The two ends of a pair send their small messages on one plane, even where their own
 * weights toward each other would pick different ones (ucx_mr/mr_xfer.cc, small_plane:
 * the end with the higher id follows the plane the other's small messages come on).
 *
 * Two ucx_mr contexts on lab nodes 0 and 1, both planes, fixed weights that disagree:
 * rank 0 weighs its planes 1:3 toward rank 1 (its own choice: plane 1), rank 1 weighs
 * them 3:1 (its own choice: plane 0). They run ITERS exchanges of 8 bytes, each end
 * posting a receive and a send and waiting for both, as a 2-rank small allreduce does,
 * then ITERS / 4 of empty messages (a barrier's). Before the rule each end kept to its
 * own choice: every exchange travelled on two connections, one each way, and rank 1's
 * data segments all went on plane 0; and empty messages took the plane of the
 * round-robin counter (plane 0 here), not the small-message plane.
 *
 *   small_plane_check --rank 0|1 --dir DIR [--trials ITERS]
 *
 * Each rank prints its data segments per plane and exits 0 when at least all but 2 of its
 * ITERS + ITERS / 4 went on plane 1 (rank 1 follows from the first message of rank 0's
 * it has seen), else 1; 2 on bad arguments or a set-up failure. Every wait is bounded (10 s).
 */
#include <stdint.h>
#include <stdio.h>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

static int fail(const char *what, dr_status_t st)
{
    printf("small_plane_check: %s: %s\n", what, dr_status_str(st));
    return 2;
}

int main(int argc, char **argv)
{
    /* rank 0 weighs its planes 1:3 toward rank 1, rank 1 3:1 (see above) */
    const unsigned weights[2][2] = {{1, 3}, {3, 1}};
    int rank = -1, iters = 200;
    dr_mr_t *mr =
        dr_lab_pair_open(argc, argv, "small_plane_check", &rank, &iters, 10, 100000, weights);
    if (mr == NULL) {
        return 2;
    }
    const uint32_t peer = (uint32_t)(1 - rank);
    dr_status_t st;
    dr_mr_plane_stats_t before[2];
    for (int i = 0; i < 2; ++i) {
        if ((st = dr_mr_plane_stats(mr, i, &before[i])) != DR_OK) {
            return fail("plane counters", st);
        }
    }
    const int total = iters + iters / 4;
    for (int k = 0; k < total; ++k) {
        uint64_t out = (uint64_t)(k * 2 + rank), in = 0;
        const size_t len = k < iters ? 8 : 0;
        dr_mr_req_t *r = NULL, *s = NULL;
        if ((st = dr_mr_irecv(mr, peer, (uint64_t)k, &in, len, &r)) != DR_OK ||
            (st = dr_mr_isend(mr, peer, (uint64_t)k, &out, len, &s)) != DR_OK ||
            (st = dr_mr_wait(mr, r, 10, NULL)) != DR_OK ||
            (st = dr_mr_wait(mr, s, 10, NULL)) != DR_OK) {
            return fail("exchange", st);
        }
        dr_mr_req_free(mr, r);
        dr_mr_req_free(mr, s);
        if (len != 0 && in != (uint64_t)(k * 2 + 1 - rank)) {
            printf("small_plane_check: rank %d: exchange %d got %llu\n", rank, k,
                   (unsigned long long)in);
            return 1;
        }
    }
    uint64_t tx[2];
    for (int i = 0; i < 2; ++i) {
        dr_mr_plane_stats_t now;
        if ((st = dr_mr_plane_stats(mr, i, &now)) != DR_OK) {
            return fail("plane counters", st);
        }
        tx[i] = now.tx_segments - before[i].tx_segments;
    }
    /* Both ends keep progressing a little, so the last acknowledgements are delivered. */
    for (int i = 0; i < 200; ++i) {
        dr_mr_progress(mr);
    }
    dr_mr_destroy(mr);
    const int ok = tx[1] + 2 >= (uint64_t)total;
    printf("small_plane_check: rank %d: %d exchanges (%d empty), data segments plane 0: %llu, "
           "plane 1: %llu (%s)\n",
           rank, total, total - iters, (unsigned long long)tx[0], (unsigned long long)tx[1],
           ok ? "one plane with the peer" : "not on the peer's plane");
    return ok ? 0 : 1;
}
