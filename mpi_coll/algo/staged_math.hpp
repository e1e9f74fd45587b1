/*
 * Staged ring arithmetic: how many segments are staged at once and which
 * earlier work each unit waits for. Pure functions, unit-tested in
 * tests/unit/test_algo_staged.cc.
 *
 * Units are the ring's (step, segment) pairs in schedule order,
 * u = step * nseg + segment (ring_math.hpp); send s carries the data of unit
 * s - nseg's result (s >= nseg) or of the input (s < nseg).
 */
#ifndef DUALRAIL_ALGO_STAGED_MATH_HPP
#define DUALRAIL_ALGO_STAGED_MATH_HPP

#include <cstddef>
#include <cstdint>

namespace dualrail {
namespace coll {

/* Staging slots per direction: never fewer than two (overlap), never more than the key allows. */
constexpr size_t kStagedMinWindow = 2;
constexpr size_t kStagedMaxWindow = 16;

/*
 * Slots per direction that fit a budget of pinned host bytes: receive and
 * send staging each take `window` slots of slot_bytes. Clamped to
 * [kStagedMinWindow, kStagedMaxWindow] and to the number of units (a slot no
 * unit uses is waste). units 0 gives 0.
 */
inline size_t staged_window(size_t budget_bytes, size_t slot_bytes, size_t units)
{
    if (units == 0) {
        return 0;
    }
    size_t w = slot_bytes == 0 ? kStagedMaxWindow : budget_bytes / 2 / slot_bytes;
    w = w < kStagedMinWindow ? kStagedMinWindow : w > kStagedMaxWindow ? kStagedMaxWindow : w;
    return w > units ? units : w;
}

/*
 * An allgather unit's host-to-device copy overwrites the device segment that
 * send u - (n-1)*nseg read (the same block, n-1 steps earlier): that send's
 * device-to-host copy must be queued first. Returns that send's index, or -1
 * for a reduce-scatter unit (it writes a block this rank never sent).
 */
inline long long staged_overwrite_gate(size_t u, int n, int nseg)
{
    const size_t rs_units = (size_t)(n - 1) * (size_t)nseg;
    return u < rs_units ? -1 : (long long)(u - rs_units);
}

/* The unit whose result send s carries, or -1 when it carries the input (step 0). */
inline long long staged_send_source(size_t s, int nseg)
{
    return s < (size_t)nseg ? -1 : (long long)(s - (size_t)nseg);
}

/* Bytes of device scratch, pinned receive and pinned send staging for window slots. */
inline size_t staged_bytes(size_t window, size_t slot_bytes)
{
    return window * slot_bytes;
}

} // namespace coll
} // namespace dualrail

#endif
