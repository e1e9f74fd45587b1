/*
 * The sending side both chains share (bcast_chain.cc, reduce_chain.cc): segment k leaves
 * for the next rank of the chain as soon as it is ready, at most `window` sends in flight,
 * completed in order. Slots: send k in first_slot + k % window.
 */
#ifndef DUALRAIL_ALGO_CHAIN_HPP
#define DUALRAIL_ALGO_CHAIN_HPP

#include "algo/chain_math.hpp"
#include "algo/engine.hpp"

namespace dualrail {
namespace coll {

struct ChainSends {
    size_t sent;       /* segments posted */
    size_t done;       /* segments whose send completed (slot free, buffer no longer read) */
    size_t window;     /* sends in flight at most */
    size_t first_slot; /* engine slots first_slot .. first_slot + window - 1 */
    int peer;          /* the next rank of the chain; -1: this rank sends nothing */

    /* Post what is ready (segments below `ready`; seg(k) gives its buffer and bytes) and
     * retire completed sends; *moved is set when anything happened. */
    template <class Seg> dr_status_t advance(Engine &eng, size_t ready, Seg seg, bool *moved)
    {
        dr_status_t st = DR_OK;
        for (; st == DR_OK && sent < ready && sent < done + window; ++sent) {
            const void *buf;
            size_t len;
            seg(sent, &buf, &len);
            st = eng.isend(first_slot + sent % window, peer, 0,
                           eng.key(0, chain_key_block(sent), chain_key_seg(sent)), buf, len);
            *moved = true;
        }
        while (st == DR_OK && done < sent) {
            if ((st = eng.test(first_slot + done % window)) == DR_INPROGRESS) {
                return DR_OK;
            }
            ++done;
            *moved = true;
        }
        return st;
    }
};

} // namespace coll
} // namespace dualrail

#endif
