/*
 * What differs between the coll frameworks of Open MPI 4.1 and 5.0, decided at
 * build time from the version macros of Open MPI's own headers. Included by
 * coll_dualrail.h, so every glue file sees it; nothing else of the component
 * tests a version.
 *
 * The collective function types (mca_coll_base_module_*_fn_t), the module's
 * enable hook and the order in which coll/base calls it (before it copies the
 * module's functions into comm->c_coll, so c_coll still holds the previous
 * module's) are the same in 4.1 and 5.0; these are not:
 *
 *   component struct  4.1: mca_coll_base_component_2_0_0_t (coll API 2.0.0)
 *                     5.0: mca_coll_base_component_2_4_0_t (coll API 2.4.0)
 *   communicator id   4.1: ompi_comm_get_cid(), the same on every member
 *                     5.0: ompi_comm_get_local_cid() is a process-local index;
 *                          it agrees across members only where Open MPI
 *                          agreed it (OMPI_COMM_GLOBAL_INDEX): communicators
 *                          from MPI_Comm_create_from_group may differ
 */
#ifndef MCA_COLL_DUALRAIL_COMPAT_H
#define MCA_COLL_DUALRAIL_COMPAT_H

#include "ompi_config.h"

#include <stdbool.h>
#include <stdint.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"

#if !defined(OMPI_MAJOR_VERSION)
#error "coll/dualrail: Open MPI's version macros are missing (ompi_config.h)"
#endif

/* For a glue file that needs a finer check than the major version. */
#define DUALRAIL_OMPI_AT_LEAST(major, minor)                                                       \
    (OMPI_MAJOR_VERSION > (major) ||                                                               \
     (OMPI_MAJOR_VERSION == (major) && OMPI_MINOR_VERSION >= (minor)))

#if OMPI_MAJOR_VERSION == 4
typedef mca_coll_base_component_2_0_0_t mca_coll_dualrail_base_component_t;
#define DUALRAIL_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
#elif OMPI_MAJOR_VERSION == 5
typedef mca_coll_base_component_2_4_0_t mca_coll_dualrail_base_component_t;
#define DUALRAIL_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
#else
#error "coll/dualrail supports Open MPI 4.1 and 5.0"
#endif

/* The communicator's id where every member sees the same one; false where it may differ
 * (the component then declines the communicator: keys must match across ranks). */
static inline bool mca_coll_dualrail_comm_cid(struct ompi_communicator_t *comm, uint32_t *cid)
{
#if OMPI_MAJOR_VERSION >= 5
    if (!OMPI_COMM_IS_GLOBAL_INDEX(comm) && !OMPI_COMM_IS_INTRINSIC(comm)) {
        return false;
    }
    *cid = ompi_comm_get_local_cid(comm);
#else
    *cid = ompi_comm_get_cid(comm);
#endif
    return true;
}

/* The communicator's id for a log message only (any communicator, an intercommunicator
 * too): 4.1's ompi_comm_get_cid() does not exist in 5.0, whose process-local index is what
 * its own messages print. Never a key: mca_coll_dualrail_comm_cid() is. */
static inline uint32_t mca_coll_dualrail_comm_log_id(struct ompi_communicator_t *comm)
{
#if OMPI_MAJOR_VERSION >= 5
    return ompi_comm_get_local_cid(comm);
#else
    return ompi_comm_get_cid(comm);
#endif
}

#endif
