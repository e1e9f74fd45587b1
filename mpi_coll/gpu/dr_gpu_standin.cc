/*
 * Host memory standing in for a GPU (dr_gpu.h): what the staged allreduce's
 * tests run on, on machines without a GPU.
 *
 *   - "Device" memory lies in one address window reserved with PROT_NONE, and
 *     its bytes in a shadow window right above it (a device address plus the
 *     window's size): a CPU access to a device pointer faults, as it would on
 *     a real GPU, while copies and reductions translate it. The window sits
 *     at a fixed address and its allocation pointer in the shadow's first
 *     page, so every copy of this file in a process agrees on what is device
 *     memory: a test program and the coll component (each links its own
 *     copy) hand each other stand-in device buffers, as an MPI application
 *     hands cudaMalloc'ed memory to MPI.
 *   - Copies and reductions are queued per stream and run by the CPU only
 *     when an event of that stream is polled (one operation per poll, after
 *     `lag` idle polls), so work completes late and in stream order; code that
 *     reads a staging buffer without waiting for its event reads stale data.
 *   - stream_wait_event is honoured across streams.
 *   - DR_MEM_STANDIN_DEVICES devices, with a current one per thread
 *     (device_enter): streams, events and device memory belong to the device
 *     current at their creation; a reduction queued on a stream of another
 *     device than the current one is refused (CUDA fails such a launch), and
 *     one whose memory is on another device than its stream's faults when it
 *     runs: the stream's events and stream_sync report it from then on, as
 *     CUDA reports an illegal address. Copies may cross devices.
 * One mutex guards the streams and events of this copy (the tests run one
 * thread per rank); device memory needs none (atomics in the shared header).
 * Each copy has its own streams, events and current device per thread.
 */
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>

#include "gpu/dr_gpu.h"
#include "gpu/dr_gpu_ops.hpp"

namespace {

struct Event;

struct Op {
    enum Kind { kCopy, kReduce, kRecord, kWait } kind;
    void *dst;
    const void *src;
    size_t bytes; /* copy: bytes; reduce: elements */
    int op, type;
    Event *ev;
    uint64_t ticket;
};

struct Stream {
    std::deque<Op> q;
    unsigned idle_polls = 0;
    int device = 0;
    const char *fault = nullptr; /* a reduction touched another device's memory */
};

struct Event {
    Stream *stream = nullptr;
    uint64_t recorded = 0, done = 0;
    int device = 0;
};

std::recursive_mutex g_mu; /* streams and events (device memory needs no lock) */
unsigned g_lag = 0;
uint64_t g_ops_run = 0;
thread_local char g_err[256] = "";
thread_local int g_device = 0; /* like CUDA's: per thread, device 0 until chosen */

dr_status_t fail(dr_status_t st, const char *what)
{
    snprintf(g_err, sizeof(g_err), "standin: %s", what);
    return st;
}

/*
 * The device window: one part per stand-in device (a pointer's device is the
 * part it lies in). The first shadow page holds the shared header; each
 * allocation is one header page in the shadow (its length) and then its
 * pages, device side PROT_NONE throughout, shadow side read-write while
 * allocated. Address space only: nothing is committed until allocated.
 */
constexpr uintptr_t kWindowAt = 0x3e0000000000ull;
constexpr size_t kWindowSize = (size_t)256 << 30; /* 256 GiB of device addresses */
constexpr size_t kPartSize = kWindowSize / DR_MEM_STANDIN_DEVICES;
constexpr uint64_t kMagic = 0x64722d7374616e64ull;      /* "dr-stand": the window's header */
constexpr uint64_t kAllocMagic = 0x64722d616c6c6f63ull; /* "dr-alloc": a live allocation */

/* An allocation's header page (shadow side, just below its bytes). */
struct AllocHeader {
    uint64_t magic; /* kAllocMagic while allocated, 0 once freed */
    uint64_t len;   /* bytes of shadow after the header page (guard page included) */
};

struct Header {
    std::atomic<uint64_t> magic;
    /* per device: offset in its part of the next allocation's header page */
    std::atomic<uint64_t> next[DR_MEM_STANDIN_DEVICES];
    /* copies still to fail (dr_mem_standin_fail_copies): here, so that a test program's
     * copy of this file arms what the component's copy does */
    std::atomic<uint64_t> fail_copies;
};

struct Window {
    uintptr_t base = 0; /* 0: no window (device_alloc fails) */
    Header *hdr = nullptr;
    size_t page = 4096;
    char why[160] = "";
};

/* Whether [a, a + len) is an anonymous read-write mapping of this process (one-time check). */
bool mapped_rw(uintptr_t a, size_t len)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == nullptr) {
        return false;
    }
    char line[512];
    bool ok = false;
    while (!ok && fgets(line, sizeof(line), f) != nullptr) {
        unsigned long lo = 0, hi = 0;
        char perms[8] = "";
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
            ok = lo <= a && a + len <= hi && perms[0] == 'r' && perms[1] == 'w';
        }
    }
    fclose(f);
    return ok;
}

Window make_window()
{
    Window w;
    w.page = (size_t)sysconf(_SC_PAGESIZE);
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void *a = mmap((void *)kWindowAt, 2 * kWindowSize, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1,
                   0);
    uintptr_t shared = kWindowAt + kWindowSize;
    bool theirs = false;
    if (a == MAP_FAILED && errno == EEXIST) {
        /* Another copy may be between its mmap and making the header writable: bounded wait. */
        for (int i = 0; i < 1000 && !(theirs = mapped_rw(shared, w.page)); ++i) {
            usleep(1000);
        }
    }
    if (theirs) {
        /* Another copy of the stand-in made it: wait (bounded) for its header. */
        w.base = kWindowAt;
        w.hdr = reinterpret_cast<Header *>(shared);
        for (int i = 0; i < 100000 && w.hdr->magic.load(std::memory_order_acquire) != kMagic;
             ++i) {
            usleep(10);
        }
        if (w.hdr->magic.load(std::memory_order_acquire) != kMagic) {
            snprintf(w.why, sizeof(w.why), "the device window at %#lx is not the stand-in's",
                     (unsigned long)kWindowAt);
            w.base = 0;
        }
        return w;
    }
    if (a != MAP_FAILED && (uintptr_t)a != kWindowAt) {
        /* A kernel without MAP_FIXED_NOREPLACE took the address as a hint: a window of
         * this copy's own (other copies in the process will not see its buffers). */
    } else if (a == MAP_FAILED) {
        a = mmap(nullptr, 2 * kWindowSize, PROT_NONE, flags, -1, 0);
        if (a == MAP_FAILED) {
            snprintf(w.why, sizeof(w.why), "cannot reserve %zu GiB of address space",
                     2 * kWindowSize >> 30);
            return w;
        }
    }
    w.base = (uintptr_t)a;
    w.hdr = reinterpret_cast<Header *>(w.base + kWindowSize);
    if (mprotect(w.hdr, w.page, PROT_READ | PROT_WRITE) != 0) {
        munmap(a, 2 * kWindowSize);
        snprintf(w.why, sizeof(w.why), "cannot map the device window's header");
        w.base = 0;
        return w;
    }
    for (auto &n : w.hdr->next) {
        n.store(w.page, std::memory_order_relaxed); /* part 0's first page: the header */
    }
    w.hdr->magic.store(kMagic, std::memory_order_release);
    return w;
}

const Window &window()
{
    static const Window w = make_window();
    return w;
}

/* The device whose memory p is, or -1 (host memory). The allocated part of each device's
 * range stays readable on the shadow side for good (freed bytes read as zero). */
int device_in(const Window &w, const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    if (w.base == 0 || a < w.base || a >= w.base + kWindowSize) {
        return -1;
    }
    const size_t d = (a - w.base) / kPartSize, off = (a - w.base) % kPartSize;
    return off >= w.page && off < w.hdr->next[d].load(std::memory_order_acquire) ? (int)d : -1;
}

bool in_window(const Window &w, const void *p)
{
    return device_in(w, p) >= 0;
}

/* The memory a (possibly device) pointer really names. */
const void *real(const void *p)
{
    const Window &w = window();
    return in_window(w, p) ? static_cast<const char *>(p) + kWindowSize : p;
}

void *real_mut(void *p)
{
    return const_cast<void *>(real(p));
}

bool run_one(Stream *s);

/* Make progress toward ev's ticket; true when it has been reached. */
bool reach(Event *ev, uint64_t ticket)
{
    while (ev->done < ticket) {
        if (ev->stream == nullptr || !run_one(ev->stream)) {
            return ev->done >= ticket;
        }
    }
    return true;
}

/* Run the head of s. false when nothing could run (empty, or blocked on another stream). */
bool run_one(Stream *s)
{
    if (s->q.empty()) {
        return false;
    }
    Op &o = s->q.front();
    switch (o.kind) {
    case Op::kCopy:
        if (o.bytes != 0) {
            memmove(real_mut(o.dst), real(o.src), o.bytes);
        }
        ++g_ops_run;
        break;
    case Op::kReduce: {
        const Window &w = window();
        const int ds = device_in(w, o.src), dd = device_in(w, o.dst);
        if ((ds >= 0 && ds != s->device) || (dd >= 0 && dd != s->device)) {
            s->fault = "a reduction on a stream of one device touched memory of another "
                       "(an illegal address without peer access)";
        } else if (s->fault == nullptr) {
            dualrail::gpu::host_reduce(o.op, o.type, real(o.src), real_mut(o.dst), o.bytes);
        }
        ++g_ops_run;
        break;
    }
    case Op::kRecord:
        o.ev->done = o.ticket;
        break;
    case Op::kWait:
        if (!reach(o.ev, o.ticket)) {
            return false;
        }
        break;
    }
    s->q.pop_front();
    return true;
}

int standin_available(void)
{
    return 1;
}

dr_mem_kind_t standin_kind(const void *p)
{
    return in_window(window(), p) ? DR_MEM_DEVICE : DR_MEM_HOST;
}

dr_status_t standin_stream_create(void **stream)
{
    Stream *s = new (std::nothrow) Stream;
    if (s == nullptr) {
        return fail(DR_ERR_NO_MEMORY, "out of memory for a stream");
    }
    s->device = g_device;
    *stream = s;
    return DR_OK;
}

void standin_stream_destroy(void *stream)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    Stream *s = static_cast<Stream *>(stream);
    while (s != nullptr && run_one(s)) {
    }
    delete s;
}

dr_status_t standin_event_create(void **event)
{
    Event *e = new (std::nothrow) Event;
    if (e == nullptr) {
        return fail(DR_ERR_NO_MEMORY, "out of memory for an event");
    }
    e->device = g_device;
    *event = e;
    return DR_OK;
}

void standin_event_destroy(void *event)
{
    delete static_cast<Event *>(event);
}

dr_status_t standin_event_record(void *event, void *stream)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    Event *e = static_cast<Event *>(event);
    Stream *s = static_cast<Stream *>(stream);
    if (e->device != s->device) {
        return fail(DR_ERR_GPU, "event record: event and stream of different devices");
    }
    e->stream = s;
    ++e->recorded;
    s->q.push_back(Op{Op::kRecord, nullptr, nullptr, 0, 0, 0, e, e->recorded});
    return DR_OK;
}

dr_status_t standin_event_query(void *event)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    Event *e = static_cast<Event *>(event);
    if (e->stream != nullptr && e->stream->fault != nullptr) {
        return fail(DR_ERR_GPU, e->stream->fault);
    }
    if (e->done >= e->recorded) {
        return DR_OK;
    }
    /* Late completion: one queued operation per poll, and only after `lag` idle polls. */
    Stream *s = e->stream;
    if (s->idle_polls < g_lag) {
        ++s->idle_polls;
        return DR_INPROGRESS;
    }
    s->idle_polls = 0;
    run_one(s);
    if (s->fault != nullptr) {
        return fail(DR_ERR_GPU, s->fault);
    }
    return e->done >= e->recorded ? DR_OK : DR_INPROGRESS;
}

dr_status_t standin_stream_wait_event(void *stream, void *event)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    Event *e = static_cast<Event *>(event);
    static_cast<Stream *>(stream)->q.push_back(
        Op{Op::kWait, nullptr, nullptr, 0, 0, 0, e, e->recorded});
    return DR_OK;
}

dr_status_t standin_stream_sync(void *stream)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    Stream *s = static_cast<Stream *>(stream);
    while (run_one(s)) {
    }
    if (s->fault != nullptr) {
        return fail(DR_ERR_GPU, s->fault);
    }
    return s->q.empty() ? DR_OK : fail(DR_ERR_INVALID, "stream blocked on an event never reached");
}

/* Whether an armed copy failure (dr_mem_standin_fail_copies) takes this copy. */
bool injected_failure()
{
    const Window &w = window();
    if (w.hdr == nullptr) {
        return false;
    }
    uint64_t n = w.hdr->fail_copies.load(std::memory_order_relaxed);
    while (n != 0 && !w.hdr->fail_copies.compare_exchange_weak(n, n - 1)) {
    }
    return n != 0;
}

dr_status_t standin_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (injected_failure()) {
        return fail(DR_ERR_GPU, "copy failed (injected by dr_mem_standin_fail_copies)");
    }
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    static_cast<Stream *>(stream)->q.push_back(Op{Op::kCopy, dst, src, bytes, 0, 0, nullptr, 0});
    return DR_OK;
}

dr_status_t standin_reduce_async(int op, int type, const void *in, void *inout, size_t count,
                                 void *stream)
{
    if (!dr_gpu_op_valid(op, type)) {
        return fail(DR_ERR_INVALID, "no reduction for this (op, type)");
    }
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (static_cast<Stream *>(stream)->device != g_device) {
        return fail(DR_ERR_GPU, "reduction launch: the stream is not of the current device");
    }
    static_cast<Stream *>(stream)->q.push_back(
        Op{Op::kReduce, inout, in, count, op, type, nullptr, 0});
    return DR_OK;
}

dr_status_t standin_host_alloc(void **p, size_t bytes)
{
    *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    return *p != nullptr ? DR_OK : fail(DR_ERR_NO_MEMORY, "out of host memory");
}

void standin_host_free(void *p)
{
    free(p);
}

dr_status_t standin_device_alloc(void **p, size_t bytes)
{
    const Window &w = window();
    if (w.base == 0) {
        return fail(DR_ERR_NO_MEMORY, w.why);
    }
    if (bytes > kPartSize) {
        return fail(DR_ERR_NO_MEMORY, "device allocation larger than the device");
    }
    const size_t len = (bytes + w.page - 1) / w.page * w.page + w.page; /* + a guard page */
    const int dev = g_device; /* memory of the thread's current device, as cudaMalloc */
    /* Advance the part's pointer only when the request fits: a refused one costs nothing. */
    std::atomic<uint64_t> &next = w.hdr->next[dev];
    uint64_t off = next.load(std::memory_order_acquire);
    do {
        if (off + w.page + len > kPartSize) {
            return fail(DR_ERR_NO_MEMORY, "device window exhausted");
        }
    } while (!next.compare_exchange_weak(off, off + w.page + len, std::memory_order_acq_rel));
    const uintptr_t at = w.base + (size_t)dev * kPartSize + off;
    /* Shadow side: the header page, then the bytes. Read-write from now on for good, so a
     * free can check any page-aligned pointer's header page, and the kernel merges the
     * part's allocated shadow into one mapping. */
    char *shadow = reinterpret_cast<char *>(at + kWindowSize);
    if (mprotect(shadow, w.page + len, PROT_READ | PROT_WRITE) != 0) {
        return fail(DR_ERR_NO_MEMORY, "out of memory for device backing");
    }
    memset(shadow + w.page, 0xdb, len); /* like fresh device memory: not zero */
    const AllocHeader h = {kAllocMagic, len};
    memcpy(shadow, &h, sizeof(h));
    *p = reinterpret_cast<void *>(at + w.page);
    return DR_OK;
}

/* Like cudaFree: anything but the start of a live allocation is ignored (never a crash). */
void standin_device_free(void *p)
{
    const Window &w = window();
    if (p == nullptr || !in_window(w, p) || ((uintptr_t)p - w.base) % w.page != 0) {
        return;
    }
    char *shadow = static_cast<char *>(p) + kWindowSize - w.page;
    AllocHeader h;
    memcpy(&h, shadow, sizeof(h));
    if (h.magic != kAllocMagic || h.len == 0 || h.len > kPartSize) {
        return; /* freed already, or not the start of an allocation */
    }
    h.magic = 0;
    memcpy(shadow, &h, sizeof(h));
    /* Give the memory back; the addresses stay reserved (and device) for good. */
    madvise(shadow, w.page + h.len, MADV_DONTNEED);
}

const char *standin_last_error(void)
{
    return g_err;
}

int standin_device_of(const void *p)
{
    return device_in(window(), p); /* the shared header's atomics: no lock */
}

int standin_device_current(void)
{
    return g_device;
}

dr_status_t standin_device_enter(int device, void **saved)
{
    *saved = reinterpret_cast<void *>((intptr_t)g_device);
    if (device < 0 || device >= DR_MEM_STANDIN_DEVICES) {
        return fail(DR_ERR_INVALID, "no such device");
    }
    g_device = device;
    return DR_OK;
}

void standin_device_leave(void *saved)
{
    g_device = (int)reinterpret_cast<intptr_t>(saved);
}

const dr_mem_ops_t kStandin = {
    "standin",
    standin_available,
    standin_kind,
    standin_stream_create,
    standin_stream_destroy,
    standin_event_create,
    standin_event_destroy,
    standin_event_record,
    standin_event_query,
    standin_stream_wait_event,
    standin_stream_sync,
    standin_copy_async,
    standin_reduce_async,
    standin_host_alloc,
    standin_host_free,
    standin_device_alloc,
    standin_device_free,
    standin_last_error,
    standin_device_of,
    standin_device_current,
    standin_device_enter,
    standin_device_leave,
};

} // namespace

extern "C" const dr_mem_ops_t *dr_mem_standin(void)
{
    return &kStandin;
}

extern "C" void dr_mem_standin_set_lag(unsigned polls)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    g_lag = polls;
}

extern "C" void dr_mem_standin_fail_copies(unsigned n)
{
    const Window &w = window();
    if (w.hdr != nullptr) {
        w.hdr->fail_copies.store(n, std::memory_order_relaxed);
    }
}

extern "C" uint64_t dr_mem_standin_ops_run(void)
{
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    return g_ops_run;
}
