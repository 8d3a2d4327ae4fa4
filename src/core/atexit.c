/* atexit.c — at process exit, writes the snapshot where KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE ask. */
#include "core/internal.h"
#include "core/service.h"

#include "shared/output.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes one output; names the variable, the path and why it failed. */
static void exit_write_one(const char *var, const char *path, const kt_snapshot_t *snap, kt_format_t format)
{
    errno = 0;
    int rc = kt_report_write(path, snap, format, NULL);
    if (rc == KT_EIO && errno == ENXIO)
        fprintf(stderr, "ktiming: %s=%s: a FIFO nobody opened for reading within %d ms: not written\n", var, path,
                KT_OUTPUT_FIFO_WAIT_MS);
    else if (rc == KT_EIO && errno)
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

/* Whether kt__path_expand puts the pid into tmpl: a %p that is not the second half of a %% ("%%p" is a literal
 * "%p"). Walks the template as kt__path_expand does. */
static int has_pid(const char *tmpl)
{
    for (const char *p = tmpl; *p; p++) {
        if (p[0] != '%')
            continue;
        if (p[1] == 'p')
            return 1;
        if (p[1] == '%' || p[1] == 'h' || p[1] == 'r')
            p++;
    }
    return 0;
}

/* The path an output goes to: the template expanded (%p %h %r %%, kt__path_expand), and in a forked child
 * whose template puts no pid in the name, PATH.PID -- never the parent's file. A child is forked when its parent
 * had initialised ktiming, or when it was forked from the process the library was loaded into before either used
 * ktiming (the parent may still use it and write PATH at its exit). NULL when it does not fit. */
static const char *out_path(const char *tmpl, char *buf, size_t size)
{
    if (kt__path_expand(tmpl, -1, buf, size) != 0)
        return NULL;
    if ((kt__forked_child() || kt__forked_since_load()) && !has_pid(tmpl)) {
        size_t n = strlen(buf);
        int k = snprintf(buf + n, size - n, ".%ld", (long)getpid());
        if (k < 0 || (size_t)k >= size - n)
            return NULL;
    }
    return buf;
}

static int set(const char *v) { return v && *v; }

/* KTIMING_REPORT asks for the text report unless it is empty or "0". */
static int report_wanted(const char *rep) { return set(rep) && !(rep[0] == '0' && rep[1] == 0); }

int kt__exit_snapshot_wanted(void)
{
    return set(kt__env(KT_ENV_NAME(OUTPUT))) || set(kt__env(KT_ENV_NAME(TRACE))) ||
           report_wanted(kt__env(KT_ENV_NAME(REPORT))) || set(kt__env(KT_ENV_NAME(RUN_DIR)));
}

void kt__exit_write(void)
{
    const char *out_t = kt__env(KT_ENV_NAME(OUTPUT));
    const char *rep = kt__env(KT_ENV_NAME(REPORT));
    const char *trace_t = kt__env(KT_ENV_NAME(TRACE));
    int want_report = report_wanted(rep);
    if (!set(out_t) && !want_report && !set(trace_t))
        return;
    char out_buf[PATH_MAX], trace_buf[PATH_MAX];
    const char *out = NULL, *trace = NULL;
    if (out_t && *out_t && !(out = out_path(out_t, out_buf, sizeof out_buf)))
        fprintf(stderr, "ktiming: KTIMING_OUTPUT=%s: %s\n", out_t, strerror(ENAMETOOLONG));
    if (trace_t && *trace_t && !(trace = out_path(trace_t, trace_buf, sizeof trace_buf)))
        fprintf(stderr, "ktiming: KTIMING_TRACE=%s: %s\n", trace_t, strerror(ENAMETOOLONG));
    if (out && trace && kt_output_same(out, trace)) {
        fprintf(stderr, "ktiming: KTIMING_OUTPUT and KTIMING_TRACE name the same file (%s): neither written\n",
                out);
        out = trace = NULL;
    }
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap) {
        fprintf(stderr, "ktiming: no snapshot at exit (out of memory)\n");
        return;
    }
    /* a forked child starts empty (fork handlers): it writes only what it recorded itself */
    if (!kt__forked_child() || snapshot_has_records(snap)) {
        if (out)
            exit_write_one(KT_ENV_NAME(OUTPUT), out, snap, KT_FORMAT_JSON);
        if (trace)
            exit_write_one(KT_ENV_NAME(TRACE), trace, snap, KT_FORMAT_CHROME);
        if (want_report) /* KTIMING_REPORT=lines: the seed's grep-friendly lines; anything else: the table */
            kt_report_print(stderr, snap, !strcmp(rep, "lines") ? KT_FORMAT_LINES : KT_FORMAT_TEXT, NULL);
    }
    kt_snapshot_free(snap);
}

int kt_path_expand(const char *tmpl, long pid, char *out, size_t size) { return kt__path_expand(tmpl, pid, out, size); }
