/*
 * Non-blocking collectives through coll/dualrail (issue 15): MPI_Iallreduce,
 * MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier.
 *
 *   - many outstanding: rounds of 8 requests on MPI_COMM_WORLD and 4 on a
 *     reversed split, mixed kinds, counts 0 .. 300000 elements, random roots,
 *     completed by MPI_Wait one by one, MPI_Waitall, MPI_Waitany, or MPI_Test
 *     polling (with a little computation between the tests); a blocking
 *     MPI_Allreduce and MPI_Bcast issued while requests are outstanding;
 *     every result exact;
 *   - completion order: with 6 requests outstanding on one communicator,
 *     polling only the last until it completes, the earlier ones must already
 *     be complete (MPI_Request_get_status);
 *   - MPI_Cancel on a running collective is refused (MPI_ERRORS_RETURN on
 *     MPI_COMM_WORLD) and the request still completes with the right data;
 *   - MPI_Request_free on a running collective request is refused too;
 *   - --progress-thread (run with coll_dualrail_progress_thread 1): an
 *     MPI_Iallreduce of 2.4 MB started, then 3 s of computation without any MPI
 *     call: the first MPI_Test after it finds it complete (the progress thread
 *     ran it; without one only its first messages would have left).
 *
 * Prints "N passed, M failed" (rank 0, over all ranks) and exits non-zero on
 * any failure. Bounded: a fixed number of rounds; a watchdog aborts at 240 s.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NREQ 8
#define MAXC 300000

static int rank, size;
static long passed, failed;

static void check(int ok, const char *what, int round, int i)
{
    if (ok) {
        ++passed;
    } else {
        ++failed;
        fprintf(stderr, "rank %d: round %d request %d: %s wrong\n", rank, round, i, what);
    }
}

static int64_t value(int round, int i, int r, size_t k)
{
    return ((int64_t)(round + 1) << 40) + ((int64_t)(i + 1) << 32) + ((int64_t)(r + 1) << 20) +
           (int64_t)(k & 0xfffff);
}

typedef struct {
    int kind; /* 0 iallreduce, 1 ibcast, 2 iallgather, 3 ibarrier */
    size_t count;
    int root;
    int64_t *buf, *in;
} op_t;

static uint64_t seed = 12345;
static uint64_t draw(void)
{
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
}

static void start(op_t *o, int round, int i, MPI_Comm comm, MPI_Request *req)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    const int c = (int)o->count;
    switch (o->kind) {
    case 0:
        for (size_t k = 0; k < o->count; ++k) {
            o->in[k] = value(round, i, r, k);
        }
        MPI_Iallreduce(o->in, o->buf, c, MPI_INT64_T, MPI_SUM, comm, req);
        break;
    case 1:
        for (size_t k = 0; k < o->count; ++k) {
            o->buf[k] = r == o->root ? value(round, i, o->root, k) : -1;
        }
        MPI_Ibcast(o->buf, c, MPI_INT64_T, o->root, comm, req);
        break;
    case 2:
        for (size_t k = 0; k < o->count; ++k) {
            o->in[k] = value(round, i, r, k);
        }
        MPI_Iallgather(o->in, c, MPI_INT64_T, o->buf, c, MPI_INT64_T, comm, req);
        break;
    default:
        MPI_Ibarrier(comm, req);
        break;
    }
}

static void verify(op_t *o, int round, int i, MPI_Comm comm)
{
    int n;
    MPI_Comm_size(comm, &n);
    int ok = 1;
    switch (o->kind) {
    case 0:
        for (size_t k = 0; ok && k < o->count; ++k) {
            int64_t want = 0;
            for (int r = 0; r < n; ++r) {
                want += value(round, i, r, k);
            }
            ok = o->buf[k] == want;
        }
        check(ok, "iallreduce", round, i);
        break;
    case 1:
        for (size_t k = 0; ok && k < o->count; ++k) {
            ok = o->buf[k] == value(round, i, o->root, k);
        }
        check(ok, "ibcast", round, i);
        break;
    case 2:
        for (size_t k = 0; ok && k < o->count * (size_t)n; ++k) {
            ok = o->buf[k] == value(round, i, (int)(k / o->count), k % o->count);
        }
        check(ok, "iallgather", round, i);
        break;
    default:
        check(1, "ibarrier", round, i);
        break;
    }
}

static void *watchdog(void *arg)
{
    (void)arg;
    sleep(240);
    fprintf(stderr, "rank %d: nb_check still running after 240 s\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 3);
    return NULL;
}

static void compute(double seconds)
{
    const double end = MPI_Wtime() + seconds;
    volatile double x = 1;
    while (MPI_Wtime() < end) {
        for (int k = 0; k < 1000; ++k) {
            x = x * 1.0000001 + 1e-9;
        }
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    MPI_Comm_set_name(rev, "reversed");
    op_t ops[NREQ];
    for (int i = 0; i < NREQ; ++i) {
        ops[i].buf = malloc(sizeof(int64_t) * MAXC * (size_t)size);
        ops[i].in = malloc(sizeof(int64_t) * MAXC);
    }
    static const size_t counts[] = {0, 1, 3, 1000, 8192, 70001, 300000};
    int64_t *blk = malloc(sizeof(int64_t) * 100000);
    const int progress_thread = argc > 1 && strcmp(argv[1], "--progress-thread") == 0;
    const int rounds = progress_thread ? 3 : argc > 1 ? atoi(argv[1]) : 24;
    for (int round = 0; round < rounds; ++round) {
        const int method = round % 4;
        MPI_Comm comm = round % 3 == 2 ? rev : MPI_COMM_WORLD;
        const int nreq = comm == rev ? 4 : NREQ;
        MPI_Request req[NREQ];
        for (int i = 0; i < nreq; ++i) {
            ops[i].kind = (int)(draw() % 4);
            ops[i].count = counts[draw() % 7];
            ops[i].root = (int)(draw() % (uint64_t)size);
            if (ops[i].kind == 2 && ops[i].count > MAXC / 4) {
                ops[i].count /= 4;
            }
            start(&ops[i], round, i, comm, &req[i]);
            if (i == 3 && round % 2 == 1) {
                /* Blocking collectives while non-blocking ones are outstanding. */
                for (int k = 0; k < 100000; ++k) {
                    blk[k] = rank + k;
                }
                MPI_Allreduce(MPI_IN_PLACE, blk, 100000, MPI_INT64_T, MPI_SUM, comm);
                int ok = 1;
                for (int k = 0; ok && k < 100000; ++k) {
                    ok = blk[k] == (int64_t)size * (size - 1) / 2 +
                                       (int64_t)size * k; /* by world rank: same sum */
                }
                check(ok, "blocking allreduce among non-blocking ones", round, i);
                int crank;
                MPI_Comm_rank(comm, &crank);
                int root = round % size, v = crank == root ? 4242 + round : -1;
                MPI_Bcast(&v, 1, MPI_INT, root, comm);
                check(v == 4242 + round, "blocking bcast among non-blocking ones", round, i);
            }
        }
        if (method == 0) {
            for (int i = 0; i < nreq; ++i) {
                check(MPI_Wait(&req[i], MPI_STATUS_IGNORE) == MPI_SUCCESS, "MPI_Wait", round, i);
            }
        } else if (method == 1) {
            check(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "MPI_Waitall", round,
                  0);
        } else if (method == 2) {
            for (int left = nreq; left > 0; --left) {
                int idx = -1;
                check(MPI_Waitany(nreq, req, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                          idx != MPI_UNDEFINED,
                      "MPI_Waitany", round, idx);
            }
        } else {
            /* Completion order: poll the last one only; all before it are complete then. */
            int flag = 0;
            for (long polls = 0; !flag && polls < 100000000; ++polls) {
                MPI_Test(&req[nreq - 1], &flag, MPI_STATUS_IGNORE);
                if (!flag) {
                    compute(20e-6);
                }
            }
            check(flag, "MPI_Test of the last request", round, nreq - 1);
            for (int i = 0; i < nreq - 1; ++i) {
                int done = 0;
                MPI_Request_get_status(req[i], &done, MPI_STATUS_IGNORE);
                check(done, "completion in order (an earlier request still running)", round, i);
            }
            check(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "MPI_Waitall", round,
                  0);
        }
        for (int i = 0; i < nreq; ++i) {
            verify(&ops[i], round, i, comm);
        }
    }
    /* Cancel and free of a running collective are refused; it still completes. */
    {
        op_t *o = &ops[0];
        o->kind = 0;
        o->count = MAXC;
        MPI_Request req;
        start(o, 999, 0, MPI_COMM_WORLD, &req);
        const int rc = MPI_Cancel(&req);
        check(rc != MPI_SUCCESS, "MPI_Cancel refused", 999, 0);
        MPI_Request keep = req;
        const int rf = MPI_Request_free(&keep);
        check(rf != MPI_SUCCESS && keep != MPI_REQUEST_NULL,
              "MPI_Request_free refused while running", 999, 0);
        MPI_Status st;
        check(MPI_Wait(&req, &st) == MPI_SUCCESS, "MPI_Wait after MPI_Cancel", 999, 0);
        int cancelled = 1;
        MPI_Test_cancelled(&st, &cancelled);
        check(!cancelled, "not cancelled", 999, 0);
        verify(o, 999, 0, MPI_COMM_WORLD);
    }
    if (progress_thread) {
        op_t *o = &ops[0];
        o->kind = 0;
        o->count = MAXC; /* 2.4 MB */
        MPI_Request req;
        MPI_Barrier(MPI_COMM_WORLD);
        start(o, 998, 0, MPI_COMM_WORLD, &req);
        compute(3.0); /* no MPI call */
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        check(flag, "progress thread: complete at the first MPI_Test after 3 s of computing", 998,
              0);
        if (!flag) {
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        verify(o, 998, 0, MPI_COMM_WORLD);
    }
    long mine[2] = {passed, failed}, all[2];
    MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%ld passed, %ld failed\n", all[0], all[1]);
    }
    MPI_Comm_free(&rev);
    pthread_cancel(dog);
    MPI_Finalize();
    return rank == 0 && all[1] != 0 ? 1 : 0;
}
