/* test_cli_fuzz_regress.c — replays the command-line fuzz corpus (tests/fuzz/corpus-cli) through fuzz_cli.c's
 * property in every build: no crash, no leak, a documented exit status. Each file is named NAME.rcN, N the exit
 * status the command must give. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
extern int kt_fuzz_cli_last_status;

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = malloc(65536);
    *len = buf ? fread(buf, 1, 65536, f) : 0;
    fclose(f);
    return buf;
}

static void test_replay_corpus(void **state)
{
    (void)state;
    int saved_out = dup(STDOUT_FILENO); /* the harness sends standard output to /dev/null */
    assert_true(saved_out >= 0);
    assert_int_equal(LLVMFuzzerInitialize(NULL, NULL), 0);
    DIR *d = opendir(KT_FUZZ_CLI_CORPUS_DIR);
    assert_non_null(d);
    size_t n = 0, failures = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *rc_at = strstr(de->d_name, ".rc");
        if (de->d_name[0] == '.' || !rc_at) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", KT_FUZZ_CLI_CORPUS_DIR, de->d_name);
        size_t len = 0;
        unsigned char *data = read_all(path, &len);
        assert_non_null(data);
        LLVMFuzzerTestOneInput(data, len);
        int want = atoi(rc_at + 3);
        if (kt_fuzz_cli_last_status != want) {
            fprintf(stderr, "%s: exit status %d, expected %d\n", de->d_name, kt_fuzz_cli_last_status, want);
            failures++;
        }
        free(data);
        n++;
    }
    closedir(d);
    dup2(saved_out, STDOUT_FILENO);
    close(saved_out);
    assert_int_equal(failures, 0);
    assert_true(n >= 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_corpus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
