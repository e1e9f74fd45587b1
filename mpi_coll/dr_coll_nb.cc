/*
 * Non-blocking collectives (dr_coll_nb.h): each one a task that runs the
 * blocking schedule on a pooled stack (algo/task.hpp) and yields at every
 * wait; one scheduler per process resumes them from dr_nb_progress.
 *
 *   start     task from the pool, queued on its communicator's queue; when
 *             the queue was empty it runs at once up to its first wait (so its
 *             first messages leave before the caller computes)
 *   progress  each queue's head task resumed once: it tests its requests,
 *             does what is ready, yields at its next wait; a finished head is
 *             replaced by the next of its queue, started in the same turn
 *   done      its stack back to the pool as it finishes; the task to the
 *             scheduler's list of finished ones; after the lock is released, by
 *             one thread at a time in the order they finished: done(arg, st,
 *             err), then the task to its pool
 *
 * The scheduler's lock is held while tasks run, which is while they compute:
 * every wait yields. A thread that finds it taken returns at once (the holder
 * is progressing for everyone). A thread already inside the scheduler never
 * enters it again (done callbacks run outside it). Callbacks run in finishing
 * order, one thread reporting at a time: a thread that finishes a task while
 * another is still in a callback (a device result being copied back) leaves
 * it to that one, so a communicator's later request never completes before
 * an earlier one (their order within a queue is their finishing order).
 */
#include "dr_coll_nb.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/alltoall.hpp"
#include "algo/collectives.hpp"
#include "algo/reductions.hpp"
#include "algo/task.hpp"
#include "mr_transport.hpp"

namespace dualrail {
namespace coll {
namespace {

struct Queue;

struct Task {
    Coroutine co;
    Queue *queue = nullptr;
    Task *next = nullptr; /* in its queue, oldest first */
    dr_mr_t *mr = nullptr;
    const uint32_t *ids = nullptr; /* ucx_mr process id of each comm rank */
    Params p;
    int window = 0; /* alltoall: pairwise steps in flight (Params has no field for it) */
    dr_status_t st = DR_OK;
    std::string err;
    Scratch scratch; /* the task's own, kept up to kKeepTaskScratch with the pooled task */
    dr_nb_done_fn done = nullptr;
    void *done_arg = nullptr;
};

struct Queue {
    Task *head = nullptr, *tail = nullptr;
    int pending = 0;
    bool listed = false; /* in the scheduler's run list */
};

/* The process's scheduler: every task in flight, their pools. */
struct Scheduler {
    std::mutex mu;
    std::vector<Queue *> run; /* queues with a task, in the order they got one */
    std::vector<Task *> free_tasks;
    StackPool stacks;
    std::atomic<int> outstanding{0};
    std::vector<Task *> finished; /* in finishing order, not yet reported */
    bool reporting = false;       /* a thread runs done callbacks (report()) */
};

Scheduler &sched()
{
    /* Never destroyed: a task's completion may race with exit handlers. */
    static Scheduler *s = new Scheduler;
    return *s;
}

/* Set while this thread runs tasks: a done callback or anything below a task that
 * reached dr_nb_progress again would lock the scheduler twice. */
thread_local bool in_scheduler = false;

void task_yield(void *arg)
{
    static_cast<Task *>(arg)->co.yield();
}

/* The task's body, on its own stack: the blocking schedule over ucx_mr. */
void task_main(void *arg)
{
    Task *t = static_cast<Task *>(arg);
    char line[512];
    line[0] = '\0';
    /* As the blocking entries: the transport is checked only when data moves. */
    const bool moves = t->p.size > 1 && (t->p.kind == kKindBarrier || t->p.count != 0);
    t->st = c_api_run(t->mr, t->ids, t->p, moves, line, sizeof(line),
                      [t](Transport &tr, const Params &q, std::string *why) {
                          switch (q.kind) {
                          case kKindAllreduce:
                              return allreduce(tr, q, &t->scratch, why);
                          case kKindBcast:
                              return bcast(tr, q, why);
                          case kKindBarrier:
                              return barrier(tr, q, why);
                          case kKindAllgather:
                              return allgather(tr, q, &t->scratch, why);
                          case kKindReduceScatterBlock:
                              return reduce_scatter_block(tr, q, &t->scratch, why);
                          case kKindAlltoall:
                              return alltoall(tr, q, t->window, &t->scratch, why);
                          default:
                              return reject(why, q.kind, "no non-blocking form");
                          }
                      });
    try {
        t->err = line;
    } catch (const std::bad_alloc &) {
        t->err.clear();
    }
    t->scratch.trim(kKeepTaskScratch);
}

/* Under the lock: run each queue's head once; finished tasks go to done. */
int run_queues(Scheduler &s, std::vector<Task *> &done)
{
    int completed = 0;
    for (size_t i = 0; i < s.run.size();) {
        Queue *q = s.run[i];
        /* A finished head lets the next one start in the same turn, so back-to-back
         * collectives on one communicator do not wait a progress call each. */
        while (q->head != nullptr) {
            Task *t = q->head;
            bool over = false;
            if (t->co.stack() == nullptr) {
                /* A stack only for the running task of each queue: the queued ones hold
                 * none, so the pool's size follows the communicators, not the backlog. */
                void *stack = s.stacks.get();
                if (stack == nullptr) {
                    t->st = DR_ERR_NO_MEMORY;
                    t->err = "non-blocking collective: no memory for a task stack";
                    over = true;
                } else {
                    t->co.init(stack, task_main, t);
                }
            }
            if (!over) {
                t->co.resume();
                over = t->co.finished();
            }
            if (!over) {
                break;
            }
            /* A finished task's stack is free at once (it is never resumed again), for the
             * next head of this queue in this very turn: otherwise every task a turn finishes
             * holds one until it is reported, and a turn that runs through a backlog of quick
             * collectives maps a stack for each. */
            s.stacks.put(t->co.stack());
            t->co.init(nullptr, task_main, t);
            q->head = t->next;
            if (q->head == nullptr) {
                q->tail = nullptr;
            }
            --q->pending;
            done.push_back(t);
            ++completed;
        }
        if (q->head == nullptr) {
            q->listed = false;
            s.run.erase(s.run.begin() + (long)i);
        } else {
            ++i;
        }
    }
    return completed;
}

/* Outside the lock: report what finished, then give the tasks back (their stacks went
 * back as they finished). One thread reports at a time, everything finished up to the
 * moment it finds nothing more: a thread that finds another reporting leaves its tasks
 * to it, which keeps the callbacks in finishing order across threads. */
void report(Scheduler &s)
{
    static thread_local std::vector<Task *> batch; /* reused: no allocation once warm */
    std::unique_lock<std::mutex> lk(s.mu);
    if (s.reporting || s.finished.empty()) {
        return;
    }
    s.reporting = true;
    while (!s.finished.empty()) {
        batch.clear();
        batch.swap(s.finished);
        lk.unlock();
        for (Task *t : batch) {
            t->done(t->done_arg, t->st, t->err.c_str());
        }
        lk.lock();
        for (Task *t : batch) {
            t->next = nullptr;
            t->queue = nullptr;
            s.free_tasks.push_back(t); /* capacity reserved when the task was made */
            s.outstanding.fetch_sub(1, std::memory_order_relaxed);
        }
    }
    s.reporting = false;
}

int progress_once()
{
    Scheduler &s = sched();
    if (in_scheduler || s.outstanding.load(std::memory_order_relaxed) == 0) {
        return 0;
    }
    std::unique_lock<std::mutex> lk(s.mu, std::try_to_lock);
    if (!lk.owns_lock()) {
        return 0; /* another thread is running the tasks, for everyone */
    }
    in_scheduler = true;
    const int n = run_queues(s, s.finished);
    in_scheduler = false;
    lk.unlock();
    if (n != 0) {
        report(s);
    }
    return n;
}

dr_status_t start(dr_mr_t *mr, dr_nb_queue_t *qc, const Params &p, int window, const uint32_t *ids,
                  dr_nb_done_fn done, void *done_arg, char *err, size_t errlen)
{
    Queue *q = reinterpret_cast<Queue *>(qc);
    if (q == nullptr || done == nullptr) {
        set_err(err, errlen, "non-blocking collective: no queue or no completion callback");
        return DR_ERR_INVALID;
    }
    /* No drop_stale here: held messages of the calls queued before this one are not stale
     * (they may still be waiting), and the task drops what is when it runs (c_api_run). */
    Scheduler &s = sched();
    {
        std::lock_guard<std::mutex> lk(s.mu);
        Task *t = nullptr;
        try {
            if (s.free_tasks.empty()) {
                std::unique_ptr<Task> fresh(new Task);
                s.free_tasks.reserve(s.free_tasks.size() + 1); /* report() never allocates */
                s.run.reserve(s.run.size() + 1);
                t = fresh.release();
            } else {
                t = s.free_tasks.back();
                s.free_tasks.pop_back();
            }
        } catch (const std::bad_alloc &) {
            set_err(err, errlen, "non-blocking collective: out of memory");
            return DR_ERR_NO_MEMORY;
        }
        t->mr = mr;
        t->p = p;
        t->window = window;
        t->ids = ids;
        t->p.idle = nullptr;
        t->p.idle_arg = nullptr;
        t->p.yield = task_yield;
        t->p.yield_arg = t;
        t->st = DR_OK;
        t->done = done;
        t->done_arg = done_arg;
        t->queue = q;
        t->next = nullptr;
        t->co.init(nullptr, task_main, t); /* its stack when it starts running */
        if (q->tail != nullptr) {
            q->tail->next = t;
        } else {
            q->head = t;
        }
        q->tail = t;
        ++q->pending;
        if (!q->listed) {
            q->listed = true;
            s.run.push_back(q); /* capacity reserved with the tasks: at most one per task */
        }
        s.outstanding.fetch_add(1, std::memory_order_relaxed);
    }
    set_err(err, errlen, "");
    /* Its first messages leave now, before the caller goes computing. */
    progress_once();
    return DR_OK;
}

} // namespace

uint32_t nb_unfinished_behind(uint32_t comm, uint32_t kind, uint32_t seq)
{
    Scheduler &s = sched();
    if (in_scheduler || s.outstanding.load(std::memory_order_relaxed) == 0) {
        /* From a task (the scheduler's lock is held): the tasks queued before it on its
         * communicator have finished, one queue per communicator running oldest first. */
        return 0;
    }
    std::lock_guard<std::mutex> lk(s.mu);
    uint32_t most = 0;
    for (const Queue *q : s.run) {
        for (const Task *t = q->head; t != nullptr; t = t->next) {
            if (t->p.comm_id == comm && (uint32_t)t->p.kind == kind) {
                const uint32_t behind = (seq - t->p.seq) & kSeqMask;
                most = behind <= kStaleMax && behind > most ? behind : most;
            }
        }
    }
    return most;
}

} // namespace coll
} // namespace dualrail

using namespace dualrail::coll;

struct dr_nb_queue {
    Queue q;
};

extern "C" dr_nb_queue_t *dr_nb_queue_new(void)
{
    return new (std::nothrow) dr_nb_queue();
}

extern "C" void dr_nb_queue_free(dr_nb_queue_t *q)
{
    delete q;
}

extern "C" int dr_nb_queue_pending(const dr_nb_queue_t *q)
{
    if (q == nullptr) {
        return 0;
    }
    std::lock_guard<std::mutex> lk(sched().mu);
    return q->q.pending;
}

extern "C" dr_status_t dr_iallreduce(dr_mr_t *mr, dr_nb_queue_t *q, const dr_allreduce_args_t *a,
                                     dr_nb_done_fn done, void *done_arg, char *err, size_t errlen)
{
    if (a == nullptr) {
        set_err(err, errlen, "iallreduce: no arguments");
        return DR_ERR_INVALID;
    }
    return start(mr, q, to_params(a), 0, a->peer_ids, done, done_arg, err, errlen);
}

extern "C" dr_status_t dr_icoll(dr_mr_t *mr, dr_nb_queue_t *q, int kind, const dr_coll_args_t *a,
                                dr_nb_done_fn done, void *done_arg, char *err, size_t errlen)
{
    if (a == nullptr || (kind != kKindBcast && kind != kKindBarrier && kind != kKindAllgather &&
                         kind != kKindReduceScatterBlock)) {
        set_err(err, errlen, "non-blocking collective: no arguments or no such kind");
        return DR_ERR_INVALID;
    }
    return start(mr, q, to_params(a, kind), 0, a->peer_ids, done, done_arg, err, errlen);
}

extern "C" dr_status_t dr_ialltoall(dr_mr_t *mr, dr_nb_queue_t *q, const dr_alltoall_args_t *a,
                                    dr_nb_done_fn done, void *done_arg, char *err, size_t errlen)
{
    if (a == nullptr) {
        set_err(err, errlen, "ialltoall: no arguments");
        return DR_ERR_INVALID;
    }
    return start(mr, q, to_params(a, kKindAlltoall), a->window, a->c.peer_ids, done, done_arg, err,
                 errlen);
}

extern "C" int dr_nb_progress(void)
{
    return progress_once();
}

extern "C" int dr_nb_outstanding(void)
{
    return sched().outstanding.load(std::memory_order_relaxed);
}

extern "C" unsigned long dr_nb_stacks_mapped(void)
{
    std::lock_guard<std::mutex> lk(sched().mu);
    return (unsigned long)sched().stacks.mapped();
}
