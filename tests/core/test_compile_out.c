/* test_compile_out.c — without KTIMING_ENABLE, instrumented code leaves no trace: no kt_ symbol to link and .text
 * byte-identical to the same file with the instrumentation removed (objects built by tests/core/CMakeLists). */
#include "test_util.h"

#include <stdio.h>

double compile_out_work_off(float *img, uint32_t width, uint32_t height);
double compile_out_work_plain(float *img, uint32_t width, uint32_t height);

/* Reads a whole file; returns its size or -1. */
static long slurp(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(n > 0 ? (size_t)n : 1);
    if (fread(*out, 1, (size_t)n, f) != (size_t)n)
        n = -1;
    fclose(f);
    return n;
}

static void test_no_kt_symbols(void **state)
{
    (void)state;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -u '%s'", KT_NM, KT_OBJ_OFF);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512];
    int undefined = 0, kt = 0;
    while (fgets(line, sizeof line, p)) {
        undefined++;
        if (strstr(line, " kt_") || strstr(line, " kt__"))
            kt++;
        if (strstr(line, " kt_") || strstr(line, " kt__"))
            fprintf(stderr, "undefined ktiming symbol: %s", line);
    }
    assert_int_equal(pclose(p), 0);
    assert_int_equal(kt, 0);
    (void)undefined;
}

static long text_of(const char *obj, const char *out, unsigned char **bytes)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' -O binary -j .text '%s' '%s'", KT_OBJCOPY, obj, out);
    assert_int_equal(system(cmd), 0);
    return slurp(out, bytes);
}

static void test_text_identical(void **state)
{
    (void)state;
    unsigned char *a = NULL, *b = NULL;
    long na = text_of(KT_OBJ_OFF, "compile_out_off.text", &a);
    long nb = text_of(KT_OBJ_PLAIN, "compile_out_plain.text", &b);
    assert_true(na > 64); /* the work itself is there */
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na);
    free(a);
    free(b);
}

static void test_behaviour_unchanged(void **state)
{
    (void)state;
    float img1[6 * 5], img2[6 * 5];
    for (int i = 0; i < 30; i++)
        img1[i] = img2[i] = (float)i;
    double s1 = compile_out_work_off(img1, 6, 5), s2 = compile_out_work_plain(img2, 6, 5);
    assert_true(s1 == 435.0 && s2 == 435.0);
    assert_memory_equal(img1, img2, sizeof img1); /* the compiled-out dispatch still ran the rows */
    assert_true(img1[29] == 58.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_kt_symbols),
        cmocka_unit_test(test_text_identical),
        cmocka_unit_test(test_behaviour_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
