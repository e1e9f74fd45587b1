/*
 * Non-blocking collectives of the algorithm layer: the blocking schedules of
 * dr_coll.h run as resumable tasks (algo/task.hpp), advanced by
 * dr_nb_progress(), which the glue calls from opal_progress.
 *
 * Order. A queue (one per communicator) holds its collectives in the order
 * they were started; only its oldest runs, the next starts when it finishes,
 * so they complete in that order on every rank (MPI matches collectives on a
 * communicator by their order of issue). Different queues run side by side.
 *
 * Threads. Any thread may start a collective (on a queue no other thread uses
 * at that moment: MPI forbids concurrent collectives on one communicator) and
 * any thread may call dr_nb_progress: one thread at a time runs the tasks
 * (a second one returns at once), holding the scheduler's lock only while a
 * task computes, never while it waits (a task yields at every wait). The
 * ucx_mr context must be thread safe when more than one thread calls in.
 */
#ifndef DUALRAIL_MPI_COLL_DR_COLL_NB_H
#define DUALRAIL_MPI_COLL_DR_COLL_NB_H

#include "dr_alltoall.h"
#include "dr_coll.h"
#include "dualrail/key.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dr_nb_queue dr_nb_queue_t;

/*
 * Called once per collective, from dr_nb_progress (possibly inside the call
 * that started it), after its task finished: st and err as the blocking
 * call's (err "" on success, valid during the call only).
 */
typedef void (*dr_nb_done_fn)(void *arg, dr_status_t st, const char *err);

/* NULL when out of memory. */
dr_nb_queue_t *dr_nb_queue_new(void);
/* Only with nothing outstanding on it. */
void dr_nb_queue_free(dr_nb_queue_t *q);
/* Collectives started on q and not yet done. */
int dr_nb_queue_pending(const dr_nb_queue_t *q);

/*
 * Start a non-blocking allreduce (a->idle is ignored; the arguments are
 * copied, the buffers and reduce_arg must stay valid until done). DR_OK: it
 * is queued (and runs up to its first wait at once when nothing is ahead of
 * it); done will be called exactly once. Otherwise nothing was started, done
 * is never called, and err says why.
 */
dr_status_t dr_iallreduce(dr_mr_t *mr, dr_nb_queue_t *q, const dr_allreduce_args_t *a,
                          dr_nb_done_fn done, void *done_arg, char *err, size_t errlen);
/* The same for DR_KIND_BCAST, DR_KIND_BARRIER, DR_KIND_ALLGATHER and
 * DR_KIND_REDUCE_SCATTER_BLOCK (a->elem_size, reduce and reduce_arg set, as for
 * dr_reduce_scatter_block). */
dr_status_t dr_icoll(dr_mr_t *mr, dr_nb_queue_t *q, int kind, const dr_coll_args_t *a,
                     dr_nb_done_fn done, void *done_arg, char *err, size_t errlen);
/* The same for an alltoall (dr_alltoall's arguments; the v-layout fields are ignored). */
dr_status_t dr_ialltoall(dr_mr_t *mr, dr_nb_queue_t *q, const dr_alltoall_args_t *a,
                         dr_nb_done_fn done, void *done_arg, char *err, size_t errlen);

/*
 * Resume every queue's running task once (and start the next of a queue whose
 * task finished). Returns the collectives completed. Returns 0 at once when
 * nothing is outstanding, or when another thread is running the tasks.
 */
int dr_nb_progress(void);

/* Collectives outstanding in the process (a hint, read without a lock). */
int dr_nb_outstanding(void);

/* Stacks the task pool has mapped since the start (tests: the steady state maps none). */
unsigned long dr_nb_stacks_mapped(void);

#ifdef __cplusplus
}
#endif

#endif
