/* fuzz_export.c — libFuzzer: a snapshot that parses is exported as a Chrome trace, an HTML report and the
 * comparison HTML view against itself; nothing may crash, leak or fail other than with KT_ENOMEM. */
#include <ktiming/analysis.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kt_snapshot_t *s = NULL;
    if (kt_snapshot_parse((const char *)data, size, &s, NULL, 0) != 0)
        return 0;
    FILE *out = fopen("/dev/null", "w");
    if (out) {
        int rc = kt_report_print(out, s, KT_FORMAT_CHROME, NULL);
        if (rc != 0 && rc != KT_ENOMEM)
            abort();
        rc = kt_report_print(out, s, KT_FORMAT_HTML, NULL);
        if (rc != 0 && rc != KT_ENOMEM)
            abort();
        rc = kt_report_compare_html(out, s, s, NULL);
        if (rc != 0 && rc != KT_ENOMEM)
            abort();
        fclose(out);
    }
    kt_snapshot_free(s);
    return 0;
}
