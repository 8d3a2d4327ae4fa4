/* atexit.c — at process exit, writes the snapshot where KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE ask. */
#include "core/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Writes snap to path in format; on failure says why on stderr, with the system's reason for a file error. */
static void write_one(const char *var, const char *path, const kt_snapshot_t *snap, kt_format_t format)
{
    int rc = kt_report_write(path, snap, format);
    if (rc != 0)
        fprintf(stderr, "ktiming: %s=%s: %s\n", var, path, rc == KT_EIO ? strerror(errno) : kt_strerror(rc));
}

void kt__exit_write(void)
{
    const char *out = getenv("KTIMING_OUTPUT");
    const char *rep = getenv("KTIMING_REPORT");
    const char *trace = getenv("KTIMING_TRACE");
    int want_report = rep && *rep && !(rep[0] == '0' && rep[1] == 0);
    if (!(out && *out) && !want_report && !(trace && *trace))
        return;
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap) {
        fprintf(stderr, "ktiming: no snapshot at exit (out of memory)\n");
        return;
    }
    if (out && *out)
        write_one("KTIMING_OUTPUT", out, snap, KT_FORMAT_JSON);
    if (trace && *trace)
        write_one("KTIMING_TRACE", trace, snap, KT_FORMAT_CHROME);
    if (want_report)
        kt_report_print(stderr, snap, KT_FORMAT_TEXT);
    kt_snapshot_free(snap);
}
