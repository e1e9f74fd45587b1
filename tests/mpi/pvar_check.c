/*
 * coll/dualrail's per-plane counters through MPI_T: after a 4 MiB allreduce
 * every plane must show sent bytes, and the counters must agree with the
 * plane count. The striping weights too: coll_dualrail_link_weight holds
 * world size x 2 shares (0 toward this rank, each other rank's planes
 * summing to 1), coll_dualrail_plane_weight_min one share per plane.
 * Between MPI_T_init_thread and MPI_Init (before the transport exists, so
 * before the counts are known) a tool must not be able to bind a handle whose
 * count is wrong: the variables are not visible yet, or a handle bound then
 * has the right count and a read after MPI_Init writes nothing past it (a
 * guard after the buffer).
 * Prints "N passed, N failed" (rank 0); exit 1 on failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of the MPI_T performance variable called want (of type want_dt unless that is
 * MPI_DATATYPE_NULL), or -1. */
static int pvar_index(const char *want, MPI_Datatype want_dt)
{
    int num = 0;
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num; ++i) {
        char name[256], desc[512];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, desc, &dlen, &bind, &ro, &cont,
                            &atomic);
        if (strcmp(name, want) == 0 && (want_dt == MPI_DATATYPE_NULL || dt == want_dt)) {
            return i;
        }
    }
    return -1;
}

#define GUARD 64

int main(int argc, char **argv)
{
    int provided, rank, failed = 0, passed = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    /* A tool's handle before MPI_Init: coll_dualrail_link_weight (its reads write straight
     * into the tool's buffer). */
    const int early_idx = pvar_index("coll_dualrail_link_weight", MPI_DATATYPE_NULL);
    MPI_T_pvar_session early_session;
    MPI_T_pvar_handle early;
    int early_count = -1, early_rc = -1;
    if (early_idx >= 0) {
        MPI_T_pvar_session_create(&early_session);
        early_rc = MPI_T_pvar_handle_alloc(early_session, early_idx, NULL, &early, &early_count);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const size_t n = (4u << 20) / sizeof(double);
    double *buf = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (early_idx < 0) {
        ++passed; /* the variables appear with the transport, their counts known */
        printf("rank %d: coll_dualrail_link_weight not visible before MPI_Init: nothing to bind "
               "early\n",
               rank);
    } else if (early_rc != MPI_SUCCESS) {
        ++passed;
        printf("rank %d: coll_dualrail_link_weight: a handle before MPI_Init refused (%d)\n", rank,
               early_rc);
    } else {
        /* bound: its count must be right, and a read must stay within it */
        int wsize;
        MPI_Comm_size(MPI_COMM_WORLD, &wsize);
        const int c = early_count < 0 ? 0 : early_count;
        double *v = malloc(sizeof(double) * (size_t)(c + GUARD));
        for (int i = 0; i < c + GUARD; ++i)
            v[i] = -7.0;
        MPI_T_pvar_read(early_session, early, v);
        int guard_ok = 1;
        for (int i = c; i < c + GUARD; ++i)
            guard_ok = guard_ok && v[i] == -7.0;
        const int ok = guard_ok && c == 2 * wsize;
        ok ? ++passed : ++failed;
        printf("%srank %d: coll_dualrail_link_weight bound before MPI_Init with count %d (%d "
               "after): %s\n",
               ok ? "" : "FAILED: ", rank, early_count, 2 * wsize,
               guard_ok ? "read within it" : "a read wrote past it");
        free(v);
        MPI_T_pvar_handle_free(early_session, &early);
    }
    if (early_idx >= 0) {
        MPI_T_pvar_session_free(&early_session);
    }

    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int found = pvar_index("coll_dualrail_plane_tx_bytes", MPI_DATATYPE_NULL);
    const int f_link = pvar_index("coll_dualrail_link_weight", MPI_DOUBLE);
    const int f_min = pvar_index("coll_dualrail_plane_weight_min", MPI_DOUBLE);
    if (found < 0) {
        ++failed;
        if (rank == 0) printf("FAILED: no MPI_T variable coll_dualrail_plane_tx_bytes\n");
    } else {
        ++passed;
        MPI_T_pvar_session session;
        MPI_T_pvar_handle handle;
        int count = 0;
        MPI_T_pvar_session_create(&session);
        MPI_T_pvar_handle_alloc(session, found, NULL, &handle, &count);
        /* A counter reads what happened since its handle was allocated. */
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        unsigned long long v[8] = {0};
        if (count >= 1 && count <= 8) {
            MPI_T_pvar_read(session, handle, v);
        }
        int ok = count == 2 && v[0] > 0 && v[1] > 0;
        printf("rank %d: coll_dualrail_plane_tx_bytes has %d value(s): %llu %llu\n", rank, count,
               v[0], count > 1 ? v[1] : 0ull);
        ok ? ++passed : ++failed;
        if (!ok) printf("FAILED: rank %d: expected bytes on two planes\n", rank);
        MPI_T_pvar_handle_free(session, &handle);
        MPI_T_pvar_session_free(&session);
    }
    if (f_link < 0 || f_min < 0) {
        ++failed;
        if (rank == 0) printf("FAILED: no MPI_T variables coll_dualrail_link_weight / plane_weight_min (doubles)\n");
    } else {
        MPI_T_pvar_session session;
        MPI_T_pvar_handle hl, hm;
        int cl = 0, cmn = 0;
        MPI_T_pvar_session_create(&session);
        MPI_T_pvar_handle_alloc(session, f_link, NULL, &hl, &cl);
        MPI_T_pvar_handle_alloc(session, f_min, NULL, &hm, &cmn);
        double w[64] = {0}, wm[8] = {0};
        int ok = cl == 2 * size && cl <= 64 && cmn == 2;
        if (ok) {
            MPI_T_pvar_read(session, hl, w);
            MPI_T_pvar_read(session, hm, wm);
            for (int q = 0; q < size; ++q) {
                const double sum = w[2 * q] + w[2 * q + 1];
                if (q == rank ? sum != 0 : (sum < 0.99 || sum > 1.01 || w[2 * q] <= 0 || w[2 * q + 1] <= 0)) {
                    ok = 0;
                }
            }
            ok = ok && wm[0] > 0 && wm[0] <= 1 && wm[1] > 0 && wm[1] <= 1;
        }
        printf("rank %d: coll_dualrail_link_weight has %d value(s), toward rank %d: %.3f %.3f; "
               "plane_weight_min %.3f %.3f\n", rank, cl, (rank + 1) % size,
               w[2 * ((rank + 1) % size)], w[2 * ((rank + 1) % size) + 1], wm[0], wm[1]);
        ok ? ++passed : ++failed;
        if (!ok) printf("FAILED: rank %d: weights are not shares of two planes per peer\n", rank);
        MPI_T_pvar_handle_free(session, &hl);
        MPI_T_pvar_handle_free(session, &hm);
        MPI_T_pvar_session_free(&session);
    }
    int f = failed, all_failed;
    MPI_Allreduce(&f, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%d passed, %d failed\n", passed, all_failed);
    free(buf);
    /* Before MPI_Finalize: stock Open MPI 4.1.4 crashes in MPI_T_finalize after it. */
    MPI_T_finalize();
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
