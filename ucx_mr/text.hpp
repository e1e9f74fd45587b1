/*
 * Text helpers of topology and discovery (topo.cc, topo_discover.cc): a printf-style
 * std::string and a bounded copy into a fixed char array of the public structures.
 */
#ifndef DUALRAIL_TEXT_HPP
#define DUALRAIL_TEXT_HPP

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <string>

namespace dualrail {

inline std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string strf(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

/* Truncates to the array (always terminated). */
template <size_t N> void copy_str(char (&dst)[N], const std::string &src)
{
    snprintf(dst, N, "%s", src.c_str());
}

} // namespace dualrail

#endif
