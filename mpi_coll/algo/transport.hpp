/*
 * The one thing the algorithms know about the network: point-to-point
 * messages between ranks of one communicator, named by a 64-bit key
 * (dualrail/key.h). Production runs over ucx_mr (dr_coll.cc maps a comm rank
 * to its ucx_mr process id); the unit tests run over an in-memory fake with
 * one thread per rank.
 *
 * The contract is ucx_mr's (include/dualrail/ucx_mr.h), which the fake copies:
 *   - isend/irecv never block; a request completes in test() after progress();
 *   - a send's buffer is read until the send completes, and a send completes
 *     only once the receiver has the whole message;
 *   - a message that arrives before its receive is held until the receive is
 *     posted; keys are unique between a pair of ranks while in flight;
 *   - a running receive may be cancelled (its buffer is never written again),
 *     a running send may not;
 *   - release() takes completed requests only; a running send that the caller
 *     abandons stays owned by the transport (freed when the transport is);
 *     reap() is test() and, once done, release().
 * Nothing here throws.
 */
#ifndef DUALRAIL_ALGO_TRANSPORT_HPP
#define DUALRAIL_ALGO_TRANSPORT_HPP

#include <cstddef>
#include <cstdint>

#include "dualrail/status.h"

namespace dualrail {
namespace coll {

class Transport {
  public:
    using Req = void *;

    virtual ~Transport() = default;

    /* peer: comm rank. On DR_OK *req is set (it may already be complete, with an error). */
    virtual dr_status_t isend(int peer, uint64_t key, const void *buf, size_t len, Req *req) = 0;
    virtual dr_status_t irecv(int peer, uint64_t key, void *buf, size_t capacity, Req *req) = 0;
    /* DR_INPROGRESS while running, else the final status; *len: bytes moved. */
    virtual dr_status_t test(Req req, size_t *len) = 0;
    /* Receives only; a completed request is left as it is (DR_OK). */
    virtual dr_status_t cancel(Req req) = 0;
    virtual void release(Req req) = 0;
    /* test(), and release() once it is no longer running: what a waiter done with the
     * request calls. A transport may do both at once (ucx_mr: one call, one lock). */
    virtual dr_status_t reap(Req req, size_t *len)
    {
        const dr_status_t st = test(req, len);
        if (st != DR_INPROGRESS) {
            release(req);
        }
        return st;
    }
    /* Drive the network; non-zero when anything happened. Never blocks. */
    virtual int progress() = 0;

    /* A receive without a request, for messages of up to take_max() bytes: DR_OK when the
     * message under key from peer is already here (copied into buf, *len set), DR_INPROGRESS
     * when not (or when a posted receive must handle it: in pieces, too large), else an
     * error. A transport without it takes nothing (take_max() 0). */
    virtual size_t take_max() const { return 0; }
    virtual dr_status_t take(int peer, uint64_t key, void *buf, size_t capacity, size_t *len)
    {
        (void)peer;
        (void)key;
        (void)buf;
        (void)capacity;
        (void)len;
        return DR_INPROGRESS;
    }
    /* take() for a waiter that calls it until DR_OK (dr_mr_take_wait): the transport may
     * write buf from the first DR_INPROGRESS on, as the message arrives, until a call
     * returns DR_OK or take_cancel() is called. Default: take(). */
    virtual dr_status_t take_wait(int peer, uint64_t key, void *buf, size_t capacity, size_t *len)
    {
        return take(peer, key, buf, capacity, len);
    }
    /* Ends take_wait()'s wait into buf (dr_mr_take_cancel): DR_OK with *len when the message
     * came into buf meanwhile, DR_INPROGRESS when buf is untouched and the caller's again. */
    virtual dr_status_t take_cancel(int peer, uint64_t key, const void *buf, size_t *len)
    {
        (void)peer;
        (void)key;
        (void)buf;
        (void)len;
        return DR_INPROGRESS;
    }

    /* "peer rank 3 (process 7)": how error lines name a peer (no allocation, no throw). */
    virtual void peer_name(int peer, char *buf, size_t len) const = 0;
    /* Why the last failed request failed (dr_mr_last_error for ucx_mr). Never NULL. */
    virtual const char *last_error() const = 0;
};

} // namespace coll
} // namespace dualrail

#endif
