/* atexit.c — at process exit, writes the snapshot where KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE ask. */
#include "core/internal.h"

#include <ktiming/output.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Did this process record anything (a forked child starts empty and writes only what it recorded)? */
static int snapshot_has_records(const kt_snapshot_t *snap)
{
    for (size_t i = 0; i < snap->count; i++)
        if (snap->entries[i].dispatch_count || snap->entries[i].errors || snap->entries[i].dropped)
            return 1;
    return 0;
}

/* A forked child's own path: PATH.PID, never the parent's file (malloc'ed; NULL when out of memory). */
static char *child_path(const char *path)
{
    size_t n = strlen(path) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s.%ld", path, (long)getpid());
    return p;
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
    char *own_out = NULL, *own_trace = NULL;
    if (getpid() != kt__init_pid()) { /* a forked child: its own files, and only when it recorded something */
        if (!snapshot_has_records(snap)) {
            kt_snapshot_free(snap);
            return;
        }
        if (out && *out && !(out = own_out = child_path(out)))
            fprintf(stderr, "ktiming: KTIMING_OUTPUT: out of memory\n");
        if (trace && *trace && !(trace = own_trace = child_path(trace)))
            fprintf(stderr, "ktiming: KTIMING_TRACE: out of memory\n");
    }
    if (out && *out)
        exit_write_one("KTIMING_OUTPUT", out, snap, KT_FORMAT_JSON);
    if (trace && *trace)
        exit_write_one("KTIMING_TRACE", trace, snap, KT_FORMAT_CHROME);
    if (want_report)
        kt_report_print(stderr, snap, KT_FORMAT_TEXT);
    kt_snapshot_free(snap);
    free(own_out);
    free(own_trace);
}
