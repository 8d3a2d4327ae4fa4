/* test_clock_tracker.c — the periodic-refit tracker: refit cadence, ring bounds, steps, bounded polls, threads. */
#include "support/clock_synth.h"

#include <ktiming/clock_model.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

static uint64_t raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A device clock driven by the real RAW clock: own epoch, drift, optional failures and a step. */
typedef struct fake_dev_t {
    uint64_t base_raw;  /* RAW time of device zero */
    uint64_t epoch;     /* device value at base_raw */
    double drift_ppm;   /* device fast by this much */
    int64_t step_ns;    /* added to every read (a reset/step when changed) */
    int fail;           /* 1: every read fails */
    int reads;          /* reads so far (racy counter is fine only single-threaded) */
} fake_dev_t;

static uint64_t fake_read(void *u)
{
    fake_dev_t *d = u;
    d->reads++;
    if (d->fail) return 0;
    double dt = (double)(raw_now() - d->base_raw) * (1.0 + d->drift_ppm * 1e-6);
    return d->epoch + (uint64_t)(int64_t)dt + (uint64_t)d->step_ns;
}

/* ------------------------------------------------------------------------------------------------ */

static void test_create_validation(void **state)
{
    (void)state;
    kt_clock_tracker_t *t = NULL;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_DEVICE, NULL, &t), KT_EINVAL);
    assert_int_equal(kt_clock_tracker_create((kt_fit_strategy_t)9, KT_DOMAIN_MONOTONIC_RAW, NULL, &t), KT_EINVAL);
    assert_int_equal(kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, NULL, NULL), KT_EINVAL);
    assert_int_equal(kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, NULL, &t), 0);
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), KT_ESTATE);
    uint64_t h;
    assert_int_equal(kt_clock_tracker_to_host(t, 1, &h, NULL), KT_ESTATE);
    /* no read_device: a due poll cannot sample */
    assert_int_equal(kt_clock_tracker_poll(t, raw_now()), KT_ESTATE);
    kt_clock_tracker_destroy(t);
    kt_clock_tracker_destroy(NULL);
}

/* Samples pushed with add(): the first fit at 10 samples, then every refit_every; the ring never exceeds its
 * capacity; the model tracks the truth. */
static void test_add_cadence_and_ring(void **state)
{
    (void)state;
    enum { N = 400 };
    kt_clock_sample_t *s = malloc(N * sizeof(*s));
    synth_truth_t tr;
    synth_generate(SYN_OUTLIERS, 77, s, N, &tr);
    kt_clock_tracker_desc_t d = {0};
    d.capacity = 64;
    d.refit_every = 8;
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_RANSAC, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    kt_clock_tracker_stats_t st;
    assert_int_equal(kt_clock_tracker_add(t, s, 9), 0);
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.fits, 0);
    assert_int_equal(kt_clock_tracker_add(t, s + 9, 1), 0);
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.fits, 1);
    for (size_t i = 10; i < N; i++) {
        int rc = kt_clock_tracker_add(t, &s[i], 1);
        assert_true(rc == 0);
    }
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.ring, 64);
    /* one fit at 10, then one per 8 new samples */
    assert_true(st.fits >= 1 + (N - 10) / 8 - 1 && st.fits <= 1 + (N - 10) / 8 + 1);
    assert_int_equal(st.fit_errors, 0);
    assert_int_equal(st.resets, 0); /* single outliers (up to 200 us) never look like a step of 1 ms */
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), 0);
    assert_int_equal(m.samples, 64);
    synth_eval_t ev;
    synth_evaluate(&m, &tr, s + N - 64, 64, &ev);
    assert_true(ev.drift_err_ppm < 1.0);
    assert_true(ev.offset_err_ns < 1000.0);
    assert_int_equal(ev.contained, ev.points);
    /* mapping through the tracker equals mapping through its model */
    uint64_t h1, h2, u1, u2;
    assert_int_equal(kt_clock_tracker_to_host(t, s[N - 1].device_ns, &h1, &u1), 0);
    assert_int_equal(kt_clock_to_host(&m, s[N - 1].device_ns, &h2, &u2), 0);
    assert_int_equal(h1, h2);
    assert_int_equal(u1, u2);
    /* a bad bracket is refused and nothing is pushed */
    kt_clock_sample_t bad = {1, 10, 5};
    assert_int_equal(kt_clock_tracker_add(t, &bad, 1), KT_EINVAL);
    kt_clock_tracker_destroy(t);
    free(s);
}

/* A clock step (device reset by 10 ms): the first disagreeing sample waits, the second restarts the ring, and
 * the model is rebuilt from samples after the step. A lone outlier of the same size is dropped instead. */
static void test_step_detection(void **state)
{
    (void)state;
    enum { N = 120 };
    kt_clock_sample_t s[N];
    synth_truth_t tr;
    synth_generate(SYN_CLEAN, 78, s, N, &tr);
    kt_clock_tracker_desc_t d = {0};
    d.refit_every = 1;
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    assert_int_equal(kt_clock_tracker_add(t, s, 60), 0);
    /* lone outlier at 61 */
    kt_clock_sample_t o = s[60];
    o.device_ns += 10000000u;
    assert_int_equal(kt_clock_tracker_add(t, &o, 1), 0);
    assert_int_equal(kt_clock_tracker_add(t, &s[61], 1), 0);
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.resets, 0);
    assert_int_equal(st.ring, 61);
    /* step from sample 70 on */
    assert_int_equal(kt_clock_tracker_add(t, &s[62], 8), 0);
    for (int i = 70; i < N; i++) s[i].device_ns += 10000000u;
    assert_int_equal(kt_clock_tracker_add(t, &s[70], 1), 0);
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.resets, 0); /* one disagreeing sample: waiting */
    assert_int_equal(kt_clock_tracker_add(t, &s[71], 1), 0);
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.resets, 1);
    assert_int_equal(st.ring, 2);
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), KT_ESTATE); /* the old model is gone */
    assert_int_equal(kt_clock_tracker_add(t, &s[72], 20), 0);
    assert_int_equal(kt_clock_tracker_model(t, &m), 0);
    uint64_t h;
    assert_int_equal(kt_clock_to_host(&m, s[80].device_ns, &h, NULL), 0);
    /* the stepped device maps 10 ms (in device ns) earlier than before the step */
    double e = synth_error(&tr, s[80].device_ns - 10000000u, h);
    assert_true(fabs(e) < 1000.0);
    kt_clock_tracker_destroy(t);
}

/* Window: samples older than window_ns leave the ring. */
static void test_window(void **state)
{
    (void)state;
    enum { N = 200 };
    kt_clock_sample_t s[N];
    synth_truth_t tr;
    synth_generate(SYN_CLEAN, 79, s, N, &tr);
    kt_clock_tracker_desc_t d = {0};
    d.window_ns = 50000000u; /* 50 ms: about 50 samples 1 ms apart */
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_BASIC, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    assert_int_equal(kt_clock_tracker_add(t, s, N), 0);
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(t, &st);
    assert_true(st.ring >= 40 && st.ring <= 63);
    kt_clock_tracker_destroy(t);
}

/* Polls with a live fake device: the first poll samples initial_samples and fits; an immediate second poll
 * does nothing; polls are due again after refit_interval_ns; each poll does at most 2 * batch + 2 reads. */
static void test_poll_live(void **state)
{
    (void)state;
    fake_dev_t dev = {raw_now(), 5000000000000ull, 80.0, 0, 0, 0};
    kt_clock_tracker_desc_t d = {0};
    d.read_device = fake_read;
    d.user = &dev;
    d.refit_interval_ns = 2000000u; /* 2 ms */
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    /* "immediately" is the same now: a fresh raw_now() could be past refit_interval_ns on a loaded machine */
    uint64_t t0 = raw_now();
    assert_int_equal(kt_clock_tracker_poll(t, t0), 1);
    assert_int_equal(dev.reads, 32);
    assert_int_equal(kt_clock_tracker_poll(t, t0), 0);
    assert_int_equal(dev.reads, 32);
    for (int i = 0; i < 40; i++) {
        struct timespec ts = {0, 2500000};
        nanosleep(&ts, NULL);
        int before = dev.reads;
        int rc = kt_clock_tracker_poll(t, raw_now());
        assert_int_equal(rc, 1);
        assert_true(dev.reads - before <= 8);
    }
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), 0);
    print_message("live fake device: drift %.3f ppm (true 80), bound %.0f ns, %u samples over %.1f ms\n", m.drift_ppm,
                  m.error_ns, m.samples, (double)(m.fitted_at_ns - m.host_first_ns) / 1e6);
    assert_true(fabs(m.drift_ppm - 80.0) < 20.0);
    /* a fresh read maps into its own bracket within the bound */
    uint64_t b = raw_now(), dv = fake_read(&dev), a = raw_now(), h, u;
    assert_int_equal(kt_clock_tracker_to_host(t, dv, &h, &u), 0);
    assert_true(h + u >= b && h <= a + u);

    /* failures: every read fails -> KT_EBACKEND after a bounded number of reads, model kept */
    dev.fail = 1;
    struct timespec ts = {0, 2500000};
    nanosleep(&ts, NULL);
    int before = dev.reads;
    assert_int_equal(kt_clock_tracker_poll(t, raw_now()), KT_EBACKEND);
    assert_true(dev.reads - before <= 2 * 8 + 2);
    assert_int_equal(kt_clock_tracker_model(t, &m), 0);
    kt_clock_tracker_destroy(t);
}

/* max_error_ns drives polls: with a tight limit the tracker samples again once the bound at now exceeds it,
 * but not more often than min_poll_interval_ns. */
static void test_poll_on_error(void **state)
{
    (void)state;
    fake_dev_t dev = {raw_now(), 77, -50.0, 0, 0, 0};
    kt_clock_tracker_desc_t d = {0};
    d.read_device = fake_read;
    d.user = &dev;
    d.max_error_ns = 1.0; /* always exceeded */
    d.min_poll_interval_ns = 1000000000u;
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_BASIC, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    uint64_t now = raw_now();
    assert_int_equal(kt_clock_tracker_poll(t, now), 1);
    assert_int_equal(kt_clock_tracker_poll(t, now + 1000), 0);         /* rate-limited */
    assert_int_equal(kt_clock_tracker_poll(t, now + 1000000001u), 1); /* interval elapsed */
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.polls, 2);
    kt_clock_tracker_destroy(t);
}

/* A device step seen by polls: restart, then an initial batch in the same poll rebuilds the model. */
static void test_poll_step(void **state)
{
    (void)state;
    fake_dev_t dev = {raw_now(), 1000, 0.0, 0, 0, 0};
    kt_clock_tracker_desc_t d = {0};
    d.read_device = fake_read;
    d.user = &dev;
    d.refit_interval_ns = 1000u;
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    assert_int_equal(kt_clock_tracker_poll(t, raw_now()), 1);
    dev.step_ns = 50000000; /* +50 ms */
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    assert_int_equal(kt_clock_tracker_poll(t, raw_now()), 1);
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(t, &st);
    assert_int_equal(st.resets, 1);
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), 0);
    int64_t off = kt_clock_model_offset_ns(&m); /* host - device = base_raw - 1000 - 50 ms */
    int64_t expect = (int64_t)dev.base_raw - 1000 - 50000000;
    assert_true(llabs((long long)(off - expect)) < 100000);
    kt_clock_tracker_destroy(t);
}

/* Threads polling, adding and mapping at once (TSan). */
typedef struct shared_t {
    kt_clock_tracker_t *t; /* the tracker */
    int errors;            /* per-thread failures */
} shared_t;

static uint64_t raw_read(void *u)
{
    (void)u;
    return raw_now() + 123456789u;
}

static void *worker(void *arg)
{
    shared_t *sh = arg;
    for (int i = 0; i < 3000; i++) {
        int rc = kt_clock_tracker_poll(sh->t, raw_now());
        if (rc < 0) sh->errors++;
        uint64_t h, u;
        uint64_t dv = raw_read(NULL);
        rc = kt_clock_tracker_to_host(sh->t, dv, &h, &u);
        if (rc != 0 && rc != KT_ESTATE) sh->errors++;
        if (i % 100 == 0) {
            kt_clock_sample_t s[4];
            if (kt_clock_sample(raw_read, NULL, KT_DOMAIN_MONOTONIC_RAW, s, 4) != 0) sh->errors++;
            if (kt_clock_tracker_add(sh->t, s, 4) < 0) sh->errors++;
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    kt_clock_tracker_desc_t d = {0};
    d.read_device = raw_read;
    d.refit_interval_ns = 100000u;
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_RANSAC, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    shared_t sh[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        sh[i] = (shared_t){t, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &sh[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) assert_int_equal(sh[i].errors, 0);
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(t, &st);
    assert_true(st.fits > 0);
    assert_int_equal(st.resets, 0);
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), 0);
    assert_true(llabs((long long)(kt_clock_model_offset_ns(&m) + 123456789)) < 100000);
    kt_clock_tracker_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_validation), cmocka_unit_test(test_add_cadence_and_ring),
        cmocka_unit_test(test_step_detection),    cmocka_unit_test(test_window),
        cmocka_unit_test(test_poll_live),         cmocka_unit_test(test_poll_on_error),
        cmocka_unit_test(test_poll_step),         cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
