#define _DEFAULT_SOURCE
#include "oob_file.h"

#include <stdio.h>

#include "dualrail/ucx_mr.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int dr_oob_publish(const char *dir, unsigned id, const void *blob, size_t len)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof(tmp), "%s/.%u.addr.tmp", dir, id);
    snprintf(path, sizeof(path), "%s/%u.addr", dir, id);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        return -1;
    }
    int ok = fwrite(blob, 1, len, f) == len;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int dr_oob_fetch(const char *dir, unsigned id, double timeout, void **blob, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%u.addr", dir, id);
    const double end = now_s() + timeout;
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            struct stat st;
            if (fstat(fileno(f), &st) == 0 && st.st_size > 0) {
                void *buf = malloc((size_t)st.st_size);
                size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
                fclose(f);
                if (n == (size_t)st.st_size) {
                    *blob = buf;
                    *len = n;
                    return 0;
                }
                free(buf);
                return -1;
            }
            fclose(f);
        }
        if (now_s() > end) {
            return -1;
        }
        usleep(20000);
    }
}

int dr_oob_connect(struct dr_mr *mr, const char *dir, unsigned self, unsigned peer, double timeout,
                   char *err, size_t errlen)
{
    const void *addr;
    size_t len;
    void *peer_addr;
    size_t peer_len;
    dr_mr_address(mr, &addr, &len);
    if (dr_oob_publish(dir, self, addr, len) != 0) {
        snprintf(err, errlen, "cannot write %s/%u.addr", dir, self);
        return -1;
    }
    if (dr_oob_fetch(dir, peer, timeout, &peer_addr, &peer_len) != 0) {
        snprintf(err, errlen, "no address from process %u in %s after %.0f s", peer, dir, timeout);
        return -1;
    }
    dr_status_t st = dr_mr_add_peer(mr, peer, peer_addr, peer_len, err, errlen);
    free(peer_addr);
    return st == DR_OK ? 0 : -1;
}

struct dr_mr *dr_lab_pair_open(int argc, char **argv, const char *name, int *rank, int *trials,
                               int min_trials, int max_trials, const unsigned weights[2][2])
{
    const char *dir = NULL;
    *rank = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rank") == 0) {
            *rank = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--dir") == 0) {
            dir = argv[i + 1];
        } else if (strcmp(argv[i], "--trials") == 0) {
            *trials = atoi(argv[i + 1]);
        }
    }
    if ((*rank != 0 && *rank != 1) || dir == NULL || *trials < min_trials || *trials > max_trials) {
        fprintf(stderr, "usage: %s --rank 0|1 --dir DIR [--trials %d..%d]\n", name, min_trials,
                max_trials);
        return NULL;
    }
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = "ethA,ethB";
    dr_mr_t *mr = NULL;
    char err[512];
    const uint32_t peer = (uint32_t)(1 - *rank);
    const uint32_t w[2] = {weights[*rank][0], weights[*rank][1]};
    dr_status_t st = DR_OK;
    if (dr_mr_create(&cfg, (uint32_t)*rank, &mr, err, sizeof(err)) != DR_OK ||
        dr_oob_connect(mr, dir, (unsigned)*rank, peer, 60, err, sizeof(err)) != 0) {
        printf("%s: rank %d: set-up: %s\n", name, *rank, err);
    } else if ((st = dr_mr_set_weights(mr, peer, w, 2)) != DR_OK) {
        printf("%s: rank %d: set weights: %s\n", name, *rank, dr_status_str(st));
    } else {
        return mr;
    }
    if (mr != NULL) {
        dr_mr_destroy(mr);
    }
    return NULL;
}
