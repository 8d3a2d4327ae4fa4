/* cli_util.c — what every ktiming subcommand shares: usage errors, format and sort words, the name filter
 * for whole snapshots, and the progress line on a terminal. */
#include "cli.h"
#include "shared/shared.h" /* kt__entry_release */

#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ktcli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ktiming %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(try 'ktiming %s --help')\n", cmd);
    return KTCLI_EXIT_USAGE;
}

int ktcli_stdout_failed(const char *cmd)
{
    errno = 0;
    int flush_failed = fflush(stdout) != 0, err = errno;
    if (!flush_failed && !ferror(stdout))
        return 0;
    if (flush_failed && err)
        fprintf(stderr, "%s: cannot write standard output: %s\n", cmd, strerror(err));
    else /* an earlier write failed: its errno is gone */
        fprintf(stderr, "%s: cannot write standard output\n", cmd);
    return 1;
}

void ktcli_getopt_begin(void)
{
    opterr = 0;
    optind = 1;
}

int ktcli_getopt_error(const char *cmd, int c, int argc, char **argv)
{
    const char *arg = optind - 1 < argc && optind > 0 ? argv[optind - 1] : "?";
    if (c == ':')
        return ktcli_usage_error(cmd, "option '%s' needs a value", arg);
    return ktcli_usage_error(cmd, "unknown option '%s'", arg);
}

int ktcli_parse_format(const char *s, kt_format_t *out)
{
    static const struct {
        const char *name; /* as typed */
        kt_format_t fmt;  /* format */
    } kFormats[] = {{"text", KT_FORMAT_TEXT},     {"csv", KT_FORMAT_CSV},   {"json", KT_FORMAT_JSON},
                    {"chrome", KT_FORMAT_CHROME}, {"html", KT_FORMAT_HTML}, {"markdown", KT_FORMAT_MARKDOWN},
                    {"md", KT_FORMAT_MARKDOWN},   {"lines", KT_FORMAT_LINES}};
    for (size_t i = 0; i < sizeof kFormats / sizeof kFormats[0]; i++)
        if (!strcmp(s, kFormats[i].name)) {
            *out = kFormats[i].fmt;
            return 0;
        }
    return -1;
}

int ktcli_parse_sort(const char *s, kt_sort_t *out)
{
    static const char *const kSorts[] = {"total", "name", "mean", "count"};
    for (size_t i = 0; i < sizeof kSorts / sizeof kSorts[0]; i++)
        if (!strcmp(s, kSorts[i])) {
            *out = (kt_sort_t)i;
            return 0;
        }
    return -1;
}

void ktcli_snapshot_filter(kt_snapshot_t *snap, const char *glob)
{
    if (!snap || !glob || !*glob || !snap->count)
        return;
    uint32_t *map = malloc(snap->count * sizeof *map);
    size_t kept = 0;
    for (size_t i = 0; i < snap->count; i++) {
        kt_kernel_timing_t *e = &snap->entries[i];
        if (fnmatch(glob, e->name ? e->name : "", 0) == 0) {
            if (map)
                map[i] = (uint32_t)kept;
            snap->entries[kept++] = *e;
            continue;
        }
        if (map)
            map[i] = UINT32_MAX;
        kt__entry_release(e);
    }
    size_t total = snap->count, spans = 0;
    snap->count = kept;
    for (size_t i = 0; i < snap->span_count; i++) { /* a span of a removed kernel goes with it */
        kt_span_t s = snap->spans[i];
        if (!map || s.entry >= total || map[s.entry] == UINT32_MAX)
            continue; /* without the map (out of memory) no span can be placed: all are dropped */
        s.entry = map[s.entry];
        snap->spans[spans++] = s;
    }
    snap->span_count = spans;
    free(map);
}

/* ---------------------------------------------------------------------------------------------------
 * Progress line
 * ------------------------------------------------------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void progress_draw(ktcli_progress_t *p, uint64_t now)
{
    double secs = (double)(now - p->start_ns) / 1e9;
    unsigned long long done = atomic_load(&p->done);
    pthread_mutex_lock(&p->lock);
    if (done)
        fprintf(stderr, "\r%s: %s, %llu %s, %.0f s\x1b[K", p->command, p->stage, done, p->unit, secs);
    else
        fprintf(stderr, "\r%s: %s, %.0f s\x1b[K", p->command, p->stage, secs);
    pthread_mutex_unlock(&p->lock);
    fflush(stderr);
    p->shown = 1;
}

static void *progress_main(void *arg)
{
    ktcli_progress_t *p = arg;
    struct timespec tick = {0, 200 * 1000000L};
    while (!atomic_load(&p->stop)) {
        nanosleep(&tick, NULL);
        uint64_t now = mono_ns();
        if (!atomic_load(&p->stop) && now - p->start_ns >= p->after_ns)
            progress_draw(p, now);
    }
    return NULL;
}

void ktcli_progress_begin(ktcli_progress_t *p, const char *command, const char *stage, const char *unit)
{
    ktcli_progress_begin_after(p, command, stage, unit, KTCLI_PROGRESS_AFTER_NS);
}

void ktcli_progress_begin_after(ktcli_progress_t *p, const char *command, const char *stage, const char *unit,
                                uint64_t after_ns)
{
    memset(p, 0, sizeof *p);
    p->after_ns = after_ns;
    p->command = command;
    snprintf(p->stage, sizeof p->stage, "%s", stage ? stage : "");
    p->unit = unit ? unit : "";
    pthread_mutex_init(&p->lock, NULL);
    p->start_ns = mono_ns();
    p->enabled = isatty(STDERR_FILENO);
    if (p->enabled && pthread_create(&p->thread, NULL, progress_main, p) != 0)
        p->enabled = 0;
}

void ktcli_progress_stage(ktcli_progress_t *p, const char *stage)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    snprintf(p->stage, sizeof p->stage, "%s", stage ? stage : "");
    pthread_mutex_unlock(&p->lock);
    atomic_store(&p->done, 0);
}

void ktcli_progress_end(ktcli_progress_t *p)
{
    if (p->enabled) {
        atomic_store(&p->stop, 1);
        pthread_join(p->thread, NULL);
        if (p->shown) {
            fputs("\r\x1b[K", stderr);
            fflush(stderr);
        }
    }
    pthread_mutex_destroy(&p->lock);
    p->enabled = 0;
}
