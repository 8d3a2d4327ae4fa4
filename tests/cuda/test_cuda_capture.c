/* test_cuda_capture.c — graph capture: a span begun on a capturing stream is skipped and counted ("graph
 * capture"), never turned into a capture error; the collector thread polls with its capture mode relaxed, so a
 * global-mode capture elsewhere is not invalidated; a span around a graph launch is one dispatch; every other
 * ktiming call on the program's threads (flush, snapshot, timer, %globaltimer, held stream) runs relaxed too, and the
 * legacy stream beside a capture (906) is skipped, not failed. */
#include "cuda_test_util.h"

#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <semaphore.h>

struct CUgraph_st;
struct CUgraphExec_st;
int cuStreamBeginCapture_v2(struct CUstream_st *s, int mode);
int cuStreamEndCapture(struct CUstream_st *s, struct CUgraph_st **g);
int cuGraphInstantiateWithFlags(struct CUgraphExec_st **x, struct CUgraph_st *g, unsigned long long flags);
int cuGraphLaunch(struct CUgraphExec_st *x, struct CUstream_st *s);
int cuGraphExecDestroy(struct CUgraphExec_st *x);
int cuGraphDestroy(struct CUgraph_st *g);

int cuThreadExchangeStreamCaptureMode(int *mode);
int cuMemAlloc_v2(unsigned long long *dptr, size_t bytes);
int cuMemFree_v2(unsigned long long dptr);

enum { MODE_GLOBAL = 0, MODE_RELAXED = 2 };
enum { CAPTURE_UNSUPPORTED = 900, CAPTURE_INVALIDATED = 901 };

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return kt_cuda_init(NULL);
}

static void test_span_on_capturing_stream_is_skipped(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(cuStreamBeginCapture_v2(s, MODE_GLOBAL), 0);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "captured"), 0);
    assert_int_equal(kt_test_cuda_driver_work(s, 1000, 1), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    struct CUgraph_st *g = NULL;
    assert_int_equal(cuStreamEndCapture(s, &g), 0); /* the capture is intact */
    assert_int_equal(cuGraphDestroy(g), 0);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "captured");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->errors, 0);
    assert_int_equal(e->dropped_by[KT_DROP_GRAPH_CAPTURE], 1);
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

/* A global-mode capture opened on cap, and one span named `name` ended on work, which the driver holds (the
 * dispatch stays pending); *before: the driver's counters once the capture is open. */
static void span_beside_capture(struct CUstream_st *cap, struct CUstream_st *work, const char *name,
                                kt_test_cuda_stats_t *before)
{
    assert_int_equal(kt_test_cuda_driver_hold(work, 1), 0);
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_GLOBAL), 0);
    kt_test_cuda_driver_stats(before);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, work, name), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
}

static void test_collector_does_not_break_a_global_capture(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    struct CUstream_st *work = kt_test_stream();
    kt_test_cuda_stats_t before, now;
    span_beside_capture(cap, work, "beside-capture", &before);
    /* Let the collector poll the held stream's event a few times while the capture is open. */
    int polled = 0;
    for (int i = 0; i < 5000 && !polled; i++) {
        kt_test_cuda_driver_stats(&now);
        polled = now.event_queries - before.event_queries >= 3;
        if (!polled)
            kt_test_sleep_ms(1);
    }
    assert_true(polled);
    struct CUgraph_st *g = NULL;
    assert_int_equal(cuStreamEndCapture(cap, &g), 0); /* not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
    kt_test_cuda_driver_stats(&now);
    assert_int_equal(now.capture_violations, before.capture_violations);
    assert_int_equal(cuGraphDestroy(g), 0);
    assert_int_equal(kt_test_cuda_driver_hold(work, 0), 0);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "beside-capture");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
    assert_int_equal(cuStreamDestroy_v2(work), 0);
}

/* Issue 36.1: every ktiming call a program makes while a graph is captured in global mode (PyTorch's CUDA graphs
 * do this on one thread while others run) — a span, kt_flush, kt_snapshot, the timer, the %globaltimer (module
 * load, allocation), the held stream (mapped host memory), kt_cuda_calibrate, kt_cuda_slots_create and _destroy,
 * and a sync-mode end (the backend set up again with desc.sync, still inside the capture) — leaves the capture
 * valid and records the healthy dispatches (not as errors). */
static void test_program_calls_keep_a_global_capture(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    struct CUstream_st *work = kt_test_stream();
    kt_test_cuda_stats_t before, now;
    span_beside_capture(cap, work, "program-thread", &before);
    kt_flush(); /* the dispatch is still pending (held): its event is queried from this thread */
    kt_snapshot_free(kt_snapshot());
    assert_int_equal(kt_test_cuda_driver_hold(work, 0), 0);
    kt_cuda_timer_t t;
    assert_int_equal(kt_cuda_timer_init(&t, g_ctx, work), 0);
    kt_cuda_timer_start(&t);
    assert_int_equal(kt_test_cuda_driver_work(work, 1000, 0), 0);
    kt_cuda_timer_stop(&t);
    double ms = -1.0;
    assert_int_equal(kt_cuda_timer_elapsed(&t, &ms), 0);
    kt_cuda_timer_destroy(&t);
    uint64_t gt = 0;
    assert_int_equal(kt_cuda_globaltimer_read(g_ctx, &gt), 0);
    kt_cuda_held_t h = {.ctx = g_ctx, .stream = work, .enqueue = kt_test_enqueue_work};
    uint64_t held_ns = 0;
    assert_int_equal(kt_cuda_time_held(&h, 4, &held_ns), 0);
    assert_int_equal(kt_cuda_calibrate(g_ctx, 16, KT_FIT_WEIGHTED, NULL, NULL), 0);
    kt_cuda_slots_t *slots = NULL;
    assert_int_equal(kt_cuda_slots_create(&slots, g_ctx, 2), 0);
    kt_cuda_slots_destroy(slots);
    kt_flush();
    kt_cuda_shutdown(); /* sync mode is the backend's setting: set up again with it */
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.sync = 1}), 0);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, work, "sync-end"), 0);
    assert_int_equal(kt_test_cuda_driver_work(work, 1000, 0), 0);
    assert_int_equal(kt_cuda_end(&span), 0); /* waits for its own pair and records it */
    kt_test_cuda_driver_stats(&now);
    assert_int_equal(now.capture_violations, before.capture_violations);
    struct CUgraph_st *g = NULL;
    assert_int_equal(cuStreamEndCapture(cap, &g), 0); /* not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) */
    assert_int_equal(cuGraphDestroy(g), 0);
    kt_snapshot_t *snap = kt_snapshot();
    const char *names[] = {"program-thread", "sync-end"};
    for (int i = 0; i < 2; i++) {
        const kt_kernel_timing_t *e = kt_test_find(snap, names[i]);
        assert_non_null(e);
        assert_int_equal(e->errors, 0);
        assert_int_equal(e->dispatch_count, 1);
    }
    kt_snapshot_free(snap);
    kt_cuda_shutdown(); /* the later tests run asynchronously again */
    assert_int_equal(kt_cuda_init(NULL), 0);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
    assert_int_equal(cuStreamDestroy_v2(work), 0);
}

/* A span on the legacy stream while a blocking stream captures: cuStreamIsCapturing answers
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906) there, and the span is skipped as captured, not failed. */
static void test_legacy_stream_beside_a_capture_is_skipped(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_GLOBAL), 0);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, NULL, "legacy-beside-capture"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    struct CUgraph_st *g = NULL;
    assert_int_equal(cuStreamEndCapture(cap, &g), 0);
    assert_int_equal(cuGraphDestroy(g), 0);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "legacy-beside-capture");
    assert_non_null(e);
    assert_int_equal(e->errors, 0);
    assert_int_equal(e->dropped_by[KT_DROP_GRAPH_CAPTURE], 1);
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
}

/* A global-mode capture on a thread of its own, as a program's capturing thread: begun, then ended when told. */
typedef struct capturer_t {
    struct CUstream_st *stream; /* a blocking stream it captures */
    sem_t begun, end;           /* it has begun / it may end */
    int end_result;             /* cuStreamEndCapture's answer */
} capturer_t;

static void *capture_thread(void *arg)
{
    capturer_t *c = arg;
    cuCtxPushCurrent_v2(g_ctx);
    int rc = cuStreamBeginCapture_v2(c->stream, MODE_GLOBAL);
    sem_post(&c->begun);
    sem_wait(&c->end);
    struct CUgraph_st *g = NULL;
    c->end_result = rc ? -1 : cuStreamEndCapture(c->stream, &g);
    if (g)
        cuGraphDestroy(g);
    struct CUctx_st *popped;
    cuCtxPopCurrent_v2(&popped);
    return NULL;
}

/* What the program's enqueue callback saw of its own capture-unsafe call (an allocation). */
typedef struct unsafe_job_t {
    uint32_t calls;
    uint32_t alloc_failures; /* answered CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, as in global mode */
    uint32_t alloc_ok;       /* answered success: the call ran in ktiming's relaxed mode */
} unsafe_job_t;

static int enqueue_unsafe(void *user, struct CUstream_st *stream, uint32_t trials)
{
    unsafe_job_t *j = user;
    j->calls++;
    unsigned long long p = 0;
    int r = cuMemAlloc_v2(&p, 16);
    if (r == 0) {
        j->alloc_ok++;
        cuMemFree_v2(p);
    } else if (r == CAPTURE_UNSUPPORTED) {
        j->alloc_failures++;
    }
    return kt_test_enqueue_work(NULL, stream, trials);
}

/* kt_cuda_time_held runs the program's callback (warm-up included) in the program's own capture mode, not in
 * ktiming's relaxed one: a capture-unsafe call the callback makes while another thread captures in global mode
 * fails and invalidates that capture exactly as it would without ktiming (in relaxed mode it succeeded, hiding
 * the program's bug from it). ktiming's own calls around it stay relaxed: every violation is the callback's. The
 * calling thread's mode is the program's again afterwards. */
static void test_held_callback_runs_in_the_programs_capture_mode(void **state)
{
    (void)state;
    capturer_t cap = {.stream = kt_test_stream()};
    struct CUstream_st *work = kt_test_stream();
    sem_init(&cap.begun, 0, 0);
    sem_init(&cap.end, 0, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, capture_thread, &cap), 0);
    sem_wait(&cap.begun);
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    unsafe_job_t j = {0};
    kt_cuda_held_t h = {.ctx = g_ctx, .stream = work, .enqueue = enqueue_unsafe, .user = &j};
    uint64_t d = 0;
    int rc = kt_cuda_time_held(&h, 2, &d);
    kt_test_cuda_driver_stats(&after);
    int mode = MODE_RELAXED;
    assert_int_equal(cuThreadExchangeStreamCaptureMode(&mode), 0);
    int back = mode;
    assert_int_equal(cuThreadExchangeStreamCaptureMode(&back), 0); /* and back */
    sem_post(&cap.end);
    pthread_join(th, NULL);
    if (rc)
        fail_msg("kt_cuda_time_held: %d (%s)", rc, kt_cuda_last_error());
    print_message("callback calls %u: allocations failed %u, succeeded %u; capture violations %llu; end %d\n",
                  j.calls, j.alloc_failures, j.alloc_ok,
                  (unsigned long long)(after.capture_violations - before.capture_violations), cap.end_result);
    assert_int_equal(j.calls, 2); /* the warm-up and one held batch */
    assert_int_equal(j.alloc_ok, 0);
    assert_int_equal(j.alloc_failures, j.calls);
    assert_int_equal(after.capture_violations - before.capture_violations, j.calls);
    assert_int_equal(cap.end_result, CAPTURE_INVALIDATED); /* as the program's own call would leave it */
    assert_int_equal(mode, MODE_GLOBAL);                   /* the thread's mode is the program's again */
    sem_destroy(&cap.begun);
    sem_destroy(&cap.end);
    assert_int_equal(cuStreamDestroy_v2(cap.stream), 0);
    assert_int_equal(cuStreamDestroy_v2(work), 0);
}

/* kt_cuda_time_held on a stream that is capturing a graph: the spin kernel, the events and the callback's launches
 * would be captured into the program's graph (a hold kernel spinning on ktiming's host word at every replay) and
 * the events never complete. It is refused (KT_ESTATE) before anything is enqueued or the callback called, and
 * the capture ends valid. Before: the warm-up and the hold were captured, and the call failed on the captured
 * event (KT_EBACKEND). */
static int count_calls(void *user, struct CUstream_st *stream, uint32_t trials)
{
    (*(uint32_t *)user)++;
    return kt_test_enqueue_work(NULL, stream, trials);
}

static void test_held_refuses_a_capturing_stream(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    uint32_t calls = 0;
    kt_cuda_held_t h = {.ctx = g_ctx, .stream = cap, .enqueue = count_calls, .user = &calls};
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_GLOBAL), 0);
    uint64_t d = 7;
    int rc = kt_cuda_time_held(&h, 4, &d);
    struct CUgraph_st *g = NULL;
    int end = cuStreamEndCapture(cap, &g);
    if (g)
        cuGraphDestroy(g);
    print_message("held on a capturing stream: %d (%s), %u callback calls; end capture %d\n", rc,
                  kt_cuda_last_error(), calls, end);
    assert_int_equal(rc, KT_ESTATE);
    assert_non_null(strstr(kt_cuda_last_error(), "captur"));
    assert_int_equal(calls, 0);
    assert_int_equal(d, 0);
    assert_int_equal(end, 0);
    assert_int_equal(kt_cuda_time_held(&h, 4, &d), 0); /* the capture over, the stream is held as any */
    assert_true(calls > 0);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
}

/* kt_cuda_slots_bind's two stream-ordered copies beside a capture: on the legacy stream (stream 0) while a blocking
 * stream captures, a copy would answer CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidate the program's capture (the
 * legacy stream synchronises with the capturing stream); on the capturing stream itself it would become a node of
 * the program's graph. Both are refused (KT_ESTATE, the reason said), as spans skip captures, and the capture ends
 * valid. Before the fix the first bind invalidated the capture (901) and the second was captured (returned 0). */
static const char kStampModule[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".global .align 8 .u64 kt_cuda_slot_ptr;\n"
    ".visible .entry kt_test_stamp(\n\t.param .u64 work_ns\n)\n{\n\tret;\n}\n";

static void test_slots_bind_refuses_a_capture(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    struct CUmod_st *mod = NULL;
    assert_int_equal(cuModuleLoadData(&mod, kStampModule), 0);
    kt_cuda_slots_t *slots = NULL;
    assert_int_equal(kt_cuda_slots_create(&slots, g_ctx, 2), 0);
    kt_test_cuda_stats_t before, after;
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_GLOBAL), 0);
    kt_test_cuda_driver_stats(&before);
    int legacy = kt_cuda_slots_bind(slots, mod, NULL, 0);
    char why[256];
    snprintf(why, sizeof why, "%s", kt_cuda_last_error());
    int captured = kt_cuda_slots_bind(slots, mod, cap, 1);
    kt_test_cuda_driver_stats(&after);
    struct CUgraph_st *g = NULL;
    int end = cuStreamEndCapture(cap, &g);
    if (g)
        cuGraphDestroy(g);
    print_message("bind on the legacy stream: %d (%s); on the capturing stream: %d; end capture %d\n", legacy, why,
                  captured, end);
    assert_int_equal(end, 0); /* not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) */
    assert_int_equal(after.capture_violations, before.capture_violations);
    assert_int_equal(legacy, KT_ESTATE);
    assert_non_null(strstr(why, "captur"));
    assert_int_equal(captured, KT_ESTATE);
    /* after the capture both binds work again */
    assert_int_equal(kt_cuda_slots_bind(slots, mod, NULL, 0), 0);
    assert_int_equal(kt_cuda_slots_bind(slots, mod, cap, 1), 0);
    assert_int_equal(cuStreamSynchronize(cap), 0);
    kt_cuda_slots_destroy(slots);
    assert_int_equal(cuModuleUnload(mod), 0);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
}

static void test_graph_launch_is_one_dispatch(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    struct CUstream_st *run = kt_test_stream();
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_GLOBAL), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(kt_test_cuda_driver_work(cap, 30000, 1), 0);
    struct CUgraph_st *g = NULL;
    struct CUgraphExec_st *x = NULL;
    assert_int_equal(cuStreamEndCapture(cap, &g), 0);
    assert_int_equal(cuGraphInstantiateWithFlags(&x, g, 0), 0);
    kt_test_cuda_driver_freeze_clock(1); /* event times then differ by the virtual work only */
    for (int i = 0; i < 2; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, run, "graph"), 0);
        assert_int_equal(cuGraphLaunch(x, run), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_flush();
    kt_test_cuda_driver_freeze_clock(0);
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "graph");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 2);
    assert_true(e->min_ns >= 90000 - 1024 && e->max_ns <= 90000 + 1024); /* the three captured works, 512 ns res */
    kt_snapshot_free(snap);
    assert_int_equal(cuGraphExecDestroy(x), 0);
    assert_int_equal(cuGraphDestroy(g), 0);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
    assert_int_equal(cuStreamDestroy_v2(run), 0);
}

/* A timer on stream 0 (the legacy stream) while a blocking stream captures: recording its events there would
 * invalidate the program's capture (906 from the driver, then 901 at cuStreamEndCapture); the timer records
 * nothing, the capture ends fine, and elapsed() says there is no time rather than reading 0. */
static void test_legacy_timer_beside_a_capture_is_refused(void **state)
{
    (void)state;
    struct CUstream_st *cap = kt_test_stream();
    kt_cuda_timer_t t;
    assert_int_equal(kt_cuda_timer_init(&t, g_ctx, NULL), 0);
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_GLOBAL), 0);
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    struct CUgraph_st *g = NULL;
    assert_int_equal(cuStreamEndCapture(cap, &g), 0);
    assert_int_equal(cuGraphDestroy(g), 0);
    double ms = -1.0;
    assert_int_equal(kt_cuda_timer_elapsed(&t, &ms), KT_ESTATE);
    assert_true(ms == 0.0);
    assert_non_null(strstr(kt_cuda_last_error(), "recorded nothing"));
    kt_cuda_timer_start(&t); /* no capture now: it times again */
    kt_cuda_timer_stop(&t);
    assert_int_equal(kt_cuda_timer_elapsed(&t, &ms), 0);
    kt_cuda_timer_destroy(&t);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
}

/* A query the driver answers with a capture error (900 unsupported, 901 invalidated, 906 implicit: a capture
 * somewhere forbids it now) says "not now", never the dispatch's result: the dispatch is recorded once the query
 * answers normally, with no error. */
static void test_capture_answers_to_a_query_mean_later(void **state)
{
    (void)state;
    static const int kAnswers[] = {900, 901, 906};
    for (size_t i = 0; i < sizeof kAnswers / sizeof kAnswers[0]; i++) {
        struct CUstream_st *s = kt_test_stream();
        char name[32];
        snprintf(name, sizeof name, "answered-%d", kAnswers[i]);
        kt_test_cuda_stats_t before, after;
        kt_test_cuda_driver_stats(&before);
        kt_test_cuda_driver_query_answer(kAnswers[i], 3);
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, name), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
        kt_flush();
        kt_test_cuda_driver_stats(&after);
        assert_int_equal(after.forced_query_answers - before.forced_query_answers, 3);
        kt_kernel_timing_t e = kt_test_entry_now(name);
        assert_int_equal(e.dispatch_count, 1);
        assert_int_equal(e.errors, 0);
        assert_int_equal(cuStreamDestroy_v2(s), 0);
    }
}

/* A capture begun in thread-local mode on the program's own thread forbids that thread's capture-unsafe calls
 * (whatever other threads do): ktiming's calls on that same thread — a span on another stream, kt_flush,
 * kt_snapshot, a timer read — run relaxed, so the capture ends valid. */
static void test_own_thread_local_capture_is_kept(void **state)
{
    (void)state;
    enum { MODE_THREAD_LOCAL = 1 };
    struct CUstream_st *cap = kt_test_stream();
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(cuStreamBeginCapture_v2(cap, MODE_THREAD_LOCAL), 0);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "beside-own-capture"), 0);
    assert_int_equal(kt_test_cuda_driver_work(s, 1000, 0), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_cuda_timer_t t;
    assert_int_equal(kt_cuda_timer_init(&t, g_ctx, s), 0);
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    double ms = -1.0;
    assert_int_equal(kt_cuda_timer_elapsed(&t, &ms), 0);
    kt_cuda_timer_destroy(&t);
    kt_flush();
    kt_snapshot_free(kt_snapshot());
    struct CUgraph_st *g = NULL;
    assert_int_equal(cuStreamEndCapture(cap, &g), 0);
    assert_int_equal(cuGraphDestroy(g), 0);
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.capture_violations - before.capture_violations, 0);
    kt_test_expect_count("beside-own-capture", 1);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    assert_int_equal(cuStreamDestroy_v2(cap), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_span_on_capturing_stream_is_skipped),
        cmocka_unit_test(test_collector_does_not_break_a_global_capture),
        cmocka_unit_test(test_graph_launch_is_one_dispatch),
        cmocka_unit_test(test_program_calls_keep_a_global_capture),
        cmocka_unit_test(test_legacy_stream_beside_a_capture_is_skipped),
        cmocka_unit_test(test_legacy_timer_beside_a_capture_is_refused),
        cmocka_unit_test(test_capture_answers_to_a_query_mean_later),
        cmocka_unit_test(test_own_thread_local_capture_is_kept),
        cmocka_unit_test(test_held_callback_runs_in_the_programs_capture_mode),
        cmocka_unit_test(test_slots_bind_refuses_a_capture),
        cmocka_unit_test(test_held_refuses_a_capturing_stream),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
