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

/*
 * The two-rank lab checks (tests/lab/cold_plane_check.c, small_plane_check.c): parses
 * "--rank 0|1 --dir DIR [--trials N]" (N in [min_trials, max_trials]; *trials holds the
 * default), then makes a ucx_mr context on the lab's two planes, connects it to the other
 * rank through DIR and fixes its weights toward it (weights[rank], two planes). Returns
 * the context, or NULL after printing why, as "NAME: ...": usage on bad arguments, the
 * set-up's reason otherwise (the check then exits 2).
 */
struct dr_mr *dr_lab_pair_open(int argc, char **argv, const char *name, int *rank, int *trials,
                               int min_trials, int max_trials, const unsigned weights[2][2]);

#ifdef __cplusplus
}
#endif

#endif
