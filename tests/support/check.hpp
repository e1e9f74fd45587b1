/*
 * The plain C++ unit tests' check (no test framework): a failed condition prints its line
 * and counts; main returns non-zero when any did (check_failures()).
 */
#ifndef DUALRAIL_TESTS_SUPPORT_CHECK_HPP
#define DUALRAIL_TESTS_SUPPORT_CHECK_HPP

#include <cstdio>

namespace dualrail {
namespace test {

inline int &check_failures()
{
    static int n = 0;
    return n;
}

} // namespace test
} // namespace dualrail

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ++dualrail::test::check_failures();                                                    \
            std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, what);                             \
        }                                                                                          \
    } while (0)

#endif
