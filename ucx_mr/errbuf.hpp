/*
 * The one way ucx_mr fills a caller's error buffer: a printf-style line,
 * truncated to the buffer, nothing written when the caller passed none.
 */
#ifndef DUALRAIL_ERRBUF_HPP
#define DUALRAIL_ERRBUF_HPP

#include <cstddef>

namespace dualrail {

void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

} // namespace dualrail

#endif
