/*
 * The far end of the lab transfer tests: receives message 2i from the peer
 * and sends the same bytes back as message 2i+1, until the peer sends the
 * quit key. Runs in another lab node. Bounded: exits after 600 s, or at the
 * first failed transfer (exit 2, the reason on stderr).
 *
 *   xfer_echo DIR SELF PEER PLANES
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

#define QUIT_KEY UINT64_C(0xffffffffffffffff)
#define MAX_MSG ((size_t)72 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: xfer_echo DIR SELF PEER PLANES\n");
        return 1;
    }
    const char *dir = argv[1];
    unsigned self = (unsigned)atoi(argv[2]), peer = (unsigned)atoi(argv[3]);
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.verbose = getenv("DR_VERBOSE") ? atoi(getenv("DR_VERBOSE")) : 0;
    cfg.planes = argv[4];
    cfg.name = "echo";
    char err[512];
    dr_mr_t *mr;
    if (dr_mr_create(&cfg, self, &mr, err, sizeof(err)) != DR_OK) {
        fprintf(stderr, "xfer_echo: %s\n", err);
        return 2;
    }
    if (dr_oob_connect(mr, dir, self, peer, 60, err, sizeof(err)) != 0) {
        fprintf(stderr, "xfer_echo: %s\n", err);
        return 2;
    }
    char *buf = malloc(MAX_MSG);
    char quit_byte;
    dr_mr_req_t *quit;
    dr_mr_irecv(mr, peer, QUIT_KEY, &quit_byte, 1, &quit);
    const double end = now_s() + 600;
    int rc = 0;
    for (uint64_t i = 0; now_s() < end; ++i) {
        dr_mr_req_t *r;
        dr_mr_irecv(mr, peer, 2 * i, buf, MAX_MSG, &r);
        dr_status_t st;
        size_t got = 0;
        while ((st = dr_mr_test(mr, r, &got)) == DR_INPROGRESS && now_s() < end &&
               dr_mr_test(mr, quit, NULL) == DR_INPROGRESS) {
            dr_mr_progress(mr);
        }
        if (dr_mr_test(mr, quit, NULL) != DR_INPROGRESS) {
            break;
        }
        if (st != DR_OK) {
            fprintf(stderr, "xfer_echo: receive %llu: %s: %s\n", (unsigned long long)(2 * i),
                    dr_status_str(st), dr_mr_last_error(mr));
            rc = 2;
            break;
        }
        dr_mr_req_free(mr, r);
        dr_mr_req_t *s;
        dr_mr_isend(mr, peer, 2 * i + 1, buf, got, &s);
        st = dr_mr_wait(mr, s, end - now_s(), NULL);
        if (st != DR_OK) {
            fprintf(stderr, "xfer_echo: send %llu: %s: %s\n", (unsigned long long)(2 * i + 1),
                    dr_status_str(st), dr_mr_last_error(mr));
            rc = 2;
            break;
        }
        dr_mr_req_free(mr, s);
    }
    /* Keep answering briefly so the peer's last acknowledgements get through. */
    for (double t = now_s() + 0.3; now_s() < t;) {
        dr_mr_progress(mr);
    }
    free(buf);
    dr_mr_destroy(mr);
    return rc;
}
