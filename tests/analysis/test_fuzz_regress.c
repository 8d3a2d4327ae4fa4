/* test_fuzz_regress.c — replays the fuzz seed corpus (tests/fuzz/corpus) and every input the fuzzer ever
 * crashed on (tests/analysis/regress) through the fuzz property; regress files named *.reject.json must be
 * rejected and *.accept.json accepted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>

#include "support/fuzz_check.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Runs every regular file in dir; returns how many. */
static size_t replay_dir(const char *dir, int check_names)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *path = ktt_path(dir, de->d_name);
        size_t len = 0;
        char *data = ktt_read_file(path, &len);
        assert_non_null(data);
        int accepted = kt_fuzz_check((const unsigned char *)data, len);
        if (check_names && ends_with(de->d_name, ".reject.json") && accepted)
            fail_msg("%s was accepted", path);
        if (check_names && ends_with(de->d_name, ".accept.json") && !accepted)
            fail_msg("%s was rejected", path);
        free(data);
        free(path);
        n++;
    }
    closedir(d);
    return n;
}

static void test_corpus(void **state)
{
    (void)state;
    assert_true(replay_dir(KT_FUZZ_CORPUS_DIR, 0) >= 5);
}

static void test_regressions(void **state)
{
    (void)state;
    assert_true(replay_dir(KT_ANALYSIS_REGRESS_DIR, 1) >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
