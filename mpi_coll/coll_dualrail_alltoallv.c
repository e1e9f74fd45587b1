/*
 * coll/dualrail MPI_Alltoallv: checks the call, then runs the plane-striped
 * pairwise alltoallv (dr_alltoall.h): each pair's bytes go as one message
 * (in pipeline segments when large) that ucx_mr splits over the live planes
 * by their weights, pairs with nothing to move are skipped on both sides.
 * MPI_IN_PLACE as MPI defines it for alltoallv: sendcounts, sdispls and
 * sendtype are ignored; what goes to rank q is taken from recvbuf at
 * rdispls[q] and replaced by what comes from q (counts must be symmetric).
 * What it does not handle goes to the previous module before any data
 * moves: derived or non-contiguous datatypes, an inactive module. Negative
 * displacements are taken (the buffer base moves to the lowest one of a
 * non-empty block; an empty block's displacement is never read).
 * Buffers in device memory are staged whole through host memory: the span
 * from the lowest displacement to the end of the last block, the receive
 * span copied in first so that bytes between blocks keep their values.
 */
#include "coll_dualrail.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_alltoall.h"
#include "dr_coll_gpu.h"

int mca_coll_dualrail_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                                struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                const int *rdispls, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int inplace = sbuf == MPI_IN_PLACE;
    const int n = ompi_comm_size(comm);
    size_t rsize = 0, ssize = 0, sspan = 0, rspan = 0;
    ptrdiff_t slo = 0, rlo = 0;

    ++m->calls[DR_KIND_ALLTOALLV];
    if (!m->active || !mca_coll_dualrail_dtype_bytes(rdtype, 1, &rsize)) {
        goto fallback;
    }
    if (!inplace && !mca_coll_dualrail_dtype_bytes(sdtype, 1, &ssize)) {
        goto fallback;
    }
    if (m->alltoallv_layout == NULL) {
        /* Kept with the module: one allocation per communicator, not per call. */
        m->alltoallv_layout = malloc(4 * sizeof(size_t) * (size_t)n);
        if (m->alltoallv_layout == NULL) {
            goto fallback;
        }
    }
    size_t *sc = m->alltoallv_layout, *sd = sc + n, *rc = sd + n, *rd = rc + n;
    if (!mca_coll_dualrail_v_layout(rcounts, rdispls, n, rsize, rc, rd, &rlo, &rspan) ||
        (!inplace &&
         !mca_coll_dualrail_v_layout(scounts, sdispls, n, ssize, sc, sd, &slo, &sspan))) {
        goto fallback; /* a negative count: erroneous, the previous module reports it */
    }
    const bool dev_s = !inplace && sspan != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = rspan != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    dr_alltoall_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    memset(&a, 0, sizeof(a));
    mca_coll_dualrail_args_init(m, comm, DR_KIND_ALLTOALLV, &a.c, &idle_state);
    char *rbase = (char *)rbuf + rlo;
    /* The algorithm layer takes a send buffer of NULL, or equal to the receive buffer, for
     * MPI_IN_PLACE: it would send recvbuf's blocks by the receive counts. A rank that sends
     * nothing may pass any address, NULL included (mpi4py and mixture-of-experts dispatchers
     * do): it gets one that is neither, of which no byte is read. */
    static const char nothing_to_send;
    const char *sbase = inplace ? NULL : sspan == 0 ? &nothing_to_send : (const char *)sbuf + slo;
    /* The same for a rank that receives nothing: its receive buffer may be its send buffer
     * (no byte overlaps), which the algorithm layer would take for in place and send by the
     * receive counts, all zero: its peers waited for blocks that never came. */
    static char nothing_to_receive;
    /* Equal buffers with something received both ways, not MPI_IN_PLACE: erroneous (they
     * overlap), but each rank decides it alone, so it is sent from a copy rather than taken
     * for in place, which could hang the peers the same way. */
    const bool alias = !inplace && !dev_s && sspan != 0 && rspan != 0 && sbase == rbase;
    a.c.sendbuf = sbase;
    a.c.recvbuf = !inplace && rspan == 0 ? &nothing_to_receive : rbase;
    a.window = (int)cm->alltoall_window;
    a.sendcounts = sc;
    a.sdispls = sd;
    a.recvcounts = rc;
    a.rdispls = rd;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: alltoallv on %s: %zu bytes out, %zu in%s",
                     cm->world_rank, comm->c_name, sspan, rspan, inplace ? " (in place)" : "");
    char err[512];
    dr_status_t st = DR_OK;
    char *host = NULL;
    const dr_coll_args_t user = a.c;
    if (dev_s || dev_r || alias) {
        /* A staging failure fails this rank before it communicates (see bcast). */
        host = malloc((dev_s || alias ? sspan : 0) + (dev_r ? rspan : 0));
        if (host == NULL) {
            snprintf(err, sizeof(err), "no host memory to stage %zu bytes", sspan + rspan);
            st = DR_ERR_NO_MEMORY;
        } else {
            char *hrecv = dev_s || alias ? host + sspan : host;
            if (dev_s) {
                st = mca_coll_dualrail_stage(host, sbase, sspan, sbase, err, sizeof(err));
                a.c.sendbuf = host;
            } else if (alias) {
                memcpy(host, sbase, sspan);
                a.c.sendbuf = host;
            }
            if (st == DR_OK && dev_r) {
                st = mca_coll_dualrail_stage(hrecv, rbase, rspan, rbase, err, sizeof(err));
                a.c.recvbuf = hrecv;
            }
        }
    }
    mca_coll_dualrail_fail_mode(&a.c, &user, st, err);
    st = dr_alltoallv(cm->mr, &a, err, sizeof(err));
    if (st == DR_OK && dev_r) {
        st = mca_coll_dualrail_stage(rbase, a.c.recvbuf, rspan, rbase, err, sizeof(err));
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Alltoallv", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_ALLTOALLV];
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: alltoallv on %s (%s) handed to the previous "
                     "module",
                     cm->world_rank, comm->c_name, rdtype->name);
    return m->previous_alltoallv(sbuf, scounts, sdispls, sdtype, rbuf, rcounts, rdispls, rdtype,
                                 comm, m->previous_alltoallv_module);
}
