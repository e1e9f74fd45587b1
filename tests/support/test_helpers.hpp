/*
 * What the C++ allreduce tests share: deterministic test values, wrapping sum
 * and max reductions (a ReduceFn), and a thread-safe list of failure lines.
 */
#ifndef DUALRAIL_TESTS_SUPPORT_TEST_HELPERS_HPP
#define DUALRAIL_TESTS_SUPPORT_TEST_HELPERS_HPP

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dualrail {
namespace test {

/* A 64-bit finalizer (splitmix64's): test values from (rank, index, salt). */
inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* inout += in, element type T; integer sums wrap (the cast), as MPI_SUM's must. */
template <typename T> void sum_t(const void *in, void *inout, size_t count, void *)
{
    const T *a = static_cast<const T *>(in);
    T *b = static_cast<T *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] = (T)(a[i] + b[i]);
    }
}

/* inout = max(in, inout), element type T. */
template <typename T> void max_t(const void *in, void *inout, size_t count, void *)
{
    const T *a = static_cast<const T *>(in);
    T *b = static_cast<T *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] = a[i] > b[i] ? a[i] : b[i];
    }
}

/* A 12-byte element: three 32-bit lanes summed (an element size of no predefined type). */
inline void sum_u32x3(const void *in, void *inout, size_t count, void *)
{
    sum_t<uint32_t>(in, inout, count * 3, nullptr);
}

/* Failure lines from rank threads; the first 30 are kept. */
struct Failures {
    std::mutex mu;
    std::vector<std::string> lines;
    void add(const std::string &s)
    {
        std::lock_guard<std::mutex> lk(mu);
        if (lines.size() < 30) {
            lines.push_back(s);
        }
    }
};

} // namespace test
} // namespace dualrail

#endif
