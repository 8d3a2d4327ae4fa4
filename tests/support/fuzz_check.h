/* fuzz_check.h — the property every input must satisfy, shared by the libFuzzer target and the corpus replay
 * test: kt_snapshot_parse() returns 0 or KT_EPARSE (with a message), never crashes or leaks; whatever it
 * accepts exports in every core format and reads back from its own JSON identical. Aborts on a violation. */
#ifndef KT_TESTS_FUZZ_CHECK_H
#define KT_TESTS_FUZZ_CHECK_H

#include <ktiming/analysis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/snapshot_fixture.h"

static inline void kt_fuzz_violation(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz property violated: %s: %s\n", what, detail ? detail : "");
    abort();
}

/* Checks one input; returns 1 if it was accepted, 0 if rejected. */
static inline int kt_fuzz_check(const unsigned char *data, size_t size)
{
    kt_snapshot_t *snap = (kt_snapshot_t *)1;
    char err[256];
    err[0] = 'x';
    int rc = kt_snapshot_parse((const char *)data, size, &snap, err, sizeof err);
    if (rc != 0) {
        if (rc != KT_EPARSE)
            kt_fuzz_violation("parse returned neither 0 nor KT_EPARSE", kt_strerror(rc));
        if (snap != NULL)
            kt_fuzz_violation("rejected input left a snapshot", err);
        if (err[0] == '\0' || !memchr(err, '\0', sizeof err))
            kt_fuzz_violation("rejected input without a message", NULL);
        return 0;
    }
    static const kt_format_t formats[] = {KT_FORMAT_TEXT, KT_FORMAT_CSV};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char *out = fx_render(snap, formats[i], &rc);
        if (rc != 0)
            kt_fuzz_violation("an accepted snapshot does not export", kt_strerror(rc));
        free(out);
    }
    char *json = fx_render(snap, KT_FORMAT_JSON, &rc);
    if (rc != 0)
        kt_fuzz_violation("an accepted snapshot does not export as JSON", kt_strerror(rc));
    kt_snapshot_t *again = NULL;
    if (kt_snapshot_parse(json, strlen(json), &again, err, sizeof err) != 0)
        kt_fuzz_violation("our own JSON of an accepted snapshot is rejected", err);
    char why[128];
    if (fx_snapshot_diff(snap, again, why, sizeof why))
        kt_fuzz_violation("JSON round trip of an accepted snapshot differs", why);
    kt_snapshot_free(again);
    free(json);
    kt_snapshot_free(snap);
    return 1;
}

#endif
