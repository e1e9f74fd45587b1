/*
 * coll/dualrail MPI_Allgatherv: checks the call, then runs the plane-striped
 * allgatherv (dr_coll.h: Bruck for small results, the pipelined ring for
 * large; blocks of any sizes, zeros included, at any displacements).
 * MPI_IN_PLACE as MPI defines it for allgatherv: sendcount and sendtype are
 * ignored and this rank's block is already at its place in recvbuf. What it
 * does not handle goes to the previous module before any data moves:
 * derived or non-contiguous datatypes, negative counts, a send block whose
 * size differs from this rank's receive count (erroneous in MPI; the previous
 * module reports it), an inactive module. The decision reads recvcounts and
 * recvtype (the same on every rank by MPI's rules), not displs, which each
 * rank chooses for its own buffer: negative ones are taken (the buffer
 * starts at the lowest one of a non-empty block). Buffers in device memory
 * are staged whole through host memory: this rank's block copied out before,
 * every block copied in after (one copy per block, so the gaps between blocks
 * are left alone).
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

int mca_coll_dualrail_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, const int *rcounts, const int *disps,
                                 struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                                 mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int inplace = sbuf == MPI_IN_PLACE;
    const int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    size_t esz = 0, sbytes = 0, *counts = NULL;

    ++m->calls[DR_KIND_ALLGATHERV];
    if (!m->active || !mca_coll_dualrail_dtype_bytes(rdtype, 1, &esz)) {
        goto fallback;
    }
    for (int r = 0; r < size; ++r) {
        if (rcounts[r] < 0) {
            goto fallback;
        }
    }
    if (!inplace &&
        (scount < 0 || !mca_coll_dualrail_dtype_bytes(sdtype, (size_t)scount, &sbytes) ||
         sbytes != (size_t)rcounts[rank] * esz)) {
        goto fallback;
    }
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_ALLGATHERV, &a, &idle_state);
    /* Per call, not per segment: byte counts and offsets for the algorithm layer. Taken
     * after the sequence number, so a failure leaves this rank's numbering with the others'. */
    counts = malloc(2 * sizeof(size_t) * (size_t)size);
    if (counts == NULL) {
        return mca_coll_dualrail_failed(comm, "MPI_Allgatherv", DR_ERR_NO_MEMORY,
                                        "no memory for the counts");
    }
    size_t *displs = counts + size, total = 0, span = 0;
    ptrdiff_t lo = 0;
    (void)mca_coll_dualrail_v_layout(rcounts, disps, size, esz, counts, displs, &lo,
                                     &span); /* counts checked above */
    for (int r = 0; r < size; ++r) {
        total += counts[r];
    }
    char *base = (char *)rbuf + lo; /* what displs are offsets from */
    const size_t mine = counts[rank];
    const bool dev_s = !inplace && mine != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = total != 0 && mca_coll_dualrail_on_device(NULL, base);
    a.sendbuf = inplace ? NULL : sbuf;
    a.recvbuf = base;
    a.counts = counts;
    a.displs = displs;
    a.algorithm = cm->allgatherv_algorithm;
    a.small_max_bytes = cm->allgatherv_small_max_bytes;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allgatherv on %s: %zu bytes in all, %s%s",
                     cm->world_rank, comm->c_name, total, rdtype->name,
                     inplace ? ", in place" : "");
    char err[512];
    dr_status_t st = DR_OK;
    char *host = NULL;
    const dr_coll_args_t user = a;
    if (dev_s || dev_r) {
        /* A staging failure fails this rank before it communicates (see bcast). */
        host = malloc(dev_r ? span : mine);
        if (host == NULL) {
            snprintf(err, sizeof(err), "no host memory to stage %zu bytes", dev_r ? span : mine);
            st = DR_ERR_NO_MEMORY;
        } else if (!dev_r) {
            st = mca_coll_dualrail_stage(host, sbuf, mine, sbuf, err, sizeof(err));
            a.sendbuf = host;
        } else {
            const void *src = inplace ? (const char *)base + displs[rank] : sbuf;
            if (mine != 0 && (inplace || dev_s)) {
                st = mca_coll_dualrail_stage(host + displs[rank], src, mine, src, err, sizeof(err));
            } else if (mine != 0) {
                memcpy(host + displs[rank], sbuf, mine);
            }
            a.sendbuf = NULL;
            a.recvbuf = host;
        }
    }
    mca_coll_dualrail_fail_mode(&a, &user, st, err);
    st = dr_allgatherv(cm->mr, &a, err, sizeof(err));
    for (int r = 0; st == DR_OK && dev_r && r < size; ++r) {
        if (counts[r] != 0) {
            char *dst = base + displs[r];
            st = mca_coll_dualrail_stage(dst, host + displs[r], counts[r], dst, err, sizeof(err));
        }
    }
    free(host);
    free(counts);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Allgatherv", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_ALLGATHERV];
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: allgatherv on %s (%s) handed to the previous "
                     "module",
                     cm->world_rank, comm->c_name, rdtype->name);
    return m->previous_allgatherv(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, comm,
                                  m->previous_allgatherv_module);
}
