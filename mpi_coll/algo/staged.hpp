/*
 * Allreduce on device buffers, staged through pinned host memory
 * (allreduce_staged.cc), and the per-communicator staging it reuses.
 *
 * The wire schedule is exactly the host algorithms' (same choice between
 * ring and recursive doubling, same segments, keys and lengths), because
 * whether a buffer is on a device is decided per rank: one rank may pass
 * device memory while its peers pass host memory, and they must still pair
 * every message.
 *
 *   receive buffer on the host   the host path (a device send buffer is
 *                                first copied into it);
 *   receive buffer on a device   the staged ring when the host would run
 *                                the ring, a kernel exists for the (op, type)
 *                                and the buffer is on the device of the
 *                                communicator's staging; otherwise the whole
 *                                message is staged through host memory and
 *                                the host algorithm (recursive doubling, ops
 *                                without a kernel, another device) reduces
 *                                it on the CPU. A staged-ring call whose
 *                                pinned slots or device scratch cannot be
 *                                allocated takes that whole-message path too
 *                                (same wire schedule: the host ring), so one
 *                                rank short of pinned memory never leaves its
 *                                peers waiting.
 * Managed memory counts as device memory.
 */
#ifndef DUALRAIL_ALGO_STAGED_HPP
#define DUALRAIL_ALGO_STAGED_HPP

#include <cstddef>
#include <string>

#include "algo/allreduce.hpp"
#include "algo/staged_math.hpp"
#include "algo/transport.hpp"
#include "dualrail/status.h"
#include "gpu/dr_gpu.h"

namespace dualrail {
namespace coll {

/* The device of p (dr_mem_ops_t::device_of); -1 also for a table without device functions. */
inline int mem_device_of(const dr_mem_ops_t *mem, const void *p)
{
    return mem->device_of != nullptr ? mem->device_of(p) : -1;
}

/*
 * Makes a device current on this thread for a scope and gives the caller's
 * back at its end (dr_gpu.h: kernels run on the current device, and the
 * thread that calls MPI need not be on the device of its buffers).
 * device < 0: changes nothing.
 */
class DeviceScope {
  public:
    explicit DeviceScope(const dr_mem_ops_t *mem) : mem_(mem) {}
    ~DeviceScope();
    DeviceScope(const DeviceScope &) = delete;
    DeviceScope &operator=(const DeviceScope &) = delete;
    dr_status_t enter(int device);

  private:
    const dr_mem_ops_t *mem_;
    void *saved_ = nullptr;
    bool switched_ = false;
};

/*
 * Streams, events and staging memory of one communicator: created once,
 * grown only when a call needs larger slots, freed with the communicator.
 * They belong to one device, the one holding the buffers of the first call
 * that needs them; each call makes it current while it works. Not thread
 * safe (a communicator's collectives are not concurrent).
 */
class Staging {
  public:
    /* budget: pinned host bytes for the two staging directions (the window follows from it). */
    Staging(const dr_mem_ops_t *mem, size_t budget);
    ~Staging();
    Staging(const Staging &) = delete;
    Staging &operator=(const Staging &) = delete;

    /*
     * Streams and events on device (< 0: the thread's current one), once: a
     * later call keeps the first device. DR_OK or an error with the reason in
     * *err.
     */
    dr_status_t init(int device, std::string *err);
    /* The device of the streams, events and scratch; -1 before init. */
    int device() const { return device_; }
    /* window slots of slot_bytes in each of: pinned receive, pinned send, device scratch. */
    dr_status_t reserve(size_t window, size_t slot_bytes, std::string *err);
    /* Host memory for a whole message (the non-ring paths); nullptr when out of memory. */
    void *whole(size_t bytes);
    /*
     * A send that could not be cancelled may still read the send staging after
     * an error: park it for the life of the process (like Scratch::abandon).
     */
    void abandon_send();

    const dr_mem_ops_t *mem() const { return mem_; }
    size_t budget() const { return budget_; }

    /* A staged-ring call that could not get its slots and ran on host memory instead. */
    void note_fallback(const std::string &why);
    /* Calls that fell back so far, and the reason of the last one (for one log line). */
    unsigned long fallbacks() const { return fallbacks_; }
    const std::string &fallback_reason() const { return fallback_reason_; }

    const dr_mem_ops_t *mem_;
    size_t budget_;
    void *reduce_stream = nullptr;        /* host-to-device copies and reductions */
    void *d2h_stream = nullptr;           /* device-to-host copies for sends */
    void *reduced[kStagedMaxWindow] = {}; /* on reduce_stream: a unit's device work is done */
    void *copied[kStagedMaxWindow] = {};  /* on d2h_stream: a send's staging is filled */
    char *host_recv = nullptr, *host_send = nullptr, *dev = nullptr;
    size_t slot_bytes = 0, window = 0;

  private:
    void release_slots();
    Scratch whole_;
    unsigned long fallbacks_ = 0;
    std::string fallback_reason_;
    int device_ = -1;
};

/* What the staged path needs beyond Params. */
struct StagedArgs {
    int gpu_op = -1;   /* dr_gpu_op_t, or -1: no kernel for this (op, type) */
    int gpu_type = -1; /* dr_gpu_type_t */
};

/* Which path a call takes (for logs and tests). */
enum StagedPath : int {
    kPathHost = 0,  /* receive buffer on the host */
    kPathRing = 1,  /* the staged ring with device reductions */
    kPathWhole = 2, /* whole message staged, host algorithm reduces */
};

/* Path and algorithm for p (already the host's normalized choice). */
int staged_path(const Params &p, const StagedArgs &a, const dr_mem_ops_t *mem);
/*
 * The same for a call on s: the ring (device kernels) only when the receive
 * buffer is on s's device, or s has none yet; otherwise the whole message.
 */
int staged_path(const Params &p, const StagedArgs &a, const Staging &s);

/*
 * Blocking allreduce where either buffer may be device memory. Same contract
 * as allreduce() (errors, agreement across ranks). scratch may be nullptr.
 * Never throws.
 */
dr_status_t allreduce_staged(Transport &t, const Params &p, const StagedArgs &a, Staging &s,
                             Scratch *scratch, std::string *err);

} // namespace coll
} // namespace dualrail

#endif
