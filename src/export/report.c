/* report.c — kt_report_print() and kt_report_write(): format dispatch, C numeric locale, atomic file writes. */
#include "export/export.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every format writes numbers with '.', whatever LC_NUMERIC the host program chose: the numeric locale is
 * switched for this thread only (uselocale), never for the process. */
static int export_dispatch(FILE *out, const kt_snapshot_t *snap, kt_format_t format, const kt_report_opts_t *opts)
{
    switch (format) {
    case KT_FORMAT_TEXT: return kt__export_text(out, snap, opts);
    case KT_FORMAT_MARKDOWN: return kt__export_markdown(out, snap, opts);
    case KT_FORMAT_CSV: return kt__export_csv(out, snap, opts);
    case KT_FORMAT_JSON: return kt__export_json(out, snap);
    case KT_FORMAT_CHROME: return kt__export_chrome(out, snap);
    case KT_FORMAT_HTML: return kt__export_html(out, snap);
    }
    return KT_EINVAL;
}

int kt_report_print(FILE *out, const kt_snapshot_t *snap, kt_format_t format)
{
    return kt_report_print_opts(out, snap, format, NULL);
}

int kt_report_print_opts(FILE *out, const kt_snapshot_t *snap, kt_format_t format, const kt_report_opts_t *opts)
{
    if (!out || !snap || (opts && (unsigned)opts->sort > KT_SORT_COUNT))
        return KT_EINVAL;
    locale_t c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t previous = c_numeric ? uselocale(c_numeric) : (locale_t)0;
    int rc = export_dispatch(out, snap, format, opts);
    if (c_numeric) {
        uselocale(previous);
        freelocale(c_numeric);
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        rc = KT_EIO;
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Atomic write: the document goes to a temporary file beside `path` (same file system), is flushed to disk,
 * then renamed over `path`. Readers see the old file or the whole new one, never a part; on any failure the
 * temporary file is removed and `path` is untouched.
 * ------------------------------------------------------------------------------------------------- */

static atomic_uint g_tmp_counter;

int kt_report_write(const char *path, const kt_snapshot_t *snap, kt_format_t format)
{
    return kt_report_write_opts(path, snap, format, NULL);
}

int kt_report_write_opts(const char *path, const kt_snapshot_t *snap, kt_format_t format, const kt_report_opts_t *opts)
{
    if (!path || !*path || !snap || (unsigned)format > KT_FORMAT_MARKDOWN)
        return KT_EINVAL;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 64);
    if (!tmp)
        return KT_ENOMEM;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&g_tmp_counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666); /* 0666 & ~umask, as fopen does */
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int saved = errno;
        free(tmp);
        errno = saved;
        return KT_EIO;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        errno = saved;
        return KT_ENOMEM;
    }
    int rc = kt_report_print_opts(f, snap, format, opts);
    if (rc == 0 && fsync(fileno(f)) != 0)
        rc = KT_EIO;
    int saved = errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = KT_EIO;
        saved = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = KT_EIO;
        saved = errno;
    }
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    errno = saved;
    return rc;
}
