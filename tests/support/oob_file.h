/*
 * Out-of-band address exchange through files in a shared directory: the lab's
 * nodes are network namespaces on one machine, so they share a filesystem.
 * Used by the lab tests and benchmarks, where no MPI runtime is present.
 */
#ifndef DUALRAIL_OOB_FILE_H
#define DUALRAIL_OOB_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write DIR/ID.addr atomically (write a temporary file, then rename). 0 on success. */
int dr_oob_publish(const char *dir, unsigned id, const void *blob, size_t len);

/* Wait up to timeout seconds for DIR/ID.addr; *blob is malloc'ed. 0 on success. */
int dr_oob_fetch(const char *dir, unsigned id, double timeout, void **blob, size_t *len);

struct dr_mr;

/*
 * Publish this context's address as DIR/SELF.addr, wait for DIR/PEER.addr and
 * add that peer. 0 on success; otherwise -1 with the reason in err.
 */
int dr_oob_connect(struct dr_mr *mr, const char *dir, unsigned self, unsigned peer, double timeout,
                   char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
