/*
 * The Transport of the algorithm layer over ucx_mr (a comm rank is mapped to
 * its ucx_mr process id), and the C arguments turned into the algorithms'
 * Params. Shared by dr_coll.cc (host buffers), dr_coll_gpu.cc (device
 * buffers), dr_alltoall.cc and dr_coll_nb.cc (the same arguments, run as tasks).
 */
#ifndef DUALRAIL_MPI_COLL_MR_TRANSPORT_HPP
#define DUALRAIL_MPI_COLL_MR_TRANSPORT_HPP

#include <cstdio>
#include <new>
#include <string>

#include "algo/allreduce.hpp"
#include "algo/transport.hpp"
#include "dr_alltoall.h"
#include "dr_coll.h"
#include "dualrail/ucx_mr.h"

namespace dualrail {
namespace coll {

/* The C API's error buffer (may be NULL). A successful call only clears it: snprintf
 * cost more than the rest of the glue of an 8-byte allreduce. */
inline void set_err(char *err, size_t errlen, const char *msg)
{
    if (err == nullptr || errlen == 0 || msg == err) {
        return; /* msg == err: a failing caller's reason (Params::fail_why) left in place */
    }
    if (msg[0] == '\0') {
        err[0] = '\0';
        return;
    }
    snprintf(err, errlen, "%s", msg);
}

/* Zero rd_max_bytes and segment_size take the defaults, as dr_coll.h promises. */
inline Params to_params(const dr_allreduce_args_t *a)
{
    Params p;
    p.sendbuf = a->sendbuf;
    p.recvbuf = a->recvbuf;
    p.count = a->count;
    p.elem_size = a->elem_size;
    p.reduce = a->reduce;
    p.reduce_arg = a->reduce_arg;
    p.rank = a->rank;
    p.size = a->size;
    p.comm_id = a->comm_id;
    p.seq = a->seq;
    p.algorithm = a->algorithm;
    p.rd_max_bytes = a->rd_max_bytes == 0 ? kDefaultRdMaxBytes : a->rd_max_bytes;
    p.segment_size = a->segment_size == 0 ? kDefaultSegmentBytes : a->segment_size;
    p.timeout = a->timeout;
    p.idle = a->idle;
    p.idle_arg = a->idle_arg;
    p.fail = a->fail;
    p.fail_why = a->fail_why;
    return p;
}

class MrTransport final : public Transport {
  public:
    MrTransport(dr_mr_t *mr, const uint32_t *ids) : mr_(mr), ids_(ids) {}

    dr_status_t isend(int peer, uint64_t key, const void *buf, size_t len, Req *req) override
    {
        dr_mr_req_t *r = nullptr;
        dr_status_t st = dr_mr_isend(mr_, ids_[peer], key, buf, len, &r);
        *req = r;
        return st;
    }
    dr_status_t irecv(int peer, uint64_t key, void *buf, size_t capacity, Req *req) override
    {
        dr_mr_req_t *r = nullptr;
        dr_status_t st = dr_mr_irecv(mr_, ids_[peer], key, buf, capacity, &r);
        *req = r;
        return st;
    }
    dr_status_t test(Req req, size_t *len) override
    {
        return dr_mr_test(mr_, static_cast<dr_mr_req_t *>(req), len);
    }
    dr_status_t cancel(Req req) override
    {
        return dr_mr_cancel(mr_, static_cast<dr_mr_req_t *>(req));
    }
    void release(Req req) override { dr_mr_req_free(mr_, static_cast<dr_mr_req_t *>(req)); }
    dr_status_t reap(Req req, size_t *len) override
    {
        return dr_mr_test_free(mr_, static_cast<dr_mr_req_t *>(req), len);
    }
    int progress() override { return dr_mr_progress(mr_); }
    size_t take_max() const override { return dr_mr_take_max(mr_); }
    dr_status_t take(int peer, uint64_t key, void *buf, size_t capacity, size_t *len) override
    {
        return dr_mr_take(mr_, ids_[peer], key, buf, capacity, len);
    }
    dr_status_t take_wait(int peer, uint64_t key, void *buf, size_t capacity, size_t *len) override
    {
        return dr_mr_take_wait(mr_, ids_[peer], key, buf, capacity, len);
    }
    dr_status_t take_cancel(int peer, uint64_t key, const void *buf, size_t *len) override
    {
        return dr_mr_take_cancel(mr_, ids_[peer], key, buf, len);
    }
    void peer_name(int peer, char *buf, size_t len) const override
    {
        snprintf(buf, len, "peer rank %d (process %u)", peer, ids_[peer]);
    }
    const char *last_error() const override
    {
        const char *e = dr_mr_last_error(mr_);
        return e != nullptr ? e : "";
    }

  private:
    dr_mr_t *mr_;
    const uint32_t *ids_;
};

/*
 * Messages a failed collective leaves behind. A rank that left a call on an error never
 * receives its peers' data still arriving for it, and a rank that finished a call never
 * takes the abort notices its peers sent once they failed; ucx_mr holds both under their
 * keys. The key's sequence number wraps after 65536 calls of a kind on a communicator, and a
 * communicator's id is used again after it is freed: the receive of a later call under the
 * same key would take the stale message instead of its own (seen: an MPI_Allgather 65536
 * calls after a failed one returned success with a block of the failed call). So every
 * kStaleEvery calls of a kind on a communicator, the messages held for calls of that kind
 * that lie kStaleMin .. kStaleMax calls behind are dropped: this rank finished (or failed)
 * those calls long ago. Messages of calls ahead of this rank (a peer may run ahead: a
 * bcast root's small sends complete at once) are kept; one more than 65536 - kStaleMax
 * calls ahead would be taken for a stale one, but 65536 ahead would already meet a call of
 * this rank under its own key. dr_coll_forget_comm drops a freed communicator's.
 */
constexpr uint32_t kStaleEvery = 1024, kStaleMin = 1024, kStaleMax = 16384;

struct StaleCalls {
    uint32_t comm, kind, seq;
    uint32_t min; /* kStaleMin, or more: past the oldest call still queued or running */
};

/* How far behind call seq of (comm, kind) the oldest non-blocking call of that kind still
 * queued or running lies, up to kStaleMax; 0 when there is none (dr_coll_nb.cc). A rank
 * may have any number of them outstanding, and their held messages are not stale. */
uint32_t nb_unfinished_behind(uint32_t comm, uint32_t kind, uint32_t seq);

inline int stale_call(uint64_t key, void *arg)
{
    const StaleCalls *s = static_cast<const StaleCalls *>(arg);
    const dr_key_fields_t f = dr_key_unpack(key);
    if (f.comm != s->comm || f.kind != s->kind) {
        return 0;
    }
    const uint32_t behind = (s->seq - f.seq) & kSeqMask;
    return behind >= s->min && behind <= kStaleMax;
}

/* At the start of call p (every kStaleEvery-th of its kind): see StaleCalls. */
inline void drop_stale(dr_mr_t *mr, const Params &p)
{
    if (mr != nullptr && (p.seq & (kStaleEvery - 1)) == 0) {
        StaleCalls s{p.comm_id, (uint32_t)p.kind, p.seq & kSeqMask, kStaleMin};
        const uint32_t open = nb_unfinished_behind(s.comm, s.kind, s.seq);
        s.min = open >= kStaleMin ? open + 1 : kStaleMin;
        if (s.min <= kStaleMax) {
            (void)dr_mr_drop_unexpected(mr, stale_call, &s);
        }
    }
}

/*
 * The C API's boundary for one collective of any kind: checks the transport
 * arguments (when the call moves data at all), runs run(transport, p, &why)
 * over ucx_mr, and turns exceptions into statuses (none crosses the C ABI).
 */
template <class Run>
dr_status_t c_api_run(dr_mr_t *mr, const uint32_t *peer_ids, const Params &p, bool moves_data,
                      char *err, size_t errlen, Run run)
{
    char line[96];
    if (p.fail != DR_OK && (!moves_data || p.size < 2)) {
        /* Params::fail with nothing to exchange: no peer waits for this rank. */
        set_err(err, errlen, p.fail_why != nullptr ? p.fail_why : dr_status_str(p.fail));
        return p.fail;
    }
    if (moves_data && (mr == nullptr || peer_ids == nullptr)) {
        snprintf(line, sizeof(line), "%s: no transport context or no peer ids", kind_name(p.kind));
        set_err(err, errlen, line);
        return DR_ERR_INVALID;
    }
    drop_stale(mr, p);
    try {
        MrTransport t(mr, peer_ids);
        std::string why;
        dr_status_t st = run(t, p, &why);
        if (st == DR_OK && p.fail != DR_OK) {
            /* Params::fail where this rank's part of the schedule was empty (a v variant
             * with nothing to or from it): no transfer, but still no success. */
            st = p.fail;
            why = p.fail_why != nullptr ? p.fail_why : dr_status_str(p.fail);
        }
        set_err(err, errlen, why.c_str());
        return st;
    } catch (const std::bad_alloc &) {
        snprintf(line, sizeof(line), "%s: out of memory", kind_name(p.kind));
        set_err(err, errlen, line);
        return DR_ERR_NO_MEMORY;
    } catch (...) {
        snprintf(line, sizeof(line), "%s: internal error", kind_name(p.kind));
        set_err(err, errlen, line);
        return DR_ERR_INVALID;
    }
}

/* The allreduce's arguments (dr_coll.cc, dr_coll_gpu.cc). a is not NULL. */
template <class Run>
dr_status_t c_api_run(dr_mr_t *mr, const dr_allreduce_args_t *a, char *err, size_t errlen, Run run)
{
    return c_api_run(mr, a->peer_ids, to_params(a), a->count != 0 && a->size > 1, err, errlen, run);
}

/* The data-movement kinds' arguments (bcast, barrier, allgather). a is not NULL. */
inline Params to_params(const dr_coll_args_t *a, int kind)
{
    Params p;
    p.kind = kind;
    p.sendbuf = a->sendbuf;
    p.recvbuf = a->recvbuf;
    p.count = a->bytes;
    p.elem_size = 1;
    p.root = a->root;
    p.rank = a->rank;
    p.size = a->size;
    p.comm_id = a->comm_id;
    p.seq = a->seq;
    p.algorithm = a->algorithm;
    p.small_max_bytes = a->small_max_bytes == 0 ? kDefaultSmallMaxBytes : a->small_max_bytes;
    p.segment_size = a->segment_size == 0 ? kDefaultSegmentBytes : a->segment_size;
    p.timeout = a->timeout;
    p.idle = a->idle;
    p.idle_arg = a->idle_arg;
    p.counts = a->counts;
    p.displs = a->displs;
    p.fail = a->fail;
    p.fail_why = a->fail_why;
    if (kind == kKindReduce || kind == kKindReduceScatterBlock || kind == kKindReduceScatter) {
        /* the reducing kinds count elements (bytes is a whole number of them) */
        p.elem_size = a->elem_size;
        p.count = a->elem_size != 0 ? a->bytes / a->elem_size : 0;
        p.reduce = a->reduce;
        p.reduce_arg = a->reduce_arg;
    }
    return p;
}

/* Alltoall(v): as above, but small_max_bytes 0 is the alltoall's own default (1 KiB), not
 * the 64 KiB of the other kinds, so it is passed as it is. The window is not a Params field:
 * the caller hands a->window to alltoall() itself. */
inline Params to_params(const dr_alltoall_args_t *a, int kind)
{
    Params p = to_params(&a->c, kind);
    p.small_max_bytes = a->c.small_max_bytes;
    return p;
}

} // namespace coll
} // namespace dualrail

#endif
