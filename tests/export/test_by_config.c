/* test_by_config.c — `report --by-config` (kt_report_opts_t.by_config, issue 40.2): after each kernel's row, one
 * row per launch configuration and one "none" row for dispatches recorded without one, in text, markdown, CSV and
 * lines; without the option, the kernel rows alone as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ktiming.h>

static char *print(const kt_snapshot_t *s, kt_format_t f, int by_config)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    kt_report_opts_t o = {.sort = KT_SORT_NAME, .by_config = by_config};
    assert_int_equal(kt_report_print(out, s, f, &o), 0);
    fclose(out);
    return buf;
}

static void dispatch(kt_kernel_id_t k, uint64_t ns, uint32_t kind, uint64_t g, uint64_t l)
{
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.duration_ns = ns;
    d.launch.kind = kind;
    d.launch.dims = kind == KT_LAUNCH_GROUPS ? 3 : 1;
    d.launch.size[0] = g;
    d.launch.local[0] = l;
    if (kind == KT_LAUNCH_GROUPS)
        d.launch.size[1] = d.launch.size[2] = 1;
    kt_record_dispatch(&d);
}

/* Lines of text that contain `needle`, in order, each found after the one before. */
static const char *after(const char *text, const char *from, const char *needle)
{
    const char *p = strstr(from ? from : text, needle);
    if (!p)
        fail_msg("'%s' not found (in order) in:\n%s", needle, text);
    return p + strlen(needle);
}

static kt_snapshot_t *fixture(void)
{
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("scale", KT_BACKEND_OPENCL, "dev");
    for (int i = 0; i < 3; i++)
        dispatch(k, 2000, KT_LAUNCH_ITEMS, 64, 16);
    dispatch(k, 5000, KT_LAUNCH_ITEMS, 64, 0);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 1000}); /* no configuration: the "none" row */
    kt_kernel_id_t g = kt_kernel_intern("grid", KT_BACKEND_CUDA, "dev");
    dispatch(g, 700, KT_LAUNCH_GROUPS, 80, 0); /* local size unknown */
    kt_kernel_id_t plain = kt_kernel_intern("plain", KT_BACKEND_CPU, NULL);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = plain, .duration_ns = 10}); /* no breakdown rows at all */
    return kt_snapshot();
}

static void test_text(void **state)
{
    (void)state;
    kt_snapshot_t *s = fixture();
    char *t = print(s, KT_FORMAT_TEXT, 1);
    const char *p = after(t, NULL, "[timing] grid ");
    p = after(t, p, "\n[timing]   groups=80x1x1 ");
    p = after(t, p, "1  ");
    p = after(t, p, "\n[timing] plain ");
    p = after(t, p, "\n[timing] scale ");
    p = after(t, p, "\n[timing]   global=64 local=16 ");
    p = after(t, p, " 3  6.000 ");
    p = after(t, p, "\n[timing]   global=64 local=auto ");
    p = after(t, p, " 1  5.000 ");
    p = after(t, p, "\n[timing]   none ");
    p = after(t, p, " 1  1.000 ");
    assert_null(strstr(p, "[timing]   ")); /* plain has no rows of its own */
    assert_null(strstr(t, "groups=80x1x1 local")); /* an unknown local size is left out */
    free(t);
    t = print(s, KT_FORMAT_TEXT, 0); /* the default: kernels only */
    assert_null(strstr(t, "global="));
    assert_null(strstr(t, "[timing]   "));
    free(t);
    kt_snapshot_free(s);
}

static void test_markdown_csv_lines(void **state)
{
    (void)state;
    kt_snapshot_t *s = fixture();
    char *t = print(s, KT_FORMAT_MARKDOWN, 1);
    const char *p = after(t, NULL, "\n| scale | OpenCL | dev | 5 |");
    p = after(t, p, "\n| scale [global=64 local=16] | OpenCL | dev | 3 |");
    p = after(t, p, "\n| scale [global=64 local=auto] | OpenCL | dev | 1 |");
    after(t, p, "\n| scale [none] | OpenCL | dev | 1 |");
    free(t);

    t = print(s, KT_FORMAT_CSV, 1);
    p = after(t, NULL, ",bytes,last_error,config\r\n");
    p = after(t, p, "scale,OpenCL,dev,5,12000,");
    p = after(t, p, ",\r\nscale,OpenCL,dev,3,6000,2000,2000,0,2000,,,,,,,,,,,global=64 local=16\r\n");
    p = after(t, p, "scale,OpenCL,dev,1,5000,5000,5000,0,5000,,,,,,,,,,,global=64 local=auto\r\n");
    after(t, p, "scale,OpenCL,dev,1,1000,,,0,1000,,,,,,,,,,,none\r\n");
    free(t);
    t = print(s, KT_FORMAT_CSV, 0);
    assert_null(strstr(t, "config"));
    free(t);

    t = print(s, KT_FORMAT_LINES, 1);
    p = after(t, NULL, "[timing] scale                OpenCL avg=   0.00ms min=   0.00ms max=   0.01ms n=5\n");
    p = after(t, p, "[timing] scale                OpenCL avg=   0.00ms min=   0.00ms max=   0.00ms n=3 global=64 local=16\n");
    p = after(t, p, "n=1 global=64 local=auto\n");
    after(t, p, "min=      -ms max=      -ms n=1 none\n");
    free(t);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_markdown_csv_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
