/* atexit.c — at process exit, writes the snapshot where KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE ask. */
#include "core/internal.h"
#include "core/service.h"

#include <stdlib.h>

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
    int rc;
    char path[4096];
    /* Paths are templates (%p %h %r %%), expanded here, where the file is written. */
    if (out && *out && ((rc = kt__path_expand(out, -1, path, sizeof path)) != 0 ||
                        (rc = kt_report_write(path, snap, KT_FORMAT_JSON)) != 0))
        fprintf(stderr, "ktiming: KTIMING_OUTPUT=%s: %s\n", out, kt_strerror(rc));
    if (trace && *trace && ((rc = kt__path_expand(trace, -1, path, sizeof path)) != 0 ||
                            (rc = kt_report_write(path, snap, KT_FORMAT_CHROME)) != 0))
        fprintf(stderr, "ktiming: KTIMING_TRACE=%s: %s\n", trace, kt_strerror(rc));
    if (want_report)
        kt_report_print(stderr, snap, KT_FORMAT_TEXT);
    kt_snapshot_free(snap);
}

int kt_path_expand(const char *tmpl, long pid, char *out, size_t size) { return kt__path_expand(tmpl, pid, out, size); }
