/* atexit.c — at process exit, writes the snapshot where KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE ask. */
#include "core/internal.h"

#include <ktiming/output.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Writes one output; names the variable, the path and why it failed. */
static void exit_write_one(const char *var, const char *path, const kt_snapshot_t *snap, kt_format_t format)
{
    errno = 0;
    int rc = kt_report_write(path, snap, format);
    if (rc == KT_EIO && errno)
        fprintf(stderr, "ktiming: %s=%s: %s\n", var, path, strerror(errno));
    else if (rc != 0)
        fprintf(stderr, "ktiming: %s=%s: %s\n", var, path, kt_strerror(rc));
}

void kt__exit_write(void)
{
    const char *out = secure_getenv("KTIMING_OUTPUT");
    const char *rep = secure_getenv("KTIMING_REPORT");
    const char *trace = secure_getenv("KTIMING_TRACE");
    int want_report = rep && *rep && !(rep[0] == '0' && rep[1] == 0);
    if (!(out && *out) && !want_report && !(trace && *trace))
        return;
    if (out && *out && trace && *trace && kt_output_same(out, trace)) {
        fprintf(stderr, "ktiming: KTIMING_OUTPUT and KTIMING_TRACE name the same file (%s): neither written\n",
                out);
        out = trace = NULL;
    }
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap) {
        fprintf(stderr, "ktiming: no snapshot at exit (out of memory)\n");
        return;
    }
    if (out && *out)
        exit_write_one("KTIMING_OUTPUT", out, snap, KT_FORMAT_JSON);
    if (trace && *trace)
        exit_write_one("KTIMING_TRACE", trace, snap, KT_FORMAT_CHROME);
    if (want_report)
        kt_report_print(stderr, snap, KT_FORMAT_TEXT);
    kt_snapshot_free(snap);
}
