/* atexit.c — at process exit, writes the snapshot where KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE ask. */
#include "core/internal.h"

#include <stdlib.h>

void kt__exit_write(void)
{
    const char *out = secure_getenv("KTIMING_OUTPUT");
    const char *rep = secure_getenv("KTIMING_REPORT");
    const char *trace = secure_getenv("KTIMING_TRACE");
    int want_report = rep && *rep && !(rep[0] == '0' && rep[1] == 0);
    if (!(out && *out) && !want_report && !(trace && *trace))
        return;
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap) {
        fprintf(stderr, "ktiming: no snapshot at exit (out of memory)\n");
        return;
    }
    int rc;
    if (out && *out && (rc = kt_report_write(out, snap, KT_FORMAT_JSON)) != 0)
        fprintf(stderr, "ktiming: KTIMING_OUTPUT=%s: %s\n", out, kt_strerror(rc));
    if (trace && *trace && (rc = kt_report_write(trace, snap, KT_FORMAT_CHROME)) != 0)
        fprintf(stderr, "ktiming: KTIMING_TRACE=%s: %s\n", trace, kt_strerror(rc));
    if (want_report)
        kt_report_print(stderr, snap, KT_FORMAT_TEXT);
    kt_snapshot_free(snap);
}
