/* test_merge_clock.c — clock anchors (src/shared/clock_anchor.h) on test-double clocks, and kt_snapshot_merge
 * putting a CLOCK_MONOTONIC snapshot (the Node WebGPU package's) on a CLOCK_MONOTONIC_RAW one through the anchor:
 * offsets, bounds growing 500 ppm with the distance from the anchor, and what is marked when no anchor serves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shared/clock_anchor.h"

/* ---------------------------------------------------------------------------------------------------
 * Taking an anchor: scripted readings
 * ------------------------------------------------------------------------------------------------- */

/* The test double: each read returns the next scripted value of its clock. */
typedef struct script_t {
    const uint64_t *mono; /* CLOCK_MONOTONIC readings, in order */
    const uint64_t *host; /* host timeline readings, in order */
    size_t m, h;          /* reads so far */
} script_t;

static uint64_t read_mono(void *ctx)
{
    script_t *s = ctx;
    return s->mono[s->m++];
}

static uint64_t read_host(void *ctx)
{
    script_t *s = ctx;
    return s->host[s->h++];
}

static void test_anchor_take(void **state)
{
    (void)state;
    /* three brackets: 900 ns wide, 7 ns wide (odd: the bound rounds up), 40 ns wide; the narrowest is kept */
    const uint64_t mono[] = {1000, 1900, 5000, 5007, 9000, 9040};
    const uint64_t host[] = {77000, 80004, 90020};
    script_t s = {mono, host, 0, 0};
    kt_clock_anchor_t a;
    assert_int_equal(kt__clock_anchor_take(read_mono, read_host, &s, 25, 3, &a), 0);
    assert_int_equal(s.m, 6);
    assert_int_equal(s.h, 3);
    assert_int_equal(a.host_ns, 80004);
    assert_int_equal(a.monotonic_ns, 5003);     /* 5000 + 7/2 */
    assert_int_equal(a.bound_ns, 4 + 25 + 1);   /* ceil(7/2) + the host clock's bound + 1 */
    assert_int_equal(kt__clock_anchor_offset(&a), 80004 - 5003);

    /* a failed read (0) and a bracket running backwards are not used; none usable: -1 and a zero anchor */
    const uint64_t bad_mono[] = {0, 10, 30, 20};
    const uint64_t bad_host[] = {15, 25};
    script_t b = {bad_mono, bad_host, 0, 0};
    assert_int_equal(kt__clock_anchor_take(read_mono, read_host, &b, 0, 2, &a), -1);
    assert_int_equal(a.host_ns, 0);
    assert_int_equal(a.monotonic_ns, 0);
}

static void test_anchor_bound(void **state)
{
    (void)state;
    kt_clock_anchor_t a = {.host_ns = 10000000000ull, .monotonic_ns = 7000000000ull, .bound_ns = 40};
    assert_int_equal(kt__clock_anchor_offset(&a), 3000000000ll);
    kt_clock_anchor_t back = {.host_ns = 5, .monotonic_ns = 1000000000ull, .bound_ns = 0};
    assert_int_equal(kt__clock_anchor_offset(&back), 5 - 1000000000ll); /* the host clock behind */
    /* at the anchor: its own bound; 500 ppm of the distance either way, rounded up */
    assert_int_equal(kt__clock_anchor_bound(&a, a.monotonic_ns), 40);
    assert_int_equal(kt__clock_anchor_bound(&a, a.monotonic_ns + 1000000000ull), 40 + 500000); /* 1 s: 0.5 ms */
    assert_int_equal(kt__clock_anchor_bound(&a, a.monotonic_ns - 2000000000ull), 40 + 1000000);
    assert_int_equal(kt__clock_anchor_bound(&a, a.monotonic_ns + 1), 40 + 1);                  /* 0.0005 up */
    assert_int_equal(kt__clock_anchor_bound(&a, a.monotonic_ns + 2000), 40 + 1);
    assert_int_equal(kt__clock_anchor_bound(&a, a.monotonic_ns + 2001), 40 + 2);
    /* far away: saturates below UINT64_MAX (which means unknown) */
    kt_clock_anchor_t huge = {.host_ns = 1, .monotonic_ns = 1, .bound_ns = UINT64_MAX - 10};
    assert_int_equal(kt__clock_anchor_bound(&huge, UINT64_MAX), UINT64_MAX - 1);
}

/* ---------------------------------------------------------------------------------------------------
 * Merging: hand-written snapshots
 * ------------------------------------------------------------------------------------------------- */

/* A one-span snapshot: kernel `name` of `backend` on `host`, one span [start, start + dur] with uncertainty unc;
 * clock_domain and clock_anchor members as given ("" / NULL: absent). */
static kt_snapshot_t *one_span(const char *host, long pid, const char *name, const char *backend, uint64_t start,
                               uint64_t dur, uint64_t unc, const char *domain, const char *anchor)
{
    char json[2048], dom[64] = "", why[256];
    if (domain && *domain)
        snprintf(dom, sizeof dom, ", \"clock_domain\": \"%s\"", domain);
    snprintf(json, sizeof json,
             "{\"schema\": \"ktiming.snapshot\", \"version\": 5, \"host\": \"%s\", \"pid\": %ld, \"taken_ns\": %llu%s%s%s,"
             " \"entries\": [{\"name\": \"%s\", \"backend\": \"%s\", \"device\": \"dev\", \"dispatch_count\": 1,"
             " \"total_ns\": %llu, \"min_ns\": %llu, \"max_ns\": %llu}],"
             " \"spans\": [{\"entry\": 0, \"queue\": 0, \"thread\": 0, \"flags\": 1, \"duration_ns\": %llu,"
             " \"start_ns\": %llu, \"end_ns\": %llu, \"uncertainty_ns\": %llu}],"
             " \"queues\": [{\"backend\": \"%s\", \"device\": \"dev\", \"label\": \"q\"}],"
             " \"threads\": [{\"os_tid\": %ld, \"name\": \"main\"}]}",
             host, pid, (unsigned long long)(start + dur), dom, anchor ? ", \"clock_anchor\": " : "",
             anchor ? anchor : "", name, backend, (unsigned long long)dur, (unsigned long long)dur,
             (unsigned long long)dur, (unsigned long long)dur, (unsigned long long)start,
             (unsigned long long)(start + dur), (unsigned long long)unc, backend, pid);
    kt_snapshot_t *s = NULL;
    if (kt_snapshot_parse(json, strlen(json), &s, why, sizeof why) != 0)
        fail_msg("parse: %s\n%s", why, json);
    return s;
}

/* The merged span of kernel `name`. */
static const kt_span_t *span_of(const kt_snapshot_t *m, const char *name)
{
    for (size_t i = 0; i < m->span_count; i++)
        if (!strcmp(m->entries[m->spans[i].entry].name, name))
            return &m->spans[i];
    fail_msg("no span of %s", name);
    return NULL;
}

/* The C side's anchor: host timeline 3,000,000 ns ahead of CLOCK_MONOTONIC, bound 40 ns, at monotonic 2 s. */
#define ANCHOR "{\"host_ns\": 2003000000, \"monotonic_ns\": 2000000000, \"bound_ns\": 40}"
#define ANCHOR_OFFSET 3000000

static void test_merge_through_anchor(void **state)
{
    (void)state;
    /* C: a span at host time 5 s; Node: a pass at CLOCK_MONOTONIC 3 s (1 s after the anchor), 100 ns long */
    kt_snapshot_t *c = one_span("box", 10, "c_kernel", "opencl", 5000000000ull, 1000, 7, KT_CLOCK_HOST, ANCHOR);
    kt_snapshot_t *node = one_span("box", 11, "pass", "webgpu", 3000000000ull, 100, 9, KT_CLOCK_MONO, NULL);
    assert_string_equal(c->clock_domain, KT_CLOCK_HOST);
    assert_int_equal(c->clock_anchor.host_ns, 2003000000ull);
    assert_int_equal(c->clock_anchor.bound_ns, 40);
    /* either order of the inputs: the merged timeline is the C one */
    for (int order = 0; order < 2; order++) {
        const kt_snapshot_t *in[2] = {order ? node : c, order ? c : node};
        kt_snapshot_t *m = NULL;
        assert_int_equal(kt_snapshot_merge(in, 2, NULL, &m), 0);
        assert_string_equal(m->clock_domain, KT_CLOCK_HOST);
        assert_int_equal(m->clock_anchor.host_ns, c->clock_anchor.host_ns); /* still mergeable with another */
        const kt_span_t *p = span_of(m, "pass"), *k = span_of(m, "c_kernel");
        assert_int_equal(p->start_ns, 3000000000ull + ANCHOR_OFFSET);
        assert_int_equal(p->end_ns, 3000000100ull + ANCHOR_OFFSET);
        /* its own 9 + the anchor's 40 + 500 ppm of the farther end's 1,000,000,100 ns from the anchor, rounded up */
        assert_int_equal(p->uncertainty_ns, 9 + 40 + 500001);
        assert_int_equal(k->start_ns, 5000000000ull); /* the C span stays */
        assert_int_equal(k->uncertainty_ns, 7);
        const kt_source_info_t *sn = &m->sources[order ? 0 : 1], *sc = &m->sources[order ? 1 : 0];
        assert_int_equal(sn->pid, 11);
        assert_int_equal(sn->offset_ns, ANCHOR_OFFSET);
        assert_int_equal(sn->offset_bound_ns, 40);
        assert_string_equal(sn->clock_domain, KT_CLOCK_MONO);
        assert_int_equal(sc->offset_ns, 0);
        assert_int_equal(sc->offset_bound_ns, 0);
        assert_string_equal(sc->clock_domain, KT_CLOCK_HOST);

        /* the file keeps all of it */
        char *text = NULL, why[256];
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        assert_int_equal(kt_report_print(f, m, KT_FORMAT_JSON, NULL), 0);
        fclose(f);
        kt_snapshot_t *back = NULL;
        if (kt_snapshot_parse(text, len, &back, why, sizeof why) != 0)
            fail_msg("%s", why);
        assert_string_equal(back->clock_domain, KT_CLOCK_HOST);
        assert_memory_equal(&back->clock_anchor, &m->clock_anchor, sizeof m->clock_anchor);
        assert_string_equal(back->sources[order ? 0 : 1].clock_domain, KT_CLOCK_MONO);
        assert_int_equal(span_of(back, "pass")->uncertainty_ns, 9 + 40 + 500001);
        kt_snapshot_free(back);
        free(text);
        kt_snapshot_free(m);
    }
    kt_snapshot_free(c);
    kt_snapshot_free(node);
}

/* Where no anchor serves: offset 0 and the bound unknown (UINT64_MAX) on the Node source and its spans' bound
 * left as it was; files that state no clock merge as before anchors. */
static void test_merge_unaligned(void **state)
{
    (void)state;
    const struct {
        const char *c_host, *c_domain, *c_anchor, *n_host, *n_domain;
        uint64_t n_bound; /* expected offset_bound_ns of the Node source */
    } cases[] = {
        {"box", KT_CLOCK_HOST, NULL, "box", KT_CLOCK_MONO, UINT64_MAX},           /* C file without an anchor */
        {"box", KT_CLOCK_HOST, ANCHOR, "other", KT_CLOCK_MONO, UINT64_MAX},       /* another host's anchor */
        {"box", KT_CLOCK_HOST, ANCHOR, "box", "performance.now", UINT64_MAX},     /* a browser's clock */
        {"box", "", NULL, "box", KT_CLOCK_MONO, 0},                               /* an old C file: as before */
        {"box", KT_CLOCK_HOST, ANCHOR, "box", "", 0},                             /* an old Node file: as before */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kt_snapshot_t *c = one_span(cases[i].c_host, 10, "c_kernel", "opencl", 5000000000ull, 1000, 7,
                                    cases[i].c_domain, cases[i].c_anchor);
        kt_snapshot_t *node = one_span(cases[i].n_host, 11, "pass", "webgpu", 3000000000ull, 100, 9,
                                       cases[i].n_domain, NULL);
        const kt_snapshot_t *in[2] = {c, node};
        kt_snapshot_t *m = NULL;
        assert_int_equal(kt_snapshot_merge(in, 2, NULL, &m), 0);
        const kt_span_t *p = span_of(m, "pass");
        if (m->sources[1].offset_bound_ns != cases[i].n_bound || m->sources[1].offset_ns != 0 ||
            p->start_ns != 3000000000ull)
            fail_msg("case %zu: offset %lld bound %llu start %llu", i, (long long)m->sources[1].offset_ns,
                     (unsigned long long)m->sources[1].offset_bound_ns, (unsigned long long)p->start_ns);
        assert_int_equal(p->uncertainty_ns, 9); /* nothing added: unknown, or the same clock (bound 0) */
        assert_string_equal(m->sources[1].clock_domain, cases[i].n_domain);
        kt_snapshot_free(m);
        kt_snapshot_free(c);
        kt_snapshot_free(node);
    }
}

/* The MPI gather gives its own offsets: those are used, the anchor is not. */
static void test_merge_given_offsets(void **state)
{
    (void)state;
    kt_snapshot_t *c = one_span("box", 10, "c_kernel", "opencl", 5000000000ull, 1000, 7, KT_CLOCK_HOST, ANCHOR);
    kt_snapshot_t *node = one_span("box", 11, "pass", "webgpu", 3000000000ull, 100, 9, KT_CLOCK_MONO, NULL);
    const kt_snapshot_t *in[2] = {c, node};
    const int64_t off[2] = {0, 500};
    const uint64_t bound[2] = {0, 3};
    kt_snapshot_t *m = NULL;
    assert_int_equal(kt_snapshot_merge(in, 2, &(kt_merge_opts_t){.offset_ns = off, .bound_ns = bound}, &m), 0);
    assert_int_equal(span_of(m, "pass")->start_ns, 3000000500ull);
    assert_int_equal(span_of(m, "pass")->uncertainty_ns, 9 + 3);
    assert_int_equal(m->sources[1].offset_ns, 500);
    kt_snapshot_free(m);
    kt_snapshot_free(c);
    kt_snapshot_free(node);
}

/* A malformed anchor is refused with its member's name. */
static void test_anchor_parse(void **state)
{
    (void)state;
    const char *bad[] = {
        "{\"schema\": \"ktiming.snapshot\", \"version\": 5, \"entries\": [], \"clock_anchor\": 3}",
        "{\"schema\": \"ktiming.snapshot\", \"version\": 5, \"entries\": [], \"clock_anchor\": {\"host_ns\": 1, "
        "\"monotonic_ns\": 2}}",
        "{\"schema\": \"ktiming.snapshot\", \"version\": 5, \"entries\": [], \"clock_anchor\": {\"host_ns\": 0, "
        "\"monotonic_ns\": 2, \"bound_ns\": 1}}",
    };
    const char *want[] = {"clock_anchor: expected an object", "clock_anchor.bound_ns: missing",
                          "clock_anchor: host_ns and monotonic_ns must be non-zero"};
    for (size_t i = 0; i < 3; i++) {
        kt_snapshot_t *s = NULL;
        char why[256] = "";
        assert_int_equal(kt_snapshot_parse(bad[i], strlen(bad[i]), &s, why, sizeof why), KT_EPARSE);
        if (!strstr(why, want[i]))
            fail_msg("case %zu: '%s', expected '%s'", i, why, want[i]);
    }
}

/* A snapshot of this process states its clock and carries an anchor whose pair is consistent with the clocks
 * read around it (order only: the anchor's CLOCK_MONOTONIC lies between two readings of it). */
static void test_snapshot_has_anchor(void **state)
{
    (void)state;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t before = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    kt_snapshot_t *s = kt_snapshot();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t after = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    assert_non_null(s);
    assert_string_equal(s->clock_domain, KT_CLOCK_HOST);
    assert_true(s->clock_anchor.host_ns != 0);
    assert_true(before <= s->clock_anchor.monotonic_ns && s->clock_anchor.monotonic_ns <= after);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anchor_take),         cmocka_unit_test(test_anchor_bound),
        cmocka_unit_test(test_merge_through_anchor), cmocka_unit_test(test_merge_unaligned),
        cmocka_unit_test(test_merge_given_offsets), cmocka_unit_test(test_anchor_parse),
        cmocka_unit_test(test_snapshot_has_anchor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
