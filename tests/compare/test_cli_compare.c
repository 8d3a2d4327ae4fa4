/* test_cli_compare.c — `ktiming compare` on snapshot files: exit codes, thresholds, formats. */
#include "support/files.h"
#include "support/proc.h"
#include "support/compare_synth.h"

#include <ktiming.h>

#include <cJSON.h>
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static char *g_dir; /* the test's private directory */
static char g_base[4096], g_same[4096], g_slow[4096], g_fast[4096], g_bad[4096], g_out[4096];

static void path_in(char *buf, const char *file) { snprintf(buf, 4096, "%s/%s", g_dir, file); }

static void write_snapshot(const char *path, double median_ns, uint64_t seed)
{
    kt_snapshot_t *s = synth_snapshot(2);
    synth_add(s, "kernel_a", KT_BACKEND_CPU, "host", 100, median_ns, 0.02, seed);
    synth_add(s, "kernel_b", KT_BACKEND_CPU, "host", 100, 5000.0, 0.02, seed + 100);
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    synth_free(s);
}

static int setup(void **state)
{
    (void)state;
    if (!(g_dir = ktt_tmpdir("cli-compare"))) return -1;
    path_in(g_base, "base.json");
    path_in(g_same, "same.json");
    path_in(g_slow, "slow.json");
    path_in(g_fast, "fast.json");
    path_in(g_bad, "bad.json");
    path_in(g_out, "out.txt");
    write_snapshot(g_base, 100000.0, 1);
    write_snapshot(g_same, 100000.0, 2);
    write_snapshot(g_slow, 125000.0, 3); /* kernel_a 25 % slower: speedup 0.8 */
    write_snapshot(g_fast, 50000.0, 4);
    FILE *f = fopen(g_bad, "w");
    fputs("{\"format\": \"ktiming.snapshot\", \"version\": 1, \"entries\": [", f);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ktt_rmtree(g_dir);
    free(g_dir);
    return 0;
}

#define CLI(...) ktt_run_to((char *const[]){KT_CLI_PATH, "compare", __VA_ARGS__, NULL}, g_out)

static void test_usage_errors(void **state)
{
    (void)state;
    assert_int_equal(ktt_run_to((char *const[]){KT_CLI_PATH, "compare", NULL}, NULL), 2);
    assert_int_equal(CLI(g_base), 2);
    assert_int_equal(CLI(g_base, g_same, g_fast), 2);
    assert_int_equal(CLI(g_base, g_same, "--format", "xml"), 2);
    assert_int_equal(CLI(g_base, g_same, "--threshold", "-3"), 2);
    assert_int_equal(CLI(g_base, g_same, "--threshold", "abc"), 2);
    assert_int_equal(CLI(g_base, g_same, "--alpha", "1"), 2);
    assert_int_equal(CLI(g_base, g_same, "--bogus"), 2);
    assert_int_equal(CLI(g_base, g_same, "--alpha"), 2);
    assert_int_equal(CLI("--help"), 0);
    char *help = ktt_read_file(g_out, NULL);
    assert_non_null(help);
    assert_non_null(strstr(help, "--fail-on-regression"));
    free(help);
}

static void test_input_errors(void **state)
{
    (void)state;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/does-not-exist.json", g_dir);
    assert_int_equal(CLI(missing, g_same), 3);
    assert_int_equal(CLI(g_base, g_bad), 3);
    char unwritable[4200];
    snprintf(unwritable, sizeof unwritable, "%s/no/such/dir/out.txt", g_dir);
    assert_int_equal(CLI(g_base, g_same, "-o", unwritable), 3);
}

static void test_regression_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(CLI(g_base, g_same, "--fail-on-regression"), 0);    /* no change */
    assert_int_equal(CLI(g_base, g_fast, "--fail-on-regression"), 0);    /* faster is fine */
    assert_int_equal(CLI(g_base, g_slow), 0);                            /* reported, not failed */
    assert_int_equal(CLI(g_base, g_slow, "--fail-on-regression"), 1);    /* 25 % slower */
    assert_int_equal(CLI(g_base, g_slow, "--fail-on-regression", "--threshold", "30"), 0); /* under 30 % */
    assert_int_equal(CLI(g_base, g_slow, "--fail-on-regression", "--threshold=20"), 1);
    char *text = ktt_read_file(g_out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "SLOWER"));
    assert_non_null(strstr(text, "kernel_a"));
    free(text);
}

static void test_formats(void **state)
{
    (void)state;
    char json_path[4200];
    snprintf(json_path, sizeof json_path, "%s/out.json", g_dir);
    assert_int_equal(CLI(g_base, g_slow, "--format", "json", "-o", json_path), 0);
    assert_int_equal(CLI(g_base, g_slow, "--format", "json", "-o", json_path), 0); /* replaces it */
    /* the short option of every command, options after the files, --filter keeping nothing */
    assert_int_equal(CLI("-f", "json", g_base, g_slow, "-o", json_path), 0);
    assert_int_equal(CLI(g_base, g_slow, "-f", "json", "--filter", "no_such*", "-o", json_path), 0);
    char *none = ktt_read_file(json_path, NULL);
    assert_non_null(none);
    assert_null(strstr(none, "kernel_a"));
    free(none);
    assert_int_equal(CLI(g_base, g_slow, "-f", "json", "--filter", "kernel_*", "-o", json_path), 0);
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) assert_null(strstr(e->d_name, ".tmp.")); /* no leftovers */
    closedir(d);
    char *js = ktt_read_file(json_path, NULL);
    unlink(json_path);
    assert_non_null(js);
    cJSON *root = cJSON_Parse(js);
    free(js);
    assert_non_null(root);
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "kernels"), 0);
    assert_string_equal(cJSON_GetObjectItem(k, "name")->valuestring, "kernel_a");
    assert_string_equal(cJSON_GetObjectItem(k, "verdict")->valuestring, "SLOWER");
    assert_true(cJSON_GetObjectItem(k, "speedup_median")->valuedouble < 0.85);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "summary"), "regression")));
    cJSON_Delete(root);

    assert_int_equal(CLI(g_base, g_fast, "--format", "markdown"), 0);
    char *md = ktt_read_file(g_out, NULL);
    assert_non_null(md);
    assert_non_null(strstr(md, "| kernel |"));
    assert_non_null(strstr(md, "**FASTER**"));
    free(md);
}

/* A snapshot file of one kernel "k" with 20 dispatches of v ns each, in the JSON a foreign tool might write. */
static void write_constant(const char *path, unsigned long long v)
{
    char doc[1024];
    int n = snprintf(doc, sizeof doc,
                     "{\"schema\":\"ktiming.snapshot\",\"version\":5,\"entries\":[{\"name\":\"k\",\"backend\":"
                     "\"cpu\",\"dispatch_count\":20,\"total_ns\":%llu,\"min_ns\":%llu,\"max_ns\":%llu,\"samples\":[",
                     20 * v, v, v);
    for (int i = 0; i < 20; i++) n += snprintf(doc + n, sizeof doc - (size_t)n, "%s%llu", i ? "," : "", v);
    n += snprintf(doc + n, sizeof doc - (size_t)n, "]}]}");
    assert_int_equal(ktt_write_file(path, doc, (size_t)n), 0);
}

static void test_zero_median_regression(void **state)
{
    (void)state;
    /* 0 ns -> 1 ms is a regression the CLI fails on, and no interval is printed beside a "-" speedup */
    char z[4200], ms[4200];
    snprintf(z, sizeof z, "%s/zero.json", g_dir);
    snprintf(ms, sizeof ms, "%s/ms.json", g_dir);
    write_constant(z, 0);
    write_constant(ms, 1000000);
    assert_int_equal(CLI(z, ms, "--fail-on-regression"), 1);
    char *text = ktt_read_file(g_out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "SLOWER"));
    free(text);
    assert_int_equal(CLI(ms, z, "--fail-on-regression"), 0);
    assert_int_equal(CLI(z, z, "--fail-on-regression"), 0);
    text = ktt_read_file(g_out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "UNSURE"));
    assert_null(strstr(text, "[0.000x")); /* the interval is "-" like the speedup */
    free(text);
}

/* The opts object of a JSON comparison written to g_out (caller deletes). */
static cJSON *read_opts(cJSON **root)
{
    char *js = ktt_read_file(g_out, NULL);
    assert_non_null(js);
    *root = cJSON_Parse(js);
    free(js);
    assert_non_null(*root);
    cJSON *o = cJSON_GetObjectItem(*root, "opts");
    assert_non_null(o);
    return o;
}

static void test_numeric_options(void **state)
{
    (void)state;
    /* counts are decimal: 010 is ten (not octal 8), 09 is nine (not a bad octal number), 0x100 is refused */
    cJSON *root;
    assert_int_equal(CLI(g_base, g_same, "-f", "json", "--min-samples", "010", "--bootstrap", "0200"), 0);
    cJSON *o = read_opts(&root);
    assert_int_equal(cJSON_GetObjectItem(o, "min_samples")->valueint, 10);
    assert_int_equal(cJSON_GetObjectItem(o, "bootstrap")->valueint, 200);
    cJSON_Delete(root);
    assert_int_equal(CLI(g_base, g_same, "-f", "json", "--min-samples", "09"), 0);
    o = read_opts(&root);
    assert_int_equal(cJSON_GetObjectItem(o, "min_samples")->valueint, 9);
    cJSON_Delete(root);
    assert_int_equal(CLI(g_base, g_same, "--bootstrap", "0x100"), 2);
    assert_int_equal(CLI(g_base, g_same, "--min-samples", "+9"), 2);
    assert_int_equal(CLI(g_base, g_same, "--min-samples", " 9"), 2);
    /* --seed 0 would silently be the default seed: refused; 1 and 2^64-1 are seeds */
    assert_int_equal(CLI(g_base, g_same, "--seed", "0"), 2);
    assert_int_equal(CLI(g_base, g_same, "-f", "json", "--seed", "18446744073709551615"), 0);
    o = read_opts(&root);
    assert_string_equal(cJSON_GetObjectItem(o, "seed")->valuestring, "18446744073709551615");
    cJSON_Delete(root);
    assert_int_equal(CLI(g_base, g_same, "-f", "json", "--seed", "010"), 0);
    o = read_opts(&root);
    assert_string_equal(cJSON_GetObjectItem(o, "seed")->valuestring, "10");
    cJSON_Delete(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_input_errors),
        cmocka_unit_test(test_regression_exit_codes),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_zero_median_regression),
        cmocka_unit_test(test_numeric_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
