/* dualrail-check: helpers every check shares (see check.hpp). */
#include <time.h>

#include <cstdarg>
#include <cstdio>

#include "check.hpp"

namespace drcheck {

namespace {

void progress_all(Env &e)
{
    for (Link &l : e.links) {
        if (l.mr != nullptr) {
            dr_mr_progress(l.mr);
        }
    }
}

} // namespace

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nap()
{
    struct timespec ts = {0, 50000};
    nanosleep(&ts, nullptr);
}

std::string strf(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

std::string rate_text(double bps)
{
    if (bps >= 1e9) {
        return strf("%.2f Gbit/s", bps / 1e9);
    }
    return strf("%.1f Mbit/s", bps / 1e6);
}

void mr_log(int level, const char *msg, void *arg)
{
    (void)level;
    auto *v = static_cast<std::vector<std::string> *>(arg);
    if (v->size() < 200) {
        v->push_back(msg);
    }
}

/* A barrier that keeps every plane progressing while it waits (a peer may still
 * need our acknowledgements); bounded. */
bool barrier(Env &e, double limit)
{
    MPI_Request r;
    MPI_Ibarrier(e.comm, &r);
    const double end = now_s() + limit;
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) {
            return true;
        }
        if (now_s() > end) {
            return false;
        }
        progress_all(e);
        nap();
    }
}

/* "plane 1 (ethB)" or "plane 1 rail 2 (mlx5_3:1)" */
std::string plane_text(const Env &e, int l)
{
    const Link &k = e.links[l];
    int rails = 0;
    for (const Link &x : e.links) {
        rails += x.plane == k.plane;
    }
    if (rails > 1) {
        return strf("plane %d rail %d (%s)", k.plane, k.rail, k.device.c_str());
    }
    return strf("plane %d (%s)", k.plane, k.device.c_str());
}

} // namespace drcheck
