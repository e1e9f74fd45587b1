/*
 * Collectives from several threads at once under MPI_THREAD_MULTIPLE, each
 * thread on its own communicator (MPI forbids concurrent collectives on one),
 * through coll/dualrail.
 *
 *   thread_check [--threads T] [--seconds S] [--iters N] [--opposite]
 *
 * T threads (2..4, default 3), thread i on communicator "thread<i>" (a dup of
 * MPI_COMM_WORLD for even i, the world's ranks reversed for odd i). Each runs
 * random MPI_Allreduce (sum of int64, max of double), MPI_Bcast (random root),
 * MPI_Allgather and MPI_Barrier with random counts (0 .. 600000 elements),
 * drawn from a generator seeded by the communicator, so every rank draws the
 * same sequence; every result is checked element by element against values
 * computed without MPI. Bounded: at most N collectives per thread (default
 * 400), and every 16 calls the thread's ranks agree (MPI_Allreduce MAX on its
 * communicator) to stop once S seconds (default 20) have passed on any rank.
 *
 * --opposite: two threads, and the ranks enter them in opposite orders: even
 * world ranks start communicator thread0 first and thread1 only once thread0
 * is inside its first collective (+ 50 ms), odd ranks the reverse; each then
 * runs eight 4 MiB allreduces. A lock held around whole collectives anywhere
 * in the process would deadlock this (tests/unit/test_mr_threads.cc shows it);
 * a watchdog thread fails the run after 120 s instead of hanging.
 *
 * Prints "N passed, M failed" (rank 0, summed over ranks and threads) and
 * exits non-zero on any failure.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 4

typedef struct {
    int index;
    MPI_Comm comm;
    long passed, failed, calls;
    volatile int inside; /* --opposite: this thread entered its first collective */
} thread_t;

static int g_threads = 3, g_iters = 400, g_opposite = 0;
static double g_seconds = 20;
static int g_world_rank, g_world_size;
static thread_t g_t[MAX_THREADS];

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64: the same sequence on every rank for the same seed */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Rank r's element i of call number it on communicator c: exact in a double too. */
static int64_t value(int c, long it, int r, size_t i)
{
    return (int64_t)(((uint64_t)(c + 1) << 40) + ((uint64_t)(it & 0xfff) << 28) +
                     ((uint64_t)(r + 1) << 20) + (i & 0xfffff));
}

static void check(thread_t *t, int ok, const char *what, long it, size_t count)
{
    if (ok) {
        ++t->passed;
    } else {
        ++t->failed;
        fprintf(stderr, "rank %d thread %d: %s call %ld (count %zu) wrong\n", g_world_rank,
                t->index, what, it, count);
    }
}

static void *watchdog(void *arg)
{
    (void)arg;
    sleep(120);
    fprintf(stderr, "rank %d: thread_check still running after 120 s: deadlock\n", g_world_rank);
    MPI_Abort(MPI_COMM_WORLD, 3);
    return NULL;
}

static void *run(void *arg)
{
    thread_t *t = arg;
    int rank, size;
    MPI_Comm_rank(t->comm, &rank);
    MPI_Comm_size(t->comm, &size);
    static const size_t counts[] = {0, 1, 2, 7, 1000, 8193, 65536, 131072, 600000};
    const size_t ncounts = sizeof(counts) / sizeof(counts[0]);
    uint64_t seed = 77 + (uint64_t)t->index;
    const double start = MPI_Wtime();
    const size_t maxc = g_opposite ? (4u << 20) / 8 : 600000;
    int64_t *a = malloc(sizeof(int64_t) * maxc * (size_t)size);
    int64_t *b = malloc(sizeof(int64_t) * maxc * (size_t)size);
    double *d = malloc(sizeof(double) * maxc);
    if (a == NULL || b == NULL || d == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", g_world_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (g_opposite) {
        const int first = (g_world_rank % 2 == 0) == (t->index == 0);
        if (!first) {
            thread_t *other = &g_t[1 - t->index];
            for (int i = 0; i < 5000 && !other->inside; ++i) {
                usleep(1000);
            }
            usleep(50000);
        }
    }
    const int iters = g_opposite ? 8 : g_iters;
    for (long it = 0; it < iters; ++it) {
        if (!g_opposite && it % 16 == 15) {
            /* Stop together: a rank alone stopping would leave the others waiting. */
            int late = MPI_Wtime() - start > g_seconds, any = 0;
            MPI_Allreduce(&late, &any, 1, MPI_INT, MPI_MAX, t->comm);
            ++t->calls;
            if (any) {
                break;
            }
        }
        const int kind = g_opposite ? 0 : (int)(rng_next(&seed) % 5);
        const size_t count = g_opposite ? maxc : counts[rng_next(&seed) % ncounts];
        const int root = (int)(rng_next(&seed) % (uint64_t)size);
        const int icount = (int)count;
        t->inside = 1;
        int ok = 1;
        switch (kind) {
        case 0: /* allreduce, int64 sum, in place every other call */
            for (size_t i = 0; i < count; ++i) {
                a[i] = value(t->index, it, rank, i);
            }
            if (it % 2) {
                MPI_Allreduce(MPI_IN_PLACE, a, icount, MPI_INT64_T, MPI_SUM, t->comm);
                memcpy(b, a, count * 8);
            } else {
                MPI_Allreduce(a, b, icount, MPI_INT64_T, MPI_SUM, t->comm);
            }
            for (size_t i = 0; ok && i < count; ++i) {
                int64_t want = 0;
                for (int r = 0; r < size; ++r) {
                    want += value(t->index, it, r, i);
                }
                ok = b[i] == want;
            }
            check(t, ok, "allreduce", it, count);
            break;
        case 1: /* allreduce, double max */
            for (size_t i = 0; i < count; ++i) {
                d[i] = (double)value(t->index, it, (rank + (int)i) % size, i);
            }
            MPI_Allreduce(MPI_IN_PLACE, d, icount, MPI_DOUBLE, MPI_MAX, t->comm);
            for (size_t i = 0; ok && i < count; ++i) {
                double want = 0;
                for (int r = 0; r < size; ++r) {
                    double v = (double)value(t->index, it, r, i);
                    want = v > want ? v : want;
                }
                ok = d[i] == want;
            }
            check(t, ok, "allreduce max", it, count);
            break;
        case 2: /* bcast from a random root */
            for (size_t i = 0; i < count; ++i) {
                a[i] = rank == root ? value(t->index, it, root, i) : -1;
            }
            MPI_Bcast(a, icount, MPI_INT64_T, root, t->comm);
            for (size_t i = 0; ok && i < count; ++i) {
                ok = a[i] == value(t->index, it, root, i);
            }
            check(t, ok, "bcast", it, count);
            break;
        case 3: { /* allgather of count / size elements per rank */
            const size_t per = count / (size_t)size;
            for (size_t i = 0; i < per; ++i) {
                a[i] = value(t->index, it, rank, i);
            }
            MPI_Allgather(a, (int)per, MPI_INT64_T, b, (int)per, MPI_INT64_T, t->comm);
            for (size_t i = 0; ok && i < per * (size_t)size; ++i) {
                ok = b[i] == value(t->index, it, (int)(i / per), i % per);
            }
            check(t, ok, "allgather", it, per);
            break;
        }
        default:
            MPI_Barrier(t->comm);
            check(t, 1, "barrier", it, 0);
            break;
        }
        ++t->calls;
    }
    free(a);
    free(b);
    free(d);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            g_threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            g_seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            g_iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--opposite") == 0) {
            g_opposite = 1;
        } else {
            fprintf(stderr, "thread_check: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (g_opposite) {
        g_threads = 2;
    }
    if (g_threads < 1 || g_threads > MAX_THREADS) {
        fprintf(stderr, "thread_check: --threads 1..%d\n", MAX_THREADS);
        return 2;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "rank %d: MPI_THREAD_MULTIPLE not provided (%d)\n", g_world_rank, provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    for (int i = 0; i < g_threads; ++i) {
        g_t[i].index = i;
        if (i % 2 == 0) {
            MPI_Comm_dup(MPI_COMM_WORLD, &g_t[i].comm);
        } else {
            MPI_Comm_split(MPI_COMM_WORLD, 0, g_world_size - g_world_rank, &g_t[i].comm);
        }
        char name[32];
        snprintf(name, sizeof(name), "thread%d", i);
        MPI_Comm_set_name(g_t[i].comm, name);
    }
    const double t0 = MPI_Wtime();
    pthread_t th[MAX_THREADS];
    for (int i = 0; i < g_threads; ++i) {
        pthread_create(&th[i], NULL, run, &g_t[i]);
    }
    long mine[3] = {0, 0, 0}, all[3];
    for (int i = 0; i < g_threads; ++i) {
        pthread_join(th[i], NULL);
        mine[0] += g_t[i].passed;
        mine[1] += g_t[i].failed;
        mine[2] += g_t[i].calls;
    }
    const double secs = MPI_Wtime() - t0;
    MPI_Reduce(mine, all, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    for (int i = 0; i < g_threads; ++i) {
        MPI_Comm_free(&g_t[i].comm);
    }
    if (g_world_rank == 0) {
        printf("%d ranks x %d threads: %ld collectives in %.1f s\n", g_world_size, g_threads,
               all[2], secs);
        printf("%ld passed, %ld failed\n", all[0], all[1]);
    }
    pthread_cancel(dog);
    MPI_Finalize();
    return g_world_rank == 0 && all[1] != 0 ? 1 : 0;
}
