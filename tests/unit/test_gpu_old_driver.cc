/*
 * A driver too old for this build's CUDA runtime, under an application whose
 * own runtime works and holds device memory (run with LD_LIBRARY_PATH on
 * tests/unit/fake_libcuda.c's libcuda.so.1). The runtime reports no GPU, but
 * a device buffer must still be seen as one, so that MPI_Allreduce refuses it
 * (no usable GPU) instead of the host path reading it with the CPU, which
 * crashes on a real device address. Host memory stays host memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <cstring>
#include <vector>

#include "dr_coll_gpu.h"
#include "gpu/dr_gpu.h"

namespace {

const void *const kDevice = reinterpret_cast<const void *>(0x7e0000000000ull + 64);

void test_device_buffer_refused(void **state)
{
    (void)state;
    const dr_mem_ops_t *m = dr_mem_cuda();
    assert_int_equal(m->available(), 0);
    std::vector<char> host(64);
    assert_int_equal(m->kind(host.data()), DR_MEM_HOST);
    assert_int_equal(m->kind(kDevice), DR_MEM_DEVICE);
    assert_int_equal(dr_buffers_on_device(nullptr, host.data(), host.data()), 0);
    assert_int_equal(dr_buffers_on_device(nullptr, kDevice, host.data()), 1);
    assert_int_equal(dr_buffers_on_device(nullptr, nullptr, kDevice), 1);
    dr_staging_t *st = nullptr;
    char err[256] = "";
    assert_int_equal(dr_staging_create(nullptr, 0, &st, err, sizeof(err)), DR_ERR_NO_DEVICE);
    assert_null(st);
    assert_non_null(strstr(err, "driver"));
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_buffer_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
