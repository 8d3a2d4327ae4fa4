/* fuzz_compare_pair.c — libFuzzer: two snapshots (the input split at its first NUL byte; without one, the
 * input against itself, so the snapshot corpus is a useful start) that both parse are compared and the comparison printed in every format; nothing may crash, leak or return other than
 * 0 / KT_ENOMEM. */
#include <ktiming/analysis.h>
#include <ktiming/compare.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t la = nul ? (size_t)(nul - data) : size, lb_off = nul ? la + 1 : 0;
    kt_snapshot_t *a = NULL, *b = NULL;
    if (kt_snapshot_parse((const char *)data, la, &a, NULL, 0) != 0 ||
        kt_snapshot_parse((const char *)data + lb_off, size - lb_off, &b, NULL, 0) != 0) {
        kt_snapshot_free(a);
        return 0;
    }
    kt_compare_opts_t opts;
    memset(&opts, 0, sizeof opts);
    opts.bootstrap = 100; /* the smallest the CLI accepts: keeps each run fast */
    kt_compare_result_t res;
    int rc = kt_compare(a, b, &opts, &res);
    if (rc != 0 && rc != KT_ENOMEM)
        abort();
    FILE *out = fopen("/dev/null", "w");
    if (rc == 0 && out) {
        const kt_compare_format_t fmts[] = {KT_COMPARE_TEXT, KT_COMPARE_MARKDOWN, KT_COMPARE_JSON};
        for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
            if (kt_compare_print(out, &res, fmts[i]) == KT_EINVAL)
                abort();
    }
    if (out)
        fclose(out);
    kt_compare_free(&res);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
    return 0;
}
