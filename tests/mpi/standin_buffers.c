/* Stand-in device buffers for the MPI checks: see standin_buffers.h. */
#include "standin_buffers.h"

#include <mpi.h>
#include <stdio.h>

const dr_mem_ops_t *dev_mem;
static void *dev_stream;
static const char *prog_name = "check";

static void fail(const char *what)
{
    fprintf(stderr, "%s: stand-in %s: %s\n", prog_name, what, dev_mem->last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
}

void standin_open(const char *prog)
{
    prog_name = prog;
    dev_mem = dr_mem_standin();
    if (dev_mem->stream_create(&dev_stream) != DR_OK) {
        fail("stream");
    }
}

void standin_close(void)
{
    if (dev_stream != NULL) {
        dev_mem->stream_destroy(dev_stream);
        dev_stream = NULL;
    }
}

void *to_dev(void *host, size_t bytes)
{
    void *d = NULL;
    if (dev_mem == NULL) {
        return host;
    }
    if (dev_mem->device_alloc(&d, bytes == 0 ? 1 : bytes) != DR_OK ||
        dev_mem->copy_async(d, host, bytes, dev_stream) != DR_OK ||
        dev_mem->stream_sync(dev_stream) != DR_OK) {
        fail("copy to the device");
    }
    return d;
}

void from_dev(void *host, void *dev, size_t bytes)
{
    if (dev == host) {
        return;
    }
    if (dev_mem->copy_async(host, dev, bytes, dev_stream) != DR_OK ||
        dev_mem->stream_sync(dev_stream) != DR_OK) {
        fail("copy from the device");
    }
    dev_mem->device_free(dev);
}
