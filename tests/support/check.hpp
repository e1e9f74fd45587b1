/*
 * The plain C++ unit tests' check (no test framework): a failed condition prints its line
 * and counts; main returns check_report(): "ok" and 0, or the count and 1.
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

/* main's verdict: "ok" and 0 when every check held, else the failures' count and 1. */
inline int check_report()
{
    if (check_failures() != 0) {
        std::printf("%d check(s) failed\n", check_failures());
        return 1;
    }
    std::printf("ok\n");
    return 0;
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
