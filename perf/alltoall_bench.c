/*
 * MPI_Alltoall / MPI_Alltoallv benchmark, two modes. Plain MPI: it measures
 * whatever coll component the MCA parameters select, so the same binary
 * compares coll/dualrail with the stock paths.
 *
 *   dualrail-alltoall-bench [-m MIN:MAX] [-i ITERS] [-T SECONDS] [-c]
 *   dualrail-alltoall-bench --moe [--tokens T] [--token-bytes B] [--layers L]
 *                           [--seed S] [--zipf A] [--payload-mbs R] [-c]
 *
 * Balanced (default): MPI_Alltoall of MPI_BYTE, size = the bytes each rank
 * sends in all (size / n to every rank, itself included), powers of four from
 * MIN to MAX (default 1024:16777216); -i timed iterations per size (default:
 * 50 up to 64 KiB, 20 up to 1 MiB, 8 above), after 2 warm-up calls and one
 * barrier, back to back (as nccl-tests; a barrier per call would add its exit
 * skew to every call); the slowest rank's average. -c checks the last result. Prints size, latency
 * (us), algorithm bandwidth (size / time) and bus bandwidth (algbw x (n-1)/n, the nccl-tests
 * convention for alltoall: the share of each rank's data that crosses the network). MB = 10^6
 * bytes.
 *
 * --moe: one expert-parallel layer per iteration, as a mixture-of-experts
 * model runs it. Each rank routes T tokens of B bytes; every token picks a
 * destination rank from a Zipf distribution (exponent A, default 1.2) over a
 * popularity order of the ranks that is redrawn every layer (the hot expert
 * moves), with each rank's own draws (seeded by seed, layer and rank: the
 * same on every run and computable by every rank). A layer is:
 *   1. MPI_Alltoall of the per-destination token counts (one int per pair),
 *   2. dispatch: MPI_Alltoallv of the tokens (per-pair byte counts),
 *   3. combine: the reverse MPI_Alltoallv (what came in goes back).
 * Reports the time per layer (slowest rank, average and per layer), the lower
 * bound of the layer and their ratio. The bound: in the dispatch and again in
 * the combine (which returns what the dispatch brought, so they cannot
 * overlap), the busiest node's bytes in its busier direction (links are full
 * duplex: the hot expert's node receives most in the dispatch and sends as
 * much back in the combine), at the two planes' payload rate --payload-mbs R
 * (MB/s). The counts exchange (n ints per rank) is not in the bound.
 *
 * -c: check every byte received (each byte names its source, destination
 * and position); exit 1 on a wrong byte. -T: stop a size early after this
 * many seconds (default 30; every loop is bounded).
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static unsigned char byte_of(int src, int dst, size_t i, unsigned salt)
{
    return (unsigned char)((unsigned)src * 131u + (unsigned)dst * 71u + (unsigned)i * 7u +
                           (unsigned)(i >> 9) * 13u + salt * 29u);
}

static void usage(void)
{
    if (rank == 0) {
        fprintf(stderr, "usage: dualrail-alltoall-bench [-m MIN:MAX] [-i ITERS] [-T SECONDS] [-c]\n"
                        "       dualrail-alltoall-bench --moe [--tokens T] [--token-bytes B] "
                        "[--layers L] [--seed S] [--zipf A] [--payload-mbs R] [-c]\n");
    }
}

static int balanced(size_t lo, size_t hi, int iters_opt, double tmax, int check)
{
    char *sbuf = malloc(hi), *rbuf = malloc(hi);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "dualrail-alltoall-bench: out of memory\n");
        return 1;
    }
    if (rank == 0) {
        printf("# alltoall, %d ranks; size = bytes each rank sends in all (size / %d per rank)\n",
               size, size);
        printf("# %-12s %14s %14s %14s\n", "size", "latency(us)", "algbw(MB/s)", "busbw(MB/s)");
        fflush(stdout);
    }
    int bad = 0;
    for (size_t s = lo; s <= hi && s >= (size_t)size; s *= 4) {
        const size_t blk = s / (size_t)size;
        const int iters = iters_opt > 0 ? iters_opt : s <= 65536 ? 50 : s <= (1u << 20) ? 20 : 8;
        for (int q = 0; q < size; ++q) {
            for (size_t i = 0; i < blk; ++i) {
                sbuf[(size_t)q * blk + i] = (char)byte_of(rank, q, i, (unsigned)s & 7u);
            }
        }
        /* Two warm-up calls, then -i calls back to back after one barrier (nccl-tests'
         * way): the arrival skew a barrier leaves, which on this loaded machine is
         * milliseconds, falls on the first call only. Fewer calls when the warm-up says
         * they would take more than -T seconds (rank 0 decides for everyone). */
        double warm = MPI_Wtime();
        for (int it = 0; it < 2; ++it) {
            MPI_Alltoall(sbuf, (int)blk, MPI_BYTE, rbuf, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
        }
        warm = (MPI_Wtime() - warm) / 2;
        int n_it = iters;
        if (warm * iters > tmax) {
            n_it = (int)(tmax / warm) > 1 ? (int)(tmax / warm) : 1;
        }
        MPI_Bcast(&n_it, 1, MPI_INT, 0, MPI_COMM_WORLD);
        memset(rbuf, 0, s);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int it = 0; it < n_it; ++it) {
            MPI_Alltoall(sbuf, (int)blk, MPI_BYTE, rbuf, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
        }
        const double total = MPI_Wtime() - t0;
        const int done = n_it;
        for (int q = 0; check && q < size; ++q) {
            for (size_t i = 0; i < blk; ++i) {
                bad |= (unsigned char)rbuf[(size_t)q * blk + i] !=
                       byte_of(q, rank, i, (unsigned)s & 7u);
            }
        }
        double avg = done ? total / done : 0, worst = 0;
        MPI_Reduce(&avg, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            const double alg = worst > 0 ? (double)s / worst / 1e6 : 0;
            printf("  %-12zu %14.1f %14.2f %14.2f\n", s, worst * 1e6, alg, alg * (size - 1) / size);
            fflush(stdout);
        }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && rank == 0) {
        printf("# WRONG RESULT in at least one call\n");
    }
    free(sbuf);
    free(rbuf);
    return any ? 1 : 0;
}

/* Tokens rank src sends each rank in layer l (counts[d], d < size). */
static void moe_counts(uint64_t seed, int l, int src, int tokens, double zipf, int *counts)
{
    int order[1024];
    double cdf[1024], sum = 0;
    for (int d = 0; d < size; ++d) {
        order[d] = d;
        counts[d] = 0;
    }
    /* the layer's popularity order, the same for every source (Fisher-Yates) */
    uint64_t g = mix(seed ^ ((uint64_t)l << 20));
    for (int d = size - 1; d > 0; --d) {
        g = mix(g);
        const int j = (int)(g % (uint64_t)(d + 1));
        const int t = order[d];
        order[d] = order[j], order[j] = t;
    }
    for (int k = 0; k < size; ++k) {
        sum += 1.0 / pow((double)(k + 1), zipf);
        cdf[k] = sum;
    }
    uint64_t x = mix(seed ^ ((uint64_t)l << 20) ^ ((uint64_t)(src + 1) << 40));
    for (int t = 0; t < tokens; ++t) {
        x = mix(x);
        const double u = (double)(x >> 11) / 9007199254740992.0 * sum;
        int k = 0;
        while (k < size - 1 && cdf[k] < u) {
            ++k;
        }
        ++counts[order[k]];
    }
}

static int moe(uint64_t seed, int tokens, int tbytes, int layers, double zipf, double payload_mbs,
               int check)
{
    if (size > 1024) {
        return 1;
    }
    const size_t cap = (size_t)tokens * (size_t)tbytes * (size_t)size; /* worst case: all to one */
    char *sbuf = malloc((size_t)tokens * (size_t)tbytes), *rbuf = malloc(cap),
         *back = malloc((size_t)tokens * (size_t)tbytes);
    int *sc = malloc(sizeof(int) * 5 * (size_t)size), *rc_tok = malloc(sizeof(int) * (size_t)size);
    int *all = malloc(sizeof(int) * (size_t)size * (size_t)size);
    if (sbuf == NULL || rbuf == NULL || back == NULL || sc == NULL || rc_tok == NULL ||
        all == NULL) {
        fprintf(stderr, "dualrail-alltoall-bench: out of memory\n");
        return 1;
    }
    int *sd = sc + size, *rc = sd + size, *rd = rc + size, *tok = rd + size;
    if (rank == 0) {
        printf("# moe: %d ranks, %d tokens of %d bytes per rank per layer, zipf %.2f, seed %llu, "
               "payload rate %.2f MB/s\n",
               size, tokens, tbytes, zipf, (unsigned long long)seed, payload_mbs);
        printf("# %-6s %12s %12s %8s %14s %14s\n", "layer", "time(ms)", "bound(ms)", "ratio",
               "busiest(MB)", "hot share");
        fflush(stdout);
    }
    double sum_t = 0, sum_b = 0;
    int bad = 0;
    for (int l = -1; l < layers; ++l) { /* layer -1: warm-up */
        /* every rank's counts, so every rank knows the bound without communicating */
        for (int s = 0; s < size; ++s) {
            moe_counts(seed, l < 0 ? 1000003 : l, s, tokens, zipf, all + (size_t)s * size);
        }
        memcpy(tok, all + (size_t)rank * size, sizeof(int) * (size_t)size);
        size_t off = 0;
        for (int d = 0; d < size; ++d) {
            sc[d] = tok[d] * tbytes;
            sd[d] = (int)off;
            for (int i = 0; i < sc[d]; ++i) {
                sbuf[off + (size_t)i] = (char)byte_of(rank, d, (size_t)i, (unsigned)l & 7u);
            }
            off += (size_t)sc[d];
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Alltoall(tok, 1, MPI_INT, rc_tok, 1, MPI_INT, MPI_COMM_WORLD);
        size_t roff = 0;
        for (int s = 0; s < size; ++s) {
            rc[s] = rc_tok[s] * tbytes;
            rd[s] = (int)roff;
            roff += (size_t)rc[s];
        }
        MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        /* the experts' output goes back where each token came from */
        MPI_Alltoallv(rbuf, rc, rd, MPI_BYTE, back, sc, sd, MPI_BYTE, MPI_COMM_WORLD);
        const double t = MPI_Wtime() - t0;
        for (int s = 0; check && s < size; ++s) {
            bad |= rc_tok[s] != all[(size_t)s * size + rank];
            for (int i = 0; i < rc[s]; ++i) {
                bad |= (unsigned char)rbuf[(size_t)rd[s] + (size_t)i] !=
                       byte_of(s, rank, (size_t)i, (unsigned)l & 7u);
            }
        }
        bad |= check && memcmp(back, sbuf, off) != 0;
        /* The bound: dispatch, then combine (the combine returns what the dispatch
         * brought, so the two cannot overlap). In each, the busiest node's bytes in
         * its busier direction (links are full duplex), at the payload rate. */
        double busiest = 0, hot = 0;
        for (int r = 0; r < size; ++r) {
            double out = 0, in = 0, tot = 0;
            for (int q = 0; q < size; ++q) {
                if (q != r) {
                    out += (double)all[(size_t)r * size + q] * tbytes;
                    in += (double)all[(size_t)q * size + r] * tbytes;
                }
                tot += all[(size_t)q * size + r];
            }
            /* dispatch: out leaves, in arrives; combine: in leaves, out arrives */
            const double phase = out > in ? out : in;
            busiest = phase > busiest ? phase : busiest;
            hot = tot > hot ? tot : hot;
        }
        busiest *= 2; /* the same busiest node and direction in both phases */
        double worst = 0;
        MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        const double bound = busiest / (payload_mbs * 1e6);
        if (rank == 0 && l >= 0) {
            sum_t += worst;
            sum_b += bound;
            printf("  %-6d %12.1f %12.1f %8.2f %14.2f %14.2f\n", l, worst * 1e3, bound * 1e3,
                   bound > 0 ? worst / bound : 0, busiest / 1e6, hot / ((double)tokens * size));
            fflush(stdout);
        }
    }
    if (rank == 0 && layers > 0) {
        printf("moe: %d layers: %.1f ms per layer, bound %.1f ms, ratio %.2f\n", layers,
               sum_t / layers * 1e3, sum_b / layers * 1e3, sum_b > 0 ? sum_t / sum_b : 0);
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && rank == 0) {
        printf("# WRONG RESULT in at least one layer\n");
    }
    free(sbuf);
    free(rbuf);
    free(back);
    free(sc);
    free(rc_tok);
    free(all);
    return any ? 1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t lo = 1024, hi = 16u << 20;
    int iters = 0, check = 0, mode_moe = 0, tokens = 1024, tbytes = 8192, layers = 10;
    double tmax = 30, zipf = 1.2, payload = 0;
    uint64_t seed = 14;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "-m") == 0 && v) {
            bad = sscanf(v, "%zu:%zu", &lo, &hi) != 2 || lo == 0 || hi < lo;
            ++i;
        } else if (strcmp(a, "-i") == 0 && v) {
            iters = atoi(v), ++i;
        } else if (strcmp(a, "-T") == 0 && v) {
            tmax = atof(v), ++i;
        } else if (strcmp(a, "-c") == 0) {
            check = 1;
        } else if (strcmp(a, "--moe") == 0) {
            mode_moe = 1;
        } else if (strcmp(a, "--tokens") == 0 && v) {
            tokens = atoi(v), ++i;
            bad = tokens < 1;
        } else if (strcmp(a, "--token-bytes") == 0 && v) {
            tbytes = atoi(v), ++i;
            bad = tbytes < 1;
        } else if (strcmp(a, "--layers") == 0 && v) {
            layers = atoi(v), ++i;
            bad = layers < 0 || layers > 10000;
        } else if (strcmp(a, "--seed") == 0 && v) {
            seed = strtoull(v, NULL, 0), ++i;
        } else if (strcmp(a, "--zipf") == 0 && v) {
            zipf = atof(v), ++i;
        } else if (strcmp(a, "--payload-mbs") == 0 && v) {
            payload = atof(v), ++i;
        } else {
            bad = 1;
        }
        if (bad || (mode_moe && (double)tokens * tbytes * size > 2e9)) {
            usage();
            MPI_Finalize();
            return 2;
        }
    }
    int rc = mode_moe
                 ? moe(seed, tokens, tbytes, layers, zipf, payload > 0 ? payload : 119.5, check)
                 : balanced(lo, hi, iters, tmax, check);
    MPI_Finalize();
    return rc;
}
