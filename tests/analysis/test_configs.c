/* test_configs.c — launch configurations (issue 40.2) in snapshot files and merges: every row through JSON and
 * back, older files without the key, merged snapshots adding configurations up and capping them as a snapshot
 * does, and the reader refusing inconsistent rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

static char *render(const kt_snapshot_t *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(kt_report_print(f, s, KT_FORMAT_JSON, NULL), 0);
    fclose(f);
    return buf;
}

static kt_snapshot_t *reload(const kt_snapshot_t *s)
{
    char *json = render(s);
    kt_snapshot_t *r = NULL;
    char err[256];
    if (kt_snapshot_parse(json, strlen(json), &r, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(json);
    return r;
}

static void dispatch(kt_kernel_id_t k, uint64_t ns, uint32_t kind, uint32_t dims, const uint64_t size[3],
                     const uint64_t local[3])
{
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.duration_ns = ns;
    d.launch.kind = kind;
    d.launch.dims = dims;
    for (int i = 0; i < 3; i++) {
        d.launch.size[i] = size ? size[i] : 0;
        d.launch.local[i] = local ? local[i] : 0;
    }
    kt_record_dispatch(&d);
}

static void assert_same_configs(const kt_kernel_timing_t *a, const kt_kernel_timing_t *b)
{
    assert_int_equal(a->config_count, b->config_count);
    for (uint32_t i = 0; i < a->config_count; i++)
        assert_memory_equal(&a->configs[i], &b->configs[i], sizeof a->configs[i]);
}

/* Every kind through the file, sizes past dims dropped, the OTHER row kept. */
static void test_roundtrip(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("grid", KT_BACKEND_CUDA, "dev");
    const uint64_t g[3] = {64, 32, 1}, b[3] = {256, 1, 1}, g2[3] = {1024, 768, 0}, l2[3] = {16, 16, 0};
    dispatch(k, 100, KT_LAUNCH_GROUPS, 3, g, b);
    dispatch(k, 300, KT_LAUNCH_GROUPS, 3, g, b);
    dispatch(k, 50, KT_LAUNCH_ITEMS, 2, g2, l2);
    dispatch(k, 70, KT_LAUNCH_ITEMS, 2, g2, NULL);
    dispatch(k, 9, KT_LAUNCH_INDIRECT, 0, NULL, NULL);
    dispatch(k, 11, 0, 0, NULL, NULL);
    kt_snapshot_t *s = kt_snapshot();
    kt_snapshot_t *r = reload(s);
    const kt_kernel_timing_t *a = kt_snapshot_find(s, "grid", KT_BACKEND_CUDA, NULL);
    const kt_kernel_timing_t *c = kt_snapshot_find(r, "grid", KT_BACKEND_CUDA, NULL);
    assert_non_null(a);
    assert_non_null(c);
    assert_int_equal(a->config_count, 4);
    assert_same_configs(a, c);
    assert_int_equal(c->configs[0].launch.kind, KT_LAUNCH_GROUPS);
    assert_int_equal(c->configs[0].dispatch_count, 2);
    assert_int_equal(c->configs[0].total_ns, 400);
    assert_int_equal(c->configs[0].launch.local[0], 256);
    kt_snapshot_free(r);
    kt_snapshot_free(s);

    /* the OTHER row past the cap survives the file too */
    kt_reset();
    for (uint64_t i = 0; i < KT_LAUNCH_CONFIGS_MAX + 3; i++) {
        const uint64_t gi[3] = {i + 1, 0, 0};
        dispatch(k, 10 + i, KT_LAUNCH_ITEMS, 1, gi, NULL);
    }
    s = kt_snapshot();
    r = reload(s);
    a = kt_snapshot_find(s, "grid", KT_BACKEND_CUDA, NULL);
    c = kt_snapshot_find(r, "grid", KT_BACKEND_CUDA, NULL);
    assert_int_equal(a->config_count, KT_LAUNCH_CONFIGS_MAX + 1);
    assert_int_equal(a->configs[KT_LAUNCH_CONFIGS_MAX].launch.kind, KT_LAUNCH_OTHER);
    assert_int_equal(a->configs[KT_LAUNCH_CONFIGS_MAX].dispatch_count, 3);
    assert_same_configs(a, c);
    kt_snapshot_free(r);
    kt_snapshot_free(s);
}

/* A version-4 file (no "configs") still reads, with no breakdown. */
static void test_older_file(void **state)
{
    (void)state;
    static const char v4[] = "{\"schema\":\"ktiming.snapshot\",\"version\":4,\"entries\":[{\"name\":\"k\","
                             "\"backend\":\"opencl\",\"device\":\"d\",\"dispatch_count\":2,\"total_ns\":10,"
                             "\"min_ns\":4,\"max_ns\":6,\"samples\":[]}]}";
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    assert_int_equal(kt_snapshot_parse(v4, strlen(v4), &s, err, sizeof err), 0);
    assert_int_equal(s->count, 1);
    assert_int_equal(s->entries[0].config_count, 0);
    assert_null(s->entries[0].configs);
    kt_snapshot_free(s);
}

static void reject(const char *configs, const char *want)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"schema\":\"ktiming.snapshot\",\"version\":5,\"entries\":[{\"name\":\"k\",\"backend\":\"opencl\","
             "\"device\":\"d\",\"dispatch_count\":3,\"total_ns\":30,\"min_ns\":5,\"max_ns\":15,\"samples\":[],"
             "\"configs\":%s}]}",
             configs);
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    assert_int_equal(kt_snapshot_parse(json, strlen(json), &s, err, sizeof err), KT_EPARSE);
    assert_null(s);
    if (!strstr(err, want))
        fail_msg("'%s' does not say '%s'", err, want);
}

static void test_malformed(void **state)
{
    (void)state;
    reject("[{\"kind\":\"warp\",\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5}]",
           "entries[0].configs[0].kind: expected");
    reject("[{\"kind\":\"items\",\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5}]",
           "entries[0].configs[0].size: expected 1 to 3 sizes");
    reject("[{\"kind\":\"items\",\"size\":[4,4],\"local\":[1],\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,"
           "\"max_ns\":5}]",
           "configs[0].local: expected as many sizes");
    reject("[{\"kind\":\"indirect\",\"dispatch_count\":4,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5}]",
           "counts add up to more than dispatch_count");
    reject("[{\"kind\":\"other\",\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5},"
           "{\"kind\":\"other\",\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5}]",
           "more than one \"other\" row");
    reject("[{\"kind\":\"indirect\",\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":6,\"max_ns\":5}]",
           "min_ns <= max_ns");
    reject("[{\"kind\":\"groups\",\"size\":[1,1,1,1],\"local\":[1,1,1,1],\"dispatch_count\":1,\"total_ns\":5,"
           "\"min_ns\":5,\"max_ns\":5}]",
           "expected 1 to 3 sizes");
}

/* Merging two snapshots: the same configuration adds up, different ones stay apart; past the cap, the smallest
 * totals fold into OTHER, whose count keeps every dispatch. */
static void test_merge(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("m", KT_BACKEND_OPENCL, "dev");
    const uint64_t g[3] = {4096, 0, 0}, l[3] = {64, 0, 0}, l2[3] = {128, 0, 0};
    dispatch(k, 100, KT_LAUNCH_ITEMS, 1, g, l);
    dispatch(k, 200, KT_LAUNCH_ITEMS, 1, g, l2);
    kt_snapshot_t *a = kt_snapshot();
    kt_reset();
    dispatch(k, 40, KT_LAUNCH_ITEMS, 1, g, l);
    dispatch(k, 60, KT_LAUNCH_ITEMS, 1, g, l);
    kt_snapshot_t *b = kt_snapshot();
    const kt_snapshot_t *in[2] = {a, b};
    kt_snapshot_t *m = NULL;
    assert_int_equal(kt_snapshot_merge(in, 2, NULL, &m), 0);
    const kt_kernel_timing_t *e = kt_snapshot_find(m, "m", KT_BACKEND_OPENCL, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 4);
    assert_int_equal(e->config_count, 2);
    assert_int_equal(e->configs[0].launch.local[0], 64); /* 200 ns in all, ties broken by count */
    assert_int_equal(e->configs[0].dispatch_count, 3);
    assert_int_equal(e->configs[0].total_ns, 200);
    assert_int_equal(e->configs[0].min_ns, 40);
    assert_int_equal(e->configs[0].max_ns, 100);
    assert_int_equal(e->configs[1].dispatch_count, 1);
    kt_snapshot_t *r = reload(m); /* and the merged file reads back the same */
    assert_same_configs(e, kt_snapshot_find(r, "m", KT_BACKEND_OPENCL, NULL));
    kt_snapshot_free(r);
    kt_snapshot_free(m);
    kt_snapshot_free(a);
    kt_snapshot_free(b);

    /* 20 configurations in each input, none shared: 32 kept, 8 folded into OTHER */
    kt_snapshot_t *s[2];
    for (int part = 0; part < 2; part++) {
        kt_reset();
        for (uint64_t i = 0; i < 20; i++) {
            const uint64_t gi[3] = {1 + i + 100 * (uint64_t)part, 0, 0};
            dispatch(k, 1000 + i + 100 * (uint64_t)part, KT_LAUNCH_ITEMS, 1, gi, NULL);
        }
        s[part] = kt_snapshot();
    }
    const kt_snapshot_t *in2[2] = {s[0], s[1]};
    assert_int_equal(kt_snapshot_merge(in2, 2, NULL, &m), 0);
    e = kt_snapshot_find(m, "m", KT_BACKEND_OPENCL, NULL);
    assert_int_equal(e->config_count, KT_LAUNCH_CONFIGS_MAX + 1);
    const kt_config_timing_t *o = &e->configs[KT_LAUNCH_CONFIGS_MAX];
    assert_int_equal(o->launch.kind, KT_LAUNCH_OTHER);
    assert_int_equal(o->dispatch_count, 8);
    assert_int_equal(o->min_ns, 1000); /* the smallest totals: the first input's first eight */
    assert_int_equal(o->max_ns, 1007);
    uint64_t n = 0;
    for (uint32_t i = 0; i < e->config_count; i++)
        n += e->configs[i].dispatch_count;
    assert_int_equal(n, 40);
    kt_snapshot_free(m);
    kt_snapshot_free(s[0]);
    kt_snapshot_free(s[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_older_file),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
