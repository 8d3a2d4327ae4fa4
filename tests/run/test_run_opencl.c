/* test_run_opencl.c — `ktiming run` on an unmodified OpenCL program (clprog): kernels timed with the right
 * names and counts on device timestamps, the program's stdout and exit status unchanged; with events, without
 * events, through dlopen + dlsym (loader layer), LD_PRELOAD only; the trace and HTML outputs; a program
 * without OpenCL. Exits 77 when there is no OpenCL device. */
#include "run_util.h"

#include <cjson/cJSON.h>

#define ITERATIONS 4
#define N_VADD (2 * ITERATIONS + 1) /* two per iteration, plus the empty size-0 one */
#define N_SCALE ITERATIONS
#define N_FILL 1
#define N_READS 2 /* clEnqueueReadBuffer: c after the loop, a after the task */
#define PIPE_REPS 3
#define PIPE_BYTES ((uint64_t)(1 << 16) * sizeof(float)) /* clprog's default size */

/* clprog [arg] under ktiming run with --opencl mode [and more]. */
static kt_snapshot_t *both(const char *prog, const char *arg, const char *mode, const char *trace, const char *html)
{
    const char *p[] = {prog, arg, NULL};
    const char *k[8] = {"--opencl", mode};
    int n = 2;
    if (trace) {
        k[n++] = "--trace";
        k[n++] = trace;
    }
    if (html) {
        k[n++] = "--html";
        k[n++] = html;
    }
    k[n] = NULL;
    return ru_run_both(p, k);
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
    assert_int_equal(opencl_entries, 4); /* the three kernels and clprog's two blocking reads */
    const kt_kernel_timing_t *reads = ru_find(s, "clEnqueueReadBuffer", KT_BACKEND_OPENCL);
    assert_non_null(reads);
    assert_int_equal(reads->dispatch_count, N_READS);
    assert_true(reads->bytes > 0);
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
        /* the enqueue clprog makes with unset arguments, refused by the driver, counts for vadd with its name */
        assert_int_equal(e->errors, k == 0 ? 1 : 0);
        assert_string_equal(e->last_error, k == 0 ? "CL_INVALID_KERNEL_ARGS" : "");
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
    assert_int_equal(device_spans, N_VADD + N_SCALE + N_FILL + N_READS);
    assert_int_equal(s->queue_count, 2);
}

/* ---------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------- */

static void test_events(void **state)
{
    (void)state;
    kt_snapshot_t *s = both(CLPROG, NULL, "auto", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
}

static void test_no_events(void **state)
{
    (void)state;
    kt_snapshot_t *s = both(CLPROG, "--no-events", "auto", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
}

/* dlopen("libOpenCL.so.1") + dlsym: an LD_PRELOAD hook never sees these calls; the loader layer does. */
static void test_dlopen_layer(void **state)
{
    (void)state;
    kt_snapshot_t *s = both(CLPROG_DL, NULL, "auto", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
    s = both(CLPROG_DL, "--no-events", "layer", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
}

/* LD_PRELOAD alone (what a loader without layers gets): linked programs are timed, dlopen ones are not. */
static void test_preload_only(void **state)
{
    (void)state;
    kt_snapshot_t *s = both(CLPROG, NULL, "preload", NULL, NULL);
    assert_timed(s);
    kt_snapshot_free(s);
    s = both(CLPROG_DL, NULL, "preload", NULL, NULL);
    assert_null(s); /* ran unchanged, untimed */
}

/* --trace and --html from the same run: the trace has the host thread, both queues, matched flows. */
static void test_outputs(void **state)
{
    (void)state;
    char *trace = ru_path("trace.json"), *html = ru_path("report.html");
    kt_snapshot_t *s = both(CLPROG, NULL, "auto", trace, html);
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
    assert_int_equal(device_x, N_VADD + N_SCALE + N_FILL + N_READS);
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

/* `-o`: where the program's snapshot lands. A new path and an existing regular file get the snapshot (moved into
 * place) with mode 0666 & ~umask whatever the old file had; a symbolic link stays a link and its target gets the
 * snapshot; a path on another file system (/dev/shm, a tmpfs) is copied through the writer. Each result loads
 * with the program's kernels in it. */
static int run_to(const char *out)
{
    char *argv[] = {KT_CLI, "run", "-f", "none", "-o", (char *)out, "--", CLPROG, "--tiny", "50", NULL};
    int st = -1;
    free(ru_run(argv, &st));
    return st;
}

static void assert_snapshot_at(const char *path)
{
    kt_snapshot_t *s = NULL;
    char err[256];
    if (kt_snapshot_load(path, NULL, &s, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    const kt_kernel_timing_t *e = ru_find(s, "scale", KT_BACKEND_OPENCL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 50);
    kt_snapshot_free(s);
}

static void test_output_placement(void **state)
{
    (void)state;
    mode_t old_mask = umask(022);
    struct stat st;
    char *fresh = ru_path("fresh.json");
    unlink(fresh);
    assert_int_equal(run_to(fresh), 0);
    assert_snapshot_at(fresh);
    assert_int_equal(stat(fresh, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);

    char *old = ru_path("old.json");
    FILE *f = fopen(old, "w");
    assert_non_null(f);
    fputs("not a snapshot\n", f);
    fclose(f);
    assert_int_equal(chmod(old, 0600), 0);
    assert_int_equal(run_to(old), 0);
    assert_snapshot_at(old);
    assert_int_equal(stat(old, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* a replaced file keeps its mode (issue 39.2) */

    char *target = ru_path("target.json"), *link = ru_path("link.json");
    unlink(target);
    unlink(link);
    f = fopen(target, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(run_to(link), 0);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_snapshot_at(target);

    char shm[128];
    snprintf(shm, sizeof shm, "/dev/shm/kt_run_place_%ld.json", (long)getpid());
    if (access("/dev/shm", W_OK) == 0) { /* not renamable to from the run directory */
        assert_int_equal(run_to(shm), 0);
        assert_snapshot_at(shm);
        unlink(shm);
    }
    umask(old_mask);
}

/* Many queues made three ways, some retained twice, released in a stride order: under the interposer (which
 * forces profiling on and keeps every queue in its lookup) each surviving queue still shows the program exactly
 * what it asked for, after every round of releases; clprog prints the mismatches, the same as alone (0), and
 * each queue's one kernel is timed. */
static void test_many_queues(void **state)
{
    (void)state;
    enum { NQ = 240 };
    const char *p[] = {CLPROG, "--queues", "240", NULL}, *k[] = {"--opencl", "auto", NULL};
    kt_snapshot_t *s = ru_run_both(p, k);
    assert_non_null(s);
    const kt_kernel_timing_t *e = ru_find(s, "scale", KT_BACKEND_OPENCL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, NQ);
    assert_int_equal(e->errors, 0);
    kt_snapshot_free(s);
}

/* cl_khr_command_buffer: each of the N executions of one command buffer (vadd, then scale) is timed as one
 * command named after its kernels, through the loader layer (clprog_dl, entry points from
 * clGetExtensionFunctionAddressForPlatform) and through LD_PRELOAD (clprog); the kernels inside are not timed
 * one by one, and the program's output is unchanged. Skipped where the device lacks the extension. */
static void test_command_buffer(void **state)
{
    (void)state;
    const char *probe[] = {CLPROG, "--cmdbuf", "1", NULL};
    int st = -1;
    free(ru_run((char *const *)probe, &st));
    if (st == 77)
        skip();
    assert_int_equal(st, 0);
    const char *progs[2] = {CLPROG_DL, CLPROG}, *modes[2] = {"layer", "preload"};
    for (int i = 0; i < 2; i++) {
        const char *p[] = {progs[i], "--cmdbuf", "6", NULL}, *k[] = {"--opencl", modes[i], NULL};
        kt_snapshot_t *s = ru_run_both(p, k);
        assert_non_null(s);
        const kt_kernel_timing_t *e = ru_find(s, "cmdbuf:vadd+scale", KT_BACKEND_OPENCL);
        if (!e)
            fail_msg("no cmdbuf:vadd+scale entry (%s)", modes[i]);
        assert_int_equal(e->dispatch_count, 6);
        assert_int_equal(e->dropped + e->errors, 0);
        assert_null(ru_find(s, "vadd", KT_BACKEND_OPENCL));
        kt_snapshot_free(s);
    }
}

/* write -> kernel -> read: three entries with the right counts and bytes (transfers are timed by default);
 * clEnqueueNativeKernel timed; the NULL-properties queue's CL_QUEUE_PROPERTIES_ARRAY is what the program
 * passed (empty) -- clprog prints it, and its stdout must match the run alone. */
static void test_pipeline(void **state)
{
    (void)state;
    kt_snapshot_t *s = both(CLPROG, "--pipeline", "auto", NULL, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *w = ru_find(s, "clEnqueueWriteBuffer", KT_BACKEND_OPENCL);
    const kt_kernel_timing_t *k = ru_find(s, "vadd", KT_BACKEND_OPENCL);
    const kt_kernel_timing_t *r = ru_find(s, "clEnqueueReadBuffer", KT_BACKEND_OPENCL);
    assert_non_null(w);
    assert_non_null(k);
    assert_non_null(r);
    assert_int_equal(w->dispatch_count, PIPE_REPS);
    assert_int_equal(k->dispatch_count, PIPE_REPS);
    assert_int_equal(r->dispatch_count, PIPE_REPS);
    assert_int_equal(w->bytes, PIPE_REPS * PIPE_BYTES);
    assert_int_equal(r->bytes, PIPE_REPS * PIPE_BYTES);
    assert_int_equal(k->bytes, 0);
    const kt_kernel_timing_t *native = ru_find(s, "clEnqueueNativeKernel", KT_BACKEND_OPENCL);
    assert_non_null(native); /* PoCL's CPU devices run native kernels */
    assert_int_equal(native->dispatch_count, 1);
    kt_snapshot_free(s);
    /* kernels only: the transfers are left untimed */
    setenv("KTIMING_OPENCL_COMMANDS", "kernels", 1);
    s = both(CLPROG, "--pipeline", "auto", NULL, NULL);
    unsetenv("KTIMING_OPENCL_COMMANDS");
    assert_non_null(s);
    assert_null(ru_find(s, "clEnqueueWriteBuffer", KT_BACKEND_OPENCL));
    assert_non_null(ru_find(s, "vadd", KT_BACKEND_OPENCL));
    kt_snapshot_free(s);
}

/* -v prints one line per command inside the program: on stderr, never into the program's stdout. */
static void test_verbose_keeps_stdout(void **state)
{
    (void)state;
    const char *p[] = {CLPROG, NULL};
    const char *k[] = {"--opencl", "auto", "-v", NULL};
    kt_snapshot_t *s = ru_run_both(p, k); /* fails when stdout differs from the run alone */
    assert_non_null(s);
    kt_snapshot_free(s);
}

/* A synchronisation point records, before it waits, what the thread's previous one waited for: under -v, the lines
 * of the commands before a clFinish (or clWaitForEvents) are on the program's stderr before what it prints after
 * the next one, and all of them by the end. Through the loader layer and LD_PRELOAD both. Without the hooks, at
 * each mark only what the collector had recorded on its own (none of 100, with the code before them). */
static void test_sync_points_record(void **state)
{
    (void)state;
    static const char *const variants[][3] = {{"auto", CLPROG, ""}, {"auto", CLPROG, "--wait-events"},
                                              {"preload", CLPROG, ""}, {"layer", CLPROG_DL, "--wait-events"}};
    enum { TINY = 400 };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        char *out = ru_path("sync.json"), *err = ru_path("sync.txt");
        char cmd[1536];
        snprintf(cmd, sizeof cmd, "exec '%s' run -v --opencl %s -o '%s' -- '%s' --tiny %d --mark %s 2> '%s'", KT_CLI,
                 variants[v][0], out, variants[v][1], TINY, variants[v][2], err);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        int st = -1;
        free(ru_run(argv, &st));
        assert_int_equal(st, 0);
        FILE *f = fopen(err, "rb");
        assert_non_null(f);
        char line[1024];
        int lines = 0, marks = 0;
        while (fgets(line, sizeof line, f)) {
            int k = 0;
            if (!strncmp(line, "ktiming,exec,opencl,", 20) && strstr(line, ",scale,"))
                lines++;
            else if (sscanf(line, "clprog: synced %d", &k) == 1) {
                marks++;
                if (lines < k - 100)
                    fail_msg("%s %s %s: %d kernels recorded when clprog had synced %d", variants[v][0],
                             variants[v][1], variants[v][2], lines, k);
            }
        }
        fclose(f);
        assert_int_equal(marks, TINY / 100);
        assert_int_equal(lines, TINY);
        /* host API time: each of the TINY / 100 waits (clFinish, or clWaitForEvents on the 100th kernel's event)
         * and the last clFinish are entries of backend host-api, one span each on the program's thread */
        kt_snapshot_t *s = NULL;
        char msg[256];
        assert_int_equal(kt_snapshot_load(out, NULL, &s, msg, sizeof msg), 0);
        int by_event = variants[v][2][0] != 0;
        const kt_kernel_timing_t *fin = ru_find(s, "clFinish", KT_BACKEND_HOST_API),
                                 *wev = ru_find(s, "clWaitForEvents", KT_BACKEND_HOST_API);
        assert_non_null(fin);
        assert_int_equal(fin->dispatch_count, by_event ? 1 : TINY / 100 + 1);
        if (by_event) {
            assert_non_null(wev);
            assert_int_equal(wev->dispatch_count, TINY / 100);
        } else {
            assert_null(wev);
        }
        size_t waits = 0;
        for (size_t i = 0; i < s->span_count; i++)
            if (s->entries[s->spans[i].entry].backend == KT_BACKEND_HOST_API) {
                waits++;
                assert_int_equal(s->spans[i].queue, UINT32_MAX);
            }
        assert_int_equal(waits, TINY / 100 + 1);
        kt_snapshot_free(s);
    }
}

/* The summary on stderr: time per API first (OpenCL: 3 kernels and every dispatch, then the sum), then the
 * kernel table with the kernels in order of total time, largest first. */
static void test_summary(void **state)
{
    (void)state;
    char *out = ru_path("summary.json"), *err = ru_path("summary.txt");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec '%s' run -o '%s' -- '%s' 2> '%s'", KT_CLI, out, CLPROG, err);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int st = -1;
    free(ru_run(argv, &st));
    assert_int_equal(st, 0);
    kt_snapshot_t *s = NULL;
    char why[256];
    if (kt_snapshot_load(out, NULL, &s, why, sizeof why) != 0)
        fail_msg("snapshot: %s", why);
    FILE *f = fopen(err, "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *api = strstr(text, "[timing] API      what        count  dispatches");
    if (!api)
        fail_msg("no per-API block in:\n%s", text);
    const char *cl = strstr(api, "\n[timing] OpenCL "), *all = strstr(api, "\n[timing] all "),
               *table = strstr(api, "\n[timing] kernel ");
    assert_non_null(cl);
    assert_non_null(all);
    assert_non_null(table);
    assert_true(api < cl && cl < all && all < table);
    unsigned long long kernels = 0, dispatches = 0;
    assert_int_equal(sscanf(cl + 1, "[timing] OpenCL kernels %llu %llu", &kernels, &dispatches), 2);
    assert_int_equal(kernels, 3);
    assert_int_equal(dispatches, N_VADD + N_SCALE + N_FILL);
    /* the table's rows in order of total time */
    const char *names[] = {"vadd", "scale", "fill"};
    const char *pos[3];
    uint64_t totals[3];
    for (int k = 0; k < 3; k++) {
        char row[64];
        snprintf(row, sizeof row, "\n[timing] %s ", names[k]);
        pos[k] = strstr(table, row);
        assert_non_null(pos[k]);
        totals[k] = ru_find(s, names[k], KT_BACKEND_OPENCL)->total_ns;
    }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            if (totals[a] > totals[b])
                assert_true(pos[a] < pos[b]);
    kt_snapshot_free(s);
}

/* Exit status passes through; a program without OpenCL runs as usual and nothing is written. */
/* What the program sees is what it sees without ktiming (the outputs compare equal): a gated kernel's event
 * reference count (ktiming's own reference left out), "no profiling" on an event of a queue made without it,
 * also after the program released the queue; and every refused clEnqueueTask is counted, as a refused
 * clEnqueueNDRangeKernel is. */
static void test_truths(void **state)
{
    (void)state;
    kt_snapshot_t *s = both(CLPROG, "--truths", "auto", NULL, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *fill = ru_find(s, "fill", KT_BACKEND_OPENCL);
    assert_non_null(fill);
    assert_int_equal(fill->errors, 3);
    assert_string_equal(fill->last_error, "CL_INVALID_KERNEL_ARGS");
    assert_int_equal(fill->dispatch_count, 0);
    const kt_kernel_timing_t *scale = ru_find(s, "scale", KT_BACKEND_OPENCL);
    assert_non_null(scale);
    assert_int_equal(scale->dispatch_count, 1);
    kt_snapshot_free(s);
}

/* Launch configurations (issue 40.2): clprog --configs runs scale as global 64 local 16 x3, global 32 local 8 x2,
 * global 64 local NULL x1 and clEnqueueTask x1. Under the loader layer and LD_PRELOAD: exactly those counts in the
 * snapshot, in the JSON file (key "configs") and in `ktiming report --by-config`. */
static const struct {
    uint64_t global, local, count;
    const char *label;
} kConfigs[] = {{64, 16, 3, "global=64 local=16"}, {32, 8, 2, "global=32 local=8"},
                {64, 0, 1, "global=64 local=auto"}, {1, 1, 1, "global=1 local=1"}};

static void assert_configs(const kt_snapshot_t *s)
{
    const kt_kernel_timing_t *e = ru_find(s, "scale", KT_BACKEND_OPENCL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 7);
    assert_int_equal(e->config_count, 4);
    for (size_t k = 0; k < sizeof kConfigs / sizeof kConfigs[0]; k++) {
        const kt_config_timing_t *c = NULL;
        for (uint32_t i = 0; i < e->config_count; i++)
            if (e->configs[i].launch.size[0] == kConfigs[k].global && e->configs[i].launch.local[0] == kConfigs[k].local)
                c = &e->configs[i];
        if (!c)
            fail_msg("no configuration %s", kConfigs[k].label);
        assert_int_equal(c->launch.kind, KT_LAUNCH_ITEMS);
        assert_int_equal(c->launch.dims, 1);
        assert_int_equal(c->dispatch_count, kConfigs[k].count);
        assert_true(c->min_ns <= c->max_ns && c->total_ns >= c->min_ns);
    }
}

/* A table with the scale kernel's row: with `want`, one row per configuration after it with its count; without,
 * none. */
static void assert_config_rows(const char *text, int want)
{
    const char *kernel = strstr(text, "\n[timing] scale ");
    if (!kernel)
        fail_msg("no scale row in:\n%s", text);
    for (size_t k = 0; k < sizeof kConfigs / sizeof kConfigs[0]; k++) {
        char label[96];
        snprintf(label, sizeof label, "\n[timing]   %s ", kConfigs[k].label);
        const char *row = strstr(text, label);
        if (!want) {
            if (row)
                fail_msg("a configuration row '%s' without --by-config in:\n%s", kConfigs[k].label, text);
            continue;
        }
        if (!row || row < kernel)
            fail_msg("no row '%s' after the kernel's in:\n%s", kConfigs[k].label, text);
        unsigned long long n = 0;
        assert_int_equal(sscanf(row + strlen(label), " %llu", &n), 1);
        assert_int_equal(n, kConfigs[k].count);
    }
}

static void test_configs(void **state)
{
    (void)state;
    const char *modes[] = {"layer", "preload"};
    for (int m = 0; m < 2; m++) {
        kt_snapshot_t *s = both(CLPROG, "--configs", modes[m], NULL, NULL);
        assert_non_null(s);
        assert_configs(s);
        kt_snapshot_free(s);
    }
    /* the file itself: one "configs" row per configuration with its count */
    char *json = ktt_read_file(ru_path("out.json"), NULL);
    assert_non_null(json);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    const cJSON *it, *scale = NULL;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "entries"))
        if (!strcmp(cJSON_GetObjectItem(it, "name")->valuestring, "scale"))
            scale = it;
    assert_non_null(scale);
    const cJSON *rows = cJSON_GetObjectItem(scale, "configs");
    assert_int_equal(cJSON_GetArraySize(rows), 4);
    uint64_t seen = 0;
    cJSON_ArrayForEach(it, rows)
    {
        assert_string_equal(cJSON_GetObjectItem(it, "kind")->valuestring, "items");
        uint64_t g = (uint64_t)cJSON_GetArrayItem(cJSON_GetObjectItem(it, "size"), 0)->valuedouble;
        uint64_t l = (uint64_t)cJSON_GetArrayItem(cJSON_GetObjectItem(it, "local"), 0)->valuedouble;
        for (size_t k = 0; k < sizeof kConfigs / sizeof kConfigs[0]; k++)
            if (kConfigs[k].global == g && kConfigs[k].local == l) {
                assert_int_equal((uint64_t)cJSON_GetObjectItem(it, "dispatch_count")->valuedouble, kConfigs[k].count);
                seen |= 1u << k;
            }
    }
    assert_int_equal(seen, 0xf);
    cJSON_Delete(root);
    free(json);
    /* report --by-config: the kernel's row, then one row per configuration with its count */
    char *argv[] = {KT_CLI, "report", ru_path("out.json"), "--by-config", "--filter", "scale", NULL};
    int st = -1;
    char *text = ru_run(argv, &st);
    assert_int_equal(st, 0);
    assert_config_rows(text, 1);
    free(text);
}

/* `ktiming run --by-config`: the summary on stderr has, after the scale kernel's row, one row per configuration with
 * its count (as `report --by-config`); without the option it has none. */
static void test_run_by_config(void **state)
{
    (void)state;
    for (int with = 0; with < 2; with++) {
        char *err = ru_path("by_config.txt"), cmd[1024];
        snprintf(cmd, sizeof cmd, "exec '%s' run %s -- '%s' --configs 2> '%s'", KT_CLI, with ? "--by-config" : "",
                 CLPROG, err);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        int st = -1;
        free(ru_run(argv, &st));
        assert_int_equal(st, 0);
        char *text = ktt_read_file(err, NULL);
        assert_non_null(text);
        assert_config_rows(text, with);
        free(text);
    }
}

/* SVM commands are transfers like the buffer ones: PoCL has SVM (CL_DEVICE_SVM_CAPABILITIES 0xb here). */
static void test_svm(void **state)
{
    (void)state;
    char *probe[] = {CLPROG, "--svm", "1", NULL};
    int st = -1;
    free(ru_run(probe, &st));
    if (st == 77) {
        printf("the device has no SVM: nothing to check\n");
        return;
    }
    const char *prog[] = {CLPROG, "--svm", "10", NULL};
    const char *k[] = {"--opencl", "auto", NULL};
    kt_snapshot_t *s = ru_run_both(prog, k);
    assert_non_null(s);
    const struct {
        const char *name;
        uint64_t count, bytes;
    } want[] = {{"clEnqueueSVMMemFill", 10, 10u << 20}, {"clEnqueueSVMMemcpy", 10, 10u << 20},
                {"clEnqueueSVMMap", 10, 10u << 20},     {"clEnqueueSVMUnmap", 10, 0},
                {"clEnqueueSVMMigrateMem", 1, 0},       {"clEnqueueSVMFree", 1, 0},
                {"scale", 10, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const kt_kernel_timing_t *e = ru_find(s, want[i].name, KT_BACKEND_OPENCL);
        if (!e)
            fail_msg("%s not timed", want[i].name);
        assert_int_equal(e->dispatch_count, want[i].count);
        assert_int_equal(e->bytes, want[i].bytes);
        assert_int_equal(e->errors, 0);
        assert_int_equal(e->dropped, 0);
    }
    kt_snapshot_free(s);
}

/* `ktiming devices` labels identical devices as `ktiming run` reports do: #0 and #1 (PoCL with two pthread
 * devices), and sub-devices and the rest the same way (both print the backend's device label). */
static void test_devices_labels(void **state)
{
    (void)state;
    char *argv[] = {KT_CLI, "devices", NULL};
    const char *const env[] = {"POCL_DEVICES=pthread pthread", NULL};
    ktt_spawn_t how = {.env = env, .err = KTT_QUIET};
    int st = -1;
    char *out = ktt_run_capture(argv, &how, &st);
    assert_int_equal(st, 0);
    assert_non_null(out);
    if (!strstr(out, "Portable Computing Language")) {
        printf("not PoCL: nothing to check\n");
        free(out);
        return;
    }
    assert_non_null(strstr(out, " #0  ("));
    assert_non_null(strstr(out, " #1  ("));
    free(out);
}

static void test_status_and_no_opencl(void **state)
{
    (void)state;
    char *argv[] = {KT_CLI, "run", "--", "/bin/sh", "-c", "echo hello; exit 3", NULL};
    int st = -1;
    char *out = ru_run(argv, &st);
    assert_int_equal(st, 3);
    assert_string_equal(out, "hello\n");
    free(out);
    char *argv2[] = {KT_CLI, "run", "--", "/bin/sh", "-c", "kill -TERM $$", NULL};
    out = ru_run(argv2, &st);
    assert_int_equal(st, 128 + 15);
    free(out);
    char *argv3[] = {KT_CLI, "run", "--", "/nonexistent/program", NULL};
    out = ru_run(argv3, &st);
    assert_int_equal(st, 127);
    free(out);
}

int main(void)
{
    char *probe_argv[] = {CLPROG, "--iterations", "1", "--size", "64", NULL};
    int st = -1;
    char *out = ru_run(probe_argv, &st);
    free(out);
    if (st == 77) {
        fprintf(stderr, "test_run_opencl: no OpenCL device, skipping\n");
        return 77;
    }
    if (ru_setup() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),       cmocka_unit_test(test_no_events),
        cmocka_unit_test(test_dlopen_layer), cmocka_unit_test(test_preload_only),
        cmocka_unit_test(test_outputs),      cmocka_unit_test(test_status_and_no_opencl),
        cmocka_unit_test(test_pipeline),     cmocka_unit_test(test_many_queues),
        cmocka_unit_test(test_command_buffer), cmocka_unit_test(test_verbose_keeps_stdout),
        cmocka_unit_test(test_summary),      cmocka_unit_test(test_output_placement),
        cmocka_unit_test(test_sync_points_record), cmocka_unit_test(test_truths),
        cmocka_unit_test(test_svm),          cmocka_unit_test(test_configs),        cmocka_unit_test(test_run_by_config),        cmocka_unit_test(test_devices_labels),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ru_teardown();
    return rc;
}
