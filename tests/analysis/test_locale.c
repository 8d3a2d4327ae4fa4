/* test_locale.c — a program running under a locale whose decimal point is ',' (de_DE, compiled for the test
 * with localedef) still writes '.' in JSON, CSV and text, reads JSON back exactly, and keeps its locale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <locale.h>
#include <ktiming/analysis.h>

#include "support/snapshot_fixture.h"

static char *g_dir;

static int setup(void **state)
{
    (void)state;
    g_dir = ktt_tmpdir("locale");
    return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    setlocale(LC_ALL, "C");
    ktt_rmtree(g_dir);
    free(g_dir);
    return 0;
}

static void test_comma_locale(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "localedef -c -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1", g_dir);
    if (system(cmd) == -1)
        skip();
    setenv("LOCPATH", g_dir, 1);
    if (!setlocale(LC_ALL, "de_DE.UTF-8")) {
        fprintf(stderr, "test_locale: cannot build or load de_DE.UTF-8 here; skipped\n");
        skip();
    }
    assert_string_equal(localeconv()->decimal_point, ",");
    char probe[16];
    snprintf(probe, sizeof probe, "%.1f", 0.5);
    assert_string_equal(probe, "0,5"); /* the locale really is in effect */

    kt_snapshot_t *s = fx_snapshot_full();
    int rc;
    char *json = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(json, "\"drift_ppm\": -0.125"));
    assert_non_null(strstr(json, "\"stddev_ns\": 76666.66666666667,"));
    kt_snapshot_t *back = NULL;
    char err[256], why[128];
    rc = kt_snapshot_parse(json, strlen(json), &back, err, sizeof err);
    if (rc)
        fail_msg("parse under de_DE failed: %s", err);
    if (fx_snapshot_diff(s, back, why, sizeof why))
        fail_msg("round trip under de_DE differs at %s", why);
    fx_free(back);
    free(json);

    char *csv = fx_render(s, KT_FORMAT_CSV, &rc);
    assert_non_null(strstr(csv, ",76666.66666666667,"));
    free(csv);
    char *text = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_non_null(strstr(text, "  12.34 ms  "));
    assert_non_null(strstr(text, "  67.9%  "));
    free(text);

    /* The program's own locale is untouched afterwards. */
    snprintf(probe, sizeof probe, "%.1f", 0.5);
    assert_string_equal(probe, "0,5");
    fx_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_comma_locale)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
