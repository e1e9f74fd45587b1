/*
 * A small message that arrives on a plane the receiver had let go cold is delivered by the
 * receiver's next progress call, not only by the one polling every plane (then every
 * 8th call, now the first one kColdPollUs after the last) (issue 11).
 *
 * Two ucx_mr contexts on lab nodes 0 and 1, both planes. Each end picks its small-message
 * plane from its own weights toward the other, and here they differ: rank 0 weighs its
 * planes 0:1 toward rank 1 (its small messages go on plane 1), rank 1 weighs them 1:0
 * (its own go on plane 0: it cannot follow rank 0's choice, as the end with the higher id
 * otherwise does, because it keeps plane 1 idle; small_plane_check tests the following).
 * Per trial: rank 1 sends "go" (plane 0); rank 0 waits for it,
 * sleeps 10 ms and sends 8 bytes (plane 1); rank 1 sleeps 40 ms without progressing, so
 * the data is in its socket and its plane 1 has been idle for longer than kHotUs (2 ms),
 * then posts the receive and counts the progress calls until it completes. Before the
 * fix the receive made only rank 1's own choice (plane 0) hot, and plane 1 was polled by
 * one progress call in 8: most trials needed more than 3.
 *
 *   cold_plane_check --rank 0|1 --dir DIR [--trials N]
 *
 * Rank 1 prints "cold_plane_check: K of M receives within 3 progress calls" and exits 0
 * when K >= M - 1 (trial 0, before any data came from rank 0, is not counted), else 1;
 * 2 on bad arguments or a set-up failure. Every wait is bounded (10 s).
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int fail(const char *what, dr_status_t st)
{
    printf("cold_plane_check: %s: %s\n", what, dr_status_str(st));
    return 2;
}

int main(int argc, char **argv)
{
    /* rank 0 weighs its planes 0:1 toward rank 1, rank 1 1:0 (see above) */
    const unsigned weights[2][2] = {{0, 1}, {1, 0}};
    int rank = -1, trials = 20;
    dr_mr_t *mr =
        dr_lab_pair_open(argc, argv, "cold_plane_check", &rank, &trials, 2, 1000, weights);
    if (mr == NULL) {
        return 2;
    }
    const uint32_t peer = (uint32_t)(1 - rank);
    dr_status_t st;
    int within = 0, counted = 0, most = 0;
    for (int k = 0; k < trials; ++k) {
        uint64_t word = (uint64_t)k, got = 0;
        dr_mr_req_t *req = NULL;
        if (rank == 1) {
            if ((st = dr_mr_isend(mr, peer, 2u * (uint64_t)k, &word, 8, &req)) != DR_OK ||
                (st = dr_mr_wait(mr, req, 10, NULL)) != DR_OK) {
                return fail("send go", st);
            }
            dr_mr_req_free(mr, req);
            sleep_ms(40); /* no progress: the data arrives, plane 1 goes cold */
            if ((st = dr_mr_irecv(mr, peer, 2u * (uint64_t)k + 1, &got, 8, &req)) != DR_OK) {
                return fail("post receive", st);
            }
            int calls = 0;
            while ((st = dr_mr_test(mr, req, NULL)) == DR_INPROGRESS && calls < 1000) {
                dr_mr_progress(mr);
                ++calls;
            }
            if (st == DR_INPROGRESS && (st = dr_mr_wait(mr, req, 10, NULL)) != DR_OK) {
                return fail("receive", st);
            }
            if (st != DR_OK || got != (uint64_t)k + 1000) {
                printf("cold_plane_check: trial %d: status %s, got %llu\n", k, dr_status_str(st),
                       (unsigned long long)got);
                return 1;
            }
            dr_mr_req_free(mr, req);
            if (k > 0) {
                ++counted;
                within += calls <= 3;
                most = calls > most ? calls : most;
            }
        } else {
            if ((st = dr_mr_irecv(mr, peer, 2u * (uint64_t)k, &got, 8, &req)) != DR_OK ||
                (st = dr_mr_wait(mr, req, 10, NULL)) != DR_OK) {
                return fail("receive go", st);
            }
            dr_mr_req_free(mr, req);
            sleep_ms(10);
            word = (uint64_t)k + 1000;
            if ((st = dr_mr_isend(mr, peer, 2u * (uint64_t)k + 1, &word, 8, &req)) != DR_OK ||
                (st = dr_mr_wait(mr, req, 10, NULL)) != DR_OK) {
                return fail("send data", st);
            }
            dr_mr_req_free(mr, req);
        }
    }
    /* Both ends keep progressing a little, so the last acknowledgements are delivered. */
    for (int i = 0; i < 200; ++i) {
        dr_mr_progress(mr);
        sleep_ms(1);
    }
    dr_mr_destroy(mr);
    if (rank == 1) {
        printf("cold_plane_check: %d of %d receives within 3 progress calls (most %d)\n", within,
               counted, most);
        return within >= counted - 1 ? 0 : 1;
    }
    return 0;
}
