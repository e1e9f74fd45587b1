/*
 * Validated MPI_Allreduce in a loop, for a bounded time, while the lab's planes
 * fail under it (tests/failover/run_failover.sh injects the faults).
 *
 * Plain MPI: coll/dualrail is chosen by MCA parameters, this program does not
 * know it. Data are integers (MPI_INT, MPI_SUM): rank r's element i in
 * iteration k is a(i,k) + r*b(i,k), so every rank knows the exact sum
 * n*a + b*n(n-1)/2 and checks every element of every result. Inputs change
 * every iteration (a stale result from an earlier call fails the check), the
 * receive buffer is poisoned before each call, odd iterations run in place,
 * and the send buffer of the others is checked to be left untouched.
 *
 * --coll bcast|allgather loops that collective instead (issue 13), validated
 * the same way: MPI_Bcast from root k mod n of rank root's values;
 * MPI_Allgather of count/n elements per rank, odd iterations in place;
 * --coll alltoall|alltoallv (issue 14): MPI_Alltoall of count/n elements per
 * pair; MPI_Alltoallv with per-pair counts that change every iteration (0,
 * 1/2, 1 or 3/2 of count/n, one destination taking twice that); the element
 * from rank s to rank d also depends on d, so a block delivered to the wrong
 * place fails the check; odd iterations in place (alltoallv: symmetric
 * counts, as MPI_IN_PLACE needs).
 * --coll reduce|reduce_scatter_block: MPI_Reduce (MPI_SUM) to root k mod n,
 * checked there, in place at the root in odd iterations; MPI_Reduce_scatter_block
 * of count/n elements per rank, odd iterations in place.
 * --coll gather|scatter|allgatherv: MPI_Gather / MPI_Scatter of count/n elements
 * per rank with root k mod n, in place at the root in odd iterations;
 * MPI_Allgatherv of unequal blocks that change every iteration (one empty, each
 * followed by an int that must stay untouched), odd iterations in place.
 * --coll iallreduce runs the allreduce as MPI_Iallreduce + MPI_Wait (issue 15):
 * the same checks, an error comes from MPI_Wait (the request's status);
 * --coll ialltoall and --coll ireduce_scatter_block the same for the alltoall
 * and reduce_scatter_block loops (MPI_Ialltoall, MPI_Ireduce_scatter_block).
 *
 * After each call every rank reports its verdict to rank 0 and gets everyone's
 * back by point-to-point messages (pml ob1 on the management network, never
 * a collective: coll/dualrail runs allgather, bcast and barrier too, and the
 * verdicts must not travel on the planes under test) together with rank 0's
 * stop decision, so all ranks make the same number of calls and leave the
 * loop together, also when some of them got an error.
 *
 *   failover_loop [--size small|whole|large | --bytes N[,N...]] [--seconds S]
 *                 [--max-iters N] [--errors-return] [--mem-after S]
 *                 [--mem-trace S] [--after-error N] [--timeline] [--device]
 *                 [--coll allreduce|iallreduce|bcast|allgather|allgatherv|alltoall|
 *                  alltoallv|reduce|reduce_scatter_block|gather|scatter|ialltoall|
 *                  ireduce_scatter_block]
 *                 [--weights]
 *
 *   --size small    8 KiB and 32 KiB alternately: recursive doubling (below
 *                   coll_dualrail_allreduce_rd_max_bytes, 64 KiB), one whole
 *                   message on one plane and one striped over both
 *   --size whole    8, 1000 and 1952 bytes in turn: recursive doubling's messages
 *                   whole, as ucx_mr's flat sends (the copy a plane loss re-sends
 *                   in the ring's slot, or in a block past 256 bytes)
 *   --size large    4 MiB and 3000004 bytes alternately: the ring (the odd
 *                   count gives uneven blocks)
 *   --bytes LIST    the sizes to cycle through (multiples of 4)
 *   --seconds S     loop length (default 10), measured by rank 0
 *   --max-iters N   hard bound on the iteration count (default 1000000)
 *   --errors-return MPI_ERRORS_RETURN on MPI_COMM_WORLD: the first error is
 *                   reported (class, MPI_Error_string, time) and every rank
 *                   leaves the loop
 *   --mem-after S   sample VmRSS S seconds into the loop (default 1) and at
 *                   the end; rank 0 prints every rank's growth
 *   --mem-trace S   every rank prints its VmRSS every S seconds
 *   --after-error N with --errors-return: when the loop stopped on an MPI error,
 *                   every rank still makes N more validated allreduces (8 KiB;
 *                   with --coll alltoall|alltoallv: that collective, 8 KiB per rank),
 *                   as an application that carries on would; coll/dualrail
 *                   promises that they run (on the previous module) or fail,
 *                   never hang. Each rank prints one line per call
 *   --timeline      rank 0 prints one line per iteration (epoch time, duration)
 *   --weights       every rank prints, after each call, the share of each
 *                   message each plane carries toward the next rank (the
 *                   ring's downstream neighbour), read through MPI_T
 *                   (coll_dualrail_link_weight)
 *   --device        the loop's buffers are "device" memory of the host stand-in
 *                   for a GPU (mpi_coll/gpu/dr_gpu.h; run with
 *                   coll_dualrail_gpu_standin 1): failover on the component's
 *                   device path, without a GPU
 *
 * Output (rank 0 unless noted), for the driver:
 *   failover_loop: start EPOCH ...                    when the loop starts
 *   failover_loop: rank R: MPI error ...              each rank that got one
 *   failover_loop: weights rank R call K EPOCH S0 S1  with --weights, each rank
 *   failover_loop: rank R: WRONG RESULT ...           each rank that saw one
 *   failover_loop: memory rank R: ...                 with --mem-after
 *   failover_loop: ... iterations ..., every result exact
 *   failover_loop: rank R exits C                     each rank, at the end
 *
 * Exit status: 0 every result exact; 1 a wrong result (on any rank);
 * 2 bad arguments; 3 this rank's MPI_Allreduce returned an error;
 * 4 another rank's did (this one saw none).
 */
#include <dirent.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "failover_loop.h"
#include "gpu/dr_gpu.h"

enum { EXIT_OK = 0, EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_MPI_ERROR = 3, EXIT_PEER_ERROR = 4 };
#define MAX_SIZES       8
#define MAX_MEM_SAMPLES 2

int rank, nranks;
static const dr_mem_ops_t *dev_mem; /* --device: the stand-in; NULL: host buffers */
static void *dev_stream, *dev_in, *dev_out;

/* --device: host <-> stand-in device copies around each call (outside the timed part). */
static void dev_copy(void *dst, const void *src, size_t bytes)
{
    if (dev_mem->copy_async(dst, src, bytes, dev_stream) != DR_OK ||
        dev_mem->stream_sync(dev_stream) != DR_OK) {
        fprintf(stderr, "failover_loop: rank %d: stand-in copy: %s\n", rank, dev_mem->last_error());
        MPI_Abort(MPI_COMM_WORLD, EXIT_USAGE);
    }
}

double epoch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* VmRSS and VmHWM of this process in kB (0 when unreadable). */
static void read_mem(long *rss_kb, long *hwm_kb)
{
    *rss_kb = *hwm_kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return;
    }
    char line[256];
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            *rss_kb = strtol(line + 6, NULL, 10);
        } else if (strncmp(line, "VmHWM:", 6) == 0) {
            *hwm_kb = strtol(line + 6, NULL, 10);
        }
    }
    fclose(f);
}

/* Open file descriptors of this process (sockets included); -1 when unreadable. */
static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        return -1;
    }
    long n = 0;
    while (readdir(d) != NULL) {
        ++n;
    }
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

const char *class_name(int cls)
{
    switch (cls) {
    case MPI_ERR_OTHER:
        return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN:
        return "MPI_ERR_INTERN";
    case MPI_ERR_NO_MEM:
        return "MPI_ERR_NO_MEM";
    case MPI_ERR_TRUNCATE:
        return "MPI_ERR_TRUNCATE";
    default:
        return "another class";
    }
}

int coll = COLL_ALLREDUCE;
static const char *coll_name = "allreduce";
const char *coll_mpi = "MPI_Allreduce";
int nonblocking = 0;

int waited(int rc, MPI_Request *req)
{
    return rc == MPI_SUCCESS ? MPI_Wait(req, MPI_STATUS_IGNORE) : rc;
}

/* Every rank's n ints to every rank, by point-to-point messages through rank 0 (see the
 * header: never a collective). */
/* The loop's allreduce, blocking or (--coll iallreduce) started and waited for: an error
 * then comes from MPI_Wait, through the request's status. */
static int allreduce_call(const void *send, void *recv, size_t count)
{
    if (!nonblocking) {
        return MPI_Allreduce(send, recv, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Request req;
    return waited(MPI_Iallreduce(send, recv, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req),
                  &req);
}

static void p2p_allgather_ints(const int *mine, int n, int *all)
{
    if (rank == 0) {
        memcpy(all, mine, sizeof(int) * (size_t)n);
        for (int r = 1; r < nranks; ++r) {
            MPI_Recv(all + (size_t)r * (size_t)n, n, MPI_INT, r, 911, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        }
        for (int r = 1; r < nranks; ++r) {
            MPI_Send(all, n * nranks, MPI_INT, r, 912, MPI_COMM_WORLD);
        }
    } else {
        MPI_Send(mine, n, MPI_INT, 0, 911, MPI_COMM_WORLD);
        MPI_Recv(all, n * nranks, MPI_INT, 0, 912, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

static void usage(void)
{
    if (rank == 0) {
        fprintf(stderr,
                "usage: failover_loop [--size small|whole|large | --bytes N[,N...]] "
                "[--seconds S] [--max-iters N] [--errors-return] [--mem-after S] [--mem-trace S] "
                "[--after-error N] [--timeline] [--device] "
                "[--coll allreduce|iallreduce|bcast|allgather|allgatherv|alltoall|alltoallv|"
                "reduce|reduce_scatter_block|gather|scatter|ialltoall|ireduce_scatter_block]\n");
    }
}

static int parse_sizes(const char *s, size_t *sizes, int *n)
{
    *n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        unsigned long long v = strtoull(t, &end, 10);
        if (end == t || *end != '\0' || v == 0 || v % sizeof(int) != 0 || v > (1ull << 30) ||
            *n == MAX_SIZES) {
            free(copy);
            return -1;
        }
        sizes[(*n)++] = (size_t)v;
    }
    free(copy);
    return *n > 0 ? 0 : -1;
}

/* The striping weights through MPI_T: coll_dualrail_link_weight holds world size x planes
 * shares, [rank * planes + plane]. */
typedef struct weights {
    int ok;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle;
    int count;
    double v[256];
} weights_t;

static void weights_open(weights_t *w)
{
    int provided, num, idx = -1;
    memset(w, 0, sizeof(*w));
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num && idx < 0; ++i) {
        char name[256], desc[256];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, desc, &dlen, &bind, &ro, &cont,
                            &atomic);
        if (strcmp(name, "coll_dualrail_link_weight") == 0 && dt == MPI_DOUBLE) {
            idx = i;
        }
    }
    if (idx >= 0 && MPI_T_pvar_session_create(&w->session) == MPI_SUCCESS &&
        MPI_T_pvar_handle_alloc(w->session, idx, NULL, &w->handle, &w->count) == MPI_SUCCESS &&
        w->count >= 2 * nranks && w->count <= 256) {
        w->ok = 1;
    } else {
        printf("failover_loop: rank %d: no MPI_T variable coll_dualrail_link_weight\n", rank);
    }
}

static void weights_print(weights_t *w, unsigned k, double at)
{
    if (!w->ok || MPI_T_pvar_read(w->session, w->handle, w->v) != MPI_SUCCESS) {
        return;
    }
    const int planes = w->count / nranks, next = (rank + 1) % nranks;
    printf("failover_loop: weights rank %d call %u %.6f %.3f %.3f\n", rank, k, at,
           w->v[next * planes], w->v[next * planes + 1]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    size_t sizes[MAX_SIZES] = {8192, 32768};
    int nsizes = 2;
    double seconds = 10, mem_after = 1, mem_trace = 0;
    int after_error = 0;
    long max_iters = 1000000;
    int errors_return = 0, timeline = 0, weights = 0;
    const char *size_name = "small";
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--size") == 0 && v != NULL) {
            size_name = v;
            if (strcmp(v, "small") == 0) {
                bad = parse_sizes("8192,32768", sizes, &nsizes);
            } else if (strcmp(v, "whole") == 0) {
                bad = parse_sizes("8,1000,1952", sizes, &nsizes);
            } else if (strcmp(v, "large") == 0) {
                bad = parse_sizes("4194304,3000004", sizes, &nsizes);
            } else {
                bad = 1;
            }
            ++i;
        } else if (strcmp(a, "--bytes") == 0 && v != NULL) {
            size_name = "custom";
            bad = parse_sizes(v, sizes, &nsizes);
            ++i;
        } else if (strcmp(a, "--seconds") == 0 && v != NULL) {
            seconds = atof(v);
            bad = !(seconds > 0 && seconds <= 3600);
            ++i;
        } else if (strcmp(a, "--max-iters") == 0 && v != NULL) {
            max_iters = atol(v);
            bad = max_iters < 1;
            ++i;
        } else if (strcmp(a, "--mem-after") == 0 && v != NULL) {
            mem_after = atof(v);
            bad = !(mem_after >= 0);
            ++i;
        } else if (strcmp(a, "--mem-trace") == 0 && v != NULL) {
            mem_trace = atof(v);
            bad = !(mem_trace > 0);
            ++i;
        } else if (strcmp(a, "--after-error") == 0 && v != NULL) {
            after_error = atoi(v);
            bad = after_error < 0 || after_error > 100;
            ++i;
        } else if (strcmp(a, "--errors-return") == 0) {
            errors_return = 1;
        } else if (strcmp(a, "--timeline") == 0) {
            timeline = 1;
        } else if (strcmp(a, "--coll") == 0 && v != NULL) {
            ++i;
            if (strcmp(v, "bcast") == 0) {
                coll = COLL_BCAST, coll_name = "bcast", coll_mpi = "MPI_Bcast";
            } else if (strcmp(v, "allgather") == 0) {
                coll = COLL_ALLGATHER, coll_name = "allgather", coll_mpi = "MPI_Allgather";
            } else if (strcmp(v, "allgatherv") == 0) {
                coll = COLL_ALLGATHERV, coll_name = "allgatherv", coll_mpi = "MPI_Allgatherv";
            } else if (strcmp(v, "gather") == 0) {
                coll = COLL_GATHER, coll_name = "gather", coll_mpi = "MPI_Gather";
            } else if (strcmp(v, "scatter") == 0) {
                coll = COLL_SCATTER, coll_name = "scatter", coll_mpi = "MPI_Scatter";
            } else if (strcmp(v, "alltoall") == 0) {
                coll = COLL_ALLTOALL, coll_name = "alltoall", coll_mpi = "MPI_Alltoall";
            } else if (strcmp(v, "alltoallv") == 0) {
                coll = COLL_ALLTOALLV, coll_name = "alltoallv", coll_mpi = "MPI_Alltoallv";
            } else if (strcmp(v, "reduce") == 0) {
                coll = COLL_REDUCE, coll_name = "reduce", coll_mpi = "MPI_Reduce";
            } else if (strcmp(v, "reduce_scatter_block") == 0) {
                coll = COLL_REDUCE_SCATTER_BLOCK, coll_name = "reduce_scatter_block",
                coll_mpi = "MPI_Reduce_scatter_block";
            } else if (strcmp(v, "iallreduce") == 0) {
                nonblocking = 1, coll_name = "iallreduce", coll_mpi = "MPI_Iallreduce";
            } else if (strcmp(v, "ialltoall") == 0) {
                coll = COLL_ALLTOALL, nonblocking = 1, coll_name = "ialltoall",
                coll_mpi = "MPI_Ialltoall";
            } else if (strcmp(v, "ireduce_scatter_block") == 0) {
                coll = COLL_REDUCE_SCATTER_BLOCK, nonblocking = 1,
                coll_name = "ireduce_scatter_block", coll_mpi = "MPI_Ireduce_scatter_block";
            } else if (strcmp(v, "allreduce") != 0) {
                bad = 1;
            }
        } else if (strcmp(a, "--weights") == 0) {
            weights = 1;
        } else if (strcmp(a, "--device") == 0) {
            dev_mem = dr_mem_standin();
        } else {
            bad = 1;
        }
        if (bad) {
            usage();
            MPI_Finalize();
            return EXIT_USAGE;
        }
    }
    if (errors_return) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }

    size_t max_bytes = 0;
    for (int s = 0; s < nsizes; ++s) {
        max_bytes = sizes[s] > max_bytes ? sizes[s] : max_bytes;
    }
    /* alltoallv's skewed counts: a rank may receive up to twice the average */
    const size_t buf_bytes = coll == COLL_ALLTOALLV ? 2 * max_bytes : max_bytes;
    int *in = malloc(buf_bytes), *out = malloc(buf_bytes);
    if (in == NULL || out == NULL) {
        fprintf(stderr, "failover_loop: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, EXIT_USAGE);
    }
    if (dev_mem != NULL && (dev_mem->stream_create(&dev_stream) != DR_OK ||
                            dev_mem->device_alloc(&dev_in, max_bytes) != DR_OK ||
                            dev_mem->device_alloc(&dev_out, max_bytes) != DR_OK)) {
        fprintf(stderr, "failover_loop: rank %d: stand-in set-up: %s\n", rank,
                dev_mem->last_error());
        MPI_Abort(MPI_COMM_WORLD, EXIT_USAGE);
    }
    const int tri = nranks * (nranks - 1) / 2;
    weights_t w;
    if (weights) {
        weights_open(&w);
    }

    const int a2a = coll == COLL_ALLTOALL || coll == COLL_ALLTOALLV;
    if (coll != COLL_ALLREDUCE && (dev_mem != NULL || (after_error > 0 && !a2a))) {
        usage(); /* device buffers: the allreduce loop only; carrying on after an error:
                  * allreduce and the all-to-alls */
        MPI_Finalize();
        return EXIT_USAGE;
    }
    /* Everyone starts together; rank 0's clock decides when to stop. */
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = epoch_now();
    if (rank == 0) {
        printf("failover_loop: start %.6f: %d ranks, size %s (", t0, nranks, size_name);
        for (int s = 0; s < nsizes; ++s) {
            printf("%s%zu", s ? "," : "", sizes[s]);
        }
        printf(" bytes), %.1f s, %s\n", seconds,
               errors_return ? "MPI_ERRORS_RETURN" : "MPI_ERRORS_ARE_FATAL");
        fflush(stdout);
    }

    long rss0 = 0, hwm0 = 0, rss1 = 0, hwm1 = 0, fds0 = 0, fds1 = 0;
    double rss0_at = -1, traced_at = 0;
    long iters = 0, per_size[MAX_SIZES] = {0};
    double slowest = 0, slowest_at = 0, total_call = 0;
    long slowest_iter = -1;
    int my_status = ST_OK, any_error = 0, any_wrong = 0;
    int *verdicts = malloc(sizeof(int) * 2 * (size_t)nranks);

    for (unsigned k = 0; iters < max_iters; ++k) {
        const int si = (int)(k % (unsigned)nsizes);
        double c0 = 0, c1 = 0;
        if (coll != COLL_ALLREDUCE) {
            const size_t count =
                a2a ? a2a_call(k, sizes[si] / sizeof(int), in, out, t0, &c0, &c1)
                    : other_call(k, sizes[si] / sizeof(int), in, out, t0, &c0, &c1);
            if (timeline && rank == 0) {
                printf("failover_loop: iter %u %.6f %.6f %zu\n", k, c0, c1 - c0,
                       count * sizeof(int));
            }
            total_call += c1 - c0;
            if (c1 - c0 > slowest) {
                slowest = c1 - c0;
                slowest_at = c0 - t0;
                slowest_iter = (long)k;
            }
            if (my_status == ST_OK) {
                my_status = other_status;
            }
            goto verdict;
        }
        const size_t count = sizes[si] / sizeof(int);
        const int in_place = k & 1;
        int *dst = out;
        if (in_place) {
            for (size_t i = 0; i < count; ++i) {
                out[i] = val_a(i, k) + rank * val_b(i, k);
            }
        } else {
            for (size_t i = 0; i < count; ++i) {
                in[i] = val_a(i, k) + rank * val_b(i, k);
            }
            memset(out, 0xa5, count * sizeof(int));
        }
        const void *send = in_place ? MPI_IN_PLACE : in;
        void *recv = dst;
        if (dev_mem != NULL) {
            dev_copy(dev_out, out, count * sizeof(int));
            if (!in_place) {
                dev_copy(dev_in, in, count * sizeof(int));
                send = dev_in;
            }
            recv = dev_out;
        }
        c0 = epoch_now();
        int rc = allreduce_call(send, recv, count);
        c1 = epoch_now();
        if (dev_mem != NULL) {
            dev_copy(out, dev_out, count * sizeof(int));
            if (!in_place) {
                dev_copy(in, dev_in, count * sizeof(int)); /* the send buffer is checked too */
            }
        }
        total_call += c1 - c0;
        if (c1 - c0 > slowest) {
            slowest = c1 - c0;
            slowest_at = c0 - t0;
            slowest_iter = (long)k;
        }
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0, cls = 0;
            MPI_Error_class(rc, &cls);
            MPI_Error_string(rc, msg, &len);
            printf("failover_loop: rank %d: MPI error in %s #%u (%zu bytes) after "
                   "%.3f s in the call, %.3f s into the loop (epoch %.6f): error class %d (%s), "
                   "code %d: %s\n",
                   rank, coll_mpi, k, count * sizeof(int), c1 - c0, c1 - t0, c1, cls,
                   class_name(cls), rc, msg);
            fflush(stdout);
            my_status = ST_MPI_ERROR;
        } else {
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < count; ++i) {
                const int want = nranks * val_a(i, k) + tri * val_b(i, k);
                if (dst[i] != want) {
                    if (wrong++ == 0) {
                        first = i;
                    }
                }
            }
            size_t src_changed = 0;
            for (size_t i = 0; !in_place && i < count; ++i) {
                src_changed += in[i] != val_a(i, k) + rank * val_b(i, k);
            }
            if (wrong != 0 || src_changed != 0) {
                printf("failover_loop: rank %d: WRONG RESULT in MPI_Allreduce #%u (%zu bytes%s), "
                       "%.3f s into the loop: %zu of %zu elements wrong, first [%zu] = %d, "
                       "expected %d; send buffer elements changed: %zu\n",
                       rank, k, count * sizeof(int), in_place ? ", in place" : "", c1 - t0, wrong,
                       count, first, dst[first], nranks * val_a(first, k) + tri * val_b(first, k),
                       src_changed);
                fflush(stdout);
                my_status = ST_WRONG;
            }
        }
        if (weights) {
            weights_print(&w, k, c1);
        }
        if (timeline && rank == 0) {
            printf("failover_loop: iter %u %.6f %.6f %zu\n", k, c0, c1 - c0, count * sizeof(int));
        }
    verdict:
        ++iters;
        ++per_size[si];
        if (rss0_at < 0 && c1 - t0 >= mem_after) {
            read_mem(&rss0, &hwm0);
            fds0 = count_fds();
            rss0_at = c1 - t0;
        }
        if (mem_trace > 0 && c1 - t0 >= traced_at + mem_trace) {
            long rss, hwm;
            read_mem(&rss, &hwm);
            traced_at = c1 - t0;
            printf("failover_loop: rank %d: VmRSS %ld kB, %ld fds at %.1f s after %ld calls\n",
                   rank, rss, count_fds(), traced_at, iters);
            fflush(stdout);
        }
        /* Verdicts and the stop decision through a stock collective (management network). */
        int mine[2] = {my_status, rank == 0 && epoch_now() - t0 >= seconds};
        p2p_allgather_ints(mine, 2, verdicts);
        for (int r = 0; r < nranks; ++r) {
            any_error |= verdicts[2 * r] == ST_MPI_ERROR;
            any_wrong |= verdicts[2 * r] == ST_WRONG;
        }
        if (any_error || any_wrong || verdicts[1]) {
            break;
        }
    }
    /* Carry on after an error: no stock collective in between, as a plain application. */
    int after_wrong = 0;
    for (int j = 0; errors_return && any_error && j < after_error; ++j) {
        const size_t count = 2048;
        const unsigned k = 0x40000u + (unsigned)j;
        if (a2a) {
            /* the same validated all-to-all, 8 KiB per rank (odd calls in place) */
            double c0 = 0, c1 = 0;
            a2a_quiet = 1;
            a2a_call(k, count, in, out, t0, &c0, &c1);
            a2a_quiet = 0;
            printf("failover_loop: rank %d: after the error, %s %d of %d: %s%s (%.3f s)\n", rank,
                   coll_mpi, j + 1, after_error,
                   other_status == ST_MPI_ERROR ? "MPI error: "
                   : other_status == ST_WRONG   ? "WRONG RESULT"
                                                : "exact",
                   a2a_msg, c1 - c0);
            fflush(stdout);
            after_wrong |= other_status == ST_WRONG;
            continue;
        }
        for (size_t i = 0; i < count; ++i) {
            in[i] = val_a(i, k) + rank * val_b(i, k);
        }
        memset(out, 0xa5, count * sizeof(int));
        const double c0 = epoch_now();
        int rc = allreduce_call(in, out, count);
        const double c1 = epoch_now();
        size_t wrong = 0;
        for (size_t i = 0; rc == MPI_SUCCESS && i < count; ++i) {
            wrong += out[i] != nranks * val_a(i, k) + tri * val_b(i, k);
        }
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        if (rc != MPI_SUCCESS) {
            MPI_Error_string(rc, msg, &len);
        }
        printf("failover_loop: rank %d: after the error, MPI_Allreduce %d of %d: %s%s (%.3f s)\n",
               rank, j + 1, after_error,
               rc != MPI_SUCCESS ? "MPI error: " : (wrong ? "WRONG RESULT" : "exact"), msg,
               c1 - c0);
        fflush(stdout);
        after_wrong |= rc == MPI_SUCCESS && wrong != 0;
    }
    const double t1 = epoch_now();
    read_mem(&rss1, &hwm1);
    fds1 = count_fds();
    if (rss0_at < 0) {
        rss0 = rss1;
        fds0 = fds1;
        rss0_at = t1 - t0;
    }

    /* Memory and timing of every rank, gathered on rank 0 (stock collective). */
    enum { NM = 8 };
    double mine[NM] = {(double)rss0, (double)rss1, (double)hwm1, rss0_at,
                       slowest,      slowest_at,   (double)fds0, (double)fds1};
    double *all = malloc(sizeof(double) * NM * (size_t)nranks);
    MPI_Gather(mine, NM, MPI_DOUBLE, all, NM, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long worst = 0;
        int worst_rank = 0;
        for (int r = 0; r < nranks; ++r) {
            const double *m = all + NM * r;
            long growth = (long)(m[1] - m[0]);
            printf("failover_loop: memory rank %d: VmRSS %.0f kB at %.1f s, %.0f kB at the end: "
                   "growth %ld kB; VmHWM %.0f kB; open fds %.0f -> %.0f; slowest %s "
                   "%.3f s at %.1f s\n",
                   r, m[0], m[3], m[1], growth, m[2], m[6], m[7], coll_name, m[4], m[5]);
            if (r == 0 || growth > worst) {
                worst = growth;
                worst_rank = r;
            }
        }
        printf("failover_loop: max VmRSS growth %ld kB (rank %d)\n", worst, worst_rank);
        printf("failover_loop: %ld iterations in %.2f s (", iters, t1 - t0);
        for (int s = 0; s < nsizes; ++s) {
            printf("%s%ld x %zu B", s ? ", " : "", per_size[s], sizes[s]);
        }
        printf("), %.3f s per call on average, slowest %.3f s (#%ld at %.1f s)%s\n",
               iters ? total_call / (double)iters : 0.0, slowest, slowest_iter, slowest_at,
               any_error || any_wrong ? "" : ", every result exact");
        fflush(stdout);
    }
    free(all);
    free(verdicts);
    free(in);
    free(out);
    if (dev_mem != NULL) {
        dev_mem->device_free(dev_in);
        dev_mem->device_free(dev_out);
        dev_mem->stream_destroy(dev_stream);
    }

    int code = EXIT_OK;
    if (any_wrong || after_wrong) {
        code = EXIT_WRONG;
    } else if (my_status == ST_MPI_ERROR) {
        code = EXIT_MPI_ERROR;
    } else if (any_error) {
        code = EXIT_PEER_ERROR;
    }
    printf("failover_loop: rank %d exits %d\n", rank, code);
    fflush(stdout);
    if (weights) {
        /* Before MPI_Finalize: stock Open MPI 4.1.4 crashes in MPI_T_finalize after it. */
        if (w.ok) {
            MPI_T_pvar_handle_free(w.session, &w.handle);
            MPI_T_pvar_session_free(&w.session);
        }
        MPI_T_finalize();
    }
    MPI_Finalize();
    return code;
}
