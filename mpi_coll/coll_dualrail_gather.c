/*
 * coll/dualrail MPI_Gather and MPI_Gatherv: check the call, then run the
 * plane-striped gather (dr_coll.h: binomial tree; gatherv linear with a
 * window, every block straight into its place at the root). MPI_IN_PLACE at
 * the root: its block is already in recvbuf (sendcount and sendtype
 * ignored). What they do not handle goes to the previous module before any
 * data moves: derived or non-contiguous datatypes, negative counts (negative
 * displacements are taken: gatherv's root buffer starts at the lowest one of a
 * non-empty block), send and receive blocks of different sizes at the root
 * (erroneous in MPI), a root out of range, an inactive module. A rank reads
 * only the type it uses (the send type; at the root the receive type too),
 * so every rank must use predefined types for the decision to be the same
 * everywhere (see README). Buffers in device memory are staged whole through
 * host memory (gatherv: block by block into recvbuf, gaps left alone).
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

/* One gather(v) with its arguments set: device staging around it, the error report.
 * mine: this rank's block; span: the root's buffer. */
static int run(int kind, struct ompi_communicator_t *comm, dr_coll_args_t *a, const void *sbuf,
               void *rbuf, size_t mine, size_t span, const char *what)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const bool root = a->rank == a->root, inplace = root && a->sendbuf == NULL;
    const size_t own_at = !root                     ? 0
                          : kind == DR_KIND_GATHERV ? a->displs[a->rank]
                                                    : (size_t)a->rank * mine;
    const bool dev_s = !inplace && mine != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = root && span != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    char err[512];
    dr_status_t st = DR_OK;
    char *host = NULL;
    const dr_coll_args_t user = *a;
    if (dev_s || dev_r) {
        /* A staging failure fails this rank before it communicates (see bcast). */
        const size_t len = dev_r ? span : mine;
        host = malloc(len == 0 ? 1 : len);
        const void *src = inplace ? (const char *)rbuf + own_at : sbuf;
        char *dst = dev_r ? host + own_at : host;
        if (host == NULL) {
            snprintf(err, sizeof(err), "no host memory to stage %zu bytes", len);
            st = DR_ERR_NO_MEMORY;
        } else if (mine != 0 && (inplace || dev_s)) {
            st = mca_coll_dualrail_stage(dst, src, mine, src, err, sizeof(err));
        } else if (mine != 0) {
            memcpy(dst, src, mine);
        }
        a->sendbuf = dev_r ? NULL : host;
        if (dev_r) {
            a->recvbuf = host;
        }
    }
    mca_coll_dualrail_fail_mode(a, &user, st, err);
    st = kind == DR_KIND_GATHER ? dr_gather(cm->mr, a, err, sizeof(err))
                                : dr_gatherv(cm->mr, a, err, sizeof(err));
    if (st == DR_OK && dev_r && kind == DR_KIND_GATHER) {
        st = mca_coll_dualrail_stage(rbuf, host, span, rbuf, err, sizeof(err));
    }
    for (int r = 0; st == DR_OK && dev_r && kind == DR_KIND_GATHERV && r < a->size; ++r) {
        if (a->counts[r] != 0) {
            char *dst = (char *)rbuf + a->displs[r];
            st = mca_coll_dualrail_stage(dst, host + a->displs[r], a->counts[r], dst, err,
                                         sizeof(err));
        }
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, what, st, err);
    }
    return OMPI_SUCCESS;
}

int mca_coll_dualrail_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
    const bool inplace = rank == root && sbuf == MPI_IN_PLACE;
    size_t sbytes = 0, rbytes = 0;

    ++m->calls[DR_KIND_GATHER];
    if (!m->active || root < 0 || root >= size) {
        goto fallback;
    }
    if (!inplace &&
        (scount < 0 || !mca_coll_dualrail_dtype_bytes(sdtype, (size_t)scount, &sbytes))) {
        goto fallback;
    }
    if (rank == root &&
        (rcount < 0 || !mca_coll_dualrail_dtype_bytes(rdtype, (size_t)rcount, &rbytes) ||
         (!inplace && rbytes != sbytes))) {
        goto fallback;
    }
    const size_t bytes = rank == root ? rbytes : sbytes;
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_GATHER, &a, &idle_state);
    a.sendbuf = inplace ? NULL : sbuf;
    a.recvbuf = rank == root ? rbuf : NULL;
    a.bytes = bytes;
    a.root = root;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: gather on %s: %zu bytes per rank to root %d%s",
                     cm->world_rank, comm->c_name, bytes, root, inplace ? ", in place" : "");
    return run(DR_KIND_GATHER, comm, &a, sbuf, rbuf, bytes, bytes * (size_t)size, "MPI_Gather");

fallback:
    ++m->fallbacks[DR_KIND_GATHER];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: gather on %s handed to the previous module",
                     cm->world_rank, comm->c_name);
    return m->previous_gather(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                              m->previous_gather_module);
}

int mca_coll_dualrail_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *disps,
                              struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
    const bool inplace = rank == root && sbuf == MPI_IN_PLACE;
    size_t sbytes = 0, esz = 0;

    ++m->calls[DR_KIND_GATHERV];
    if (!m->active || root < 0 || root >= size) {
        goto fallback;
    }
    if (!inplace &&
        (scount < 0 || !mca_coll_dualrail_dtype_bytes(sdtype, (size_t)scount, &sbytes))) {
        goto fallback;
    }
    if (rank == root) {
        if (!mca_coll_dualrail_dtype_bytes(rdtype, 1, &esz)) {
            goto fallback;
        }
        /* Negative displacements are taken (only the root reads them: falling back on one
         * would leave the root alone in the previous module); negative counts are not. */
        for (int r = 0; r < size; ++r) {
            if (rcounts[r] < 0) {
                goto fallback;
            }
        }
        if (!inplace && sbytes != (size_t)rcounts[rank] * esz) {
            goto fallback;
        }
    }
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_GATHERV, &a, &idle_state);
    size_t *counts = NULL, span = 0, mine = sbytes;
    char *base = NULL;
    if (rank == root) {
        /* Per call: byte counts and offsets, after the sequence number (see allgatherv). */
        counts = malloc(2 * sizeof(size_t) * (size_t)size);
        if (counts == NULL) {
            return mca_coll_dualrail_failed(comm, "MPI_Gatherv", DR_ERR_NO_MEMORY,
                                            "no memory for the counts");
        }
        ptrdiff_t lo = 0;
        (void)mca_coll_dualrail_v_layout(rcounts, disps, size, esz, counts, counts + size, &lo,
                                         &span); /* counts checked above */
        base = (char *)rbuf + lo;
        mine = counts[rank];
        a.counts = counts;
        a.displs = counts + size;
    }
    a.sendbuf = inplace ? NULL : sbuf;
    a.recvbuf = base;
    a.bytes = mine;
    a.root = root;
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: gatherv on %s: %zu bytes of this rank to root "
                     "%d%s",
                     cm->world_rank, comm->c_name, mine, root, inplace ? ", in place" : "");
    const int rc = run(DR_KIND_GATHERV, comm, &a, sbuf, base, mine, span, "MPI_Gatherv");
    free(counts);
    return rc;

fallback:
    ++m->fallbacks[DR_KIND_GATHERV];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: gatherv on %s handed to the previous module",
                     cm->world_rank, comm->c_name);
    return m->previous_gatherv(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, root, comm,
                               m->previous_gatherv_module);
}
