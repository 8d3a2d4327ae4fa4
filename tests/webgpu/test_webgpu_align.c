/* test_webgpu_align.c — a real Node snapshot (bindings/webgpu, CLOCK_MONOTONIC) merged by `ktiming merge` with this
 * process's C snapshot (CLOCK_MONOTONIC_RAW): the Node span lands inside the C zone that was open while Node ran,
 * after the zone that ended before it and before the one that began after it (order and containment within the
 * stated uncertainty, never a duration). Without the C snapshot's clock anchor: one line on stderr, and the Node
 * source is marked with its offset unknown. SKIPPED without Node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/files.h"
#include "support/proc.h"

static char *g_dir;

/* Runs `sh -c script` with $1.. = args; its status (stderr to err_path when given, else quiet). */
static int sh(const char *script, const char *err_path, const char *a1, const char *a2, const char *a3,
              const char *a4)
{
    char *const argv[] = {"/bin/sh", "-c", (char *)script, "sh", (char *)a1, (char *)a2, (char *)a3, (char *)a4,
                          NULL};
    return ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = err_path ? err_path : KTT_QUIET});
}

/* The span of kernel `name` in m, and the index of its source. */
static const kt_span_t *span_of(const kt_snapshot_t *m, const char *name, uint32_t *source)
{
    for (size_t i = 0; i < m->span_count; i++)
        if (!strcmp(m->entries[m->spans[i].entry].name, name)) {
            *source = m->threads[m->spans[i].thread].source;
            return &m->spans[i];
        }
    fail_msg("no span of %s in the merged snapshot", name);
    return NULL;
}

static void zone(const char *name)
{
    kt_zone_t z = kt_zone_begin(NULL, name);
    kt_zone_end(&z);
}

static void test_merge_node_and_c(void **state)
{
    (void)state;
    char *node_json = ktt_path(g_dir, "node.json"), *c_json = ktt_path(g_dir, "c.json"),
         *bare_json = ktt_path(g_dir, "c-no-anchor.json"), *merged = ktt_path(g_dir, "merged.json"),
         *bare_merged = ktt_path(g_dir, "merged-no-anchor.json"), *err = ktt_path(g_dir, "merge.err");

    zone("c_before");
    kt_zone_t outer = kt_zone_begin(NULL, "c_outer"); /* open while Node runs */
    int st = sh("exec node \"$1\" \"$2\" \"$3\"", NULL,
                KT_SOURCE_DIR "/tests/webgpu/align_node.mjs", KT_WEBGPU_DIR, node_json, NULL);
    kt_zone_end(&outer);
    zone("c_after");
    assert_int_equal(st, 0);

    kt_snapshot_t *c = kt_snapshot();
    assert_non_null(c);
    assert_int_equal(kt_report_write(c_json, c, KT_FORMAT_JSON, NULL), 0);
    memset(&c->clock_anchor, 0, sizeof c->clock_anchor); /* as a ktiming from before anchors wrote it */
    assert_int_equal(kt_report_write(bare_json, c, KT_FORMAT_JSON, NULL), 0);
    kt_snapshot_free(c);

    /* with the anchor: nothing said, the Node source placed with a bound */
    assert_int_equal(sh("exec \"$1\" merge \"$2\" \"$3\" -o \"$4\"", err, KT_CLI, c_json, node_json, merged), 0);
    char *said = ktt_read_file(err, NULL);
    assert_non_null(said);
    if (said[0])
        fail_msg("merge said: %s", said);
    free(said);
    kt_snapshot_t *m = NULL;
    char why[256];
    if (kt_snapshot_load(merged, NULL, &m, why, sizeof why) != 0)
        fail_msg("%s", why);
    assert_string_equal(m->clock_domain, "CLOCK_MONOTONIC_RAW");
    uint32_t sb, so, sn, sa;
    const kt_span_t *before = span_of(m, "c_before", &sb), *outer_sp = span_of(m, "c_outer", &so),
                    *node = span_of(m, "node_span", &sn), *after = span_of(m, "c_after", &sa);
    assert_true(sb == so && so == sa && sn != so);
    assert_string_equal(m->sources[sn].clock_domain, "CLOCK_MONOTONIC");
    assert_true(m->sources[sn].offset_bound_ns != UINT64_MAX);
    uint64_t u = node->uncertainty_ns;
    assert_true(u != 0 && u < UINT64_MAX / 4);
    /* the Node span, within its bound, inside the zone open while it ran, after c_before and before c_after */
    if (!(node->start_ns + u >= outer_sp->start_ns && node->end_ns <= outer_sp->end_ns + u &&
          node->start_ns + u >= before->end_ns && node->end_ns <= after->start_ns + u))
        fail_msg("node_span [%llu, %llu] +-%llu is not inside c_outer [%llu, %llu], after c_before (end %llu), "
                 "before c_after (start %llu)",
                 (unsigned long long)node->start_ns, (unsigned long long)node->end_ns, (unsigned long long)u,
                 (unsigned long long)outer_sp->start_ns, (unsigned long long)outer_sp->end_ns,
                 (unsigned long long)before->end_ns, (unsigned long long)after->start_ns);
    kt_snapshot_free(m);

    /* without it: one line, and the Node source marked (offset unknown), its span where Node put it */
    assert_int_equal(sh("exec \"$1\" merge \"$2\" \"$3\" -o \"$4\"", err, KT_CLI, bare_json, node_json, bare_merged),
                     0);
    said = ktt_read_file(err, NULL);
    assert_non_null(said);
    if (!strstr(said, "node.json: host times on CLOCK_MONOTONIC, not the merged timeline's CLOCK_MONOTONIC_RAW") ||
        !strstr(said, "offset unknown") || strchr(said, '\n') != said + strlen(said) - 1)
        fail_msg("expected one line about node.json, got: %s", said);
    free(said);
    if (kt_snapshot_load(bare_merged, NULL, &m, why, sizeof why) != 0)
        fail_msg("%s", why);
    span_of(m, "node_span", &sn);
    assert_int_equal(m->sources[sn].offset_bound_ns, UINT64_MAX);
    assert_int_equal(m->sources[sn].offset_ns, 0);
    kt_snapshot_free(m);

    free(node_json);
    free(c_json);
    free(bare_json);
    free(merged);
    free(bare_merged);
    free(err);
}

KTT_TMPDIR_GROUP(g_dir, "webgpu-align")

int main(void)
{
    if (sh("command -v node >/dev/null 2>&1", NULL, NULL, NULL, NULL, NULL) != 0) {
        printf("SKIPPED: node is not installed (scripts/install-deps.sh --test installs it)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_merge_node_and_c)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
