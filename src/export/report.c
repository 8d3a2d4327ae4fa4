/* report.c — kt_report_print() and kt_report_write(): format dispatch, C numeric locale, file writes. */
#include "export/export.h"

#include "shared/output.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* Every format writes numbers with '.', whatever LC_NUMERIC the host program chose: the numeric locale is
 * switched for this thread only (uselocale), never for the process. v: the tables' entries (NULL: snap's). */
static int export_dispatch(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v, kt_format_t format,
                           const kt_report_opts_t *opts)
{
    kt__entry_view_t own = {snap->count, snap->entries, NULL, NULL, NULL, 0, 1};
    const kt__entry_view_t *tv = v ? v : &own;
    switch (format) {
    case KT_FORMAT_TEXT: return kt__export_text(out, snap, tv, opts);
    case KT_FORMAT_MARKDOWN: return kt__export_markdown(out, snap, tv, opts);
    case KT_FORMAT_LINES: return kt__export_lines(out, snap, tv, opts);
    case KT_FORMAT_CSV: return kt__export_csv(out, tv, opts);
    case KT_FORMAT_JSON: return v && !v->whole ? KT_EINVAL : kt__export_json(out, snap, tv);
    case KT_FORMAT_CHROME: return v ? KT_EINVAL : kt__export_chrome(out, snap);
    case KT_FORMAT_HTML: return v ? KT_EINVAL : kt__export_html(out, snap);
    }
    return KT_EINVAL;
}

int kt__report_print_view(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v, kt_format_t format,
                          const kt_report_opts_t *opts)
{
    if (!out || !snap || (opts && (unsigned)opts->sort > KT_SORT_COUNT))
        return KT_EINVAL;
    kt__c_numeric_t l = kt__c_numeric_enter();
    return kt__c_numeric_leave(l, out, export_dispatch(out, snap, v, format, opts));
}

int kt_report_print(FILE *out, const kt_snapshot_t *snap, kt_format_t format, const kt_report_opts_t *opts)
{
    return kt__report_print_view(out, snap, NULL, format, opts);
}

kt__c_numeric_t kt__c_numeric_enter(void)
{
    kt__c_numeric_t l;
    l.c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    l.previous = l.c_numeric ? uselocale(l.c_numeric) : (locale_t)0;
    return l;
}

int kt__c_numeric_leave(kt__c_numeric_t l, FILE *out, int rc)
{
    if (l.c_numeric) {
        uselocale(l.previous);
        freelocale(l.c_numeric);
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        rc = KT_EIO;
    return rc;
}

/* Through the one output writer (src/shared/output.h): atomic replacement of a regular file, write-through of a
 * FIFO or device, a symlink's target replaced. */
int kt__report_write_view(const char *path, const kt_snapshot_t *snap, const kt__entry_view_t *v, kt_format_t format,
                          const kt_report_opts_t *opts)
{
    if (!path || !*path || !snap || (unsigned)format > KT_FORMAT_LINES)
        return KT_EINVAL;
    kt_output_t *o;
    int rc = kt_output_open(path, 0, &o);
    if (rc != 0)
        return rc;
    rc = kt__report_print_view(kt_output_file(o), snap, v, format, opts);
    if (rc != 0) {
        kt_output_abort(o);
        return rc;
    }
    return kt_output_commit(o);
}

int kt_report_write(const char *path, const kt_snapshot_t *snap, kt_format_t format, const kt_report_opts_t *opts)
{
    return kt__report_write_view(path, snap, NULL, format, opts);
}
