/* test_load_many.c — kt_snapshot_load_many: files parsed on several threads come back in order, equal to loading
 * them one by one; a bad file fails the whole call with its name and leaves no snapshot behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/files.h"

#define FILES 24

static char paths[FILES][4096];

static void test_load_many(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("load-many");
    assert_non_null(dir);
    kt_kernel_id_t k = kt_kernel_intern("many", KT_BACKEND_CPU, NULL);
    for (int i = 0; i < FILES; i++) {
        kt_reset();
        for (int j = 0; j <= i; j++)
            kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = (uint64_t)(100 + j)});
        kt_snapshot_t *s = kt_snapshot();
        snprintf(paths[i], sizeof paths[i], "%s/f%02d.json", dir, i);
        assert_int_equal(kt_report_write(paths[i], s, KT_FORMAT_JSON, NULL), 0);
        kt_snapshot_free(s);
    }
    const char *p[FILES];
    for (int i = 0; i < FILES; i++)
        p[i] = paths[i];
    kt_snapshot_t *out[FILES];
    char err[512];
    assert_int_equal(kt_snapshot_load_many(p, FILES, out, 4, err, sizeof err), 0);
    for (int i = 0; i < FILES; i++) {
        const kt_kernel_timing_t *e = kt_snapshot_find(out[i], "many", KT_BACKEND_CPU, NULL);
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, i + 1); /* in order */
        kt_snapshot_free(out[i]);
    }
    FILE *f = fopen(paths[7], "w"); /* one bad file */
    assert_non_null(f);
    fputs("{\"schema\": \"ktiming.snapshot\", \"version\": 2", f);
    fclose(f);
    assert_int_equal(kt_snapshot_load_many(p, FILES, out, 3, err, sizeof err), KT_EPARSE);
    assert_non_null(strstr(err, "f07.json"));
    for (int i = 0; i < FILES; i++)
        assert_null(out[i]);
    /* the options reach every file: a limit below the largest file's size refuses it, naming it */
    assert_int_equal(kt_snapshot_load_many_opts(p + 8, FILES - 8, &(kt_load_opts_t){.max_bytes = 64}, out, 2, err,
                                                sizeof err),
                     KT_EFULL);
    assert_non_null(strstr(err, "larger than the input limit"));
    for (int i = 0; i < FILES - 8; i++)
        assert_null(out[i]);
    assert_int_equal(kt_snapshot_load_many_opts(p + 8, FILES - 8, &(kt_load_opts_t){.max_bytes = 1 << 20}, out, 2,
                                                err, sizeof err),
                     0);
    for (int i = 0; i < FILES - 8; i++)
        kt_snapshot_free(out[i]);
    ktt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_load_many)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
