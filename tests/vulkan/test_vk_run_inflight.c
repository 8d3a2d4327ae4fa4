/* test_vk_run_inflight.c — Vulkan device work in flight when the program dies is counted as lost (issue 39.1):
 * under `ktiming run -o`, vkcrashprog (a plain Vulkan program, timed by the layer) submits dispatches that wait
 * on an event it never sets and then segfaults or SIGKILLs itself: each kernel has exactly its dispatches dropped
 * as "in flight at exit", and the batches too (one read through ktiming's records, one through a one-time
 * primary's own pair). Then the balance: a program whose timed work ended every way the layer knows (read per
 * submission, through a one-time primary's pair, a pair its batch did not need, a secondary's occurrences, a
 * recording reset unsent, a device destroyed with work in flight) and then SIGKILLs itself leaves nothing
 * counted in flight: every begin had its end. Under the validation layer (the program counts its messages).
 * Built a second time with VKC_API (test_vk_run_inflight_api): the same through the backend's own API
 * (kt_vk_begin/kt_vk_end, no layer: `ktiming run --vulkan off`), in the readback mode VKCRASH_READBACK names;
 * no batches there (no per-submission timing), and settled ends by collection, discard, context destroy and
 * device loss.
 * Also launch configurations (issue 40.2, `configs`): one pipeline dispatched with two group counts, a
 * vkCmdDispatchBase and a vkCmdDispatchIndirect, exact counts per configuration in the program's own snapshot.
 * Counts only. Exits 77 without a Vulkan device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/files.h"
#include "support/proc.h"

#define N_A 3 /* gated: one-time primary's dispatches; settled: submissions of `reuse` and `once` */
#define N_B 5 /* gated: reusable primary's; settled: dispatches of `unsent` and `destroyed` */

static int g_skip;

/* name: `counted` dispatches recorded, `lost` dropped in flight at exit, and `other` dropped for other reasons. */
static void check_kernel(const kt_snapshot_t *s, const char *name, uint64_t counted, uint64_t lost, uint64_t other)
{
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_VULKAN, NULL);
    if (!t)
        fail_msg("%s: no entry", name);
    if (t->dispatch_count != counted || t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT] != lost ||
        t->dropped != lost + other)
        fail_msg("%s: %llu counted, %llu dropped (%llu in flight at exit); want %llu, %llu (%llu)", name,
                 (unsigned long long)t->dispatch_count, (unsigned long long)t->dropped,
                 (unsigned long long)t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], (unsigned long long)counted,
                 (unsigned long long)(lost + other), (unsigned long long)lost);
}

/* Runs vkcrashprog `mode` under ktiming run; returns the snapshot (run's stderr line checked for `lost`). */
static kt_snapshot_t *run_prog(const char *mode, int status, const char *ended, unsigned lost, char **dir_out)
{
    char *dir = ktt_tmpdir("vkinflight");
    assert_non_null(dir);
    char *out = ktt_path(dir, "out.json"), *errf = ktt_path(dir, "stderr.txt"), *outf = ktt_path(dir, "stdout.txt");
    char na[16], nb[16];
    snprintf(na, sizeof na, "%d", N_A);
    snprintf(nb, sizeof nb, "%d", N_B);
    char *argv[] = {(char *)KT_CLI, (char *)"run", (char *)"-o", out, (char *)"-f", (char *)"none",
#ifdef VKC_API
                    (char *)"--vulkan", (char *)"off",
#endif
                    (char *)"--", (char *)VKCRASHPROG, (char *)"--validation", (char *)mode, na, nb, NULL};
    /* sanitizer runtimes in the program (the layer and ktiming are built with them there) catch SIGSEGV and
     * abort otherwise */
    const char *env[] = {"ASAN_OPTIONS=handle_segv=0:handle_abort=0:detect_leaks=0", NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = outf, .err = errf, .env = env}), status);
    char *said = ktt_read_file(errf, NULL), *printed = ktt_read_file(outf, NULL), want[64];
    assert_non_null(said);
    assert_non_null(printed);
    /* the validation layer below ours reported nothing */
    if (!strstr(printed, "validation messages: 0\n"))
        fail_msg("program said: %s; stderr: %s", printed, said);
    if (lost) { /* run's line says what was lost, not only what was recovered */
        snprintf(want, sizeof want, ", %u dispatches lost in flight\n", lost);
        if (!strstr(said, want))
            fail_msg("run said: %s", said);
    } else if (strstr(said, "lost in flight")) {
        fail_msg("run said: %s", said);
    }
    free(said);
    free(printed);
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    int rc = kt_snapshot_load(out, NULL, &s, err, sizeof err);
    if (rc != 0)
        fail_msg("load %s: %s", out, err);
    if (ended) /* how a dead program ended */
        assert_string_equal(s->ended, ended);
    free(errf);
    free(outf);
    free(out);
    *dir_out = dir;
    return s;
}

static void done(kt_snapshot_t *s, char *dir)
{
    kt_snapshot_free(s);
    ktt_rmtree(dir);
    free(dir);
}

static void check_death(const char *mode, int status, const char *ended)
{
    if (g_skip)
        skip();
    char *dir;
#ifdef VKC_API
    kt_snapshot_t *s = run_prog(mode, status, ended, N_A + N_B, &dir);
    assert_null(kt_snapshot_find(s, "vkQueueSubmit", KT_BACKEND_VULKAN, NULL));
#else
    kt_snapshot_t *s = run_prog(mode, status, ended, N_A + N_B + 2, &dir);
    check_kernel(s, "vkQueueSubmit", 0, 2, 0); /* the reusable one's batch record, the one-time one's pair */
#endif
    check_kernel(s, "gated_a", 0, N_A, 0);
    check_kernel(s, "gated_b", 0, N_B, 0);
    done(s, dir);
}

static void test_segv(void **state) { (void)state; check_death("segv", 128 + SIGSEGV, "signal 11"); }
static void test_sigkill(void **state) { (void)state; check_death("kill", 128 + SIGKILL, "signal 9"); }

/* Every way a timed dispatch ends leaves nothing in flight: a begin without its end would show here as dispatches
 * "lost in flight" of a program whose work all completed. */
static void test_settled(void **state)
{
    (void)state;
    if (g_skip)
        skip();
    char *dir;
    kt_snapshot_t *s = run_prog("settled", 128 + SIGKILL, "signal 9", 0, &dir);
#ifdef VKC_API
    check_kernel(s, "once", N_A, 0, 0);
    check_kernel(s, "unsent", 0, 0, N_B);    /* discarded, never submitted */
    check_kernel(s, "destroyed", 0, 0, N_B); /* its context destroyed first */
    check_kernel(s, "lost", 0, 0, N_B);      /* device lost */
#else
    check_kernel(s, "reuse", N_A, 0, 0);
    check_kernel(s, "once", N_A, 0, 0);
    check_kernel(s, "pair2", 1, 0, 0);
    check_kernel(s, "sec", 2, 0, 0);
    check_kernel(s, "unsent", 0, 0, N_B); /* never submitted */
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "destroyed", KT_BACKEND_VULKAN, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count + t->dropped, N_B);
    assert_int_equal(t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 0);
    t = kt_snapshot_find(s, "vkQueueSubmit", KT_BACKEND_VULKAN, NULL);
    assert_non_null(t);
    assert_int_equal(t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 0);
#endif
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT])
            fail_msg("%s: %llu in flight at exit", s->entries[i].name,
                     (unsigned long long)s->entries[i].dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT]);
    done(s, dir);
}

/* The configuration with kind and group counts x, y, z of t (NULL: none). */
static const kt_config_timing_t *config(const kt_kernel_timing_t *t, uint32_t kind, uint64_t x, uint64_t y,
                                        uint64_t z)
{
    for (uint32_t i = 0; i < t->config_count; i++) {
        const kt_launch_t *l = &t->configs[i].launch;
        if (l->kind == kind && (kind == KT_LAUNCH_INDIRECT || (l->dims == 3 && l->size[0] == x &&
                                                               l->size[1] == y && l->size[2] == z)))
            return &t->configs[i];
    }
    return NULL;
}

/* Issue 40.2: one pipeline launched with different group counts: each configuration counted exactly, the base of
 * vkCmdDispatchBase not in its counts, vkCmdDispatchIndirect as "indirect". Through the layer every execution of
 * a reusable recording and a one-time primary's own dispatch carry theirs; through the API kt_vk_launch does. */
static void test_configs(void **state)
{
    (void)state;
    if (g_skip)
        skip();
    char *dir;
    kt_snapshot_t *s = run_prog("configs", 0, NULL, 0, &dir);
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "cfg", KT_BACKEND_VULKAN, NULL);
    assert_non_null(t);
#ifdef VKC_API
    const uint64_t want[4] = {3, 2, 1, 1}; /* 4x1x1, 8x2x1, 2x1x1, indirect: submitted once */
#else
    const uint64_t want[4] = {7, 4, 2, 2}; /* twice, and 4x1x1 once more in a one-time primary */
#endif
    assert_int_equal(t->dispatch_count, want[0] + want[1] + want[2] + want[3]);
    assert_int_equal(t->dropped, 0);
    assert_int_equal(t->config_count, 4);
    const kt_config_timing_t *c[4] = {config(t, KT_LAUNCH_GROUPS, 4, 1, 1), config(t, KT_LAUNCH_GROUPS, 8, 2, 1),
                                      config(t, KT_LAUNCH_GROUPS, 2, 1, 1), config(t, KT_LAUNCH_INDIRECT, 0, 0, 0)};
    for (int i = 0; i < 4; i++) {
        if (!c[i])
            fail_msg("configuration %d missing", i);
        assert_int_equal(c[i]->dispatch_count, want[i]);
        assert_true(c[i]->min_ns <= c[i]->max_ns && c[i]->total_ns >= c[i]->min_ns);
    }
    done(s, dir);
}

int main(void)
{
    char *argv[] = {(char *)VKCRASHPROG, (char *)"--validation", (char *)"probe", (char *)"0", (char *)"0", NULL};
    if (ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET}) == 77)
        g_skip = 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_segv), cmocka_unit_test(test_sigkill),
                                       cmocka_unit_test(test_settled), cmocka_unit_test(test_configs)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return g_skip && !failed ? 77 : failed;
}
