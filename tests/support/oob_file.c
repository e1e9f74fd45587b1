#define _DEFAULT_SOURCE
#include "oob_file.h"

#include <stdio.h>

#include "dualrail/ucx_mr.h"
#include <stdlib.h>
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
