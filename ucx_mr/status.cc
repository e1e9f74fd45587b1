#include "dualrail/status.h"

#include <cstdarg>
#include <cstdio>

#include "errbuf.hpp"

void dualrail::set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == nullptr || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

extern "C" const char *dr_status_str(dr_status_t status)
{
    switch (status) {
    case DR_OK: return "success";
    case DR_INPROGRESS: return "in progress";
    case DR_ERR_INVALID: return "invalid argument";
    case DR_ERR_CONFIG: return "bad plane configuration";
    case DR_ERR_NO_DEVICE: return "no such device";
    case DR_ERR_UCX: return "ucx error";
    case DR_ERR_NO_MEMORY: return "out of memory";
    case DR_ERR_PEER_UNREACHABLE: return "peer unreachable on every plane";
    case DR_ERR_TRUNCATED: return "message truncated";
    case DR_ERR_TIMEOUT: return "timed out";
    case DR_ERR_PEER_MISMATCH: return "peer plane layout mismatch";
    case DR_ERR_CANCELED: return "canceled";
    case DR_ERR_GPU: return "gpu error";
    }
    return "unknown status";
}
