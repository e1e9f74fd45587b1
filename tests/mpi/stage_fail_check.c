/*
 * stage_fail_check: a rank whose device buffer cannot be staged through host memory fails
 * its collective before it communicates; its peers must get an error too, promptly, not wait
 * for it. Run on 3 lab nodes with coll/dualrail selected, coll_dualrail_gpu_standin 1 and no
 * coll_dualrail_timeout (the default: no limit), so only the failing rank's word can end
 * the peers' wait.
 *
 * For each collective that stages device buffers whole (blocking and non-blocking; the
 * allreduce of a pair type with holes, staged through a host copy; the staged allreduce
 * pipeline): rank F arms one copy failure in the
 * host stand-in for a GPU (dr_mem_standin_fail_copies) and calls the collective on device
 * buffers; every rank must return within kLimitS seconds (an alarm fails the check, naming
 * the collective), F and every rank whose result needs F's data with an error. Then an
 * allreduce through coll/dualrail on the same communicator must give the exact sum: a failed
 * call leaves the communicator usable. Before the fail mode (dr_coll_args_t.fail) the peers
 * waited for F for ever.
 *
 * Prints "N passed, 0 failed" on rank 0 (verdict by point-to-point messages, agree.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "agree.h"
#include "standin_buffers.h"

enum { kLimitS = 30, kCount = 1000, kNp = 3 };

static const char *current = "start";
static int me;
static unsigned limit_s = kLimitS; /* the alarm armed last */

static void arm(unsigned s)
{
    limit_s = s;
    alarm(s);
}

static void on_alarm(int sig)
{
    (void)sig;
    char line[160];
    const int n = snprintf(line, sizeof(line),
                           "stage_fail_check: rank %d: %s did not return within %u s (the peers "
                           "of a rank whose staging failed are waiting for it)\n",
                           me, current, limit_s);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
    }
    _exit(3);
}

/* Which ranks must fail when rank f's staging fails. */
enum Needs { kAll, kRoot };

struct Case {
    const char *name;
    int failing; /* the rank whose staging fails */
    enum Needs needs;
};

static int run_case(const char *name, void *send_d, void *recv_d, int n)
{
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    for (int r = 0; r < n; ++r) {
        counts[r] = kCount;
        displs[r] = r * kCount;
    }
    int rc = MPI_ERR_OTHER;
    MPI_Comm w = MPI_COMM_WORLD;
    if (strcmp(name, "MPI_Bcast") == 0) {
        rc = MPI_Bcast(send_d, kCount, MPI_INT, 0, w);
    } else if (strcmp(name, "MPI_Allgather") == 0) {
        rc = MPI_Allgather(send_d, kCount, MPI_INT, recv_d, kCount, MPI_INT, w);
    } else if (strcmp(name, "MPI_Allgatherv") == 0) {
        rc = MPI_Allgatherv(send_d, kCount, MPI_INT, recv_d, counts, displs, MPI_INT, w);
    } else if (strcmp(name, "MPI_Reduce") == 0) {
        rc = MPI_Reduce(send_d, recv_d, kCount, MPI_INT, MPI_SUM, 0, w);
    } else if (strcmp(name, "MPI_Reduce_scatter_block") == 0) {
        rc = MPI_Reduce_scatter_block(send_d, recv_d, kCount, MPI_INT, MPI_SUM, w);
    } else if (strcmp(name, "MPI_Reduce_scatter") == 0) {
        rc = MPI_Reduce_scatter(send_d, recv_d, counts, MPI_INT, MPI_SUM, w);
    } else if (strcmp(name, "MPI_Gather") == 0) {
        rc = MPI_Gather(send_d, kCount, MPI_INT, recv_d, kCount, MPI_INT, 0, w);
    } else if (strcmp(name, "MPI_Gatherv") == 0) {
        rc = MPI_Gatherv(send_d, kCount, MPI_INT, recv_d, counts, displs, MPI_INT, 0, w);
    } else if (strcmp(name, "MPI_Scatter") == 0) {
        rc = MPI_Scatter(send_d, kCount, MPI_INT, recv_d, kCount, MPI_INT, 0, w);
    } else if (strcmp(name, "MPI_Scatterv") == 0) {
        rc = MPI_Scatterv(send_d, counts, displs, MPI_INT, recv_d, kCount, MPI_INT, 0, w);
    } else if (strcmp(name, "MPI_Alltoall") == 0) {
        rc = MPI_Alltoall(send_d, kCount, MPI_INT, recv_d, kCount, MPI_INT, w);
    } else if (strcmp(name, "MPI_Alltoallv") == 0) {
        rc = MPI_Alltoallv(send_d, counts, displs, MPI_INT, recv_d, counts, displs, MPI_INT, w);
    } else if (strcmp(name, "MPI_Allreduce") == 0) {
        rc = MPI_Allreduce(send_d, recv_d, kCount, MPI_INT, MPI_SUM, w);
    } else if (strncmp(name, "MPI_I", 5) == 0) {
        /* the failing rank's call fails at once; the others' in MPI_Wait */
        MPI_Request req = MPI_REQUEST_NULL;
        if (strcmp(name, "MPI_Ibcast") == 0) {
            rc = MPI_Ibcast(send_d, kCount, MPI_INT, 0, w, &req);
        } else if (strcmp(name, "MPI_Iallgather") == 0) {
            rc = MPI_Iallgather(send_d, kCount, MPI_INT, recv_d, kCount, MPI_INT, w, &req);
        } else if (strcmp(name, "MPI_Ireduce_scatter_block") == 0) {
            rc = MPI_Ireduce_scatter_block(send_d, recv_d, kCount, MPI_INT, MPI_SUM, w, &req);
        } else if (strcmp(name, "MPI_Ialltoall") == 0) {
            rc = MPI_Ialltoall(send_d, kCount, MPI_INT, recv_d, kCount, MPI_INT, w, &req);
        } else if (strcmp(name, "MPI_Iallreduce") == 0) {
            rc = MPI_Iallreduce(send_d, recv_d, kCount, MPI_INT, MPI_SUM, w, &req);
        }
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else if (strcmp(name, "MPI_Allreduce(MPI_DOUBLE_INT)") == 0) {
        /* the first kCount/2 pairs of the buffers: a pair type with holes */
        rc = MPI_Allreduce(send_d, recv_d, kCount / 4, MPI_DOUBLE_INT, MPI_MAXLOC, w);
    }
    free(counts);
    free(displs);
    return rc;
}

/* One check's verdict, agreed by every rank (tags tag and tag + 1), into the counts. */
static void tally(int ok, int tag, int *passed, int *failed)
{
    if (mpi_agree(ok, tag)) {
        ++*passed;
    } else {
        ++*failed;
    }
}

/* Block q of an allgather's result (kCount ints per rank) must be q's: tag t. */
static int blocks_ok(const int *r, int n, int t, const char *what)
{
    for (int q = 0; q < n; ++q) {
        for (int k = 0; k < kCount; ++k) {
            if (r[q * kCount + k] != t * 10 + q) {
                printf("stage_fail_check: rank %d: %s: block %d holds %d, not %d\n", me, what, q,
                       r[q * kCount + k], t * 10 + q);
                return 0;
            }
        }
    }
    return 1;
}

/*
 * A failed allgather on a duplicate of MPI_COMM_WORLD leaves its peers' blocks in the failing
 * rank's transport; the duplicate is freed and a new one made, which Open MPI gives the same
 * context id (the lowest free one): its first allgather has the failed call's key. Before
 * dr_coll_forget_comm it took the old blocks and returned success.
 */
static int reused_comm_id(int *send_h, int *recv_h)
{
    const int n = kNp;
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    for (int k = 0; k < kCount; ++k) {
        send_h[k] = 7000000 + me;
    }
    void *send_d = to_dev(send_h, (size_t)kCount * sizeof(int));
    if (me == 1) {
        dr_mem_standin_fail_copies(1);
    }
    const int rc = MPI_Allgather(send_d, kCount, MPI_INT, recv_h, kCount, MPI_INT, d);
    dr_mem_standin_fail_copies(0);
    from_dev(send_h, send_d, (size_t)kCount * sizeof(int));
    MPI_Comm_free(&d);
    int ok = me != 1 || rc != MPI_SUCCESS;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    for (int k = 0; k < kCount; ++k) {
        send_h[k] = 10 + me;
    }
    const int rc2 = MPI_Allgather(send_h, kCount, MPI_INT, recv_h, kCount, MPI_INT, d);
    ok = ok && rc2 == MPI_SUCCESS && blocks_ok(recv_h, n, 1, "the new communicator's allgather");
    MPI_Comm_free(&d);
    return ok;
}

/*
 * The failed MPI_Allgather and MPI_Iallgather above (allgather calls 0 and 1 on
 * MPI_COMM_WORLD) left blocks behind; a call's key repeats 65536 allgathers later. Every one
 * of the next 65538 allgathers must hold its own blocks (before: calls 65536 and 65537 took
 * the failed calls' blocks and returned success).
 */
static int wrapped_sequence(int n)
{
    int s[4], r[4 * kNp];
    int bad = 0;
    for (int it = 1; it <= 65538 && bad == 0; ++it) {
        for (int k = 0; k < 4; ++k) {
            s[k] = it * 10 + me;
        }
        if (MPI_Allgather(s, 4, MPI_INT, r, 4, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS) {
            printf("stage_fail_check: rank %d: allgather %d failed\n", me, it);
            bad = 1;
        }
        for (int q = 0; q < n && bad == 0; ++q) {
            for (int k = 0; k < 4; ++k) {
                if (r[q * 4 + k] != it * 10 + q) {
                    printf(
                        "stage_fail_check: rank %d: allgather %d after the failed ones: block %d "
                        "holds %d, not %d\n",
                        me, it, q, r[q * 4 + k], it * 10 + q);
                    bad = 1;
                    break;
                }
            }
        }
    }
    return bad == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != kNp) {
        if (me == 0) {
            fprintf(stderr, "stage_fail_check: run on %d ranks, not %d\n", kNp, n);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    (void)argc;
    (void)argv;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    signal(SIGALRM, on_alarm);
    standin_open("stage_fail_check");

    static const struct Case cases[] = {
        {"MPI_Bcast", 0, kAll}, /* the root copies its buffer out first */
        {"MPI_Allgather", 1, kAll},
        {"MPI_Allgatherv", 1, kAll},
        {"MPI_Reduce", 1, kRoot},
        {"MPI_Reduce_scatter_block", 1, kAll},
        {"MPI_Reduce_scatter", 1, kAll},
        {"MPI_Gather", 1, kRoot},
        {"MPI_Gatherv", 1, kRoot},
        {"MPI_Scatter", 0, kAll},
        {"MPI_Scatterv", 0, kAll},
        {"MPI_Alltoall", 2, kAll},
        {"MPI_Alltoallv", 2, kAll},
        {"MPI_Allreduce(MPI_DOUBLE_INT)", 1, kAll},
        {"MPI_Allreduce", 1, kAll}, /* the staged pipeline's own early failure */
        {"MPI_Ibcast", 0, kAll},
        {"MPI_Iallgather", 1, kAll},
        {"MPI_Ireduce_scatter_block", 2, kAll},
        {"MPI_Ialltoall", 1, kAll},
        {"MPI_Iallreduce", 2, kAll},
    };
    const size_t total = (size_t)kCount * kNp;
    int *send_h = calloc(total, sizeof(int)), *recv_h = calloc(total, sizeof(int));
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        const struct Case *c = &cases[i];
        for (size_t k = 0; k < total; ++k) {
            send_h[k] = me * 7 + (int)k;
        }
        void *send_d = to_dev(send_h, total * sizeof(int));
        void *recv_d = to_dev(recv_h, total * sizeof(int));
        current = c->name;
        if (me == c->failing) {
            dr_mem_standin_fail_copies(1);
        }
        arm(kLimitS);
        const int rc = run_case(c->name, send_d, recv_d, n);
        alarm(0);
        if (me == c->failing) {
            dr_mem_standin_fail_copies(0);
        }
        from_dev(send_h, send_d, total * sizeof(int));
        from_dev(recv_h, recv_d, total * sizeof(int));
        const int must_fail =
            me == c->failing || c->needs == kAll || (c->needs == kRoot && me == 0);
        int ok = !must_fail || rc != MPI_SUCCESS;
        if (!ok) {
            printf("stage_fail_check: rank %d: %s succeeded, but rank %d's staging failed\n", me,
                   c->name, c->failing);
        }
        /* The communicator still works: an exact sum through coll/dualrail. */
        current = "the MPI_Allreduce after it";
        long v = me + 1, sum = 0;
        arm(kLimitS);
        const int arc = MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        alarm(0);
        if (arc != MPI_SUCCESS || sum != (long)n * (n + 1) / 2) {
            printf("stage_fail_check: rank %d: the allreduce after %s gave rc %d, sum %ld\n", me,
                   c->name, arc, sum);
            ok = 0;
        }
        tally(ok, 100 + 2 * (int)i, &passed, &failed);
    }
    /* What the failed calls left behind must never reach a later call. */
    current = "a communicator whose id was used again";
    arm(kLimitS);
    int ok = reused_comm_id(send_h, recv_h);
    alarm(0);
    tally(ok, 90, &passed, &failed);
    current = "65538 allgathers after the failed ones";
    arm(2 * kLimitS);
    ok = wrapped_sequence(n);
    alarm(0);
    tally(ok, 94, &passed, &failed);
    if (me == 0) {
        printf("%d passed, %d failed\n", passed, failed);
    }
    free(send_h);
    free(recv_h);
    standin_close();
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
