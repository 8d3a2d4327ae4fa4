/* verbose.c — the one writer of `ktiming run -v` lines (KTIMING_VERBOSE, KTIMING_LOG) for every backend. */
#include "core/service.h"
#include "export/escape.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_on;    /* KTIMING_VERBOSE holds profile_exec or all */
static FILE *g_out; /* KTIMING_LOG's file, else stderr (never the program's stdout) */

static void read_env(void)
{
    const char *v = kt__env(KT_ENV_NAME(VERBOSE));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        g_on |= !strcmp(tok, "profile_exec") || !strcmp(tok, "all");
    g_out = stderr;
    const char *log = kt__env(KT_ENV_NAME(LOG));
    char path[4096];
    if (g_on && log && *log && kt__path_expand(log, -1, path, sizeof path) == 0) {
        FILE *f = fopen(path, "a");
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            g_out = f;
        }
    }
}

int kt__verbose_on(void)
{
    pthread_once(&g_once, read_env);
    return g_on;
}

void kt__verbose_line(const char *kind, const char *backend, const char *device, const char *name, const char *fmt,
                      ...)
{
    if (!kt__verbose_on())
        return;
    char dev[256], nm[512], line[2048];
    kt__escape_field(dev, sizeof dev, device ? device : "?");
    kt__escape_field(nm, sizeof nm, name ? name : "?");
    int n = snprintf(line, sizeof line, "ktiming,%s,%s,%s,%s", kind ? kind : "?", backend ? backend : "?", dev, nm);
    size_t used = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (fmt && used + 1 < sizeof line) {
        line[used++] = ',';
        va_list ap;
        va_start(ap, fmt);
        n = vsnprintf(line + used, sizeof line - used, fmt, ap);
        va_end(ap);
        used += n < 0 ? 0 : (size_t)n < sizeof line - used ? (size_t)n : sizeof line - used - 1;
    }
    if (used > sizeof line - 2)
        used = sizeof line - 2;
    line[used++] = '\n';
    line[used] = 0;
    fputs(line, g_out);
    fflush(g_out);
}
