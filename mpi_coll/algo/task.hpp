/*
 * Resumable tasks for non-blocking collectives: a stackful coroutine
 * (ucontext) per collective in flight, its stack from a pool.
 *
 * Why coroutines and not state machines. Every algorithm is blocking code
 * over the Engine (engine.hpp): post, then wait in Engine::stalled(). Run on
 * a stack of its own, the same schedule becomes non-blocking when stalled()
 * suspends the task instead of spinning (Params::yield): the progress
 * callback resumes it, it tests its requests, does what is ready (a
 * reduction, the next posts) and suspends again. So MPI_Iallreduce runs the
 * very schedules, failover and abort handling that MPI_Allreduce runs, with
 * no second copy of any algorithm to keep right.
 *
 * What this costs and what it asks:
 *   - one context switch per wait (swapcontext, which also saves the signal
 *     mask: a system call, ~0.5 us), next to a transfer of a segment;
 *   - a stack per task in flight: kStackBytes of address space, of which the
 *     pages touched become memory; stacks are pooled (kPoolMax kept), so a
 *     steady stream of collectives maps nothing per call; a guard page below
 *     each turns an overflow into a crash instead of silent corruption;
 *   - nothing may be held across a yield: no lock (the scheduler's lock is
 *     the resumer's, taken around resume() and released by it), and nothing
 *     thread-local kept in a frame that spans a yield, because under
 *     MPI_THREAD_MULTIPLE (or a progress thread) another thread may resume
 *     the task. The schedules keep their state in their Engine and scratch
 *     (the task's own), never in thread-local storage.
 */
#ifndef DUALRAIL_ALGO_TASK_HPP
#define DUALRAIL_ALGO_TASK_HPP

#include <ucontext.h>

#include <cstddef>
#include <cstdint>

namespace dualrail {
namespace coll {

/* Deepest schedule (ring allreduce, Open MPI's op engine, vsnprintf of an error line)
 * uses a few tens of KiB; the rest is margin. */
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kPoolMax = 64;

/* Stacks of kStackBytes with a guard page below; taking one from the pool allocates
 * nothing. Not thread safe: the scheduler's lock serialises it. */
class StackPool {
  public:
    ~StackPool();
    /* nullptr when the system has no memory for a new one. */
    void *get();
    void put(void *stack);
    /* Stacks mapped since the start (for tests: a steady state maps none). */
    uint64_t mapped() const { return mapped_; }

  private:
    void *free_[kPoolMax] = {};
    size_t nfree_ = 0;
    uint64_t mapped_ = 0;
};

class Coroutine {
  public:
    /* fn(arg) runs on stack (kStackBytes) at the first resume(). */
    void init(void *stack, void (*fn)(void *), void *arg);
    /* Run until the task yields or finishes; on the resumer's thread. */
    void resume();
    /* From inside the task only: back to resume()'s caller. */
    void yield();
    bool finished() const { return finished_; }
    void *stack() const { return stack_; }

  private:
    static void entry(unsigned hi, unsigned lo);
    ucontext_t ctx_{};
    ucontext_t caller_{};
    void *stack_ = nullptr;
    void (*fn_)(void *) = nullptr;
    void *arg_ = nullptr;
    bool started_ = false;
    bool finished_ = false;
};

} // namespace coll
} // namespace dualrail

#endif
