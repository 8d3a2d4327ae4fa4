/* test_merge_fuzz_regress.c — replays the streamed-merge fuzz corpus (tests/fuzz/corpus-merge) through
 * fuzz_merge.c's property in every build: each seed merged an entry at a time and written through the JSON
 * writer's view gives the same bytes and by-rank text as kt_snapshot_merge made whole (the target aborts
 * otherwise), and every seed really reaches that comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/files.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned kt_fuzz_merge_compared;

static void test_replay_corpus(void **state)
{
    (void)state;
    DIR *d = opendir(KT_FUZZ_MERGE_CORPUS_DIR);
    assert_non_null(d);
    unsigned n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", KT_FUZZ_MERGE_CORPUS_DIR, de->d_name);
        size_t len = 0;
        char *data = ktt_read_file(path, &len);
        assert_non_null(data);
        unsigned before = kt_fuzz_merge_compared;
        LLVMFuzzerTestOneInput((const uint8_t *)data, len);
        if (kt_fuzz_merge_compared != before + 1)
            fprintf(stderr, "%s: the two merges were not compared\n", de->d_name);
        assert_int_equal(kt_fuzz_merge_compared, before + 1);
        free(data);
        n++;
    }
    closedir(d);
    assert_true(n >= 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
