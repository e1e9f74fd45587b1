/*
 * coll/dualrail MPI_Scatter and MPI_Scatterv: check the call, then run the
 * plane-striped scatter (dr_coll.h: binomial tree; scatterv linear with a
 * window, every block straight from its place at the root). MPI_IN_PLACE at
 * the root (as recvbuf): its block stays in sendbuf (recvcount and recvtype
 * ignored). What they do not handle goes to the previous module before any
 * data moves: derived or non-contiguous datatypes, negative counts (negative
 * displacements are taken: scatterv's root buffer starts at the lowest one of
 * a non-empty block), send and receive blocks of different sizes at the root
 * (erroneous in MPI), a root out of range, an inactive module. A rank reads
 * only the type it uses (the receive type; at the root the send type too),
 * so every rank must use predefined types for the decision to be the same
 * everywhere (see README). Buffers in device memory are staged whole through
 * host memory (scatterv: block by block out of sendbuf).
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

/* One scatter(v) with its arguments set: device staging around it, the error report.
 * mine: this rank's block; span: the root's buffer. */
static int run(int kind, struct ompi_communicator_t *comm, dr_coll_args_t *a, const void *sbuf,
               void *rbuf, size_t mine, size_t span, const char *what)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const bool root = a->rank == a->root, inplace = root && a->recvbuf == NULL;
    const bool dev_s = root && span != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = !inplace && mine != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    char err[512];
    dr_status_t st = DR_OK;
    char *hs = NULL, *hr = NULL;
    const dr_coll_args_t user = *a;
    if (dev_s) {
        /* A staging failure fails this rank before it communicates (see bcast). */
        hs = malloc(span);
        if (hs == NULL) {
            st = DR_ERR_NO_MEMORY;
        } else if (kind == DR_KIND_SCATTER) {
            st = mca_coll_dualrail_stage(hs, sbuf, span, sbuf, err, sizeof(err));
        }
        for (int r = 0; st == DR_OK && kind == DR_KIND_SCATTERV && r < a->size; ++r) {
            if (a->counts[r] != 0) {
                const char *src = (const char *)sbuf + a->displs[r];
                st = mca_coll_dualrail_stage(hs + a->displs[r], src, a->counts[r], src, err,
                                             sizeof(err));
            }
        }
        a->sendbuf = hs;
    }
    if (st == DR_OK && dev_r) {
        hr = malloc(mine);
        st = hr == NULL ? DR_ERR_NO_MEMORY : DR_OK;
        a->recvbuf = hr;
    }
    if (st == DR_ERR_NO_MEMORY) {
        snprintf(err, sizeof(err), "no host memory to stage %zu bytes", dev_s ? span : mine);
    }
    mca_coll_dualrail_fail_mode(a, &user, st, err);
    st = kind == DR_KIND_SCATTER ? dr_scatter(cm->mr, a, err, sizeof(err))
                                 : dr_scatterv(cm->mr, a, err, sizeof(err));
    if (st == DR_OK && dev_r) {
        st = mca_coll_dualrail_stage(rbuf, hr, mine, rbuf, err, sizeof(err));
    }
    free(hs);
    free(hr);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, what, st, err);
    }
    return OMPI_SUCCESS;
}

int mca_coll_dualrail_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
    const bool inplace = rank == root && rbuf == MPI_IN_PLACE;
    size_t sbytes = 0, rbytes = 0;

    ++m->calls[DR_KIND_SCATTER];
    if (!m->active || root < 0 || root >= size) {
        goto fallback;
    }
    if (!inplace &&
        (rcount < 0 || !mca_coll_dualrail_dtype_bytes(rdtype, (size_t)rcount, &rbytes))) {
        goto fallback;
    }
    if (rank == root &&
        (scount < 0 || !mca_coll_dualrail_dtype_bytes(sdtype, (size_t)scount, &sbytes) ||
         (!inplace && rbytes != sbytes))) {
        goto fallback;
    }
    const size_t bytes = rank == root ? sbytes : rbytes;
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_SCATTER, &a, &idle_state);
    a.sendbuf = rank == root ? sbuf : NULL;
    a.recvbuf = inplace ? NULL : rbuf;
    a.bytes = bytes;
    a.root = root;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: scatter on %s: %zu bytes per rank from root %d%s",
                     cm->world_rank, comm->c_name, bytes, root, inplace ? ", in place" : "");
    return run(DR_KIND_SCATTER, comm, &a, sbuf, rbuf, bytes, bytes * (size_t)size, "MPI_Scatter");

fallback:
    ++m->fallbacks[DR_KIND_SCATTER];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: scatter on %s handed to the previous module",
                     cm->world_rank, comm->c_name);
    return m->previous_scatter(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                               m->previous_scatter_module);
}

int mca_coll_dualrail_scatterv(const void *sbuf, const int *scounts, const int *disps,
                               struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                               struct ompi_datatype_t *rdtype, int root,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
    const bool inplace = rank == root && rbuf == MPI_IN_PLACE;
    size_t rbytes = 0, esz = 0;

    ++m->calls[DR_KIND_SCATTERV];
    if (!m->active || root < 0 || root >= size) {
        goto fallback;
    }
    if (!inplace &&
        (rcount < 0 || !mca_coll_dualrail_dtype_bytes(rdtype, (size_t)rcount, &rbytes))) {
        goto fallback;
    }
    if (rank == root) {
        if (!mca_coll_dualrail_dtype_bytes(sdtype, 1, &esz)) {
            goto fallback;
        }
        /* Negative displacements are taken (see gatherv); negative counts are not. */
        for (int r = 0; r < size; ++r) {
            if (scounts[r] < 0) {
                goto fallback;
            }
        }
        if (!inplace && rbytes != (size_t)scounts[rank] * esz) {
            goto fallback;
        }
    }
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_SCATTERV, &a, &idle_state);
    size_t *counts = NULL, span = 0, mine = rbytes;
    const char *base = NULL;
    if (rank == root) {
        /* Per call: byte counts and offsets, after the sequence number (see allgatherv). */
        counts = malloc(2 * sizeof(size_t) * (size_t)size);
        if (counts == NULL) {
            return mca_coll_dualrail_failed(comm, "MPI_Scatterv", DR_ERR_NO_MEMORY,
                                            "no memory for the counts");
        }
        ptrdiff_t lo = 0;
        (void)mca_coll_dualrail_v_layout(scounts, disps, size, esz, counts, counts + size, &lo,
                                         &span); /* counts checked above */
        base = (const char *)sbuf + lo;
        mine = counts[rank];
        a.counts = counts;
        a.displs = counts + size;
    }
    a.sendbuf = base;
    a.recvbuf = inplace ? NULL : rbuf;
    a.bytes = mine;
    a.root = root;
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: scatterv on %s: %zu bytes of this rank from "
                     "root %d%s",
                     cm->world_rank, comm->c_name, mine, root, inplace ? ", in place" : "");
    const int rc = run(DR_KIND_SCATTERV, comm, &a, base, rbuf, mine, span, "MPI_Scatterv");
    free(counts);
    return rc;

fallback:
    ++m->fallbacks[DR_KIND_SCATTERV];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: scatterv on %s handed to the previous module",
                     cm->world_rank, comm->c_name);
    return m->previous_scatterv(sbuf, scounts, disps, sdtype, rbuf, rcount, rdtype, root, comm,
                                m->previous_scatterv_module);
}
