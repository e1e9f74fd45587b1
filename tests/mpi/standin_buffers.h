/*
 * Stand-in device buffers for the MPI checks (coll_check, alltoall_check,
 * nb_check): with --device the buffers handed to MPI are "device" memory of
 * the host stand-in for a GPU (gpu/dr_gpu.h; the component runs with
 * coll_dualrail_gpu_standin 1), which faults on any CPU access, so a
 * collective that reads or writes them without staging crashes the check.
 */
#ifndef DUALRAIL_TESTS_STANDIN_BUFFERS_H
#define DUALRAIL_TESTS_STANDIN_BUFFERS_H

#include <stddef.h>

#include "gpu/dr_gpu.h"

extern const dr_mem_ops_t *dev_mem; /* after standin_open: the stand-in; NULL: host buffers */

/* --device: device copies from now on (MPI_Abort, naming prog, if the stand-in fails). */
void standin_open(const char *prog);
/* Its stream destroyed (nothing without --device). */
void standin_close(void);
/* A device copy of host (bytes), or host itself without --device. */
void *to_dev(void *host, size_t bytes);
/* Copy a device buffer back into host and free it (nothing when dev is host). */
void from_dev(void *host, void *dev, size_t bytes);

#endif
