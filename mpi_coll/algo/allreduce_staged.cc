/*
 * Staged ring allreduce: device buffers over a host-only network.
 *
 * Purpose:  allreduce on device (or managed) memory when UCX cannot read it
 *           (Debian's UCX has no CUDA transports). The ring's segments pass
 *           through pinned host slots; reductions run as kernels on the
 *           device (dr_gpu.h), in the order of the host ring, so results are
 *           bitwise the same on every rank and the same as a host rank's.
 * Accepts:  what the host ring accepts (allreduce_ring.cc), an (op, type)
 *           with a kernel, a receive buffer in device memory; the send buffer
 *           may be host or device memory. The wire schedule is the host
 *           ring's exactly: same segments, keys and lengths, so ranks with
 *           host buffers and ranks with device buffers run one collective.
 * Limits:   the ring's (kRingMaxRanks, kMaxSegments). Staging: `window`
 *           slots per direction (staged_window() of the budget), at least 2;
 *           a call whose segments do not fit grows the staging once. The
 *           staging lives on the device of the first call's buffers and is
 *           made current for each call; a receive buffer on another device
 *           takes the whole-message path (no kernel may touch it).
 *
 * Units as in the ring: u = step * nseg + segment. Per unit, with slot
 * j = u % window and send staging i = s % window:
 *
 *   stage        where                           waits for (on the host, or as a stream wait)
 *   D2H(s)       device seg -> host_send[i]      send s - window complete (slot free);
 *                (d2h stream)                    s >= nseg: unit s - nseg's device work
 *   send(s)      host_send[i] -> right           D2H(s)'s event
 *   recv(u)      left -> host_recv[j]            unit u - window retired (slot free)
 *   device(u)    H2D host_recv[j] -> dev[j],     recv(u); allgather: D2H of send
 *                reduce into recvbuf seg         u - (n-1)*nseg queued (that send read the
 *                (reduce-scatter), or H2D into   segment this unit overwrites)
 *                recvbuf seg (allgather)
 *   retire(u)    -                               device(u)'s event
 *
 * On 2 ranks with one segment per block (s = send, r = receive, R = reduce
 * on the device, C = copy to the device, D = copy to the host):
 *
 *   unit  step  rank 0                       rank 1
 *    0     0    D b0, s b0 | r b1, C, R b1   D b1, s b1 | r b0, C, R b0
 *    1     1    D b1, s b1 | r b0, C b0      D b0, s b0 | r b1, C b1
 *
 * Overlap: each stage is a separate queue (network, d2h stream, reduce
 * stream), so while unit u is on the wire, unit u - 1 is copied and reduced
 * and send u + 1's data is copied out. Nothing blocks: every stage is polled
 * (events and requests), the loop resumes where it stopped, and only a call
 * that made no progress at all waits (Engine::stalled). No device-wide
 * synchronisation; the streams are synchronized only on the error path.
 */
#include <sched.h>

#include <cstring>
#include <new>

#include "algo/engine.hpp"
#include "algo/ring_math.hpp"
#include "algo/staged.hpp"

namespace dualrail {
namespace coll {

namespace {

class StagedRing {
  public:
    StagedRing(Transport &t, const Params &p, const StagedArgs &a, Staging &s)
        : t_(t), p_(p), a_(a), s_(s), mem_(s.mem()), eng_(t, p, "staged ring"), n_(p.size),
          r_(p.rank), left_(ring_left(p.rank, p.size)), right_(ring_right(p.rank, p.size)),
          esz_(p.elem_size),
          src_(static_cast<const char *>(p.sendbuf != nullptr ? p.sendbuf : p.recvbuf)),
          dst_(static_cast<char *>(p.recvbuf)), plan_(p.count, p.size, p.elem_size, p.segment_size),
          nseg_(plan_.nseg), steps_(plan_.steps), units_(plan_.units), slot_bytes_(plan_.slot_bytes)
    {
        window_ = staged_window(s.budget(), slot_bytes_, units_);
    }

    /*
     * The slots for this call, before anything goes on the wire (streams and
     * events exist and the staging's device is current: allreduce_staged). A
     * rank that cannot have them takes the whole-message path instead (same
     * wire schedule), rather than failing alone while its peers wait.
     */
    dr_status_t prepare(std::string *why) { return s_.reserve(window_, slot_bytes_, why); }

    /* After prepare() succeeded. */
    dr_status_t run(std::string *err)
    {
        const int peers[2] = {left_, right_};
        dr_status_t st = eng_.init(window_ + units_, peers, 2);
        if (st != DR_OK) {
            return eng_.finish(st, err);
        }
        eng_.set_scratch(s_.host_send, s_.window * s_.slot_bytes);
        st = schedule();
        if (st != DR_OK) {
            /* Device work must not touch the slots (or the user's buffers) after we return. */
            mem_->stream_sync(s_.reduce_stream);
            mem_->stream_sync(s_.d2h_stream);
        }
        st = eng_.finish(st, err);
        if (eng_.scratch_busy()) {
            s_.abandon_send();
        }
        return st;
    }

  private:
    size_t send_slot(size_t s) const { return window_ + s; }
    char *host_recv(size_t u) const { return s_.host_recv + (u % window_) * s_.slot_bytes; }
    char *host_send(size_t s) const { return s_.host_send + (s % window_) * s_.slot_bytes; }
    char *dev(size_t u) const { return s_.dev + (u % window_) * s_.slot_bytes; }

    dr_status_t mem_fail(dr_status_t st, const char *what)
    {
        return eng_.set_error(st, "%s: %s", what, mem_->last_error());
    }

    /* Queue send s's device-to-host copy, if its slot and its data are ready. */
    dr_status_t stage_send(size_t s, bool *ready)
    {
        *ready = false;
        if (s >= window_) {
            if (sent_ <= s - window_) {
                return DR_OK; /* the slot's previous send is not even posted (a free slot tests OK)
                               */
            }
            dr_status_t st = eng_.test(send_slot(s - window_));
            if (st != DR_OK) {
                return st == DR_INPROGRESS ? DR_OK : st;
            }
        }
        const long long from = staged_send_source(s, nseg_);
        if (from >= 0 && (size_t)from >= enqueued_) {
            return DR_OK; /* the unit that produces this data has not been queued */
        }
        const int st_ = plan_.step_of(s), b = ring_send_block(r_, n_, st_);
        const Span sp = plan_.span(b, plan_.seg_of(s));
        const char *base = st_ == 0 ? src_ : dst_;
        dr_status_t st;
        if (from >= 0 && (st = mem_->stream_wait_event(
                              s_.d2h_stream, s_.reduced[(size_t)from % window_])) != DR_OK) {
            return mem_fail(st, "stream wait");
        }
        if ((st = mem_->copy_async(host_send(s), base + sp.offset * esz_, sp.count * esz_,
                                   s_.d2h_stream)) != DR_OK) {
            return mem_fail(st, "device-to-host copy");
        }
        if ((st = mem_->event_record(s_.copied[s % window_], s_.d2h_stream)) != DR_OK) {
            return mem_fail(st, "event record");
        }
        *ready = true;
        return DR_OK;
    }

    dr_status_t post_send(size_t s)
    {
        const int st = plan_.step_of(s), k = plan_.seg_of(s), b = ring_send_block(r_, n_, st);
        const Span sp = plan_.span(b, k);
        return eng_.isend(send_slot(s), right_, (uint32_t)st,
                          eng_.key((uint32_t)st, (uint32_t)b, (uint32_t)k), host_send(s),
                          sp.count * esz_);
    }

    dr_status_t post_recv(size_t u)
    {
        const int st = plan_.step_of(u), k = plan_.seg_of(u), b = ring_recv_block(r_, n_, st);
        const Span sp = plan_.span(b, k);
        return eng_.irecv(u % window_, left_, (uint32_t)st,
                          eng_.key((uint32_t)st, (uint32_t)b, (uint32_t)k), host_recv(u),
                          sp.count * esz_);
    }

    /* Queue unit u's device work (its receive is complete). */
    dr_status_t enqueue(size_t u, bool *ready)
    {
        *ready = false;
        const long long gate = staged_overwrite_gate(u, n_, nseg_);
        if (gate >= 0 && (size_t)gate >= staged_) {
            return DR_OK;
        }
        const int st_ = plan_.step_of(u);
        const Span sp = plan_.span(ring_recv_block(r_, n_, st_), plan_.seg_of(u));
        const size_t bytes = sp.count * esz_;
        char *d = dst_ + sp.offset * esz_;
        void *rs = s_.reduce_stream;
        dr_status_t st = DR_OK;
        if (gate >= 0) {
            st = mem_->stream_wait_event(rs, s_.copied[(size_t)gate % window_]);
            if (st == DR_OK) {
                st = mem_->copy_async(d, host_recv(u), bytes, rs);
            }
        } else if (bytes != 0) {
            st = mem_->copy_async(dev(u), host_recv(u), bytes, rs);
            if (st == DR_OK && src_ != dst_) {
                st = mem_->copy_async(d, src_ + sp.offset * esz_, bytes, rs);
            }
            if (st == DR_OK) {
                st = mem_->reduce_async(a_.gpu_op, a_.gpu_type, dev(u), d, sp.count, rs);
            }
        }
        if (st == DR_OK) {
            st = mem_->event_record(s_.reduced[u % window_], rs);
        }
        if (st != DR_OK) {
            return mem_fail(st, "queueing device work");
        }
        *ready = true;
        return DR_OK;
    }

    dr_status_t schedule()
    {
        dr_status_t st;
        while (retired_ < units_ || sent_ < units_) {
            bool moved = false, ok = false;
            /* Sends: copy out, then post once the copy is done. */
            while (staged_ < units_) {
                if ((st = stage_send(staged_, &ok)) != DR_OK) {
                    return st;
                }
                if (!ok) {
                    break;
                }
                ++staged_;
                moved = true;
            }
            while (sent_ < staged_) {
                st = mem_->event_query(s_.copied[sent_ % window_]);
                if (st == DR_INPROGRESS) {
                    break;
                }
                if (st != DR_OK) {
                    return mem_fail(st, "event query");
                }
                if ((st = post_send(sent_)) != DR_OK) {
                    return st;
                }
                ++sent_;
                moved = true;
            }
            /* Receives into free slots, then device work for the ones that arrived. */
            while (posted_ < units_ && posted_ < retired_ + window_) {
                if ((st = post_recv(posted_)) != DR_OK) {
                    return st;
                }
                ++posted_;
                moved = true;
            }
            while (enqueued_ < posted_) {
                st = eng_.test(enqueued_ % window_);
                if (st == DR_INPROGRESS) {
                    break;
                }
                if (st != DR_OK || (st = enqueue(enqueued_, &ok)) != DR_OK) {
                    return st;
                }
                if (!ok) {
                    break;
                }
                ++enqueued_;
                moved = true;
            }
            while (retired_ < enqueued_) {
                st = mem_->event_query(s_.reduced[retired_ % window_]);
                if (st == DR_INPROGRESS) {
                    break;
                }
                if (st != DR_OK) {
                    return mem_fail(st, "event query");
                }
                ++retired_;
                moved = true;
            }
            if (!moved) {
                if (retired_ < enqueued_ || sent_ < staged_) {
                    /* Only the device is behind: poll it, do not sleep on the network. */
                    t_.progress();
                    sched_yield();
                    continue;
                }
                const bool waiting_send = posted_ == enqueued_;
                st = eng_.stalled(waiting_send ? right_ : left_,
                                  (uint32_t)plan_.step_of(waiting_send ? sent_ : enqueued_));
                if (st != DR_OK) {
                    return st;
                }
            }
        }
        /* The right neighbour must have every send before the staging is reused. */
        for (size_t s = units_ > window_ ? units_ - window_ : 0; s < units_; ++s) {
            if ((st = eng_.wait(send_slot(s))) != DR_OK) {
                return st;
            }
        }
        return DR_OK;
    }

    Transport &t_;
    const Params &p_;
    const StagedArgs &a_;
    Staging &s_;
    const dr_mem_ops_t *mem_;
    Engine eng_;
    const int n_, r_, left_, right_;
    const size_t esz_;
    const char *const src_;
    char *const dst_;
    const RingPlan plan_; /* the host ring's (allreduce_ring.cc): the wire must match */
    const int nseg_, steps_;
    const size_t units_, slot_bytes_;
    size_t window_ = 1;
    size_t staged_ = 0, sent_ = 0, posted_ = 0, enqueued_ = 0, retired_ = 0;
};

bool on_device(const dr_mem_ops_t *mem, const void *p)
{
    return p != nullptr && mem->kind(p) != DR_MEM_HOST;
}

dr_status_t copy_sync(const dr_mem_ops_t *mem, void *stream, void *dst, const void *src,
                      size_t bytes, std::string *err, const char *what)
{
    dr_status_t st = mem->copy_async(dst, src, bytes, stream);
    if (st == DR_OK) {
        st = mem->stream_sync(stream);
    }
    if (st != DR_OK && err != nullptr) {
        try {
            *err = std::string("staged allreduce: ") + what + ": " + mem->last_error();
        } catch (const std::bad_alloc &) {
        }
    }
    return st;
}

} // namespace

int staged_path(const Params &p, const StagedArgs &a, const dr_mem_ops_t *mem)
{
    if (!on_device(mem, p.recvbuf)) {
        return kPathHost;
    }
    if (p.size >= 2 && allreduce_choose(p) == kAlgoRing && p.size <= kRingMaxRanks &&
        dr_gpu_op_valid(a.gpu_op, a.gpu_type) && dr_gpu_type_size(a.gpu_type) == p.elem_size) {
        return kPathRing;
    }
    return kPathWhole;
}

int staged_path(const Params &p, const StagedArgs &a, const Staging &s)
{
    const int path = staged_path(p, a, s.mem());
    if (path == kPathRing && s.device() >= 0) {
        /* A kernel on the staging's device may not touch another device's memory. */
        const int dev = mem_device_of(s.mem(), p.recvbuf);
        if (dev >= 0 && dev != s.device()) {
            return kPathWhole;
        }
    }
    return path;
}

dr_status_t allreduce_staged(Transport &t, const Params &in, const StagedArgs &a, Staging &s,
                             Scratch *scratch, std::string *err)
{
    const dr_mem_ops_t *mem = s.mem();
    const bool send_dev =
        in.sendbuf != nullptr && in.sendbuf != in.recvbuf && on_device(mem, in.sendbuf);
    const bool recv_dev = on_device(mem, in.recvbuf);
    if (!send_dev && !recv_dev) {
        return allreduce(t, in, scratch, err);
    }
    /* The host path's checks first, with host stand-ins for the buffers: same verdicts. */
    if (in.elem_size < 1 || in.elem_size > kMaxElemSize || in.count > SIZE_MAX / in.elem_size ||
        in.size < 1 || in.rank < 0 || in.rank >= in.size || in.count == 0) {
        return allreduce(t, in, scratch, err);
    }
    const size_t bytes = in.count * in.elem_size;
    std::string why;
    /*
     * The staging belongs to the device of the first call's buffers, not to
     * whichever device the calling thread happens to be on (device 0 for a
     * thread that never chose one); it is current for the whole call.
     */
    DeviceScope scope(mem);
    dr_status_t st = s.init(mem_device_of(mem, recv_dev ? in.recvbuf : in.sendbuf), &why);
    if (st == DR_OK && (st = scope.enter(s.device())) != DR_OK) {
        why =
            std::string("staged allreduce: cannot use the staging's device: ") + mem->last_error();
    }
    /* A failure from here to the schedule's start is told to the schedule's peers
     * (allreduce_fail_early): they would wait for this rank otherwise. */
    if (st != DR_OK) {
        return allreduce_fail_early(t, in, st, why, err);
    }
    Params p = normalized(in);
    if (!recv_dev) {
        /* Device input, host output: bring the input over and run the host path in place. */
        if ((st = copy_sync(mem, s.reduce_stream, p.recvbuf, p.sendbuf, bytes, &why,
                            "device-to-host copy of the input")) != DR_OK) {
            return allreduce_fail_early(t, p, st, why, err);
        }
        p.sendbuf = nullptr;
        return allreduce(t, p, scratch, err);
    }
    const int path = staged_path(p, a, s);
    if (path == kPathRing && p.size >= 2) {
        StagedRing ring(t, p, a, s);
        if (ring.prepare(&why) == DR_OK) {
            return ring.run(err);
        }
        /* No pinned slots (or device scratch) for this call: the whole message through
         * ordinary host memory, on the host ring, whose wire schedule is the staged ring's.
         * Slower, but this rank keeps pace with its peers instead of failing alone. */
        s.note_fallback(why);
    }
    /* One rank, recursive doubling, or no kernel: the host algorithm on a host copy. */
    void *h = s.whole(bytes);
    if (h == nullptr) {
        return allreduce_fail_early(t, p, DR_ERR_NO_MEMORY,
                                    "staged allreduce: out of memory for " + std::to_string(bytes) +
                                        " bytes of host staging",
                                    err);
    }
    const void *from = p.sendbuf != nullptr ? p.sendbuf : p.recvbuf;
    if ((st = copy_sync(mem, s.reduce_stream, h, from, bytes, &why,
                        "device-to-host copy of the input")) != DR_OK) {
        return allreduce_fail_early(t, p, st, why, err);
    }
    p.sendbuf = nullptr;
    p.recvbuf = h;
    if ((st = allreduce(t, p, scratch, err)) != DR_OK) {
        return st;
    }
    return copy_sync(mem, s.reduce_stream, in.recvbuf, h, bytes, err,
                     "host-to-device copy of the result");
}

} // namespace coll
} // namespace dualrail
