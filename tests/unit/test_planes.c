/* Plane-list parsing and device checks (include/dualrail/planes.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "dualrail/planes.h"

static void test_parse_good(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int nplanes;
        int ndev0, ndev1;
        const char *first0, *first1;
    } cases[] = {
        {"ethA,ethB", 2, 1, 1, "ethA", "ethB"},
        {" ethA , ethB ", 2, 1, 1, "ethA", "ethB"},
        {"mlx5_0|mlx5_2,mlx5_1|mlx5_3", 2, 2, 2, "mlx5_0", "mlx5_1"},
        {"mlx5_0:1", 1, 1, 0, "mlx5_0:1", NULL},
        {"a|b|c,d", 2, 3, 1, "a", "d"},
        {"lo", 1, 1, 0, "lo", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        dr_plane_list_t list;
        char err[256] = "";
        assert_int_equal(dr_plane_list_parse(cases[i].text, &list, err, sizeof(err)), DR_OK);
        assert_int_equal(list.nplanes, cases[i].nplanes);
        assert_int_equal(list.planes[0].ndevices, cases[i].ndev0);
        assert_string_equal(dr_plane_select_device(&list.planes[0]), cases[i].first0);
        if (cases[i].nplanes > 1) {
            assert_int_equal(list.planes[1].ndevices, cases[i].ndev1);
            assert_string_equal(dr_plane_select_device(&list.planes[1]), cases[i].first1);
        }
    }
}

static void test_parse_bad(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *must_mention;
    } cases[] = {
        {NULL, "empty"},
        {"", "empty"},
        {"   ", "empty"},
        {"ethA,", "plane 1"},
        {",ethA", "plane 0"},
        {"ethA,,ethB", "plane 1"},
        {"ethA|", "plane 0"},
        {"ethA,ethA", "plane 0 and plane 1"},
        {"ethA|ethB,ethB", "plane 0 and plane 1"},
        {"ethA|ethA", "twice"},
        {"mlx5_0:1,mlx5_0:2", "mlx5_0:2"},
        {"a,b,c,d,e,f,g,h,i", "too many"},
        {"eth A", "bad character"},
        {"eth;rm", "bad character"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "too long"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        dr_plane_list_t list;
        memset(&list, 0x5a, sizeof(list));
        dr_plane_list_t before = list;
        char err[256] = "";
        assert_int_equal(dr_plane_list_parse(cases[i].text, &list, err, sizeof(err)),
                         DR_ERR_CONFIG);
        if (strstr(err, cases[i].must_mention) == NULL) {
            fail_msg("case %zu (\"%s\"): error \"%s\" does not mention \"%s\"", i,
                     cases[i].text ? cases[i].text : "(null)", err, cases[i].must_mention);
        }
        /* Outputs are set only on success. */
        assert_memory_equal(&list, &before, sizeof(list));
    }
}

static int fake_exists(const char *dev, void *arg)
{
    (void)arg;
    return strcmp(dev, "ethA") == 0 || strcmp(dev, "ethB") == 0;
}

static void test_check_devices(void **state)
{
    (void)state;
    dr_plane_list_t list;
    char err[256] = "";
    assert_int_equal(dr_plane_list_parse("ethA,ethB", &list, err, sizeof(err)), DR_OK);
    assert_int_equal(dr_plane_list_check(&list, fake_exists, NULL, err, sizeof(err)), DR_OK);
    assert_int_equal(dr_plane_list_parse("ethA,ethB|ethC", &list, err, sizeof(err)), DR_OK);
    assert_int_equal(dr_plane_list_check(&list, fake_exists, NULL, err, sizeof(err)),
                     DR_ERR_NO_DEVICE);
    assert_non_null(strstr(err, "\"ethC\""));
    assert_non_null(strstr(err, "plane 1"));
}

static void test_system_devices(void **state)
{
    (void)state;
    assert_true(dr_device_exists_system("lo", NULL));
    assert_true(dr_device_exists_system("lo:1", NULL)); /* port suffix ignored */
    assert_false(dr_device_exists_system("drnosuchdev0", NULL));
    dr_plane_list_t list;
    char err[256] = "";
    assert_int_equal(dr_plane_list_parse("lo,drnosuchdev0", &list, err, sizeof(err)), DR_OK);
    assert_int_equal(dr_plane_list_check(&list, NULL, NULL, err, sizeof(err)), DR_ERR_NO_DEVICE);
    assert_non_null(strstr(err, "drnosuchdev0"));
}

/* mkdir -p root/rel, and write text into root/rel/file when file is not NULL. */
static void fake_sysfs(const char *root, const char *rel, const char *file, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p != '\0'; ++p) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    }
    mkdir(path, 0755);
    if (file != NULL) {
        char f[600];
        snprintf(f, sizeof(f), "%s/%s", path, file);
        FILE *out = fopen(f, "w");
        assert_non_null(out);
        fputs(text, out);
        fclose(out);
    }
}

/* UCX matches RDMA devices by "device:port": a plane written "mlx5_0" gets its active port. */
static void test_ucx_device_names(void **state)
{
    (void)state;
    char root[] = "/tmp/dr-sysfs-XXXXXX";
    assert_non_null(mkdtemp(root));
    fake_sysfs(root, "class/infiniband/mlx5_0/ports/1", "state", "1: DOWN\n");
    fake_sysfs(root, "class/infiniband/mlx5_0/ports/2", "state", "4: ACTIVE\n");
    fake_sysfs(root, "class/infiniband/mlx5_1/ports/1", "state", "1: DOWN\n");
    fake_sysfs(root, "class/infiniband/mlx5_1/ports/3", "state", "1: DOWN\n");
    fake_sysfs(root, "class/infiniband/mlx5_2/ports/10", "state", "4: ACTIVE\n");
    fake_sysfs(root, "class/infiniband/mlx5_2/ports/9", "state", "4: ACTIVE\n");
    fake_sysfs(root, "class/infiniband/mlx5_3/ports", NULL, NULL); /* no port listed */
    fake_sysfs(root, "class/net/ib0", NULL, NULL);                   /* IPoIB: a netdev */
    fake_sysfs(root, "class/net/ethA", NULL, NULL);
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"mlx5_0", "mlx5_0:2"},   /* the active port */
        {"mlx5_1", "mlx5_1:1"},   /* none active: the lowest */
        {"mlx5_2", "mlx5_2:9"},   /* the lowest active, numerically */
        {"mlx5_3", "mlx5_3:1"},   /* no ports listed: 1 */
        {"mlx5_0:1", "mlx5_0:1"}, /* a port given: as written */
        {"ib0", "ib0"},           /* network interfaces: as written */
        {"ethA", "ethA"},
        {"nosuch", "nosuch"}, /* unknown: as written (the existence check reports it) */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        char out[96];
        assert_string_equal(dr_plane_ucx_device(cases[i].in, root, out, sizeof(out)),
                            cases[i].out);
    }
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_check_devices),
        cmocka_unit_test(test_system_devices),
        cmocka_unit_test(test_ucx_device_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
