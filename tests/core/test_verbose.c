/* test_verbose.c — the one verbose-line writer (kt__verbose_line): KTIMING_VERBOSE turns it on, KTIMING_LOG sends
 * it to a file instead of stderr, names are escaped once here. Run three ways by CTest (log file, stderr, off);
 * built with src/core/verbose.c, service.c and src/export/escape.c compiled in (their symbols are internal). */
#include "test_util.h"

#include "core/service.h"

#include <stdio.h>
#include <unistd.h>

static char g_path[4096];  /* where the lines should land */
static int g_expect_on;    /* KTIMING_VERBOSE asks for them */

static void read_back(char *buf, size_t cap)
{
    fflush(stderr);
    FILE *f = fopen(g_path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

static void test_lines(void **state)
{
    (void)state;
    assert_int_equal(kt__verbose_on(), g_expect_on);
    kt__verbose_line("exec", "opencl", "dev,1", "k\x1b[31m", "%.6f,%.6f,%.6f,device", 1.5, 0.25, 0.0);
    kt__verbose_line("exec", "vulkan", "gpu", "main", "%.6f,,device", 0.001);
    kt__verbose_line("error", "opencl", NULL, "k2", "%d,%s", -5, "CL_OUT_OF_RESOURCES");
    kt__verbose_line("exec", "cuda", "d", "n", NULL);
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    kt__verbose_line("exec", "cuda", big, big, "%s", big); /* cut, still one line */
    char buf[16384];
    read_back(buf, sizeof buf);
    if (!g_expect_on) {
        assert_string_equal(buf, "");
        return;
    }
    const char *want = "ktiming,exec,opencl,dev\\x2c1,k\\x1b[31m,1.500000,0.250000,0.000000,device\n"
                       "ktiming,exec,vulkan,gpu,main,0.001000,,device\n"
                       "ktiming,error,opencl,?,k2,-5,CL_OUT_OF_RESOURCES\n"
                       "ktiming,exec,cuda,d,n\n";
    assert_int_equal(strncmp(buf, want, strlen(want)), 0);
    const char *last = buf + strlen(want);
    assert_int_equal(strncmp(last, "ktiming,exec,cuda,xxx", 21), 0);
    const char *nl = strchr(last, '\n');
    assert_non_null(nl);
    assert_true(nl - last <= 2047);
    assert_string_equal(nl, "\n"); /* nothing after the cut line */
}

int main(void)
{
    const char *v = kt__env(KT_ENV_NAME(VERBOSE));
    g_expect_on = v && (strstr(v, "profile_exec") || strstr(v, "all"));
    const char *log = kt__env(KT_ENV_NAME(LOG));
    if (log && *log) {
        if (kt__path_expand(log, -1, g_path, sizeof g_path) != 0)
            return 1;
        unlink(g_path);
        FILE *f = fopen(g_path, "w"); /* exists (empty) even when nothing is written */
        if (!f)
            return 1;
        fclose(f);
    } else { /* stderr: pointed at a file of our own before the writer reads its settings */
        snprintf(g_path, sizeof g_path, "verbose-stderr-%ld.txt", (long)getpid());
        if (!freopen(g_path, "w", stderr))
            return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_lines)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(g_path);
    return rc;
}
