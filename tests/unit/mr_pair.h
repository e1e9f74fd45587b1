/*
 * The unit tests' pair of ucx_mr contexts on loopback (test_mr_loopback.c,
 * test_mr_acks.c): opened, closed (cmocka setup/teardown), driven until a send and a
 * receive complete, and a buffer filled with a seeded pattern.
 */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "../support/loopback_config.h"
#include "dualrail/ucx_mr.h"

typedef struct pair {
    dr_mr_t *a, *b;
} pair_t;

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* dr_mr_config_t.wakeup of the pairs pair_open makes from now on (default 0, as ucx_mr's). */
static int pair_wakeup = 0;

/* Two contexts on loopback that know each other; weights NULL: the default. 0 or -1. */
static inline int pair_open(pair_t *p, const char *weights)
{
    p->a = p->b = NULL;
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    cfg.wakeup = pair_wakeup;
    if (weights != NULL) {
        cfg.weights = weights;
    }
    char err[256];
    if (dr_mr_create(&cfg, 0, &p->a, err, sizeof(err)) != DR_OK ||
        dr_mr_create(&cfg, 1, &p->b, err, sizeof(err)) != DR_OK) {
        print_error("create: %s\n", err);
        return -1;
    }
    const void *addr;
    size_t len;
    dr_mr_address(p->a, &addr, &len);
    if (dr_mr_add_peer(p->b, 0, addr, len, err, sizeof(err)) != DR_OK) {
        return -1;
    }
    dr_mr_address(p->b, &addr, &len);
    if (dr_mr_add_peer(p->a, 1, addr, len, err, sizeof(err)) != DR_OK) {
        return -1;
    }
    return 0;
}

static inline int setup(void **state)
{
    *state = NULL;
    pair_t *p = calloc(1, sizeof(*p));
    if (p == NULL || pair_open(p, NULL) != 0) {
        return -1;
    }
    *state = p;
    return 0;
}

static inline int teardown(void **state)
{
    pair_t *p = *state;
    dr_mr_destroy(p->a);
    dr_mr_destroy(p->b);
    free(p);
    return 0;
}

/* Drive both contexts until both requests complete; bounded at 20 s. */
static inline void finish(pair_t *p, dr_mr_req_t *s, dr_mr_req_t *r, dr_status_t *ss, dr_status_t *rs,
                   size_t *rlen)
{
    double end = now_s() + 20;
    *ss = *rs = DR_INPROGRESS;
    if (s == NULL) {
        *ss = DR_OK; /* a receive alone */
    }
    while ((*ss == DR_INPROGRESS || *rs == DR_INPROGRESS) && now_s() < end) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
        if (*ss == DR_INPROGRESS) {
            *ss = dr_mr_test(p->a, s, NULL);
        }
        if (*rs == DR_INPROGRESS) {
            *rs = dr_mr_test(p->b, r, rlen);
        }
    }
}

static inline void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i) {
        buf[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 11));
    }
}
