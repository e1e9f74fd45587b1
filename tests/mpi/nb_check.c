/*
 * Non-blocking collectives through coll/dualrail (issue 15): MPI_Iallreduce,
 * MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier, MPI_Ireduce_scatter_block,
 * MPI_Ialltoall.
 *
 *   - the two block kinds table-driven first: MPI_Ireduce_scatter_block
 *     (MPI_SUM of int64) and MPI_Ialltoall at 0, 1, 2, 3, 7, 13, 97, 1000, 4099
 *     and 65537 elements per rank (primes: uneven ring and Bruck splits), each
 *     in place (MPI_IN_PLACE, which both blocking forms take) and not, 4 of
 *     them outstanding at a time, every element checked against the closed
 *     form (rank s's element j is a known function of s, j and the call) and
 *     the send buffer checked untouched (on MPI_COMM_WORLD and on a reversed
 *     split);
 *   - many outstanding: rounds of 8 requests on MPI_COMM_WORLD and 4 on a
 *     reversed split, all six kinds in turn (the block kinds in place at
 *     random), counts 0 .. 300000 elements, random roots,
 *     completed by MPI_Wait one by one, MPI_Waitall, MPI_Waitany, or MPI_Test
 *     polling (with a little computation between the tests); a blocking
 *     MPI_Allreduce and MPI_Bcast issued while requests are outstanding;
 *     every result exact;
 *   - completion order: with 6 requests outstanding on one communicator,
 *     polling only the last until it completes, the earlier ones must already
 *     be complete (MPI_Request_get_status); not with --any-order (a kind
 *     switched off runs on coll/libnbc, whose requests complete on their own:
 *     MPI promises no order of completion, dualrail does among its own);
 *   - MPI_Cancel on a running collective is refused (MPI_ERRORS_RETURN on
 *     MPI_COMM_WORLD) and the request still completes with the right data;
 *   - MPI_Request_free on a running collective request is refused too;
 *   - fallback per call: on a communicator "fallback", MPI_Ireduce_scatter_block
 *     with a user-defined op and MPI_Ialltoall with a derived datatype (what
 *     the blocking forms hand to the previous module) beside MPI_Ibarrier,
 *     outstanding together, exact (run_nb.sh checks they were handed over);
 *   - --device (run with coll_dualrail_gpu_standin 1): the buffers handed to
 *     MPI are device memory of the host stand-in for a GPU (it faults on a CPU
 *     access) where a per-op placement says so: send, receive, both or
 *     neither, differing between the ranks of one call; device_kinds() runs
 *     every kind that way in place and not at four counts, and the mixed
 *     rounds (6 of them) draw the placement; the results are copied back and
 *     checked as above. With --progress-thread too, the 2.4 MB allreduce's
 *     buffers are on the device (its result is copied there by the thread);
 *   - --multiple: MPI_Init_thread with MPI_THREAD_MULTIPLE (MPI_THREAD_SINGLE
 *     otherwise);
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

#include "standin_buffers.h"

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

/* Alltoall: what rank s sends rank d as element k of its block (a block delivered to the wrong
 * rank or the wrong place fails). */
static int64_t pair_value(int round, int i, int s, int d, size_t k)
{
    return value(round, i, s, k) + ((int64_t)(d + 1) << 52);
}

enum { K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_BARRIER, K_RSB, K_ALLTOALL, K_KINDS };

typedef struct {
    int kind;     /* K_* */
    size_t count; /* per rank: the block of allgather, reduce_scatter_block, alltoall */
    int root;
    int inplace; /* every kind but bcast and barrier: MPI_IN_PLACE */
    int place;   /* --device: bit 0, the send buffer in (stand-in) device memory; bit 1, recv */
    int64_t *buf, *in;
    void *dbuf, *din; /* their device copies, which MPI gets (NULL: MPI gets buf, in) */
} op_t;

/* The buffers MPI gets: the device copies where o->place asks for them (made from buf and
 * in as start() filled them; sized for the largest use, count x n elements). */
static void place(op_t *o, int n)
{
    const size_t bytes = sizeof(int64_t) * o->count * (size_t)n;
    o->din = dev_mem != NULL && (o->place & 1) ? to_dev(o->in, bytes) : NULL;
    o->dbuf = dev_mem != NULL && (o->place & 2) ? to_dev(o->buf, bytes) : NULL;
}
#define IN(o)  ((o)->din != NULL ? (o)->din : (void *)(o)->in)
#define BUF(o) ((o)->dbuf != NULL ? (o)->dbuf : (void *)(o)->buf)

/* After completion: the device copies back into buf and in (checked there), freed. */
static void unplace(op_t *o, int n)
{
    const size_t bytes = sizeof(int64_t) * o->count * (size_t)n;
    if (o->din != NULL) {
        from_dev(o->in, o->din, bytes);
    }
    if (o->dbuf != NULL) {
        from_dev(o->buf, o->dbuf, bytes);
    }
    o->din = o->dbuf = NULL;
}

/* What the block kinds are called with: MPI_SUM and MPI_INT64_T on dualrail; a user-defined
 * op and a derived type (two int64 per element) for the calls the previous module serves. */
static MPI_Op rsb_op = MPI_SUM;
static MPI_Datatype a2a_type = MPI_INT64_T;
static int a2a_per = 1; /* int64 per element of a2a_type */

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
    case K_ALLREDUCE:
        for (size_t k = 0; k < o->count; ++k) {
            (o->inplace ? o->buf : o->in)[k] = value(round, i, r, k);
        }
        place(o, n);
        MPI_Iallreduce(o->inplace ? MPI_IN_PLACE : IN(o), BUF(o), c, MPI_INT64_T, MPI_SUM, comm,
                       req);
        break;
    case K_BCAST:
        for (size_t k = 0; k < o->count; ++k) {
            o->buf[k] = r == o->root ? value(round, i, o->root, k) : -1;
        }
        place(o, n);
        MPI_Ibcast(BUF(o), c, MPI_INT64_T, o->root, comm, req);
        break;
    case K_ALLGATHER:
        /* in place: this rank's block at its place in buf, the others' garbage there */
        for (size_t k = 0; k < o->count * (size_t)n; ++k) {
            o->buf[k] = -1;
        }
        for (size_t k = 0; k < o->count; ++k) {
            (o->inplace ? o->buf + (size_t)r * o->count : o->in)[k] = value(round, i, r, k);
        }
        place(o, n);
        MPI_Iallgather(o->inplace ? MPI_IN_PLACE : IN(o), c, MPI_INT64_T, BUF(o), c, MPI_INT64_T,
                       comm, req);
        break;
    case K_RSB:
    case K_ALLTOALL: {
        /* n blocks of count in (in buf when in place); out: this rank's block / n blocks */
        int64_t *src = o->inplace ? o->buf : o->in;
        for (size_t k = 0; k < o->count * (size_t)n; ++k) {
            src[k] = o->kind == K_RSB ? value(round, i, r, k)
                                      : pair_value(round, i, r, (int)(k / o->count), k % o->count);
        }
        if (!o->inplace) {
            memset(o->buf, 0xa5, sizeof(int64_t) * o->count * (size_t)n);
        }
        place(o, n);
        const void *send = o->inplace ? MPI_IN_PLACE : IN(o);
        if (o->kind == K_RSB) {
            MPI_Ireduce_scatter_block(send, BUF(o), c, MPI_INT64_T, rsb_op, comm, req);
        } else {
            MPI_Ialltoall(send, c / a2a_per, a2a_type, BUF(o), c / a2a_per, a2a_type, comm, req);
        }
        break;
    }
    default:
        MPI_Ibarrier(comm, req);
        break;
    }
}

static void verify(op_t *o, int round, int i, MPI_Comm comm)
{
    int n;
    MPI_Comm_size(comm, &n);
    unplace(o, n);
    int ok = 1;
    switch (o->kind) {
    case K_ALLREDUCE:
        for (size_t k = 0; ok && k < o->count; ++k) {
            int64_t want = 0;
            for (int r = 0; r < n; ++r) {
                want += value(round, i, r, k);
            }
            ok = o->buf[k] == want;
        }
        check(ok, "iallreduce", round, i);
        break;
    case K_BCAST:
        for (size_t k = 0; ok && k < o->count; ++k) {
            ok = o->buf[k] == value(round, i, o->root, k);
        }
        check(ok, "ibcast", round, i);
        break;
    case K_ALLGATHER:
        for (size_t k = 0; ok && k < o->count * (size_t)n; ++k) {
            ok = o->buf[k] == value(round, i, (int)(k / o->count), k % o->count);
        }
        check(ok, "iallgather", round, i);
        break;
    case K_RSB: {
        int r;
        MPI_Comm_rank(comm, &r);
        for (size_t k = 0; ok && k < o->count; ++k) {
            int64_t want = 0;
            for (int s = 0; s < n; ++s) {
                want += value(round, i, s, (size_t)r * o->count + k);
            }
            ok = o->buf[k] == want;
        }
        for (size_t k = 0; ok && !o->inplace && k < o->count * (size_t)n; ++k) {
            ok = o->in[k] == value(round, i, r, k); /* the send buffer is left alone */
        }
        check(ok, o->inplace ? "ireduce_scatter_block in place" : "ireduce_scatter_block", round,
              i);
        break;
    }
    case K_ALLTOALL: {
        int r;
        MPI_Comm_rank(comm, &r);
        for (size_t k = 0; ok && k < o->count * (size_t)n; ++k) {
            ok = o->buf[k] == pair_value(round, i, (int)(k / o->count), r, k % o->count);
        }
        for (size_t k = 0; ok && !o->inplace && k < o->count * (size_t)n; ++k) {
            ok = o->in[k] == pair_value(round, i, r, (int)(k / o->count), k % o->count);
        }
        check(ok, o->inplace ? "ialltoall in place" : "ialltoall", round, i);
        break;
    }
    default:
        check(1, "ibarrier", round, i);
        break;
    }
}

/*
 * The block kinds at counts that matter to their splits (0, odd, primes, one more than a
 * power of two), each in place and not; 4 outstanding on comm at a time, waited for with
 * MPI_Waitall, checked. Rounds 500.. (value() tells them from the mixed rounds).
 */
static void block_kinds(op_t *ops, MPI_Comm comm)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 13, 97, 1000, 4099, 65537};
    const size_t nc = sizeof(counts) / sizeof(counts[0]);
    int round = 500;
    for (size_t c = 0; c < nc; ++c) {
        MPI_Request req[4];
        for (int i = 0; i < 4; ++i) {
            op_t *o = &ops[i];
            o->kind = i < 2 ? K_RSB : K_ALLTOALL;
            o->inplace = i & 1;
            o->count = counts[c];
            while (o->count * (size_t)size > MAXC) {
                o->count /= 2; /* the buffers hold MAXC elements per rank */
            }
            start(o, round, i, comm, &req[i]);
        }
        check(MPI_Waitall(4, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "MPI_Waitall (block kinds)",
              round, 0);
        for (int i = 0; i < 4; ++i) {
            verify(&ops[i], round, i, comm);
        }
        ++round;
    }
}

/*
 * --device: the five data kinds with stand-in device buffers at counts 1, 97, 4099 and 70001
 * (per rank for the block kinds), in place and not, with an ibarrier, all six outstanding
 * together. Where the buffers lie differs per rank and call (send on the device, receive on
 * the device, both, neither, rotating with the rank): in one call some ranks pass device and
 * others host buffers, as each rank's staging is its own. Rounds 800.. .
 */
static void device_kinds(op_t *ops, MPI_Comm comm)
{
    static const size_t counts[] = {1, 97, 4099, 70001};
    int round = 800;
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
        for (int inplace = 0; inplace < 2; ++inplace) {
            MPI_Request req[K_KINDS];
            for (int k = 0; k < K_KINDS; ++k) {
                op_t *o = &ops[k];
                o->kind = k;
                o->count = counts[c];
                o->root = (round + k) % size;
                o->inplace = inplace;
                o->place = (rank + k + (int)c + inplace) % 4;
                while (o->count * (size_t)size > MAXC) {
                    o->count /= 2;
                }
                start(o, round, k, comm, &req[k]);
            }
            check(MPI_Waitall(K_KINDS, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS,
                  "MPI_Waitall (device buffers)", round, 0);
            for (int k = 0; k < K_KINDS; ++k) {
                verify(&ops[k], round, k, comm);
            }
            ++round;
        }
    }
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int k = 0; k < *len; ++k) {
        ((int64_t *)inout)[k] += ((const int64_t *)in)[k];
    }
}

/*
 * What the blocking forms decline goes to the previous module per call, here too: on a
 * communicator of its own ("fallback", so run_nb.sh can count them apart) a user-defined op
 * for MPI_Ireduce_scatter_block and a derived datatype for MPI_Ialltoall, 2 of each
 * outstanding at once, beside 2 MPI_Ibarrier that dualrail serves; exact results.
 */
static void fallbacks(op_t *ops, MPI_Comm fb)
{
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT64_T, &pair);
    MPI_Type_commit(&pair);
    MPI_Op_create(user_sum, 1, &rsb_op);
    a2a_type = pair;
    a2a_per = 2;
    MPI_Request req[6];
    for (int i = 0; i < 6; ++i) {
        ops[i].kind = i % 3 == 0 ? K_RSB : i % 3 == 1 ? K_ALLTOALL : K_BARRIER;
        ops[i].count = i < 3 ? 1000 : 2;
        ops[i].inplace = 0;
        ops[i].place = 0; /* the previous module reads host memory only */
        start(&ops[i], 700, i, fb, &req[i]);
    }
    check(MPI_Waitall(6, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "MPI_Waitall (fallbacks)", 700,
          0);
    for (int i = 0; i < 6; ++i) {
        verify(&ops[i], 700, i, fb);
    }
    MPI_Op_free(&rsb_op);
    MPI_Type_free(&pair);
    rsb_op = MPI_SUM;
    a2a_type = MPI_INT64_T;
    a2a_per = 1;
}

/*
 * More than 1024 calls outstanding on one communicator. Every 1024th call of a kind drops
 * the messages held for calls of that kind 1024 or more behind it (a failed call's
 * leftovers); call 1024 dropped messages of call 0, still running here. The timing: rank 0
 * starts 200 ms late; the others start call 0 and poll it for 100 ms (MPI_Test), so that a
 * message of a later step arrives from another early rank and is held while call 0 waits
 * for rank 0 in an earlier one (recursive doubling: rank 0 folds into rank 1 on 3 ranks, is
 * rank 1's first partner on 4); then they start calls 1 .. 1099 without polling. Call 0 then waited for ever for the message call 1024 had dropped.
 * Call 1024 blocking (blocking = 1) or not. Needs 3 ranks or more.
 */
static void many_outstanding(int blocking)
{
    enum { kCalls = 1100 };
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int64_t *v = malloc(sizeof(int64_t) * kCalls);
    MPI_Request *r = malloc(sizeof(MPI_Request) * kCalls);
    if (v == NULL || r == NULL) {
        fprintf(stderr, "nb_check: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(c);
    const double t0 = MPI_Wtime();
    while (rank == 0 && MPI_Wtime() < t0 + 0.2) {
    }
    for (int i = 0; i < kCalls; ++i) {
        v[i] = rank + i;
        r[i] = MPI_REQUEST_NULL;
        if (i == 1024 && blocking) {
            check(MPI_Allreduce(MPI_IN_PLACE, &v[i], 1, MPI_INT64_T, MPI_SUM, c) == MPI_SUCCESS,
                  "blocking MPI_Allreduce among outstanding ones", 0, i);
        } else {
            MPI_Iallreduce(MPI_IN_PLACE, &v[i], 1, MPI_INT64_T, MPI_SUM, c, &r[i]);
        }
        int flag = 0;
        while (i == 0 && rank != 0 && MPI_Wtime() < t0 + 0.1) {
            MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE); /* polled: call 0 waits for rank 0 */
        }
    }
    int done = 0;
    for (const double end = MPI_Wtime() + 20; !done && MPI_Wtime() < end;) {
        MPI_Testall(kCalls, r, &done, MPI_STATUSES_IGNORE);
    }
    if (!done) {
        fprintf(stderr, "rank %d: %d MPI_Iallreduce calls outstanding on one communicator%s: "
                "not all complete after 20 s\n", rank, kCalls, blocking ? " (one blocking)" : "");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int ok = 1;
    for (int i = 0; i < kCalls; ++i) {
        ok = ok && v[i] == (int64_t)size * (size - 1) / 2 + (int64_t)size * i;
    }
    check(ok, blocking ? "1100 allreduces outstanding, one blocking" : "1100 allreduces outstanding",
          0, 0);
    free(v);
    free(r);
    MPI_Comm_free(&c);
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
    int provided, level = MPI_THREAD_SINGLE;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--multiple") == 0) {
            level = MPI_THREAD_MULTIPLE;
        }
    }
    MPI_Init_thread(&argc, &argv, level, &provided);
    if (provided < level) {
        fprintf(stderr, "nb_check: MPI_THREAD_MULTIPLE asked for, %d provided\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    MPI_Comm_set_name(rev, "reversed");
    MPI_Comm fb;
    MPI_Comm_dup(MPI_COMM_WORLD, &fb);
    MPI_Comm_set_name(fb, "fallback");
    op_t ops[NREQ];
    memset(ops, 0, sizeof(ops));
    for (int i = 0; i < NREQ; ++i) {
        ops[i].buf = malloc(sizeof(int64_t) * MAXC * (size_t)size);
        ops[i].in = malloc(sizeof(int64_t) * MAXC * (size_t)size);
    }
    static const size_t counts[] = {0, 1, 3, 1000, 8192, 70001, 300000};
    int64_t *blk = malloc(sizeof(int64_t) * 100000);
    int progress_thread = 0, any_order = 0, rounds = 24;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--progress-thread") == 0) {
            progress_thread = 1;
            rounds = 3;
        } else if (strcmp(argv[a], "--any-order") == 0) {
            any_order = 1;
        } else if (strcmp(argv[a], "--multiple") == 0) {
            continue; /* the thread level, above */
        } else if (strcmp(argv[a], "--device") == 0) {
            standin_open("nb_check");
            rounds = 6;
        } else {
            rounds = atoi(argv[a]);
        }
    }
    if (dev_mem == NULL && size >= 3) {
        many_outstanding(0);
        many_outstanding(1);
    }
    if (dev_mem != NULL) {
        device_kinds(ops, MPI_COMM_WORLD);
        device_kinds(ops, rev);
    } else {
        block_kinds(ops, MPI_COMM_WORLD);
        block_kinds(ops, rev);
    }
    unsigned turn[2] = {0, 0};
    for (int round = 0; round < rounds; ++round) {
        const int method = round % 4;
        MPI_Comm comm = round % 3 == 2 ? rev : MPI_COMM_WORLD;
        const int nreq = comm == rev ? 4 : NREQ;
        MPI_Request req[NREQ];
        for (int i = 0; i < nreq; ++i) {
            /* Kinds in turn per communicator (each kind on each, even in the 3 rounds of
             * --progress-thread; run_nb.sh counts every kind on both); the rest drawn. */
            ops[i].kind = (int)(turn[comm == rev]++ % K_KINDS);
            ops[i].count = counts[draw() % 7];
            ops[i].root = (int)(draw() % (uint64_t)size);
            ops[i].inplace = (int)(draw() % 2);
            ops[i].place = (int)(draw() % 4); /* --device only */
            /* the per-rank block kinds: n blocks must fit the buffers' MAXC per rank */
            const int per_rank =
                ops[i].kind == K_ALLGATHER || ops[i].kind == K_RSB || ops[i].kind == K_ALLTOALL;
            while (per_rank && ops[i].count * (size_t)size > MAXC) {
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
            for (int i = 0; !any_order && i < nreq - 1; ++i) {
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
    fallbacks(ops, fb);
    /*
     * Cancel and free of a running collective are refused; it still completes. "Running" must
     * be certain where the free is tried: the ranks start one after another (a token passed
     * point to point), and each one but the last tries the free before handing the token on,
     * so the rank that has not started yet holds the allreduce back. The last rank starts
     * it everywhere, and a progress thread may finish it before that rank's free (a free that
     * succeeds there would release the request under the MPI_Wait below), so the last one
     * tries the cancel only.
     */
    {
        op_t *o = &ops[0];
        o->kind = K_ALLREDUCE;
        o->count = MAXC;
        o->inplace = 0;
        MPI_Request req;
        int token = 0;
        if (rank > 0) {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        start(o, 999, 0, MPI_COMM_WORLD, &req);
        const int rc = MPI_Cancel(&req);
        check(rc != MPI_SUCCESS, "MPI_Cancel refused", 999, 0);
        if (rank < size - 1) {
            MPI_Request keep = req;
            const int rf = MPI_Request_free(&keep);
            check(rf != MPI_SUCCESS && keep != MPI_REQUEST_NULL,
                  "MPI_Request_free refused while running", 999, 0);
            MPI_Send(&token, 1, MPI_INT, rank + 1, 999, MPI_COMM_WORLD);
        }
        MPI_Status st;
        check(MPI_Wait(&req, &st) == MPI_SUCCESS, "MPI_Wait after MPI_Cancel", 999, 0);
        int cancelled = 1;
        MPI_Test_cancelled(&st, &cancelled);
        check(!cancelled, "not cancelled", 999, 0);
        verify(o, 999, 0, MPI_COMM_WORLD);
    }
    if (progress_thread) {
        op_t *o = &ops[0];
        o->kind = K_ALLREDUCE;
        o->count = MAXC; /* 2.4 MB */
        o->inplace = 0;
        o->place = 3; /* --device: the result goes to the device from the progress thread */
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
    MPI_Comm_free(&fb);
    standin_close();
    pthread_cancel(dog);
    MPI_Finalize();
    return rank == 0 && all[1] != 0 ? 1 : 0;
}
