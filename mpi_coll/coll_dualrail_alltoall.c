/*
 * coll/dualrail MPI_Alltoall: checks the call, then runs the plane-striped
 * alltoall (dr_alltoall.h: pairwise exchange with steps in flight for large
 * blocks, Bruck for small ones). MPI_IN_PLACE as MPI defines it for
 * alltoall: sendcount and sendtype are ignored, the blocks are taken from
 * recvbuf and replaced there. What it does not handle goes to the previous
 * module before any data moves: derived or non-contiguous datatypes, send
 * and receive blocks of different sizes (erroneous in MPI; the previous
 * module reports it), an inactive module. Buffers in device memory are
 * staged whole through host memory.
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_alltoall.h"
#include "dr_coll_gpu.h"

void mca_coll_dualrail_alltoall_args(mca_coll_dualrail_module_t *m,
                                     struct ompi_communicator_t *comm, const void *sbuf, void *rbuf,
                                     size_t bytes, dr_alltoall_args_t *a,
                                     mca_coll_dualrail_idle_t *idle_state)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    memset(a, 0, sizeof(*a));
    mca_coll_dualrail_args_init(m, comm, DR_KIND_ALLTOALL, &a->c, idle_state);
    a->c.sendbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
    a->c.recvbuf = rbuf;
    a->c.bytes = bytes;
    a->c.algorithm = cm->alltoall_algorithm;
    a->c.small_max_bytes = cm->alltoall_small_max_bytes;
    a->window = (int)cm->alltoall_window;
}

int mca_coll_dualrail_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int inplace = sbuf == MPI_IN_PLACE;
    size_t bytes = 0;

    ++m->calls[DR_KIND_ALLTOALL];
    if (!m->active ||
        !mca_coll_dualrail_block_bytes(sbuf, scount, sdtype, rcount, rdtype, &bytes)) {
        goto fallback;
    }
    const bool dev_s = !inplace && bytes != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = bytes != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    dr_alltoall_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_alltoall_args(m, comm, sbuf, rbuf, bytes, &a, &idle_state);
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: alltoall on %s: %d x %s%s, algorithm %d",
                     cm->world_rank, comm->c_name, rcount, rdtype->name, inplace ? " in place" : "",
                     dr_alltoall_choose(&a));
    char err[512];
    dr_status_t st = DR_OK;
    char *host = NULL;
    const size_t total = bytes * (size_t)a.c.size;
    const dr_coll_args_t user = a.c;
    if (dev_s || dev_r) {
        /* A staging failure fails this rank before it communicates (see bcast). Host
         * layout: [send copy | result]; a host side stays where it is. */
        host = malloc(dev_s && dev_r ? 2 * total : total);
        char *hsend = host, *hrecv = dev_s && dev_r ? host + total : host;
        if (host == NULL) {
            snprintf(err, sizeof(err), "no host memory to stage %zu bytes", total);
            st = DR_ERR_NO_MEMORY;
        } else {
            if (dev_s) {
                st = mca_coll_dualrail_stage(hsend, sbuf, total, sbuf, err, sizeof(err));
                a.c.sendbuf = hsend;
            }
            if (st == DR_OK && dev_r) {
                if (inplace) {
                    st = mca_coll_dualrail_stage(hrecv, rbuf, total, rbuf, err, sizeof(err));
                }
                a.c.recvbuf = hrecv;
            }
        }
    }
    mca_coll_dualrail_fail_mode(&a.c, &user, st, err);
    st = dr_alltoall(cm->mr, &a, err, sizeof(err));
    if (st == DR_OK && dev_r) {
        st = mca_coll_dualrail_stage(rbuf, a.c.recvbuf, total, rbuf, err, sizeof(err));
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Alltoall", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_ALLTOALL];
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: alltoall on %s (%d x %s) handed to the previous "
                     "module",
                     cm->world_rank, comm->c_name, rcount, rdtype->name);
    return m->previous_alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                m->previous_alltoall_module);
}
