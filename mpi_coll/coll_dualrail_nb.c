/*
 * coll/dualrail non-blocking collectives: MPI_Iallreduce, MPI_Ibcast,
 * MPI_Iallgather, MPI_Ibarrier, MPI_Ireduce_scatter_block, MPI_Ialltoall
 * (MPI_IN_PLACE where the blocking form takes it). Each call is checked as its blocking form
 * (the same fallbacks, to the previous module's non-blocking entry, before
 * any data moves), then started as a task of
 * the algorithm layer (dr_coll_nb.h) that runs the blocking schedule and
 * yields at every wait. The tasks advance from the progress callback
 * registered with opal_progress, so MPI_Test, MPI_Wait and any other MPI call
 * progress them; they complete in issue order per communicator.
 *
 * Keys: a non-blocking collective takes its blocking kind's next sequence
 * number (MPI orders blocking and non-blocking collectives on a communicator
 * alike, so every rank numbers them the same).
 *
 * Requests (the life cycle of Open MPI 4.1's coll/libnbc and coll/ucc):
 * from a free list, OMPI_REQUEST_INIT, type OMPI_REQUEST_COLL, active; the
 * communicator is retained until the request is freed (MPI lets a program
 * free a communicator with collectives outstanding); completion sets
 * req_status.MPI_ERROR (MPI_SUCCESS or the failure's class, the failure
 * printed in one line naming the collective, communicator and peer) and calls
 * ompi_request_complete, so MPI_Wait and MPI_Test raise it through the
 * communicator's error handler; MPI_Cancel is refused (MPI_ERR_REQUEST: MPI
 * does not allow cancelling a collective); freeing a running request is
 * refused (MPI_ERR_REQUEST), as libnbc does.
 */
#include "coll_dualrail.h"

#include <stdarg.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"
#include "opal/class/opal_free_list.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"
#include "dr_coll_nb.h"

typedef struct mca_coll_dualrail_request_t {
    ompi_request_t super;
    struct ompi_communicator_t *comm;
    const char *what;                    /* "MPI_Iallreduce": how a failure names it */
    mca_coll_dualrail_reduce_ctx_t rctx; /* the reduction's op and datatype (iallreduce,
                                          * ireduce_scatter_block): read until completion */
    mca_coll_dualrail_nb_staging_t staging; /* device buffers' host copies (coll_dualrail_gpu.c) */
    struct mca_coll_dualrail_request_t *deferred_next; /* in nb_deferred (request_done) */
} mca_coll_dualrail_request_t;

OBJ_CLASS_INSTANCE(mca_coll_dualrail_request_t, ompi_request_t, NULL, NULL);

void mca_coll_dualrail_nb_open(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    OBJ_CONSTRUCT(&cm->nb_requests, opal_free_list_t);
    /* Nothing allocated until the first non-blocking call; then 16 at a time, unbounded. */
    cm->nb_requests_ready =
        opal_free_list_init(&cm->nb_requests, sizeof(mca_coll_dualrail_request_t),
                            opal_cache_line_size, OBJ_CLASS(mca_coll_dualrail_request_t), 0, 0, 0,
                            -1, 16, NULL, 0, NULL, NULL, NULL) == OPAL_SUCCESS;
}

/*
 * The progress thread (coll_dualrail_progress_thread): while a non-blocking collective is
 * outstanding it progresses the planes and resumes the tasks, and sleeps when nothing moved
 * (dr_mr_wait_event: a 50 us nap, or on the planes' descriptors with coll_dualrail_wakeup,
 * woken by data, at most 1 ms, so timeouts keep running);
 * with none outstanding it waits on a condition a start signals. It never calls
 * opal_progress (the application may not have asked for threads).
 */
static pthread_t nb_thread;
static pthread_mutex_t nb_thread_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nb_thread_cv = PTHREAD_COND_INITIALIZER;
static int nb_thread_running, nb_thread_stop;

/*
 * Requests whose task the progress thread finished while the job is not MPI_THREAD_MULTIPLE.
 * Open MPI then updates a waiter's count without atomics (wait_sync_update: two threads
 * completing two requests of one MPI_Waitall at once can lose one, and the wait never
 * ends), so only the application's thread completes requests: the progress thread queues
 * them here and the next progress call (MPI_Test, MPI_Wait, any MPI call) completes them.
 * The transfers, the reductions and a device result's copy have run by then. A request the
 * application's thread finishes itself completes after those queued before it (they
 * finished earlier: dr_nb reports in finishing order), so that a communicator's requests
 * still complete in the order they were started.
 */
static pthread_mutex_t nb_deferred_mu = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_dualrail_request_t *nb_deferred_head, *nb_deferred_tail;
static int nb_deferred_n;                          /* queued; read without the lock first */
static unsigned long nb_on_thread, nb_handed_over; /* completions by the thread: done, queued */

/*
 * Lines the progress thread has to say while the job is not MPI_THREAD_MULTIPLE (ucx_mr's
 * plane transitions from its dr_mr_progress, a failed request's line). opal_output keeps
 * its formatting buffer in unlocked globals then, so two threads printing at once can
 * corrupt each other's line or its memory: the thread queues them here and the
 * application's thread prints them at its next progress call, in order. A burst beyond
 * DUALRAIL_NB_LINES is counted and said as one line.
 */
#define DUALRAIL_NB_LINES    64
#define DUALRAIL_NB_LINE_MAX 512
static char nb_lines[DUALRAIL_NB_LINES][DUALRAIL_NB_LINE_MAX];
static int nb_lines_n;                          /* queued; read without the lock first */
static unsigned long nb_lines_dropped;          /* beyond the queue, not yet said */
static unsigned long nb_lines_said_on_thread;   /* printed by the thread itself */
static unsigned long nb_lines_handed;           /* queued for the application's thread */

static int nb_on_progress_thread(void)
{
    return nb_thread_running && pthread_equal(pthread_self(), nb_thread);
}

void mca_coll_dualrail_say(const char *fmt, ...)
{
    const int on_thread = nb_on_progress_thread();
    va_list ap;
    va_start(ap, fmt);
    if (on_thread && !mca_coll_dualrail_component.thread_multiple) {
        pthread_mutex_lock(&nb_deferred_mu);
        if (nb_lines_n < DUALRAIL_NB_LINES) {
            vsnprintf(nb_lines[nb_lines_n], DUALRAIL_NB_LINE_MAX, fmt, ap);
            __atomic_store_n(&nb_lines_n, nb_lines_n + 1, __ATOMIC_RELEASE);
        } else {
            ++nb_lines_dropped;
        }
        ++nb_lines_handed;
        pthread_mutex_unlock(&nb_deferred_mu);
    } else {
        char line[2048];
        vsnprintf(line, sizeof(line), fmt, ap);
        if (on_thread) {
            ++nb_lines_said_on_thread;
        }
        opal_output(mca_coll_dualrail_component.output, "%s", line);
    }
    va_end(ap);
}

/* Print what the progress thread queued (the application's thread). The thread does not
 * print below MPI_THREAD_MULTIPLE, so printing under the lock races with nobody. */
static void nb_lines_flush(void)
{
    if (__atomic_load_n(&nb_lines_n, __ATOMIC_ACQUIRE) == 0) {
        return;
    }
    pthread_mutex_lock(&nb_deferred_mu);
    for (int i = 0; i < nb_lines_n; ++i) {
        opal_output(mca_coll_dualrail_component.output, "%s", nb_lines[i]);
    }
    if (nb_lines_dropped != 0) {
        opal_output(mca_coll_dualrail_component.output,
                    "coll/dualrail: rank %d: progress thread: %lu more line(s) left out",
                    mca_coll_dualrail_component.world_rank, nb_lines_dropped);
        nb_lines_dropped = 0;
    }
    __atomic_store_n(&nb_lines_n, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&nb_deferred_mu);
}

static void *nb_thread_main(void *arg)
{
    dr_mr_t *mr = arg;
    for (;;) {
        pthread_mutex_lock(&nb_thread_mu);
        while (!nb_thread_stop && dr_nb_outstanding() == 0) {
            pthread_cond_wait(&nb_thread_cv, &nb_thread_mu);
        }
        const int stop = nb_thread_stop;
        pthread_mutex_unlock(&nb_thread_mu);
        if (stop) {
            return NULL;
        }
        const int events = dr_mr_progress(mr);
        if (dr_nb_progress() == 0 && events == 0) {
            dr_mr_wait_event(mr, 0.001);
        }
    }
}

void mca_coll_dualrail_nb_thread_start(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    if (nb_thread_running || cm->mr == NULL) {
        return;
    }
    nb_thread_stop = 0;
    if (pthread_create(&nb_thread, NULL, nb_thread_main, cm->mr) != 0) {
        opal_output(cm->output,
                    "coll/dualrail: rank %d: no progress thread (pthread_create "
                    "failed): non-blocking collectives advance inside MPI calls only",
                    cm->world_rank);
        return;
    }
    nb_thread_running = 1;
    DUALRAIL_VERBOSE(1, "coll/dualrail: rank %d: progress thread started", cm->world_rank);
}

/* A collective was started: wake the progress thread if it idles. */
static void nb_thread_kick(void)
{
    if (nb_thread_running) {
        pthread_mutex_lock(&nb_thread_mu);
        pthread_cond_signal(&nb_thread_cv);
        pthread_mutex_unlock(&nb_thread_mu);
    }
}

/* Complete what the progress thread queued (the application's thread); how many. */
static int nb_deferred_complete(void)
{
    if (__atomic_load_n(&nb_deferred_n, __ATOMIC_ACQUIRE) == 0) {
        return 0;
    }
    pthread_mutex_lock(&nb_deferred_mu);
    mca_coll_dualrail_request_t *req = nb_deferred_head;
    nb_deferred_head = nb_deferred_tail = NULL;
    __atomic_store_n(&nb_deferred_n, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&nb_deferred_mu);
    int n = 0;
    while (req != NULL) {
        mca_coll_dualrail_request_t *next = req->deferred_next;
        ompi_request_complete(&req->super, true);
        req = next;
        ++n;
    }
    return n;
}

void mca_coll_dualrail_nb_close(void)
{
    if (nb_thread_running) {
        pthread_mutex_lock(&nb_thread_mu);
        nb_thread_stop = 1;
        pthread_cond_signal(&nb_thread_cv);
        pthread_mutex_unlock(&nb_thread_mu);
        pthread_join(nb_thread, NULL);
        nb_thread_running = 0;
        (void)nb_deferred_complete();
        nb_lines_flush();
        DUALRAIL_VERBOSE(1,
                         "coll/dualrail: rank %d: progress thread: %lu collective(s) completed "
                         "on it, %lu handed to the application's thread; %lu line(s) printed "
                         "on it, %lu handed over%s",
                         mca_coll_dualrail_component.world_rank, nb_on_thread, nb_handed_over,
                         nb_lines_said_on_thread, nb_lines_handed,
                         mca_coll_dualrail_component.thread_multiple
                             ? ""
                             : " (not MPI_THREAD_MULTIPLE: the application's thread completes "
                               "them)");
    }
    OBJ_DESTRUCT(&mca_coll_dualrail_component.nb_requests);
    mca_coll_dualrail_component.nb_requests_ready = false;
}

void mca_coll_dualrail_nb_module_init(mca_coll_dualrail_module_t *m)
{
    m->nb_queue = NULL;
    memset(m->nb_calls, 0, sizeof(m->nb_calls));
    memset(m->nb_fallbacks, 0, sizeof(m->nb_fallbacks));
    m->previous_iallreduce = NULL;
    m->previous_iallreduce_module = NULL;
    m->previous_ibcast = NULL;
    m->previous_ibcast_module = NULL;
    m->previous_ibarrier = NULL;
    m->previous_ibarrier_module = NULL;
    m->previous_iallgather = NULL;
    m->previous_iallgather_module = NULL;
    m->previous_ireduce_scatter_block = NULL;
    m->previous_ireduce_scatter_block_module = NULL;
    m->previous_ialltoall = NULL;
    m->previous_ialltoall_module = NULL;
}

void mca_coll_dualrail_nb_module_fini(mca_coll_dualrail_module_t *m)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    for (int k = 0; k < DR_KIND_COUNT; ++k) {
        if (m->nb_calls[k] != 0) {
            DUALRAIL_VERBOSE(1,
                             "coll/dualrail: rank %d: communicator %s (cid %u): %llu i%s "
                             "call(s), %llu handed to the previous module",
                             cm->world_rank, m->comm ? m->comm->c_name : "?", m->comm_id,
                             (unsigned long long)m->nb_calls[k], mca_coll_dualrail_kind_name(k),
                             (unsigned long long)m->nb_fallbacks[k]);
        }
        /* the statistics table at finalize sums every communicator's, as the blocking ones */
        cm->nb_kind_calls[k] += m->nb_calls[k];
        cm->nb_kind_fallbacks[k] += m->nb_fallbacks[k];
    }
    /* Every request retains the communicator: none can be outstanding here. */
    dr_nb_queue_free(m->nb_queue);
    mca_coll_base_module_t *prev[] = {m->previous_iallreduce_module,
                                      m->previous_ibcast_module,
                                      m->previous_ibarrier_module,
                                      m->previous_iallgather_module,
                                      m->previous_ireduce_scatter_block_module,
                                      m->previous_ialltoall_module};
    for (size_t i = 0; i < sizeof(prev) / sizeof(prev[0]); ++i) {
        if (prev[i] != NULL) {
            OBJ_RELEASE(prev[i]);
        }
    }
    mca_coll_dualrail_nb_module_init(m);
}

void mca_coll_dualrail_nb_query(mca_coll_dualrail_module_t *m)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    /* Taken only with the blocking form: their checks, fallbacks and algorithms are one. */
    const int nb = cm->nb_enable && cm->nb_requests_ready;
    m->super.coll_iallreduce = nb ? mca_coll_dualrail_iallreduce : NULL;
    m->super.coll_ibcast = nb && cm->bcast_enable ? mca_coll_dualrail_ibcast : NULL;
    m->super.coll_ibarrier = nb && cm->barrier_enable ? mca_coll_dualrail_ibarrier : NULL;
    m->super.coll_iallgather = nb && cm->allgather_enable ? mca_coll_dualrail_iallgather : NULL;
    m->super.coll_ireduce_scatter_block =
        nb && cm->reduce_scatter_block_enable ? mca_coll_dualrail_ireduce_scatter_block : NULL;
    m->super.coll_ialltoall = nb && cm->alltoall_enable ? mca_coll_dualrail_ialltoall : NULL;
}

int mca_coll_dualrail_nb_enable(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm)
{
    /* As DUALRAIL_SAVE in module_enable: the previous module of each, retained. */
#define DUALRAIL_NB_SAVE(coll)                                                                     \
    do {                                                                                           \
        if (m->super.coll_##coll != NULL) {                                                        \
            m->previous_##coll = comm->c_coll->coll_##coll;                                        \
            m->previous_##coll##_module = comm->c_coll->coll_##coll##_module;                      \
            if (m->previous_##coll == NULL || m->previous_##coll##_module == NULL) {               \
                opal_output(mca_coll_dualrail_component.output,                                    \
                            "coll/dualrail: no previous " #coll " on %s", comm->c_name);           \
                return OMPI_ERROR;                                                                 \
            }                                                                                      \
            OBJ_RETAIN(m->previous_##coll##_module);                                               \
        }                                                                                          \
    } while (0)
    DUALRAIL_NB_SAVE(iallreduce);
    DUALRAIL_NB_SAVE(ibcast);
    DUALRAIL_NB_SAVE(ibarrier);
    DUALRAIL_NB_SAVE(iallgather);
    DUALRAIL_NB_SAVE(ireduce_scatter_block);
    DUALRAIL_NB_SAVE(ialltoall);
#undef DUALRAIL_NB_SAVE
    return OMPI_SUCCESS;
}

/*
 * A thread in MPI_Wait (or any wait loop) calls opal_progress back to back. While it waits
 * for a non-blocking collective, it then behaves as a blocking collective's wait does
 * (mca_coll_dualrail_idle): polls for 20 us, yields until spin_time, then sleeps on the
 * planes' descriptors (woken at once by data, at most 1 ms). Spinning instead halves a
 * collective's speed when ranks share cores (the lab: 4 ranks on 2 cores). Calls further
 * apart than kBackToBack (MPI_Test from a compute loop) never sleep.
 */
#define DUALRAIL_NB_BACK_TO_BACK  100e-6
#define DUALRAIL_SPIN_NO_YIELD_NB 20e-6 /* as coll_dualrail_common.c's */
#define DUALRAIL_NB_RESUME_EVERY  50e-6
static __thread double nb_idle_since, nb_last_call, nb_last_resume;

int mca_coll_dualrail_nb_progress(int events)
{
    nb_lines_flush();
    const int handed = nb_deferred_complete();
    if (dr_nb_outstanding() == 0) {
        return handed;
    }
    /* A task is resumed (two context switches, each a system call for the signal mask)
     * when the planes did something, and otherwise at most every DUALRAIL_NB_RESUME_EVERY:
     * its transfers may have completed in someone else's progress (a blocking collective's
     * waits progress the planes themselves), and its timeouts must keep running. */
    const double now = MPI_Wtime();
    int done = 0;
    if (events != 0 || now - nb_last_resume > DUALRAIL_NB_RESUME_EVERY) {
        done = dr_nb_progress();
        nb_last_resume = now;
    }
    if (events != 0 || done != 0 || handed != 0 || now - nb_last_call > DUALRAIL_NB_BACK_TO_BACK) {
        nb_idle_since = now;
    }
    nb_last_call = now;
    const double idle = now - nb_idle_since;
    if (idle < DUALRAIL_SPIN_NO_YIELD_NB) {
        return done + handed;
    } else if (idle < mca_coll_dualrail_component.spin_time) {
        sched_yield();
    } else {
        dr_mr_wait_event(mca_coll_dualrail_component.mr, 0.001);
        nb_last_call = MPI_Wtime();
    }
    return done + handed;
}

static int request_free(ompi_request_t **r)
{
    mca_coll_dualrail_request_t *req = (mca_coll_dualrail_request_t *)*r;
    if (!REQUEST_COMPLETE(&req->super)) {
        return MPI_ERR_REQUEST; /* its task still runs and writes the buffers */
    }
    struct ompi_communicator_t *comm = req->comm;
    OMPI_REQUEST_FINI(&req->super);
    opal_free_list_return(&mca_coll_dualrail_component.nb_requests, (opal_free_list_item_t *)req);
    *r = MPI_REQUEST_NULL;
    OBJ_RELEASE(comm);
    return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t *r, int complete)
{
    (void)r;
    (void)complete;
    return MPI_ERR_REQUEST; /* MPI: a collective cannot be cancelled */
}

/* From dr_nb_progress, outside its lock (the caller's thread or the progress thread): a
 * device receive buffer's result copied in, the status, then completion. */
static void request_done(void *arg, dr_status_t st, const char *err)
{
    mca_coll_dualrail_request_t *req = arg;
    char serr[256];
    if (req->staging.host_s != NULL || req->staging.host_r != NULL) {
        const dr_status_t ss =
            mca_coll_dualrail_nb_stage_out(&req->staging, st, serr, sizeof(serr));
        if (st == DR_OK && ss != DR_OK) {
            st = ss;
            err = serr;
        }
    }
    req->super.req_status.MPI_ERROR =
        st == DR_OK ? MPI_SUCCESS : mca_coll_dualrail_failed(req->comm, req->what, st, err);
    if (nb_thread_running && pthread_equal(pthread_self(), nb_thread)) {
        if (!mca_coll_dualrail_component.thread_multiple) {
            /* see nb_deferred_mu */
            req->deferred_next = NULL;
            pthread_mutex_lock(&nb_deferred_mu);
            if (nb_deferred_tail != NULL) {
                nb_deferred_tail->deferred_next = req;
            } else {
                nb_deferred_head = req;
            }
            nb_deferred_tail = req;
            __atomic_add_fetch(&nb_deferred_n, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&nb_deferred_mu);
            ++nb_handed_over;
            return;
        }
        ++nb_on_thread;
    } else if (!mca_coll_dualrail_component.thread_multiple) {
        (void)nb_deferred_complete(); /* the earlier ones first (see nb_deferred_mu) */
    }
    ompi_request_complete(&req->super, true);
}

static mca_coll_dualrail_request_t *request_get(struct ompi_communicator_t *comm, const char *what)
{
    opal_free_list_item_t *item = opal_free_list_get(&mca_coll_dualrail_component.nb_requests);
    if (item == NULL) {
        return NULL;
    }
    mca_coll_dualrail_request_t *req = (mca_coll_dualrail_request_t *)item;
    OMPI_REQUEST_INIT(&req->super, false);
    req->super.req_type = OMPI_REQUEST_COLL;
    req->super.req_state = OMPI_REQUEST_ACTIVE;
    req->super.req_status = ompi_status_empty;
    req->super.req_status.MPI_ERROR = MPI_SUCCESS;
    req->super.req_free = request_free;
    req->super.req_cancel = request_cancel;
    req->super.req_mpi_object.comm = comm;
    req->comm = comm;
    req->what = what;
    memset(&req->staging, 0, sizeof(req->staging));
    OBJ_RETAIN(comm);
    return req;
}

/* Undo request_get for a call that did not start (its fallback runs instead). */
static void request_put(mca_coll_dualrail_request_t *req)
{
    struct ompi_communicator_t *comm = req->comm;
    mca_coll_dualrail_nb_stage_free(&req->staging);
    OMPI_REQUEST_FINI(&req->super);
    opal_free_list_return(&mca_coll_dualrail_component.nb_requests, (opal_free_list_item_t *)req);
    OBJ_RELEASE(comm);
}

/*
 * Every call's start: counted; then, when taken is false (the blocking form's verdict on the
 * arguments, which MPI makes the same on every rank), OMPI_SUCCESS with *req NULL: the caller
 * hands the call to the previous module (handed). Otherwise what a taken call still needs:
 * its communicator's queue (created at the first call: MPI forbids concurrent collectives on
 * one communicator), host buffers, and a request. These are this rank's facts only, so none
 * of them may send the call to the previous module (the other ranks would run dualrail and
 * wait for this one): a missing one fails the call with an MPI error instead. Device buffers
 * are this rank's fact too: they are staged (staged()), never handed over (the previous
 * module would read them as host memory; Debian's Open MPI has no CUDA support).
 */
static int prologue(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, int kind,
                    bool taken, const char *what, mca_coll_dualrail_request_t **req)
{
    ++m->nb_calls[kind];
    *req = NULL;
    if (!taken) {
        return OMPI_SUCCESS;
    }
    if (m->nb_queue == NULL) {
        m->nb_queue = dr_nb_queue_new();
    }
    if (m->nb_queue == NULL || (*req = request_get(comm, what)) == NULL) {
        return mca_coll_dualrail_failed(comm, what, DR_ERR_NO_MEMORY,
                                        "no memory for a non-blocking collective's request");
    }
    return OMPI_SUCCESS;
}

/*
 * A call whose staging failed on this rank: its blocking kind run in fail mode
 * (dr_coll_args_t.fail) on the caller's buffers, with the same key (a non-blocking call takes
 * its blocking kind's next sequence number): no transfer, no wait, only the abort messages to
 * the peers its schedule exchanges with, whose tasks then fail instead of waiting for this
 * rank. args: as for staged().
 */
static void tell_peers(int kind, void *args, dr_status_t st, const char *why)
{
    dr_mr_t *mr = mca_coll_dualrail_component.mr;
    char line[256];
    if (kind == DR_KIND_ALLREDUCE) {
        dr_allreduce_args_t *a = (dr_allreduce_args_t *)args;
        a->fail = st;
        a->fail_why = why;
        (void)dr_allreduce(mr, a, line, sizeof(line));
    } else if (kind == DR_KIND_ALLTOALL) {
        dr_alltoall_args_t *a = (dr_alltoall_args_t *)args;
        a->c.fail = st;
        a->c.fail_why = why;
        (void)dr_alltoall(mr, a, line, sizeof(line));
    } else {
        dr_coll_args_t *a = (dr_coll_args_t *)args;
        a->fail = st;
        a->fail_why = why;
        (void)(kind == DR_KIND_BCAST       ? dr_bcast(mr, a, line, sizeof(line))
               : kind == DR_KIND_ALLGATHER ? dr_allgather(mr, a, line, sizeof(line))
                                           : dr_reduce_scatter_block(mr, a, line, sizeof(line)));
    }
}

/*
 * A taken call's buffers, where device memory, replaced by host copies (the arguments of
 * mca_coll_dualrail_nb_stage_in) for the call's task; the result goes to the device when the
 * task completes (request_done). A failure here fails the call on this rank before it sends
 * anything, and tell_peers() tells the peers whose tasks would wait for it. kind and args:
 * the call's kind and its arguments (dr_allreduce_args_t, dr_alltoall_args_t or
 * dr_coll_args_t). OMPI_SUCCESS, or the call's MPI error with req released.
 */
static int staged(mca_coll_dualrail_request_t *req, int kind, void *args, const void **sendbuf,
                  size_t s_bytes, void **recvbuf, size_t r_bytes, size_t in_bytes, size_t out_bytes,
                  struct ompi_datatype_t *holes, size_t elem)
{
    char err[256];
    const void *user_s = *sendbuf;
    void *user_r = *recvbuf;
    const dr_status_t st =
        mca_coll_dualrail_nb_stage_in(&req->staging, sendbuf, s_bytes, recvbuf, r_bytes,
                                      in_bytes, out_bytes, holes, elem, err, sizeof(err));
    if (st == DR_OK) {
        return OMPI_SUCCESS;
    }
    *sendbuf = user_s;
    *recvbuf = user_r;
    tell_peers(kind, args, st, err);
    const int rc = mca_coll_dualrail_failed(req->comm, req->what, st, err);
    request_put(req);
    return rc;
}

/* prologue for the kinds with a block per rank (iallgather, ialltoall): the blocking forms'
 * verdict on the blocks (block_bytes, *bytes: one block) decides whether it is taken. */
static int block_prologue(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, int kind,
                          const void *sbuf, int scount, struct ompi_datatype_t *sdtype, int rcount,
                          struct ompi_datatype_t *rdtype, const char *what, size_t *bytes,
                          mca_coll_dualrail_request_t **req)
{
    *bytes = 0;
    const bool taken =
        m->active && mca_coll_dualrail_block_bytes(sbuf, scount, sdtype, rcount, rdtype, bytes);
    return prologue(m, comm, kind, taken, what, req);
}

/* A call handed to the previous module, before any data moved: counted, said at verbose 2. */
static void handed(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, int kind,
                   int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    ++m->nb_fallbacks[kind];
    if (dtype == NULL) {
        DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: i%s on %s handed to the previous module",
                         mca_coll_dualrail_component.world_rank, mca_coll_dualrail_kind_name(kind),
                         comm->c_name);
        return;
    }
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: i%s on %s (%d x %s%s%s) handed to the previous "
                     "module",
                     mca_coll_dualrail_component.world_rank, mca_coll_dualrail_kind_name(kind),
                     comm->c_name, count, dtype->name[0] != '\0' ? dtype->name : "unnamed type",
                     op != NULL ? ", " : "", op != NULL ? op->o_name : "");
}

/*
 * Start the task, or report why not. A start that fails has moved no data and taken no
 * sequence number from the peers' point of view only if it failed on every rank: it fails
 * for lack of memory only, so it is reported as an error of this call (not a fallback).
 */
static int started(mca_coll_dualrail_request_t *req, dr_status_t st, const char *err,
                   ompi_request_t **request)
{
    if (st != DR_OK) {
        const int rc = mca_coll_dualrail_failed(req->comm, req->what, st, err);
        request_put(req);
        return rc;
    }
    *request = &req->super;
    nb_thread_kick();
    return OMPI_SUCCESS;
}

/* Start a kind that takes dr_icoll's arguments on m's queue. */
static int start_coll(mca_coll_dualrail_module_t *m, mca_coll_dualrail_request_t *req, int kind,
                      const dr_coll_args_t *a, ompi_request_t **request)
{
    char err[256];
    const dr_status_t st = dr_icoll(mca_coll_dualrail_component.mr, m->nb_queue, kind, a,
                                    request_done, req, err, sizeof(err));
    return started(req, st, err, request);
}

int mca_coll_dualrail_iallreduce(const void *sbuf, void *rbuf, int count,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;
    mca_coll_dualrail_request_t *req = NULL;

    const bool taken = m->active && count >= 0 && mca_coll_dualrail_op_supported(op, dtype, &elem);
    const int rc = prologue(m, comm, DR_KIND_ALLREDUCE, taken, "MPI_Iallreduce", &req);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    if (req == NULL) {
        handed(m, comm, DR_KIND_ALLREDUCE, count, dtype, op);
        return m->previous_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                      m->previous_iallreduce_module);
    }
    mca_coll_dualrail_reduce_ctx_init(&req->rctx, op, dtype);
    dr_allreduce_args_t a = {
        .sendbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf,
        .recvbuf = rbuf,
        .count = (size_t)count,
        .elem_size = elem,
        .reduce = mca_coll_dualrail_reduce,
        .reduce_arg = &req->rctx,
        .rank = ompi_comm_rank(comm),
        .size = ompi_comm_size(comm),
        .peer_ids = m->peer_ids,
        .comm_id = m->comm_id,
        .seq = m->seq[DR_KIND_ALLREDUCE]++ & DR_KEY_SEQ_MASK,
        .algorithm = cm->allreduce_algorithm,
        .rd_max_bytes = cm->rd_max_bytes,
        .segment_size = cm->segment_size,
        .timeout = cm->op_timeout,
    };
    const size_t bytes = a.count * elem;
    /* in place, recvbuf is the input too */
    const int sr = staged(req, DR_KIND_ALLREDUCE, &a, &a.sendbuf, bytes, &a.recvbuf, bytes,
                          a.sendbuf ? 0 : bytes, bytes, mca_coll_dualrail_holes(dtype), elem);
    if (sr != OMPI_SUCCESS) {
        return sr;
    }
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: iallreduce on %s: %d x %s, %s, algorithm %d",
                     cm->world_rank, comm->c_name, count, dtype->name, op->o_name,
                     dr_allreduce_choose(&a));
    char err[256];
    const dr_status_t st =
        dr_iallreduce(cm->mr, m->nb_queue, &a, request_done, req, err, sizeof(err));
    return started(req, st, err, request);
}

/* The shared arguments of ibcast, iallgather, ibarrier (the kind's next sequence number). */
static void coll_args(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, int kind,
                      dr_coll_args_t *a)
{
    mca_coll_dualrail_idle_t unused;
    mca_coll_dualrail_args_init(m, comm, kind, a, &unused);
    a->idle = NULL; /* tasks yield instead (dr_coll_nb.h) */
    a->idle_arg = NULL;
}

int mca_coll_dualrail_ibcast(void *buff, int count, struct ompi_datatype_t *dtype, int root,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t bytes = 0;
    mca_coll_dualrail_request_t *req = NULL;

    const bool taken =
        m->active && count >= 0 && mca_coll_dualrail_dtype_bytes(dtype, (size_t)count, &bytes);
    const int rc = prologue(m, comm, DR_KIND_BCAST, taken, "MPI_Ibcast", &req);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    if (req == NULL) {
        handed(m, comm, DR_KIND_BCAST, count, dtype, NULL);
        return m->previous_ibcast(buff, count, dtype, root, comm, request,
                                  m->previous_ibcast_module);
    }
    dr_coll_args_t a;
    coll_args(m, comm, DR_KIND_BCAST, &a);
    a.recvbuf = buff;
    a.bytes = bytes;
    a.root = root;
    a.algorithm = cm->bcast_algorithm;
    a.small_max_bytes = cm->bcast_small_max_bytes;
    const bool is_root = a.rank == root;
    const int sr = staged(req, DR_KIND_BCAST, &a, &a.sendbuf, 0, &a.recvbuf, bytes,
                          is_root ? bytes : 0, is_root ? 0 : bytes, NULL, 0);
    if (sr != OMPI_SUCCESS) {
        return sr;
    }
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: ibcast on %s: %d x %s from root %d, algorithm %d",
                     cm->world_rank, comm->c_name, count, dtype->name, root, dr_bcast_choose(&a));
    return start_coll(m, req, DR_KIND_BCAST, &a, request);
}

int mca_coll_dualrail_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int inplace = sbuf == MPI_IN_PLACE;
    size_t bytes = 0;
    mca_coll_dualrail_request_t *req = NULL;

    const int rc = block_prologue(m, comm, DR_KIND_ALLGATHER, sbuf, scount, sdtype, rcount, rdtype,
                                  "MPI_Iallgather", &bytes, &req);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    if (req == NULL) {
        handed(m, comm, DR_KIND_ALLGATHER, rcount, rdtype, NULL);
        return m->previous_iallgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, request,
                                      m->previous_iallgather_module);
    }
    dr_coll_args_t a;
    coll_args(m, comm, DR_KIND_ALLGATHER, &a);
    a.sendbuf = inplace ? NULL : sbuf;
    a.recvbuf = rbuf;
    a.bytes = bytes;
    a.algorithm = cm->allgather_algorithm;
    if (a.algorithm == DR_ALLGATHER_RD && (a.size & (a.size - 1)) != 0) {
        a.algorithm = DR_ALLGATHER_BRUCK; /* as the blocking allgather */
    }
    a.small_max_bytes = cm->allgather_small_max_bytes;
    const size_t total = bytes * (size_t)a.size;
    /* in place, this rank's block is read from recvbuf (the whole of it is copied) */
    const int sr = staged(req, DR_KIND_ALLGATHER, &a, &a.sendbuf, bytes, &a.recvbuf, total,
                          inplace ? total : 0, total, NULL, 0);
    if (sr != OMPI_SUCCESS) {
        return sr;
    }
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: iallgather on %s: %d x %s%s, algorithm %d",
                     cm->world_rank, comm->c_name, rcount, rdtype->name, inplace ? " in place" : "",
                     dr_allgather_choose(&a));
    return start_coll(m, req, DR_KIND_ALLGATHER, &a, request);
}

int mca_coll_dualrail_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                               mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_request_t *req = NULL;

    const int rc = prologue(m, comm, DR_KIND_BARRIER, m->active, "MPI_Ibarrier", &req);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    if (req == NULL) {
        handed(m, comm, DR_KIND_BARRIER, 0, NULL, NULL);
        return m->previous_ibarrier(comm, request, m->previous_ibarrier_module);
    }
    dr_coll_args_t a;
    coll_args(m, comm, DR_KIND_BARRIER, &a);
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: ibarrier on %s, dissemination",
                     mca_coll_dualrail_component.world_rank, comm->c_name);
    return start_coll(m, req, DR_KIND_BARRIER, &a, request);
}

/*
 * MPI_Ireduce_scatter_block: the blocking form's checks and arguments (MPI_IN_PLACE: the
 * input in rbuf, this rank's block of the result at its start), as a task of the
 * reduce-scatter schedule (recursive halving or the pipelined ring).
 */
int mca_coll_dualrail_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                            struct ompi_communicator_t *comm,
                                            ompi_request_t **request,
                                            mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;
    mca_coll_dualrail_request_t *req = NULL;

    const bool taken = m->active && rcount >= 0 && mca_coll_dualrail_op_supported(op, dtype, &elem);
    const int rc =
        prologue(m, comm, DR_KIND_REDUCE_SCATTER_BLOCK, taken, "MPI_Ireduce_scatter_block", &req);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    if (req == NULL) {
        handed(m, comm, DR_KIND_REDUCE_SCATTER_BLOCK, rcount, dtype, op);
        return m->previous_ireduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, request,
                                                 m->previous_ireduce_scatter_block_module);
    }
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t unused; /* tasks yield instead of idling (dr_coll_nb.h) */
    mca_coll_dualrail_reduce_scatter_block_args(m, comm, sbuf, rbuf, rcount, elem, op, dtype,
                                                &req->rctx, &a, &unused);
    /* the input: n blocks in sendbuf, or in place in recvbuf; the result: one block */
    const size_t total = a.bytes * (size_t)a.size;
    const bool inplace = a.sendbuf == NULL;
    const int sr = staged(req, DR_KIND_REDUCE_SCATTER_BLOCK, &a, &a.sendbuf, total, &a.recvbuf,
                          inplace ? total : a.bytes, inplace ? total : 0, a.bytes,
                          mca_coll_dualrail_holes(dtype), elem);
    if (sr != OMPI_SUCCESS) {
        return sr;
    }
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: ireduce_scatter_block on %s: %d x %s, %s%s, "
                     "algorithm %d",
                     cm->world_rank, comm->c_name, rcount, dtype->name, op->o_name,
                     sbuf == MPI_IN_PLACE ? " in place" : "", dr_reduce_scatter_block_choose(&a));
    return start_coll(m, req, DR_KIND_REDUCE_SCATTER_BLOCK, &a, request);
}

/*
 * MPI_Ialltoall: the blocking form's checks and arguments (MPI_IN_PLACE: sendcount and
 * sendtype ignored, the blocks taken from rbuf and replaced there), as a task of the
 * alltoall schedule (pairwise with a window, or Bruck for small blocks).
 */
int mca_coll_dualrail_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t bytes = 0;
    mca_coll_dualrail_request_t *req = NULL;

    const int rc = block_prologue(m, comm, DR_KIND_ALLTOALL, sbuf, scount, sdtype, rcount, rdtype,
                                  "MPI_Ialltoall", &bytes, &req);
    if (rc != OMPI_SUCCESS) {
        return rc;
    }
    if (req == NULL) {
        handed(m, comm, DR_KIND_ALLTOALL, rcount, rdtype, NULL);
        return m->previous_ialltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, request,
                                     m->previous_ialltoall_module);
    }
    dr_alltoall_args_t a;
    mca_coll_dualrail_idle_t unused; /* tasks yield instead of idling (dr_coll_nb.h) */
    mca_coll_dualrail_alltoall_args(m, comm, sbuf, rbuf, bytes, &a, &unused);
    const size_t total = bytes * (size_t)a.c.size;
    const int sr = staged(req, DR_KIND_ALLTOALL, &a, &a.c.sendbuf, total, &a.c.recvbuf, total,
                          a.c.sendbuf == NULL ? total : 0, total, NULL, 0);
    if (sr != OMPI_SUCCESS) {
        return sr;
    }
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: ialltoall on %s: %d x %s%s, algorithm %d",
                     cm->world_rank, comm->c_name, rcount, rdtype->name,
                     sbuf == MPI_IN_PLACE ? " in place" : "", dr_alltoall_choose(&a));
    char err[256];
    const dr_status_t st =
        dr_ialltoall(cm->mr, m->nb_queue, &a, request_done, req, err, sizeof(err));
    return started(req, st, err, request);
}
