/* test_run_opencl.c — `ktiming run` on an unmodified OpenCL program (clprog): kernels timed with the right
 * names and counts on device timestamps, the program's stdout and exit status unchanged; with events, without
 * events, through dlopen + dlsym (loader layer), LD_PRELOAD only; the trace and HTML outputs; a program
 * without OpenCL. Exits 77 when there is no OpenCL device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <ktiming.h>
#include <ktiming/analysis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITERATIONS 4
#define N_VADD (2 * ITERATIONS + 1) /* two per iteration, plus the empty size-0 one */
#define N_SCALE ITERATIONS
#define N_FILL 1

static char g_dir[64]; /* scratch directory */

/* ---------------------------------------------------------------------------------------------------
 * Running programs
 * ------------------------------------------------------------------------------------------------- */

/* Runs argv, returns its stdout (malloc) and *status (exit code, or 128+signal). */
static char *run(char *const argv[], int *status)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 1024)
            buf = realloc(buf, cap *= 2);
    }
    close(fds[0]);
    buf[len] = '\0';
    int st = 0;
    waitpid(pid, &st, 0);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return buf;
}

static char *path_in(const char *name)
{
    static char buf[4][256];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, 256, "%s/%s", g_dir, name);
    return p;
}

/* Program alone vs. under `ktiming run -o out.json [extra]`: same stdout, same status 0. Returns the
 * snapshot (NULL when none was written) after checking those. */
static kt_snapshot_t *run_both(const char *prog, const char *prog_arg, const char *mode, const char *trace,
                               const char *html)
{
    char *alone_argv[] = {(char *)prog, (char *)prog_arg, NULL};
    int st_alone = -1, st_timed = -1;
    char *alone = run(alone_argv, &st_alone);
    assert_int_equal(st_alone, 0);

    char *out = path_in("out.json");
    unlink(out);
    char *argv[16];
    int a = 0;
    argv[a++] = KT_CLI;
    argv[a++] = "run";
    argv[a++] = "-o";
    argv[a++] = out;
    argv[a++] = "--opencl";
    argv[a++] = (char *)mode;
    if (trace) {
        argv[a++] = "--trace";
        argv[a++] = (char *)trace;
    }
    if (html) {
        argv[a++] = "--html";
        argv[a++] = (char *)html;
    }
    argv[a++] = "--";
    argv[a++] = (char *)prog;
    if (prog_arg)
        argv[a++] = (char *)prog_arg;
    argv[a] = NULL;
    char *timed = run(argv, &st_timed);
    if (strcmp(alone, timed) != 0)
        fail_msg("stdout differs under ktiming run\n--- alone:\n%s\n--- timed:\n%s", alone, timed);
    free(alone);
    free(timed);
    kt_snapshot_t *snap = NULL;
    if (access(out, R_OK) != 0) {
        assert_int_equal(st_timed, 125); /* -o asked for, nothing timed */
        return NULL;
    }
    assert_int_equal(st_timed, 0);
    char err[256];
    int rc = kt_snapshot_load(out, &snap, err, sizeof err);
    if (rc != 0)
        fail_msg("snapshot: %s", err);
    return snap;
}

/* Names and counts of the OpenCL kernels, and every span of them on device timestamps. */
static void assert_timed(const kt_snapshot_t *s)
{
    assert_non_null(s);
    const char *names[] = {"vadd", "scale", "fill"};
    const uint64_t counts[] = {N_VADD, N_SCALE, N_FILL};
    size_t opencl_entries = 0;
    for (size_t i = 0; i < s->count; i++)
        opencl_entries += s->entries[i].backend == KT_BACKEND_OPENCL;
    assert_int_equal(opencl_entries, 3);
    for (int k = 0; k < 3; k++) {
        const kt_kernel_timing_t *e = NULL;
        for (size_t i = 0; i < s->count; i++)
            if (s->entries[i].backend == KT_BACKEND_OPENCL && !strcmp(s->entries[i].name, names[k]))
                e = &s->entries[i];
        if (!e)
            fail_msg("kernel %s not in the snapshot", names[k]);
        if (e->dispatch_count != counts[k])
            fail_msg("kernel %s: %llu dispatches, expected %llu", names[k], (unsigned long long)e->dispatch_count,
                     (unsigned long long)counts[k]);
        assert_int_equal(e->errors, 0);
        assert_int_equal(e->dropped, 0);
        assert_true(e->max_ns > 0);
    }
    size_t device_spans = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (s->entries[sp->entry].backend != KT_BACKEND_OPENCL)
            continue;
        assert_true(sp->flags & KT_SPAN_DEVICE);         /* profiling was forced on... */
        assert_false(sp->flags & KT_SPAN_HOST_TIMED);    /* ...so no host-timed fallback */
        assert_true(sp->enqueue_ns > 0 && sp->enqueue_ns <= sp->start_ns + sp->uncertainty_ns + 1000000);
        device_spans++;
    }
    assert_int_equal(device_spans, N_VADD + N_SCALE + N_FILL);
    assert_int_equal(s->queue_count, 2);
}

/* ---------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------- */

static void test_events(void **state)
{
    (void)state;
    kt_snapshot_t *s = run_both(CLPROG, NULL, "auto", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
}

static void test_no_events(void **state)
{
    (void)state;
    kt_snapshot_t *s = run_both(CLPROG, "--no-events", "auto", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
}

/* dlopen("libOpenCL.so.1") + dlsym: an LD_PRELOAD hook never sees these calls; the loader layer does. */
static void test_dlopen_layer(void **state)
{
    (void)state;
    kt_snapshot_t *s = run_both(CLPROG_DL, NULL, "auto", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
    s = run_both(CLPROG_DL, "--no-events", "layer", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
}

/* LD_PRELOAD alone (what a loader without layers gets): linked programs are timed, dlopen ones are not. */
static void test_preload_only(void **state)
{
    (void)state;
    kt_snapshot_t *s = run_both(CLPROG, NULL, "preload", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
    s = run_both(CLPROG_DL, NULL, "preload", NULL, NULL);
    assert_null(s); /* ran unchanged, untimed */
}

/* --trace and --html from the same run: the trace has the host thread, both queues, matched flows. */
static void test_outputs(void **state)
{
    (void)state;
    char *trace = path_in("trace.json"), *html = path_in("report.html");
    kt_snapshot_t *s = run_both(CLPROG, NULL, "auto", trace, html);
    assert_timed(s);
    kt_snapshot_free(s);
    FILE *f = fopen(trace, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    cJSON *doc = cJSON_Parse(buf);
    free(buf);
    assert_non_null(doc);
    const cJSON *ev, *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    int device_x = 0, enqueue_x = 0, s_n = 0, f_n = 0, queue_tracks = 0, host_threads = 0;
    long ids_s = 0, ids_f = 0;
    cJSON_ArrayForEach(ev, events) {
        const char *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph")->valuestring;
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "cat"));
        int pid = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ev, "pid"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "name"));
        if (!strcmp(ph, "X") && cat && !strcmp(cat, "OpenCL"))
            device_x++;
        if (!strcmp(ph, "X") && cat && !strcmp(cat, "enqueue"))
            enqueue_x++;
        if (!strcmp(ph, "s")) {
            s_n++;
            ids_s += (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ev, "id"));
        }
        if (!strcmp(ph, "f")) {
            f_n++;
            ids_f += (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ev, "id"));
        }
        if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
            if (pid == 1)
                host_threads++;
            else
                queue_tracks++;
        }
    }
    assert_int_equal(device_x, N_VADD + N_SCALE + N_FILL);
    assert_int_equal(enqueue_x, device_x);
    assert_int_equal(s_n, device_x);
    assert_int_equal(f_n, device_x);
    assert_true(ids_s == ids_f);
    assert_true(queue_tracks >= 2);  /* two queues (more lanes if kernels overlapped) */
    assert_int_equal(host_threads, 1); /* clprog enqueues from its main thread only */
    cJSON_Delete(doc);
    f = fopen(html, "rb");
    assert_non_null(f);
    char head[64] = "";
    assert_true(fread(head, 1, sizeof head - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(head, "<!DOCTYPE html>"));
}

/* Exit status passes through; a program without OpenCL runs as usual and nothing is written. */
static void test_status_and_no_opencl(void **state)
{
    (void)state;
    char *argv[] = {KT_CLI, "run", "--", "/bin/sh", "-c", "echo hello; exit 3", NULL};
    int st = -1;
    char *out = run(argv, &st);
    assert_int_equal(st, 3);
    assert_string_equal(out, "hello\n");
    free(out);
    char *argv2[] = {KT_CLI, "run", "--", "/bin/sh", "-c", "kill -TERM $$", NULL};
    out = run(argv2, &st);
    assert_int_equal(st, 128 + 15);
    free(out);
    char *argv3[] = {KT_CLI, "run", "--", "/nonexistent/program", NULL};
    out = run(argv3, &st);
    assert_int_equal(st, 127);
    free(out);
}

int main(void)
{
    char *probe_argv[] = {CLPROG, "--iterations", "1", "--size", "64", NULL};
    int st = -1;
    char *out = run(probe_argv, &st);
    free(out);
    if (st == 77) {
        fprintf(stderr, "test_run_opencl: no OpenCL device, skipping\n");
        return 77;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/kt_run_XXXXXX");
    if (!mkdtemp(g_dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),       cmocka_unit_test(test_no_events),
        cmocka_unit_test(test_dlopen_layer), cmocka_unit_test(test_preload_only),
        cmocka_unit_test(test_outputs),      cmocka_unit_test(test_status_and_no_opencl),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return rc;
}
