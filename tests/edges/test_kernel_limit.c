/* test_kernel_limit.c — records past the kernel table's limit are counted (kernels_dropped in the snapshot, its
 * JSON and the text report), and the memory of 65,535 kernels recorded once stays small: sample buffers grow
 * with use instead of 8 KB per kernel per thread up front. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define KERNEL_LIMIT 65535u

/* Runs in a child (the kernel table is process-wide and cannot be emptied); its exit code is the verdict. */
static int child_main(void)
{
    char name[32];
    for (unsigned i = 0; i < KERNEL_LIMIT; i++) {
        snprintf(name, sizeof name, "k%u", i);
        kt_record(name, KT_BACKEND_CPU, 100 + i);
    }
    for (unsigned i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "over%u", i);
        kt_record(name, KT_BACKEND_CPU, 5);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "test_kernel_limit: peak RSS after recording %ld KiB\n", ru.ru_maxrss);
    /* 65,535 kernels x 8 KB of up-front sample buffer alone was 512 MiB; grown with use it is a few dozen. */
    if (ru.ru_maxrss > 200 * 1024)
        return 17;
    kt_kernel_id_t site = 0;
    kt__record_site(&site, "over_site", KT_BACKEND_CPU, 5);
    kt_snapshot_t *s = kt_snapshot();
    if (!s)
        return 10;
    if (s->count != KERNEL_LIMIT)
        return 11;
    if (s->kernels_dropped != 11)
        return 12;
    char *text = NULL, *json = NULL;
    size_t tl = 0, jl = 0;
    FILE *ft = open_memstream(&text, &tl), *fj = open_memstream(&json, &jl);
    if (!ft || !fj || kt_report_print(ft, s, KT_FORMAT_TEXT, NULL) != 0 || kt_report_print(fj, s, KT_FORMAT_JSON, NULL) != 0)
        return 13;
    fclose(ft);
    fclose(fj);
    if (!strstr(text, "[timing] warning: 11 records lost: the kernel table was full"))
        return 14;
    if (!strstr(json, "\"kernels_dropped\": 11"))
        return 15;
    free(text);
    free(json);
    kt_snapshot_free(s);
    kt_reset();
    s = kt_snapshot();
    if (!s || s->kernels_dropped != 0) /* reset clears the count with the rest */
        return 16;
    kt_snapshot_free(s);
    return 0;
}

static void test_limit_counted_and_memory(void **state)
{
    (void)state;
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_main());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_limit_counted_and_memory)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
