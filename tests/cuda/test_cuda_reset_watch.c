/* test_cuda_reset_watch.c — a device reset (cudaDeviceReset) or cuCtxDestroy that lands between the collector's
 * context-id check and its next driver call (issue 36.6). The driver double makes that race on demand
 * (kt_test_cuda_driver_race_destroy: the reset runs on another thread inside the collector's cuCtxGetId), and
 * the CUPTI double calls its subscriber at CONTEXT_DESTROY_STARTING from inside the driver's reset, as CUPTI does.
 *
 * Watching (kt_cuda_watch_resets, or `ktiming run`'s CUPTI library: KT_TEST_WATCH=inject), ktiming is told
 * before anything is freed: no use of a freed handle, and the dispatches that completed are recorded instead of
 * dropped. Not watching, the double shows the one raced use the id check cannot prevent (so the watched tests
 * fail on code that does not watch). Also: the watch refuses clearly without libcupti and beside another CUPTI
 * client, and gives the subscription back; KTIMING_CUDA_WATCH_RESETS=1 (KT_TEST_WATCH=env) watches from the start. */
#include "cuda_test_util.h"
#include "shared/cupti_subscribe.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <signal.h>

int cuCtxCreate_v2(struct CUctx_st **ctx, unsigned int flags, int dev);
int cuCtxDestroy_v2(struct CUctx_st *ctx);
int cuDevicePrimaryCtxReset(int dev);

static struct CUctx_st *g_ctx;

/* KT_TEST_WATCH=inject: the CUPTI injection library (KT_TEST_CUPTI_INJECT) holds the subscription and watches;
 * KT_TEST_WATCH=env: KTIMING_CUDA_WATCH_RESETS=1 makes each initialisation of the backend watch (after every
 * kt_cuda_shutdown too); otherwise the tests call kt_cuda_watch_resets. */
static int watch_mode(const char *mode)
{
    const char *m = getenv("KT_TEST_WATCH");
    return m && !strcmp(m, mode);
}
static int inject_mode(void)
{
    return watch_mode("inject");
}

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return kt_cuda_init(NULL);
}

/* Watch through the mode under test. */
static void watch_on(void)
{
    if (watch_mode("env"))
        return; /* the environment asked at initialisation: the tests below fail if it did not */
    if (inject_mode()) {
        /* the library holds CUPTI's one subscription and tells the backend: the program's own call for the watch
         * succeeds as it is, without a subscription CUPTI would refuse */
        assert_int_equal(kt_cuda_watch_resets(1), 0);
        assert_int_equal(kt_cuda_watch_resets(0), 0); /* nothing of the backend's to give back */
        assert_int_equal(kt_cuda_watch_resets(1), 0);
    } else {
        assert_int_equal(kt_cuda_watch_resets(1), 0);
        assert_int_equal(kt_cuda_watch_resets(1), 0); /* again: still held, nothing changes */
    }
}

/* n spans of `name` on stream s, held until the race is armed, then released so the collector polls them. */
static void spans_then_race(struct CUctx_st *ctx, struct CUstream_st *s, const char *name, int n)
{
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    for (int i = 0; i < n; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, ctx, s, name), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 2000, 0), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    assert_int_equal(kt_test_cuda_driver_race_destroy(ctx), 0); /* the collector's next id check resets it */
    kt_test_cuda_driver_hold(s, 0); /* fails once the reset freed s: then its work is gone with it */
    assert_int_equal(kt_test_cuda_driver_race_wait(30000), 1);
}

static void test_watched_primary_reset(void **state)
{
    (void)state;
    watch_on();
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    spans_then_race(g_ctx, s, "watched-reset", 8);
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.raced_destroys - before.raced_destroys, 1);
    assert_int_equal(after.resets - before.resets, 1);
    /* told before the reset freed anything: no freed handle used, not even the raced one */
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0);
    assert_int_equal(after.raced_handle_uses - before.raced_handle_uses, 0);

    struct CUstream_st *s2 = kt_test_stream(); /* the reset freed s */
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s2, "after-watched-reset"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_kernel_timing_t e = kt_test_entry_now("watched-reset");
    /* the work was done when the reset began: collected inside the callback, none dropped */
    assert_int_equal(e.dispatch_count, 8);
    assert_int_equal(e.dropped_by[KT_DROP_CONTEXT_RESET], 0);
    assert_int_equal(e.errors, 0);
    kt_test_expect_count("after-watched-reset", 1);
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0);
    kt_cuda_shutdown();
    assert_int_equal(kt_test_cuda_driver_live_events(), 0);
    assert_int_equal(cuStreamDestroy_v2(s2), 0);
}

static void test_watched_context_destroy(void **state)
{
    (void)state;
    watch_on();
    struct CUctx_st *user = NULL;
    assert_int_equal(cuCtxCreate_v2(&user, 0, 0), 0); /* current on this thread */
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    spans_then_race(user, s, "watched-destroy", 5); /* cuCtxDestroy, no kt_cuda_context_release first */
    struct CUctx_st *popped = NULL;
    assert_int_equal(cuCtxPopCurrent_v2(&popped), 0); /* destroyed on another thread: off this one's stack */
    assert_ptr_equal(popped, user);
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.raced_destroys - before.raced_destroys, 1);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0);
    assert_int_equal(after.raced_handle_uses - before.raced_handle_uses, 0);
    kt_kernel_timing_t e = kt_test_entry_now("watched-destroy");
    assert_int_equal(e.dispatch_count, 5);
    assert_int_equal(e.errors, 0);
    kt_cuda_shutdown();
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0); /* not destroyed again at shutdown */
}

/* kt_cuda_context_release of a primary context that only ktiming still retains: releasing that retain destroys
 * the context right there (the driver destroys a primary context at its last release), so the watch's callback
 * comes from inside the release, on the releasing thread, which holds ktiming's consumer lock. It returns at once
 * (the state is unlinked already) instead of waiting flush_timeout_ms for a lock its own thread holds and then
 * reporting the collector stuck in the driver. */
static void test_release_of_the_last_retain(void **state)
{
    (void)state;
    watch_on();
    struct CUctx_st *ctx = NULL;
    assert_int_equal(kt_cuda_device_primary(0, &ctx), 0); /* ktiming retains device 0's primary context */
    assert_ptr_equal(ctx, g_ctx);
    assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), 0); /* the test's own retain: ktiming's is the last */
    struct CUstream_st *s = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, ctx, s, "released-last"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(kt_cuda_context_release(ctx), 0);
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.primary_destroys - before.primary_destroys, 1); /* destroyed inside the release */
    assert_null(strstr(kt_cuda_last_error(), "inside the driver"));
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0);
    struct CUctx_st *again = NULL;
    assert_int_equal(cuDevicePrimaryCtxRetain(&again, 0), 0); /* the group's retain back, for the tests after */
    kt_test_expect_count("released-last", 1); /* collected by the release, before the context went */
    kt_cuda_shutdown();
}

/* In a child forked while the watch holds CUPTI's subscription, kt_cuda_watch_resets touches nothing of the
 * parent's (its lock may have been held by a thread the child does not have; CUPTI's state is the parent's): 0
 * returns 0 leaving the inherited subscription as it is, 1 is refused. */
static void test_watch_in_a_forked_child(void **state)
{
    (void)state;
    if (getenv("KT_TEST_WATCH"))
        skip(); /* the subscription is the environment's or the injection library's there */
    assert_int_equal(kt_cuda_watch_resets(1), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        int off = kt_cuda_watch_resets(0);
        int on = kt_cuda_watch_resets(1);
        void *lib = dlopen(getenv("KTIMING_CUPTI_LIBRARY"), RTLD_NOW | RTLD_LOCAL);
        int (*subscribe)(void **, void *, void *) = NULL;
        if (lib)
            *(void **)&subscribe = dlsym(lib, "cuptiSubscribe");
        void *h = NULL;
        int still_held = subscribe && subscribe(&h, NULL, NULL) != 0;
        _exit(off == 0 && on == KT_EUNAVAILABLE && still_held ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(kt_cuda_watch_resets(0), 0);
}

/* The bounded wait: a collector pass stuck inside the driver (as a real driver might make it wait for the
 * destroying thread) holds ktiming's consumer lock; the destroy callback gives up after flush_timeout_ms instead
 * of hanging the program's cudaDeviceReset, marks the context gone and says so. The stuck query then meets the
 * freed event: the one raced use the watch cannot prevent in that case, and no other. */
static void test_watched_reset_behind_stuck_collector(void **state)
{
    (void)state;
    kt_cuda_shutdown();
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.flush_timeout_ms = 50}), 0);
    watch_on();
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "stuck-reset"), 0);
    kt_test_end_into_blocked_query(&span); /* the collector now waits inside cuEventQuery */
    assert_int_equal(cuDevicePrimaryCtxReset(0), 0); /* returns: the callback did not wait for the collector */
    assert_non_null(strstr(kt_cuda_last_error(), "collector is inside the driver"));
    kt_test_cuda_driver_block_queries(0);
    kt_flush();
    kt_test_cuda_driver_stats(&after);
    assert_true(after.raced_handle_uses - before.raced_handle_uses <= 1);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles,
                     after.raced_handle_uses - before.raced_handle_uses);
    kt_kernel_timing_t e = kt_test_entry_now("stuck-reset");
    assert_int_equal(e.dispatch_count + e.dropped_by[KT_DROP_CONTEXT_RESET], 1);
    assert_int_equal(e.errors, 0);
    kt_cuda_shutdown();
}

/* What the watch is for: without it the same race makes exactly the one use of a freed event the id check cannot
 * prevent (the double counts it instead of aborting), and the in-flight dispatches are dropped. */
static void test_unwatched_race_uses_a_freed_event(void **state)
{
    (void)state;
    if (inject_mode())
        skip(); /* the injection library watches for the whole process */
    assert_int_equal(kt_cuda_init(NULL), 0);        /* (with KTIMING_CUDA_WATCH_RESETS=1 this watches ...) */
    assert_int_equal(kt_cuda_watch_resets(0), 0); /* ... and this gives it back: a later reset is not told */
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    spans_then_race(g_ctx, s, "unwatched-reset", 8);
    kt_flush();
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.raced_destroys - before.raced_destroys, 1);
    assert_int_equal(after.raced_handle_uses - before.raced_handle_uses, 1);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 1);
    kt_kernel_timing_t e = kt_test_entry_now("unwatched-reset");
    assert_int_equal(e.dispatch_count + e.dropped_by[KT_DROP_CONTEXT_RESET], 8);
    assert_true(e.dropped_by[KT_DROP_CONTEXT_RESET] > 0);
    kt_cuda_shutdown();
}

/* Refusals name their cause: no libcupti where KTIMING_CUPTI_LIBRARY points (first: nothing loaded it yet),
 * another CUPTI client holding the subscription; the watch is then taken and given back. */
static void test_watch_refusals(void **state)
{
    (void)state;
    if (getenv("KT_TEST_WATCH"))
        skip(); /* libcupti is loaded and subscribed already */
    const char *cupti = getenv("KTIMING_CUPTI_LIBRARY");
    assert_non_null(cupti);
    char *saved = strdup(cupti);
    assert_non_null(saved);
    assert_int_equal(setenv("KTIMING_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1), 0);
    assert_int_equal(kt_cuda_watch_resets(1), KT_EUNAVAILABLE);
    assert_non_null(strstr(kt_cuda_last_error(), "CUPTI could not be loaded"));
    assert_non_null(strstr(kt_cuda_last_error(), "/nonexistent/libcupti.so.13"));
    assert_int_equal(setenv("KTIMING_CUPTI_LIBRARY", saved, 1), 0);
    free(saved);
    assert_int_equal(setenv("KT_TEST_CUPTI_OTHER_SUBSCRIBER", "1", 1), 0); /* a client CUPTI names not */
    assert_int_equal(kt_cuda_watch_resets(1), KT_EUNAVAILABLE);
    assert_non_null(strstr(kt_cuda_last_error(), "another CUPTI client holds"));
    assert_non_null(strstr(kt_cuda_last_error(), "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"));
    assert_null(strstr(kt_cuda_last_error(), "held by"));
    assert_int_equal(setenv("KT_TEST_CUPTI_OTHER_SUBSCRIBER", "Nsight Compute", 1), 0); /* one it names */
    assert_int_equal(kt_cuda_watch_resets(1), KT_EUNAVAILABLE);
    assert_non_null(strstr(kt_cuda_last_error(), "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, held by "
                                                 "\"Nsight Compute\")"));
    assert_int_equal(unsetenv("KT_TEST_CUPTI_OTHER_SUBSCRIBER"), 0);
    assert_int_equal(kt_cuda_watch_resets(1), 0);
    /* a profiler of the program's own that subscribes now is refused and told who holds the slot, and how to free it */
    void *cupti_lib = dlopen(getenv("KTIMING_CUPTI_LIBRARY"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cupti_lib);
    int (*subscribe)(void **, void *, void *, kt__cupti_subscriber_params_t *) = NULL;
    *(void **)&subscribe = dlsym(cupti_lib, "cuptiSubscribe_v2");
    assert_non_null(subscribe);
    char holder[KT__CUPTI_HOLDER_NAME_LEN];
    kt__cupti_subscriber_params_t p = kt__cupti_subscriber_params("a profiler", holder);
    void *handle = NULL;
    assert_int_not_equal(subscribe(&handle, NULL, NULL, &p), 0);
    assert_string_equal(holder, "CUPTI for " KT__CUPTI_NAME_WATCH);
    dlclose(cupti_lib);
    assert_int_equal(kt_cuda_watch_resets(0), 0);
    assert_int_equal(kt_cuda_watch_resets(0), 0); /* given back already: nothing to do */
}

/* After the core stopped (kt_shutdown, or exit, when drivers destroy contexts late), the callback still comes: the
 * context is only marked gone (nothing recorded into a stopped core), and a later kt_cuda_shutdown destroys none
 * of the freed handles. Last: it shuts the core down. */
static void test_reset_after_core_shutdown(void **state)
{
    (void)state;
    watch_on();
    struct CUstream_st *s = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "before-core-shutdown"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    kt_shutdown();
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(cuDevicePrimaryCtxReset(0), 0);
    kt_cuda_shutdown();
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0);
    assert_true(after.events_freed_by_reset > before.events_freed_by_reset);
}

int main(void)
{
    if (inject_mode()) { /* what the driver does with CUDA_INJECTION64_PATH */
        const char *path = getenv("KT_TEST_CUPTI_INJECT");
        void *lib = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
        int (*init)(void) = NULL;
        if (lib)
            *(void **)&init = dlsym(lib, "InitializeInjection");
        if (!init || init() != 1) {
            fprintf(stderr, "the CUPTI injection library did not initialise (%s)\n", path ? path : "unset");
            return 1;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_refusals),
        cmocka_unit_test(test_watch_in_a_forked_child), /* before any stream dies (TSan: no unjoined thread) */
        cmocka_unit_test(test_release_of_the_last_retain),
        cmocka_unit_test(test_watched_primary_reset),
        cmocka_unit_test(test_watched_context_destroy),
        cmocka_unit_test(test_watched_reset_behind_stuck_collector),
        cmocka_unit_test(test_unwatched_race_uses_a_freed_event),
        cmocka_unit_test(test_reset_after_core_shutdown),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
