/*
 * coll/dualrail MPI_Allgather: checks the call, then runs the plane-striped
 * allgather (dr_coll.h: ring for large, recursive doubling or Bruck for
 * small). MPI_IN_PLACE as MPI defines it for allgather: sendcount and
 * sendtype are ignored and this rank's block is already at its place in
 * recvbuf. What it does not handle goes to the previous module before any
 * data moves: derived or non-contiguous datatypes, send and receive blocks of
 * different sizes (erroneous in MPI; the previous module reports it), an
 * inactive module. Buffers in device memory are staged whole through host
 * memory: this rank's block copied out before, the result copied in after.
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

int mca_coll_dualrail_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int inplace = sbuf == MPI_IN_PLACE;
    size_t bytes = 0;

    ++m->calls[DR_KIND_ALLGATHER];
    if (!m->active ||
        !mca_coll_dualrail_block_bytes(sbuf, scount, sdtype, rcount, rdtype, &bytes)) {
        goto fallback;
    }
    const bool dev_s = !inplace && bytes != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = bytes != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_ALLGATHER, &a, &idle_state);
    a.sendbuf = inplace ? NULL : sbuf;
    a.recvbuf = rbuf;
    a.bytes = bytes;
    a.algorithm = cm->allgather_algorithm;
    if (a.algorithm == DR_ALLGATHER_RD && (a.size & (a.size - 1)) != 0) {
        /* forced recursive doubling on a communicator it cannot serve: its small-message
         * sibling, the same verdict on every rank */
        a.algorithm = DR_ALLGATHER_BRUCK;
    }
    a.small_max_bytes = cm->allgather_small_max_bytes;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allgather on %s: %d x %s%s, algorithm %d",
                     cm->world_rank, comm->c_name, rcount, rdtype->name,
                     inplace ? " in place" : "", dr_allgather_choose(&a));
    char err[512];
    dr_status_t st = DR_OK;
    void *host = NULL;
    const dr_coll_args_t user = a;
    if (dev_s || dev_r) {
        /* A staging failure fails this rank before it communicates (see bcast). */
        const size_t total = bytes * (size_t)a.size;
        char *mine = (char *)rbuf + (size_t)a.rank * bytes;
        host = malloc(dev_r ? total : bytes);
        if (host == NULL) {
            snprintf(err, sizeof(err), "no host memory to stage %zu bytes", total);
            st = DR_ERR_NO_MEMORY;
        } else if (!dev_r) {
            /* device send buffer, host result */
            st = mca_coll_dualrail_stage(host, sbuf, bytes, sbuf, err, sizeof(err));
            a.sendbuf = host;
        } else {
            /* the result on the device: gather on the host, this rank's block from the send
             * buffer (host or device) or, in place, from its place in recvbuf */
            char *hmine = (char *)host + (size_t)a.rank * bytes;
            const void *src = inplace ? mine : sbuf;
            if (inplace || dev_s) {
                st = mca_coll_dualrail_stage(hmine, src, bytes, src, err, sizeof(err));
            } else {
                memcpy(hmine, sbuf, bytes);
            }
            a.sendbuf = NULL;
            a.recvbuf = host;
        }
    }
    mca_coll_dualrail_fail_mode(&a, &user, st, err);
    st = dr_allgather(cm->mr, &a, err, sizeof(err));
    if (st == DR_OK && dev_r) {
        st = mca_coll_dualrail_stage(rbuf, host, bytes * (size_t)a.size, rbuf, err, sizeof(err));
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Allgather", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_ALLGATHER];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allgather on %s (%d x %s) handed to the previous "
                     "module", cm->world_rank, comm->c_name, rcount, rdtype->name);
    return m->previous_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                 m->previous_allgather_module);
}
