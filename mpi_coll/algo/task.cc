/* Pooled stacks and the ucontext coroutine behind non-blocking collectives (task.hpp). */
#include "algo/task.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cstdlib>

namespace dualrail {
namespace coll {

namespace {

size_t page_size()
{
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

} // namespace

StackPool::~StackPool()
{
    for (size_t i = 0; i < nfree_; ++i) {
        munmap(static_cast<char *>(free_[i]) - page_size(), kStackBytes + page_size());
    }
}

void *StackPool::get()
{
    if (nfree_ != 0) {
        return free_[--nfree_];
    }
    const size_t guard = page_size();
    void *m = mmap(nullptr, kStackBytes + guard, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        return nullptr;
    }
    /* Stacks grow down: an overflow runs into the guard and faults. */
    mprotect(m, guard, PROT_NONE);
    ++mapped_;
    return static_cast<char *>(m) + guard;
}

void StackPool::put(void *stack)
{
    if (stack == nullptr) {
        return;
    }
    if (nfree_ < kPoolMax) {
        free_[nfree_++] = stack;
        return;
    }
    munmap(static_cast<char *>(stack) - page_size(), kStackBytes + page_size());
}

void Coroutine::init(void *stack, void (*fn)(void *), void *arg)
{
    stack_ = stack;
    fn_ = fn;
    arg_ = arg;
    started_ = false;
    finished_ = false;
}

/* makecontext passes ints only: the coroutine's address in two halves. */
void Coroutine::entry(unsigned hi, unsigned lo)
{
    Coroutine *c = reinterpret_cast<Coroutine *>(((uintptr_t)hi << 32) | (uintptr_t)lo);
    c->fn_(c->arg_);
    c->finished_ = true;
    /* Never resumed again: its stack goes back to the pool. */
    swapcontext(&c->ctx_, &c->caller_);
    abort();
}

void Coroutine::resume()
{
    assert(!finished_);
    if (!started_) {
        started_ = true;
        getcontext(&ctx_);
        ctx_.uc_stack.ss_sp = stack_;
        ctx_.uc_stack.ss_size = kStackBytes;
        ctx_.uc_link = nullptr;
        const uintptr_t self = reinterpret_cast<uintptr_t>(this);
        makecontext(&ctx_, reinterpret_cast<void (*)()>(&Coroutine::entry), 2,
                    (unsigned)(self >> 32), (unsigned)(self & 0xffffffffu));
    }
    swapcontext(&caller_, &ctx_);
}

void Coroutine::yield()
{
    swapcontext(&ctx_, &caller_);
}

} // namespace coll
} // namespace dualrail
