/* test_run_vulkan.c — `ktiming run` on an unmodified Vulkan program (vkprog, which loads Vulkan with dlopen and
 * fetches every function through vkGet*ProcAddr): the timing layer names and counts every dispatch, places it
 * on the host timeline, leaves the program's stdout and status alone, and the Khronos validation layer (enabled
 * by the program, below ours) reports nothing. Exits 77 when there is no Vulkan device. */
#include "run_util.h"

#include <inttypes.h>

#ifdef KT_RUN_VULKAN_THREADS_ONLY /* one case registered: the others are compiled, not run */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

#define ITERATIONS 4

static const kt_kernel_timing_t *entry(const kt_snapshot_t *s, const char *name)
{
    const kt_kernel_timing_t *e = ru_find(s, name, KT_BACKEND_VULKAN);
    if (!e)
        fail_msg("kernel %s not in the snapshot", name);
    return e;
}

static int is_batch(const kt_snapshot_t *s, const kt_span_t *sp)
{
    return !strcmp(s->entries[sp->entry].name, "vkQueueSubmit");
}

/* How many batch spans ("vkQueueSubmit") of its queue sp lies inside; for the failure message, *before gets the
 * last batch starting at or before it and *after the first one starting after it. */
static int batches_holding(const kt_snapshot_t *s, const kt_span_t *sp, const kt_span_t **before,
                           const kt_span_t **after)
{
    int n = 0;
    *before = *after = NULL;
    for (size_t k = 0; k < s->span_count; k++) {
        const kt_span_t *b = &s->spans[k];
        if (!is_batch(s, b) || b->queue != sp->queue)
            continue;
        n += b->start_ns <= sp->start_ns && sp->end_ns <= b->end_ns;
        if (b->start_ns <= sp->start_ns && (!*before || b->start_ns >= (*before)->start_ns))
            *before = b;
        if (b->start_ns > sp->start_ns && (!*after || b->start_ns < (*after)->start_ns))
            *after = b;
    }
    return n;
}

/* Every Vulkan span is a device span placed on the host timeline after its enqueue (within its bound); every
 * dispatch span lies inside the span of the batch that ran it (every execution is timed per submission). */
static void assert_spans(const kt_snapshot_t *s, size_t expected)
{
    size_t n = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (s->entries[sp->entry].backend != KT_BACKEND_VULKAN || is_batch(s, sp))
            continue;
        const kt_span_t *b, *a;
        int held = batches_holding(s, sp, &b, &a);
        if (held != 1) {
            /* what the batches' entry counted, dropped ones by reason */
            const kt_kernel_timing_t *sub = ru_find(s, "vkQueueSubmit", KT_BACKEND_VULKAN);
            char drops[256] = "";
            size_t dn = 0;
            for (int r = 0; sub && r < KT_DROP_REASON_COUNT && dn < sizeof drops - 48; r++)
                if (sub->dropped_by[r])
                    dn += (size_t)snprintf(drops + dn, sizeof drops - dn, " %s %" PRIu64 ";",
                                           kt_drop_reason_name((kt_drop_reason_t)r), sub->dropped_by[r]);
            fail_msg("span %zu of %s [%" PRIu64 ", %" PRIu64 "] (+-%" PRIu64 " ns, enqueued %" PRIu64 ") is inside %d "
                     "batch spans; batches around it [%" PRIu64 ", %" PRIu64 "] and [%" PRIu64 ", %" PRIu64 "]; "
                     "vkQueueSubmit: %" PRIu64 " batches, dropped:%s",
                     i, s->entries[sp->entry].name, sp->start_ns, sp->end_ns, sp->uncertainty_ns, sp->enqueue_ns,
                     held, b ? b->start_ns : 0, b ? b->end_ns : 0, a ? a->start_ns : 0, a ? a->end_ns : 0,
                     sub ? sub->dispatch_count : 0, drops[0] ? drops : " none");
        }
        n++;
        assert_true(sp->flags & KT_SPAN_DEVICE);
        assert_true(sp->start_ns > 0 && sp->end_ns >= sp->start_ns);
        assert_true(sp->enqueue_ns > 0);
        /* recorded into the command buffer before the submit, so it starts after the enqueue (with the bound) */
        assert_true(sp->start_ns + sp->uncertainty_ns >= sp->enqueue_ns);
    }
    assert_int_equal(n, expected);
}

static void test_dispatches(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    /* "vadd": the entry point's name; "scale": the pipeline's VK_EXT_debug_utils name (its entry is "main") */
    const kt_kernel_timing_t *vadd = entry(s, "vadd"), *scale = entry(s, "scale");
    assert_int_equal(vadd->dispatch_count, ITERATIONS);
    assert_int_equal(scale->dispatch_count, ITERATIONS);
    assert_int_equal(vadd->dropped + scale->dropped, 0);
    assert_true(vadd->min_ns > 0 && scale->min_ns > 0);
    assert_null(ru_find(s, "main", KT_BACKEND_VULKAN));
    assert_spans(s, 2 * ITERATIONS);
    kt_snapshot_free(s);
}

/* With the validation layer on (vkprog exits 3 on any warning or error) and a command buffer recorded once and
 * submitted 3 (or 100) times: every execution timed, one batch span per submission, nothing dropped. */
static void resubmit_case(const char *times, int n)
{
    const char *prog[] = {VKPROG, "--validation", "--resubmit", times, NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *vadd = entry(s, "vadd"), *scale = entry(s, "scale"), *b = entry(s, "vkQueueSubmit");
    assert_int_equal(vadd->dispatch_count, ITERATIONS);
    assert_int_equal(scale->dispatch_count, ITERATIONS + n);
    assert_int_equal(b->dispatch_count, ITERATIONS + n);
    assert_int_equal(vadd->dropped + scale->dropped + b->dropped, 0);
    assert_spans(s, 2 * ITERATIONS + (size_t)n);
    /* host API time: each submission and the fence wait after it, and the one vkDeviceWaitIdle at the end, are
     * entries of backend host-api with one span each on the program's thread (no queue) */
    const kt_kernel_timing_t *submit = ru_find(s, "vkQueueSubmit", KT_BACKEND_HOST_API),
                             *wait = ru_find(s, "vkWaitForFences", KT_BACKEND_HOST_API),
                             *idle = ru_find(s, "vkDeviceWaitIdle", KT_BACKEND_HOST_API);
    assert_non_null(submit);
    assert_non_null(wait);
    assert_non_null(idle);
    assert_int_equal(submit->dispatch_count, b->dispatch_count);
    assert_int_equal(wait->dispatch_count, b->dispatch_count);
    assert_int_equal(idle->dispatch_count, 1);
    size_t host_spans = 0;
    for (size_t i = 0; i < s->span_count; i++)
        if (s->entries[s->spans[i].entry].backend == KT_BACKEND_HOST_API) {
            host_spans++;
            assert_int_equal(s->spans[i].queue, UINT32_MAX);
            assert_false(s->spans[i].flags & KT_SPAN_DEVICE);
        }
    assert_int_equal(host_spans, 2 * b->dispatch_count + 1);
    kt_snapshot_free(s);
}

static void test_validation_and_reuse(void **state)
{
    (void)state;
    resubmit_case("3", 3);
    resubmit_case("100", 100);
    /* the same through vkQueueSubmit2 (a 1.3 device with synchronization2) */
    const char *prog2[] = {VKPROG, "--validation", "--api", "1.3", "--resubmit", "5", "--submit2", NULL};
    kt_snapshot_t *s2 = ru_run_both(prog2, NULL);
    assert_non_null(s2);
    assert_int_equal(entry(s2, "scale")->dispatch_count, ITERATIONS + 5);
    assert_int_equal(entry(s2, "scale")->dropped, 0);
    assert_int_equal(entry(s2, "vkQueueSubmit")->dispatch_count, ITERATIONS + 5);
    assert_spans(s2, 2 * ITERATIONS + 5);
    kt_snapshot_free(s2);
    /* KTIMING_VULKAN_ONCE: the recording is timed once, its re-executions counted as dropped, re-executed */
    setenv("KTIMING_VULKAN_ONCE", "1", 1);
    const char *prog[] = {VKPROG, "--validation", "--reuse", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    unsetenv("KTIMING_VULKAN_ONCE");
    assert_non_null(s);
    const kt_kernel_timing_t *scale = entry(s, "scale");
    assert_int_equal(scale->dispatch_count, ITERATIONS + 1);
    assert_int_equal(scale->dropped_by[KT_DROP_RESUBMITTED], 2);
    assert_null(ru_find(s, "vkQueueSubmit", KT_BACKEND_VULKAN));
    kt_snapshot_free(s);
}

/* A SIMULTANEOUS_USE recording submitted 3 times: its executions may overlap, so its dispatches are counted as
 * dropped with that reason at every submission; each batch still has its span. */
static void test_simultaneous_use(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--validation", "--reuse", "--simultaneous", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *scale = entry(s, "scale"), *b = entry(s, "vkQueueSubmit");
    assert_int_equal(scale->dispatch_count, ITERATIONS);
    assert_int_equal(scale->dropped, 3);
    assert_int_equal(scale->dropped_by[KT_DROP_SIMULTANEOUS_USE], 3);
    assert_int_equal(b->dispatch_count, ITERATIONS + 3);
    kt_snapshot_free(s);
}

/* A SIMULTANEOUS_USE secondary (as recording it 4 times into one primary requires) is not timed: pending in
 * several primaries at once its executions would share its queries (docs/vulkan.md). Each of its 4 occurrences
 * counts as dropped, simultaneous-use, in both modes; the rest is timed, each span inside its batch. */
static void test_secondary_executed_4_times(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--validation", "--secondary", "4", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *scale = entry(s, "scale");
    assert_int_equal(scale->dispatch_count, ITERATIONS);
    assert_int_equal(scale->dropped_by[KT_DROP_SIMULTANEOUS_USE], 4);
    assert_spans(s, 2 * ITERATIONS);
    kt_snapshot_free(s);
    setenv("KTIMING_VULKAN_ONCE", "1", 1);
    s = ru_run_both(prog, NULL);
    unsetenv("KTIMING_VULKAN_ONCE");
    assert_non_null(s);
    scale = entry(s, "scale");
    assert_int_equal(scale->dispatch_count, ITERATIONS);
    assert_int_equal(scale->dropped_by[KT_DROP_SIMULTANEOUS_USE], 4);
    kt_snapshot_free(s);
}

/* A pipeline named with VK_EXT_debug_marker (here provided by the validation layer below ours) is timed under
 * that name. */
static void test_debug_marker_name(void **state)
{
    (void)state;
    char *probe[] = {VKPROG, "--validation", "--debug-marker", "--iterations", "1", NULL};
    int st = -1;
    free(ru_run(probe, &st));
    if (st == 77) {
        fprintf(stderr, "VK_EXT_debug_marker not available: case skipped\n");
        return;
    }
    const char *prog[] = {VKPROG, "--validation", "--debug-marker", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    assert_int_equal(entry(s, "scale_marker")->dispatch_count, ITERATIONS);
    assert_null(ru_find(s, "scale", KT_BACKEND_VULKAN));
    kt_snapshot_free(s);
}

/* apiVersion 1.0 .. 1.3, with and without VK_KHR_get_physical_device_properties2: the validation layer reports
 * nothing (vkprog exits 3 otherwise) -- the layer enables VK_EXT_calibrated_timestamps only where its dependency
 * holds -- and every dispatch is timed and placed. */
static void test_api_versions(void **state)
{
    (void)state;
    static const char *const kApis[] = {"1.0", "1.1", "1.2", "1.3"};
    for (int a = 0; a < 4; a++)
        for (int props2 = 0; props2 < 2; props2++) {
            const char *prog[] = {VKPROG, "--validation", "--api", kApis[a], props2 ? "--props2" : NULL, NULL};
            kt_snapshot_t *s = ru_run_both(prog, NULL);
            assert_non_null(s);
            const kt_kernel_timing_t *vadd = entry(s, "vadd"), *scale = entry(s, "scale");
            assert_int_equal(vadd->dispatch_count, ITERATIONS);
            assert_int_equal(scale->dispatch_count, ITERATIONS);
            assert_int_equal(vadd->dropped + scale->dropped, 0);
            /* placed on the host timeline in every case: by calibrated timestamps where the layer may enable
             * them, else by bracketed samples of the layer's own submitted inside the program's vkQueueSubmit */
            assert_spans(s, 2 * ITERATIONS);
            kt_snapshot_free(s);
        }
}

/* The program destroys its device with N dispatches in flight: no crash (the layer waits for its own reads
 * before freeing), every dispatch recorded. */
/* Two VkDevices of one physical device, each driven by its own thread at the same time: one device (issue 34),
 * so every dispatch is timed under its one name, the bare model (no "#2"), with one device record; the two
 * VkDevices' queues are two queue tracks. Under the validation layer (a message makes vkprog exit 3). Before:
 * the second VkDevice was another device, "<name> #2". */
static void test_two_devices(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--validation", "--devices", "2", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    uint32_t queues[2] = {UINT32_MAX, UINT32_MAX};
    for (int k = 0; k < 2; k++) {
        const kt_kernel_timing_t *e = entry(s, k ? "scale" : "vadd");
        assert_null(strstr(e->device, " #"));
        assert_int_equal(e->dispatch_count, 2 * ITERATIONS);
        assert_int_equal(e->dropped, 0);
        size_t idx = (size_t)(e - s->entries);
        for (size_t i = 0; i < s->span_count; i++) {
            if (s->spans[i].entry != idx)
                continue;
            uint32_t q = s->spans[i].queue;
            assert_true(q != UINT32_MAX);
            if (queues[0] == UINT32_MAX || queues[0] == q)
                queues[0] = q;
            else if (queues[1] == UINT32_MAX || queues[1] == q)
                queues[1] = q;
            else
                fail_msg("a third queue track %u", q);
        }
    }
    assert_true(queues[0] != UINT32_MAX && queues[1] != UINT32_MAX); /* one track per VkDevice's queue */
    size_t vulkan_devices = 0;
    for (size_t i = 0; i < s->device_count; i++)
        vulkan_devices += s->devices[i].backend == KT_BACKEND_VULKAN;
    assert_int_equal(vulkan_devices, 1);
    assert_spans(s, 4 * ITERATIONS);
    kt_snapshot_free(s);
}

/* Three VkDevices of one physical device created one after another (each destroyed before the next): one device,
 * every dispatch under the bare model name, on one queue track. Before: "<name>", "<name> #2", "<name> #3". */
static void test_devices_one_after_another(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--devices", "3", "--sequential", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    for (int k = 0; k < 2; k++) {
        const kt_kernel_timing_t *e = entry(s, k ? "scale" : "vadd");
        assert_null(strstr(e->device, " #"));
        assert_int_equal(e->dispatch_count, 3 * ITERATIONS);
    }
    size_t vulkan_devices = 0;
    for (size_t i = 0; i < s->device_count; i++)
        vulkan_devices += s->devices[i].backend == KT_BACKEND_VULKAN;
    assert_int_equal(vulkan_devices, 1);
    kt_snapshot_free(s);
}

/* Two threads record and submit on one device while a third creates, renames and destroys pipelines: every
 * dispatch is timed under its name, none dropped, the churned pipelines (never dispatched) leave no entry. The
 * layer's hot path finds devices and command buffers through per-thread caches; this is the case where a stale
 * or shared cache would misname or lose dispatches (and where TSan, on an instrumented build, sees the races). */
static void test_record_threads(void **state)
{
    (void)state;
    enum { T = 2, IT = 25 };
    char its[16];
    snprintf(its, sizeof its, "%d", IT);
    const char *prog[] = {VKPROG, "--validation", "--record-threads", "2", "--iterations", its, NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *vadd = entry(s, "vadd"), *scale = entry(s, "scale");
    assert_int_equal(vadd->dispatch_count, IT);
    assert_int_equal(scale->dispatch_count, IT + T * IT);
    assert_int_equal(vadd->dropped + scale->dropped, 0);
    assert_null(ru_find(s, "churn_a", KT_BACKEND_VULKAN));
    assert_null(ru_find(s, "churn_b", KT_BACKEND_VULKAN));
    assert_spans(s, 2 * IT + T * IT);
    kt_snapshot_free(s);
}

static void test_destroy_in_flight(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--in-flight", "destroy", "--iterations", "12", "--size", "262144", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *vadd = entry(s, "vadd");
    assert_int_equal(vadd->dispatch_count, 12);
    assert_int_equal(vadd->dropped, 0);
    kt_snapshot_free(s);
}

/* KTIMING_VULKAN_QUERIES sizes the layer's ring (issue 37.2): with 16, one recording of 20 dispatches gets 16 of
 * them timed and the other 4 counted dropped, `ring full`, and its batch span too (no slot left for it); the
 * default, 4096, times all 20 (as test_destroy_in_flight). A value out of 16..1048576 is refused on stderr and the
 * default used. Before (9fbb4ef) the variable did not exist: all 20 timed. */
static void test_ring_size_env(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--in-flight", "destroy", "--iterations", "20", NULL};
    setenv("KTIMING_VULKAN_QUERIES", "16", 1);
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    unsetenv("KTIMING_VULKAN_QUERIES");
    assert_non_null(s);
    const kt_kernel_timing_t *vadd = entry(s, "vadd"), *batch = entry(s, "vkQueueSubmit");
    assert_int_equal(vadd->dispatch_count, 16);
    assert_int_equal(vadd->dropped, 4);
    assert_int_equal(vadd->dropped_by[KT_DROP_RING_FULL], 4);
    assert_int_equal(batch->dispatch_count, 0);
    assert_int_equal(batch->dropped_by[KT_DROP_RING_FULL], 1);
    kt_snapshot_free(s);

    char *out = ru_path("out.json"), *err = ru_path("err.txt");
    char *argv[] = {KT_CLI, "run", "-o", out, "--", VKPROG, "--in-flight", "destroy", "--iterations", "20", NULL};
    const char *const env[] = {"KTIMING_VULKAN_QUERIES=8", NULL};
    ktt_spawn_t how = {.out = KTT_DEVNULL, .err = err, .env = env};
    assert_int_equal(ktt_run(argv, &how), 0);
    char *text = ktt_read_file(err, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "KTIMING_VULKAN_QUERIES=8 is not a number of dispatches in 16..1048576"));
    free(text);
    char msg[256];
    if (kt_snapshot_load(out, NULL, &s, msg, sizeof msg) != 0)
        fail_msg("snapshot: %s", msg);
    vadd = entry(s, "vadd");
    assert_int_equal(vadd->dispatch_count, 20);
    assert_int_equal(vadd->dropped, 0);
    kt_snapshot_free(s);
}

/* The program returns from main with N dispatches never waited for: at exit they are waited for (bounded) and
 * recorded, or counted as dropped with the reason "in flight at exit" -- never lost. With
 * KTIMING_EXIT_WAIT_MS=0 nothing is waited for: the same sum holds. */
static void exit_case(const char *wait_ms)
{
    setenv("KTIMING_EXIT_WAIT_MS", wait_ms, 1);
    const char *prog[] = {VKPROG, "--in-flight", "exit", "--iterations", "12", "--size", "262144", NULL};
    kt_snapshot_t *s = ru_run_both(prog, NULL);
    unsetenv("KTIMING_EXIT_WAIT_MS");
    assert_non_null(s);
    const kt_kernel_timing_t *vadd = entry(s, "vadd");
    assert_int_equal(vadd->dispatch_count + vadd->dropped, 12);
    assert_int_equal(vadd->dropped, vadd->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT]);
    kt_snapshot_free(s);
}

static void test_exit_in_flight(void **state)
{
    (void)state;
    exit_case("2000");
    exit_case("0");
}

/* A loader older than 1.3.207 ignores VK_ADD_LAYER_PATH: `ktiming run` says so on stderr instead of timing
 * nothing silently (a stand-in loader reports 1.3.200; the program itself runs on the real one). */
static void test_old_loader_warns(void **state)
{
    (void)state;
    setenv("KTIMING_VULKAN_LIBRARY", FAKE_VKLOADER, 1);
    char *argv[] = {"/bin/sh", "-c", "exec \"$0\" run -- \"$1\" --iterations 1 2>&1", KT_CLI, VKPROG, NULL};
    int st = -1;
    char *out = ru_run(argv, &st); /* stdout and stderr */
    assert_int_equal(st, 0);
    unsetenv("KTIMING_VULKAN_LIBRARY");
    assert_non_null(strstr(out, "older than 1.3.207"));
    free(out);
}

/* The name of the one Vulkan entry starting with "main#", or NULL. */
static char *main_hash_name(const kt_snapshot_t *s)
{
    char *found = NULL;
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_VULKAN && !strncmp(s->entries[i].name, "main#", 5)) {
            assert_null(found);
            assert_int_equal(s->entries[i].dispatch_count, ITERATIONS);
            found = strdup(s->entries[i].name);
        }
    return found;
}

/* A pipeline with entry point "main" and no debug name is named after its SPIR-V content: the same in two runs. */
static void test_stable_unnamed(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, "--unnamed", NULL};
    char *names[2];
    for (int run = 0; run < 2; run++) {
        kt_snapshot_t *s = ru_run_both(prog, NULL);
        assert_non_null(s);
        names[run] = main_hash_name(s);
        assert_non_null(names[run]);
        assert_null(ru_find(s, "scale", KT_BACKEND_VULKAN));
        kt_snapshot_free(s);
    }
    assert_string_equal(names[0], names[1]);
    assert_int_equal(strlen(names[0]), strlen("main#") + 8);
    free(names[0]);
    free(names[1]);
}

/* -v: one line per Vulkan dispatch on stderr (stdout stays the program's). */
static void test_verbose_lines(void **state)
{
    (void)state;
    char *argv[] = {"/bin/sh", "-c", "exec \"$0\" run -v -- \"$1\" 2>&1 >/dev/null", KT_CLI, VKPROG, NULL};
    int st = -1;
    char *err = ru_run(argv, &st); /* stderr only */
    assert_int_equal(st, 0);
    int lines = 0;
    for (const char *p = err; (p = strstr(p, "ktiming,exec,vulkan,")) != NULL; p++)
        lines++;
    assert_int_equal(lines, 2 * ITERATIONS);
    free(err);
}

/* --vulkan off: nothing timed, the program unchanged. */
static void test_off(void **state)
{
    (void)state;
    const char *prog[] = {VKPROG, NULL};
    const char *k[] = {"--vulkan", "off", NULL};
    assert_null(ru_run_both(prog, k));
}

/* Teardown of the tests that set a variable for the runs they make: a failed assertion leaves the test before its
 * unsetenv, and the variable would change every later test's runs (KTIMING_VULKAN_ONCE made test_record_threads
 * fail after a failure of test_secondary_executed_4_times). */
static int clear_env(void **state)
{
    (void)state;
    static const char *const vars[] = {"KTIMING_VULKAN_ONCE", "KTIMING_VULKAN_QUERIES", "KTIMING_EXIT_WAIT_MS",
                                       "KTIMING_VULKAN_LIBRARY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

int main(void)
{
    char *probe[] = {VKPROG, "--iterations", "1", "--size", "64", NULL};
    int st = -1;
    free(ru_run(probe, &st));
    if (st == 77) {
        fprintf(stderr, "test_run_vulkan: no Vulkan device, skipping\n");
        return 77;
    }
    if (ru_setup() != 0)
        return 1;
#ifdef KT_RUN_VULKAN_THREADS_ONLY /* test_run_vulkan_threads: the multi-threaded case alone (for TSan builds) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_threads),
    };
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatches),
        cmocka_unit_test_teardown(test_validation_and_reuse, clear_env),
        cmocka_unit_test(test_simultaneous_use),
        cmocka_unit_test(test_api_versions),
        cmocka_unit_test(test_two_devices),
        cmocka_unit_test(test_devices_one_after_another),
        cmocka_unit_test_teardown(test_secondary_executed_4_times, clear_env),
        cmocka_unit_test(test_record_threads),
        cmocka_unit_test(test_destroy_in_flight),
        cmocka_unit_test_teardown(test_ring_size_env, clear_env),
        cmocka_unit_test_teardown(test_exit_in_flight, clear_env),
        cmocka_unit_test_teardown(test_old_loader_warns, clear_env),
        cmocka_unit_test(test_stable_unnamed),
        cmocka_unit_test(test_debug_marker_name),
        cmocka_unit_test(test_verbose_lines),
        cmocka_unit_test(test_off),
    };
#endif
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ru_teardown();
    return rc;
}
