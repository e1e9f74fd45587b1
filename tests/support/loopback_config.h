/*
 * The unit tests' ucx_mr configuration on the loopback device: TCP on lo, 64 KiB wire
 * segments, everything else ucx_mr's default. C and C++.
 */
#ifndef DUALRAIL_TESTS_SUPPORT_LOOPBACK_CONFIG_H
#define DUALRAIL_TESTS_SUPPORT_LOOPBACK_CONFIG_H

#include "dualrail/ucx_mr.h"

static inline void dr_test_loopback_config(dr_mr_config_t *cfg)
{
    dr_mr_config_default(cfg);
    cfg->planes = "lo";
    cfg->transports = "tcp";
    cfg->segment_size = 64 * 1024;
}

#endif
