/* test_devices.c — device identity in snapshot files, merge and compare (issue 34), on hand-written snapshot JSON:
 * two devices with equal names and distinct UUIDs; the same UUID in two runs at different ordinals; two hosts each
 * with "GPU 0"; files from before identities (version 3) still load and merge as before. */
#include <ktiming.h>
#include <ktiming/analysis.h>
#include <ktiming/compare.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* A device of a hand-written file; NULL members are left out of the JSON (version 3 wrote none of them). */
typedef struct tdev_t {
    const char *label, *model, *key, *kind, *uuid, *pci;
    int ordinal;
} tdev_t;

/* An entry of kernel `name` on device `label` with n samples around base_ns (a small fixed spread). */
typedef struct tent_t {
    const char *name, *label;
    int n;
    unsigned base_ns;
} tent_t;

typedef struct buf_t {
    char *p;
    size_t len, cap;
} buf_t;

static void put(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static kt_snapshot_t *make(int version, const char *host, int pid, int rank, const tdev_t *d, int nd,
                           const tent_t *e, int ne)
{
    buf_t b = {0};
    put(&b, "{\"schema\": \"ktiming.snapshot\", \"version\": %d, \"host\": \"%s\", \"pid\": %d, \"rank\": %d,\n"
            " \"taken_ns\": 1000, \"entries\": [", version, host, pid, rank);
    for (int i = 0; i < ne; i++) {
        unsigned long long total = 0, mn = ~0ull, mx = 0;
        for (int k = 0; k < e[i].n; k++) {
            unsigned long long v = e[i].base_ns + (unsigned)(k % 5) * (e[i].base_ns / 200);
            total += v;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        put(&b, "%s\n  {\"name\": \"%s\", \"backend\": \"cuda\", \"device\": \"%s\", \"dispatch_count\": %d, "
                "\"total_ns\": %llu, \"min_ns\": %llu, \"max_ns\": %llu, \"samples\": [",
            i ? "," : "", e[i].name, e[i].label, e[i].n, total, mn, mx);
        for (int k = 0; k < e[i].n; k++)
            put(&b, "%s%u", k ? ", " : "", e[i].base_ns + (unsigned)(k % 5) * (e[i].base_ns / 200));
        put(&b, "]}");
    }
    put(&b, "],\n \"devices\": [");
    for (int i = 0; i < nd; i++) {
        put(&b, "%s\n  {\"backend\": \"cuda\", \"name\": \"%s\", \"clock_domain\": \"device\"", i ? "," : "",
            d[i].label);
        if (d[i].model)
            put(&b, ", \"model\": \"%s\", \"key\": \"%s\", \"id_kind\": \"%s\", \"ordinal\": %d", d[i].model,
                d[i].key, d[i].kind, d[i].ordinal);
        if (d[i].uuid)
            put(&b, ", \"uuid\": \"%s\"", d[i].uuid);
        if (d[i].pci)
            put(&b, ", \"pci\": \"%s\"", d[i].pci);
        put(&b, "}");
    }
    put(&b, "]}\n");
    kt_snapshot_t *s = NULL;
    char err[256];
    if (kt_snapshot_parse(b.p, b.len, &s, err, sizeof err) != 0)
        fail_msg("parse: %s\n%s", err, b.p);
    free(b.p);
    return s;
}

#define UA "GPU-aaaaaaaa-0000-0000-0000-000000000001"
#define UB "GPU-bbbbbbbb-0000-0000-0000-000000000002"
static const tdev_t kA3 = {"H100 #3", "H100", "uuid:" UA, "uuid", UA, "0000:41:00.0", 3};
static const tdev_t kB5 = {"H100 #5", "H100", "uuid:" UB, "uuid", UB, "0000:c1:00.0", 5};
/* the next run, CUDA_VISIBLE_DEVICES reordered: the same two GPUs, ordinals swapped */
static const tdev_t kA5 = {"H100 #5", "H100", "uuid:" UA, "uuid", UA, "0000:41:00.0", 5};
static const tdev_t kB3 = {"H100 #3", "H100", "uuid:" UB, "uuid", UB, "0000:c1:00.0", 3};

/* The identity survives the file: written by the JSON exporter, read back field for field. */
static void test_identity_round_trip(void **state)
{
    (void)state;
    const tdev_t d[2] = {kA3, kB5};
    const tent_t e[2] = {{"gemm", "H100 #3", 10, 1000}, {"gemm", "H100 #5", 10, 9000}};
    kt_snapshot_t *s = make(4, "n1", 11, 0, d, 2, e, 2);
    assert_int_equal(s->count, 2); /* equal names, two devices: two entries */
    const kt_device_info_t *a = kt_snapshot_device(s, KT_BACKEND_CUDA, "H100 #3");
    assert_non_null(a);
    assert_string_equal(a->id.uuid, UA);
    assert_string_equal(a->id.pci, "0000:41:00.0");
    assert_string_equal(a->id.id_kind, "uuid");
    assert_int_equal(a->id.ordinal, 3);
    assert_string_equal(a->host, "n1"); /* the file's host where the record names none */
    assert_ptr_equal(kt_snapshot_device(s, KT_BACKEND_CUDA, "uuid:" UB), &s->devices[1]); /* by key too */

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(kt_report_print(f, s, KT_FORMAT_JSON, NULL), 0);
    fclose(f);
    assert_non_null(strstr(text, "\"version\": 5"));
    kt_snapshot_t *r = NULL;
    char err[256];
    if (kt_snapshot_parse(text, len, &r, err, sizeof err) != 0)
        fail_msg("re-parse: %s", err);
    assert_int_equal(r->device_count, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(r->devices[i].name, s->devices[i].name);
        assert_string_equal(r->devices[i].key, s->devices[i].key);
        assert_string_equal(r->devices[i].id.model, s->devices[i].id.model);
        assert_string_equal(r->devices[i].id.uuid, s->devices[i].id.uuid);
        assert_string_equal(r->devices[i].id.pci, s->devices[i].id.pci);
        assert_string_equal(r->devices[i].host, "n1");
        assert_int_equal(r->devices[i].id.ordinal, s->devices[i].id.ordinal);
        assert_int_equal(r->devices[i].id.partition, -1);
    }
    free(text);
    kt_snapshot_free(r);
    kt_snapshot_free(s);
}

/* A file from before identities: its devices are known by name only. */
static void test_old_file_devices(void **state)
{
    (void)state;
    const tdev_t d[1] = {{"GPU 0", NULL, NULL, NULL, NULL, NULL, 0}};
    const tent_t e[1] = {{"k", "GPU 0", 3, 500}};
    kt_snapshot_t *s = make(3, "old", 5, -1, d, 1, e, 1);
    const kt_device_info_t *g = kt_snapshot_device(s, KT_BACKEND_CUDA, "GPU 0");
    assert_non_null(g);
    assert_string_equal(g->key, "GPU 0");
    assert_string_equal(g->id.model, "GPU 0");
    assert_string_equal(g->id.id_kind, "name");
    assert_int_equal(g->id.ordinal, -1);
    assert_string_equal(g->host, "old");
    assert_int_equal(g->rank, -1);
    kt_snapshot_free(s);
}

/* Two nodes each with "GPU 0" (version 3 files, as today's backends write them): two devices after the merge, each
 * with its own entry; --by-model folds them into one. Before identities the merge had one entry of 7. */
static void test_merge_two_hosts_gpu0(void **state)
{
    (void)state;
    const tdev_t d[1] = {{"GPU 0", NULL, NULL, NULL, NULL, NULL, 0}};
    const tent_t e1[1] = {{"k", "GPU 0", 3, 500}}, e2[1] = {{"k", "GPU 0", 4, 700}};
    kt_snapshot_t *a = make(3, "n1", 10, 0, d, 1, e1, 1), *b = make(3, "n2", 10, 1, d, 1, e2, 1), *m = NULL;
    const kt_snapshot_t *in[2] = {a, b};
    assert_int_equal(kt_snapshot_merge(in, 2, NULL, &m), 0);
    assert_int_equal(m->count, 2);
    const kt_kernel_timing_t *k1 = kt_snapshot_find(m, "k", KT_BACKEND_CUDA, "GPU 0 @n1");
    const kt_kernel_timing_t *k2 = kt_snapshot_find(m, "k", KT_BACKEND_CUDA, "GPU 0 @n2");
    assert_non_null(k1);
    assert_non_null(k2);
    assert_int_equal(k1->dispatch_count, 3);
    assert_int_equal(k2->dispatch_count, 4);
    assert_int_equal(m->device_count, 2);
    assert_string_equal(kt_snapshot_device(m, KT_BACKEND_CUDA, "GPU 0 @n2")->host, "n2");

    /* per rank over the kernel's devices: one line for "k" (totals 1,500-ish and 2,800-ish) */
    kt_rank_balance_t *bal = NULL;
    size_t nb = 0;
    assert_int_equal(kt_rank_balance(m, &bal, &nb), 0);
    assert_int_equal(nb, 1);
    assert_int_equal(bal[0].devices, 2);
    assert_int_equal(bal[0].min_total_ns, k1->total_ns);
    assert_int_equal(bal[0].max_total_ns, k2->total_ns);
    assert_int_equal(bal[0].slowest_source, 1);
    free(bal);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(kt_report_by_rank(f, m), 0);
    fclose(f);
    assert_non_null(strstr(text, "rank 1 on GPU 0 @n2"));
    assert_non_null(strstr(text, "    on GPU 0 @n1\n"));
    free(text);
    kt_snapshot_free(m);

    kt_merge_opts_t o = {.by_model = 1};
    assert_int_equal(kt_snapshot_merge(in, 2, &o, &m), 0);
    assert_int_equal(m->count, 1);
    assert_string_equal(m->entries[0].device, "GPU 0");
    assert_int_equal(m->entries[0].dispatch_count, 7);
    assert_int_equal(m->device_count, 1);
    assert_string_equal(m->devices[0].id.id_kind, "model");
    kt_snapshot_free(m);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
}

/* Two ranks of one node on two GPUs of one model: apart; the same GPU in two ranks: one device. */
static void test_merge_same_model_one_node(void **state)
{
    (void)state;
    const tdev_t da[1] = {kA3}, db[1] = {kB5};
    const tent_t ea[1] = {{"gemm", "H100 #3", 5, 1000}}, eb[1] = {{"gemm", "H100 #5", 6, 3000}};
    kt_snapshot_t *a = make(4, "n1", 10, 0, da, 1, ea, 1), *b = make(4, "n1", 11, 1, db, 1, eb, 1);
    kt_snapshot_t *c = make(4, "n1", 12, 2, da, 1, ea, 1), *m = NULL;
    const kt_snapshot_t *in[3] = {a, b, c};
    assert_int_equal(kt_snapshot_merge(in, 3, NULL, &m), 0);
    assert_int_equal(m->device_count, 2);
    assert_int_equal(m->count, 2);
    const kt_kernel_timing_t *g3 = kt_snapshot_find(m, "gemm", KT_BACKEND_CUDA, "H100 #3");
    assert_non_null(g3);
    assert_int_equal(g3->dispatch_count, 10); /* ranks 0 and 2 on GPU A */
    assert_int_equal(kt_snapshot_device(m, KT_BACKEND_CUDA, "H100 #3")->rank, -1); /* used by two ranks */
    kt_snapshot_free(m);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
    kt_snapshot_free(c);
}

static const kt_compare_row_t *row_of(const kt_compare_result_t *r, const char *device)
{
    for (size_t i = 0; i < r->count; i++)
        if (!strcmp(r->rows[i].device, device))
            return &r->rows[i];
    return NULL;
}

/* The same UUIDs in two runs at swapped ordinals: compared GPU for GPU (by UUID), not label for label. GPU A runs
 * the kernel in 1,000 ns and GPU B in 9,000 ns in both runs: nothing changed. Matched by label, "H100 #3" would be
 * GPU A before and GPU B after: a 9x slowdown that is not there. */
static void test_compare_same_uuid_other_ordinal(void **state)
{
    (void)state;
    const tdev_t d1[2] = {kA3, kB5}, d2[2] = {kA5, kB3};
    const tent_t e1[2] = {{"gemm", "H100 #3", 30, 1000}, {"gemm", "H100 #5", 30, 9000}};
    const tent_t e2[2] = {{"gemm", "H100 #5", 30, 1000}, {"gemm", "H100 #3", 30, 9000}};
    kt_snapshot_t *b = make(4, "n1", 10, -1, d1, 2, e1, 2), *a = make(4, "n1", 11, -1, d2, 2, e2, 2);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.matched, 2);
    assert_int_equal(r.slower, 0);
    assert_int_equal(r.faster, 0);
    const kt_compare_row_t *x = row_of(&r, "H100 #3");
    assert_non_null(x);
    assert_string_equal(x->match, "uuid");
    assert_non_null(x->device_after);
    assert_string_equal(x->device_after, "H100 #5");
    assert_true(x->speedup_median > 0.99 && x->speedup_median < 1.01);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(kt_compare_print(f, &r, KT_COMPARE_TEXT), 0);
    fclose(f);
    assert_non_null(strstr(text, "devices matched by uuid 2"));
    assert_non_null(strstr(text, "gemm: BEFORE's H100 #3 is AFTER's H100 #5 (same uuid)"));
    free(text);
    /* the JSON rows say the same (the HTML compare reads them) */
    f = open_memstream(&text, &len);
    assert_int_equal(kt_compare_print(f, &r, KT_COMPARE_JSON), 0);
    fclose(f);
    assert_non_null(strstr(text, "\"device\":\"H100 #3\",\"presence\":\"both\",\"match\":\"uuid\","
                                 "\"device_after\":\"H100 #5\""));
    free(text);
    kt_compare_free(&r);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
}

/* One side without stable ids: model + ordinal; neither side with records: by label, as before identities. */
static void test_compare_fallbacks(void **state)
{
    (void)state;
    const tdev_t d1[1] = {kA3};
    const tdev_t d2[1] = {{"H100 #3", "H100", "enumeration:3:H100", "enumeration", NULL, NULL, 3}};
    const tent_t e[1] = {{"gemm", "H100 #3", 12, 1000}};
    kt_snapshot_t *b = make(4, "n1", 10, -1, d1, 1, e, 1), *a = make(4, "n1", 11, -1, d2, 1, e, 1);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.matched, 1);
    assert_string_equal(r.rows[0].match, "model+ordinal");
    assert_null(r.rows[0].device_after);
    kt_compare_free(&r);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
    const tdev_t o[1] = {{"GPU 0", NULL, NULL, NULL, NULL, NULL, 0}};
    const tent_t eo[1] = {{"k", "GPU 0", 12, 1000}};
    b = make(3, "n1", 10, -1, o, 1, eo, 1);
    a = make(3, "n1", 11, -1, o, 1, eo, 1);
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.matched, 1);
    assert_string_equal(r.rows[0].match, "name");
    kt_compare_free(&r);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_round_trip),       cmocka_unit_test(test_old_file_devices),
        cmocka_unit_test(test_merge_two_hosts_gpu0),      cmocka_unit_test(test_merge_same_model_one_node),
        cmocka_unit_test(test_compare_same_uuid_other_ordinal), cmocka_unit_test(test_compare_fallbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
