/* demo_webgpu.c — the WebGPU rows of `ktiming demo`: runs bindings/webgpu/demo/demo.mjs (Node; Dawn from the npm
 * package `webgpu`, on the newer lavapipe of scripts/fetch-lavapipe25.sh: the same three kernels in WGSL), loads
 * the snapshot it writes and records its dispatches here, so they join the one table. Unavailable (skipped) when
 * this build has no source tree, or Node, the npm package, the driver or an adapter is missing. */
#include "cli.h"
#include "core/env.h"

#include <ktiming/analysis.h>
#include <ktiming/clock_model.h>

#include "shared/clock_anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The demo script exits 3 when WebGPU is unavailable (no package, adapter or timestamp-query). */
#define DEMO_UNAVAILABLE 3

#if defined(KTCLI_WEBGPU_DIR) && defined(KTCLI_LVP25_DIR)

/* Note for --verbose: why the WebGPU rows are absent. */
static int unavailable(const ktcli_demo_opts_t *opts, const char *why)
{
    if (opts->verbose)
        fprintf(stderr, "ktiming demo: webgpu: %s\n", why);
    return KT_EUNAVAILABLE;
}

/* Node's process.hrtime.bigint() reads CLOCK_MONOTONIC; the recorder's host timeline is kt_now_ns(). Both clocks
 * are of this machine, so a clock anchor (what `ktiming merge` uses, src/shared/clock_anchor.h) maps one onto the
 * other, with its bound. */
static uint64_t read_host(void *ctx)
{
    (void)ctx;
    return kt_now_ns();
}

/* Runs the script into `out`; its exit status, or -1 when it could not be started. */
static int run_script(const ktcli_demo_opts_t *opts, const char *out)
{
    char n[24], w[24], s[24], script[4096];
    snprintf(n, sizeof n, "%d", opts->dispatches > 0 ? opts->dispatches : 20);
    snprintf(w, sizeof w, "%d", opts->warmup > 0 ? opts->warmup : 0);
    snprintf(s, sizeof s, "%zu", (opts->bytes ? opts->bytes : (size_t)8 << 20) >> 20);
    snprintf(script, sizeof script, "%s/demo/demo.mjs", KTCLI_WEBGPU_DIR);
    /* The driver's environment comes from the file the fetch script wrote; no node on PATH is "unavailable". */
    char *const argv[] = {"sh", "-c",
                          ". \"$1/env.sh\" && command -v node >/dev/null 2>&1 || exit 3; "
                          "exec node \"$2\" -o \"$3\" --dispatches \"$4\" --warmup \"$5\" --size \"$6\"",
                          "sh", KTCLI_LVP25_DIR, script, (char *)out, n, w, s, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO); /* our stdout is the table */
    if (!opts->verbose) /* Dawn's notes about the driver's limits */
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc)
        return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static uint64_t shifted(uint64_t t, int64_t shift) { return t ? t + (uint64_t)shift : 0; }

/* What the anchor adds to a span's uncertainty: its bound at the span's end farther from it. */
static uint64_t placed_bound(const kt_clock_anchor_t *a, const kt_span_t *sp)
{
    uint64_t b0 = kt__clock_anchor_bound(a, sp->start_ns), b1 = kt__clock_anchor_bound(a, sp->end_ns);
    return b0 > b1 ? b0 : b1;
}

/* Records every dispatch, drop and error of the snapshot, on this process's host timeline. */
static int replay(const kt_snapshot_t *s, ktcli_progress_t *progress)
{
    kt_host_clock_info_t hc = {0};
    kt_clock_anchor_t anchor;
    kt_host_clock_info(&hc);
    uint64_t hb = isfinite(hc.error_bound_ns) && hc.error_bound_ns > 0 ? (uint64_t)ceil(hc.error_bound_ns) : 0;
    if (kt__clock_anchor_take(kt__clock_read_monotonic, read_host, NULL, hb, KT_CLOCK_ANCHOR_TRIES, &anchor) != 0)
        return KT_EIO;
    int64_t shift = kt__clock_anchor_offset(&anchor);
    int rc = 0;
    kt_kernel_id_t *ids = calloc(s->count ? s->count : 1, sizeof *ids);
    uint32_t *queues = calloc(s->queue_count ? s->queue_count : 1, sizeof *queues);
    if (!ids || !queues) {
        free(ids);
        free(queues);
        return KT_ENOMEM;
    }
    for (size_t i = 0; i < s->count; i++)
        ids[i] = kt_kernel_intern(s->entries[i].name, KT_BACKEND_WEBGPU, s->entries[i].device);
    for (size_t i = 0; i < s->queue_count; i++)
        queues[i] = kt_queue_register(KT_BACKEND_WEBGPU, s->queues[i].device, s->queues[i].label);
    for (size_t i = 0; i < s->device_count; i++)
        kt_device_publish(&s->devices[i]);
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        kt_record_dispatch(&(kt_dispatch_t){.kernel = ids[sp->entry],
                                            .queue = sp->queue < s->queue_count ? queues[sp->queue] : 0,
                                            .flags = sp->flags,
                                            .duration_ns = sp->duration_ns,
                                            .enqueue_ns = shifted(sp->enqueue_ns, shift),
                                            .submit_ns = shifted(sp->submit_ns, shift),
                                            .start_ns = shifted(sp->start_ns, shift),
                                            .end_ns = shifted(sp->end_ns, shift),
                                            .uncertainty_ns = sp->uncertainty_ns + placed_bound(&anchor, sp)});
    }
    for (size_t i = 0; i < s->count; i++) {
        const kt_kernel_timing_t *e = &s->entries[i];
        if (e->spans_dropped) { /* the script keeps a span per dispatch: anything else is a defect, not data */
            fprintf(stderr, "ktiming demo: webgpu: %s: %llu dispatches without a span\n", e->name,
                    (unsigned long long)e->spans_dropped);
            rc = KT_EPARSE;
        }
        for (int r = 0; r < KT_DROP_REASON_COUNT; r++)
            for (uint64_t k = 0; k < e->dropped_by[r]; k++)
                kt_record_drop(ids[i], (kt_drop_reason_t)r);
        for (uint64_t k = 0; k < e->errors; k++)
            kt_record_error(ids[i], NULL);
        ktcli_progress_add(progress, e->dispatch_count);
    }
    free(ids);
    free(queues);
    return rc;
}

int ktcli_demo_webgpu(const ktcli_demo_opts_t *opts)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/node_modules/webgpu/package.json", KTCLI_WEBGPU_DIR);
    if (access(path, R_OK))
        return unavailable(opts, "no npm package webgpu in " KTCLI_WEBGPU_DIR "/node_modules "
                                 "(scripts/install-deps.sh --test installs it)");
    if (access(KTCLI_LVP25_DIR "/env.sh", R_OK))
        return unavailable(opts, "no newer lavapipe in " KTCLI_LVP25_DIR " (scripts/fetch-lavapipe25.sh)");
    const char *tmp = kt__env_any("TMPDIR");
    snprintf(path, sizeof path, "%s/ktiming-webgpu-XXXXXX.json", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemps(path, 5);
    if (fd < 0) {
        fprintf(stderr, "ktiming demo: webgpu: cannot create %s: %s\n", path, strerror(errno));
        return KT_EIO;
    }
    close(fd);
    int st = run_script(opts, path), rc = 0;
    if (st == DEMO_UNAVAILABLE) {
        rc = unavailable(opts, "Node or a WebGPU adapter with timestamp-query is missing");
    } else if (st != 0) {
        fprintf(stderr, "ktiming demo: webgpu: the Node demo failed (%s %d; --verbose shows its messages)\n",
                st < 0 ? "could not start, errno" : "exit status", st < 0 ? errno : st);
        rc = KT_EBACKEND;
    } else {
        kt_snapshot_t *s = NULL;
        char err[512];
        if (kt_snapshot_load(path, NULL, &s, err, sizeof err)) {
            fprintf(stderr, "ktiming demo: webgpu: %s\n", err);
            rc = KT_EPARSE;
        } else {
            rc = replay(s, opts->progress);
            kt_snapshot_free(s);
        }
    }
    unlink(path);
    return rc;
}

#else

int ktcli_demo_webgpu(const ktcli_demo_opts_t *opts)
{
    if (opts->verbose)
        fprintf(stderr, "ktiming demo: webgpu: this ktiming was built without the bindings/webgpu source tree\n");
    return KT_EUNAVAILABLE;
}

#endif
