/*
 * Stripe split. See include/dualrail/stripe.h.
 *
 * Boundary i is floor(len * W_{<i} / W, aligned down to align), computed in
 * 128 bits so that a message near 2^64 bytes times a large weight cannot
 * overflow. Stripes are therefore contiguous, in plane order, and differ from
 * the exact proportional share by less than align bytes each.
 */
#include "dualrail/stripe.h"

extern "C" int dr_stripe_split(uint64_t len, const uint32_t *weights, int n, uint64_t align,
                               uint64_t min_stripe, int first, dr_extent_t *out)
{
    if (n <= 0 || align == 0 || weights == nullptr || out == nullptr) {
        return -1;
    }
    unsigned __int128 total = 0;
    for (int i = 0; i < n; ++i) {
        total += weights[i];
        out[i].offset = 0;
        out[i].length = 0;
    }
    if (total == 0) {
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    if (len <= min_stripe) {
        int start = first < 0 ? 0 : first % n;
        for (int k = 0; k < n; ++k) {
            int p = (start + k) % n;
            if (weights[p] != 0) {
                out[p].length = len;
                return 1;
            }
        }
        return -1; /* unreachable: total != 0 */
    }
    unsigned __int128 acc = 0;
    uint64_t prev = 0;
    int used = 0;
    for (int i = 0; i < n; ++i) {
        acc += weights[i];
        uint64_t end;
        if (acc == total) {
            end = len;
        } else {
            end = (uint64_t)(((unsigned __int128)len * acc) / total);
            end -= end % align;
            if (end < prev) {
                end = prev;
            }
        }
        out[i].offset = prev;
        out[i].length = end - prev;
        if (out[i].length != 0) {
            ++used;
        }
        prev = end;
        if (acc == total) {
            /* Later planes have weight 0: they keep an empty extent at the end. */
            for (int j = i + 1; j < n; ++j) {
                out[j].offset = len;
            }
            break;
        }
    }
    return used;
}

extern "C" uint64_t dr_segment_count(uint64_t len, uint64_t seg_size)
{
    if (len == 0 || seg_size == 0) {
        return 0;
    }
    return len / seg_size + (len % seg_size != 0);
}
