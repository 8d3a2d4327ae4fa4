/* ktiming/analysis.h — reading snapshots back from JSON (library ktiming::analysis, which uses cJSON).
 *
 *     kt_snapshot_t *s;
 *     char err[256];
 *     if (kt_snapshot_load("run.json", &s, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); ... }
 *     kt_report_print(stdout, s, KT_FORMAT_TEXT);
 *     kt_snapshot_free(s);
 *
 * The format is the versioned schema "ktiming.snapshot" written by kt_report_write(..., KT_FORMAT_JSON) and
 * documented in docs/json-schema.md. Loaded snapshots follow the same memory contract as kt_snapshot() (see
 * kt_snapshot_t in ktiming.h) and are released with kt_snapshot_free(). Entries come back sorted by name,
 * backend, device (span entry indices are remapped when a file lists them in another order), spans sorted by
 * start_ns. Every uint64 value round-trips exactly.
 */
#ifndef KTIMING_ANALYSIS_H
#define KTIMING_ANALYSIS_H

#include <ktiming.h>

#if !KT_ENABLED
#error "ktiming/analysis.h needs KTIMING_ENABLE=1: define it where you include this header (README, \"Link\")"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The newest schema version this library reads; files with a larger "version" are rejected. */
#define KT_SNAPSHOT_SCHEMA_VERSION 2

/* Parses len bytes of JSON (need not be NUL-terminated) into a new snapshot stored in *out.
 * Returns 0; KT_EPARSE for malformed, truncated or inconsistent input, an unknown schema or a newer schema
 * version; KT_ENOMEM; or KT_EINVAL for NULL arguments. On failure *out is NULL and, when errbuf is non-NULL
 * and errlen > 0, errbuf holds a one-line NUL-terminated message naming the position ("line 3, column 17
 * (byte 52)") or the offending member ("entries[3].min_ns: expected a non-negative integer"). */
KT_API int kt_snapshot_parse(const char *json, size_t len, kt_snapshot_t **out, char *errbuf, size_t errlen);

/* Reads the file at path and parses it as kt_snapshot_parse() does; "-" reads standard input. Returns the
 * same codes plus KT_EIO when the file cannot be read (errno is kept, the message names path). Messages
 * start with the path. */
KT_API int kt_snapshot_load(const char *path, kt_snapshot_t **out, char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_ANALYSIS_H */
