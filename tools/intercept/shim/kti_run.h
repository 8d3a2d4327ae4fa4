/* kti_run.h — shared by the interception libraries: write the process's snapshot for `ktiming run` at exit. */
#ifndef KTI_RUN_H
#define KTI_RUN_H

#include <ktiming.h>
#include "shared/output.h"
#include "shared/tool.h"

#include "core/env.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

/* Secure-execution mode (setuid, setgid or file capabilities: AT_SECURE): the interception libraries stay
 * inert -- they forward every call untouched, time nothing and write nothing -- and no KTIMING_* variable is
 * read (secure_getenv). */
static inline int kti_secure(void) { return getauxval(AT_SECURE) != 0; }

/* Host API time (docs/cli.md): a zone of backend host-api named `api` around a GPU API call that can block the
 * program's thread, ended with kt_zone_end; one host-clock read at each end. Nothing in secure-execution mode. */
static inline kt_zone_t kti_wait_begin(kt_kernel_id_t *site, const char *api)
{
    static int secure = -1;
    if (secure < 0)
        secure = kti_secure();
    if (secure) {
        kt_zone_t none = {0, 0};
        return none;
    }
    return kt__host_api_begin(site, api);
}

/* Tells `ktiming run` that this process's snapshot is complete: "<pid>\n" into the FIFO it made in the run
 * directory (cmd_run.c, KTI_RUN_FIFO there too), so it reads the snapshot while the process is still being torn
 * down. Never blocks and never fails the program: without a reader (or with anything but a FIFO there) nothing
 * is written, and ktiming then reads the snapshot after the process has ended. */
#define KTI_RUN_FIFO "notify.fifo"
static void kti_notify_run(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" KTI_RUN_FIFO, dir) >= (int)sizeof path)
        return;
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    struct stat st;
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%ld\n", (long)getpid());
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && n > 0) {
        ssize_t w = write(fd, msg, (size_t)n); /* EAGAIN (a full FIFO): ktiming reads it after the wait instead */
        (void)w;
    }
    close(fd);
}

static pthread_once_t kti_exit_once = PTHREAD_ONCE_INIT;
static pid_t kti_exit_pid; /* the process that first timed (a forked child writes only what it recorded) */
static int kti_exit_timed; /* something was timed: the exit writer has work (kti_run_exit_register) */
static int kti_exit_early; /* the exit writer was registered when this library loaded (kti_run_at_load) */
/* The snapshot written at exit, kept: the process is ending, and freeing its span array (1.2 MB for 16,384 spans)
 * is a munmap that shoots down the TLBs of the driver's threads, 0.12-0.15 ms on the 2-core VM, while the program
 * is still waited for. Kept reachable here, so a leak checker does not report it: volatile, else the compiler drops
 * a store nothing reads (and the variable with it), and LeakSanitizer reported the snapshot as leaked. */
static kt_snapshot_t *volatile kti_exit_snap;

/* One bounded wait for the commands in flight (kt_shutdown: KTIMING_EXIT_WAIT_MS, default 2 s; what is left is
 * counted as dropped, in flight at exit) and writes the snapshot to KTIMING_RUN_DIR/<pid>.json. Both interception
 * libraries may do so in one process; the later write holds everything. A scratch file read once the process is
 * gone: no fsync (which kt_report_write does and which can cost tens of ms). */
static void kti_write_run_snapshot(void)
{
    const char *dir = kt__env(KT_ENV_NAME(RUN_DIR));
    if (!dir || !*dir || !kti_exit_timed)
        return;
    int was_on = kt_is_enabled();
    kt_shutdown(); /* the backends are then unregistered: kt_snapshot does not wait again */
    kt_snapshot_t *snap = kt_snapshot();
    /* recording on again: what later exit handlers and destructors time goes to the run arena, and `ktiming run`
     * reports from there when it holds records made after this file (kt_run_arena_late) */
    kt_desc_t again = {.start_disabled = !was_on};
    kt_init(&again);
    if (!snap)
        return;
    /* A forked child starts with empty statistics (ktiming's fork handler): one that timed nothing itself
     * writes nothing, one that did writes its own <pid>.json. */
    int any = getpid() == kti_exit_pid;
    for (size_t i = 0; !any && i < snap->count; i++)
        any = snap->entries[i].dispatch_count || snap->entries[i].errors || snap->entries[i].dropped;
    if (!any) {
        kt_snapshot_free(snap);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%ld.json", dir, (long)getpid());
    kt_output_t *o = NULL;
    errno = 0;
    int rc = kt_output_open(path, KT_OUTPUT_NOSYNC, &o);
    if (rc == 0) {
        rc = kt_report_print(kt_output_file(o), snap, KT_FORMAT_JSON, NULL);
        if (rc != 0)
            kt_output_abort(o);
        else
            rc = kt_output_commit(o);
    }
    if (rc != 0)
        fprintf(stderr, "ktiming: could not write %s: %s\n", path, errno ? strerror(errno) : kt_strerror(rc));
    else
        kti_notify_run(dir);
    kti_exit_snap = snap; /* not freed: see kti_exit_snap */
}

static void kti_register_exit(void)
{
    kti_exit_pid = getpid();
    kt_is_enabled();
    kti_exit_timed = 1;
    if (!kti_exit_early)
        atexit(kti_write_run_snapshot);
}

/* Under `ktiming run`, the exit writer is registered when the library loads (as an LD_PRELOAD, before the program
 * starts), not at the first timed call: exit handlers run last-registered first, so it then runs after every exit
 * handler the program registers (even one registered before its first GPU call) and after its static destructors,
 * and what they time is in the snapshot. It writes only once something was timed. Loaded later (a loader layer,
 * dlopen'ed at the first API call), it runs after what is registered from then on. */
__attribute__((constructor)) static void kti_run_at_load(void)
{
    const char *dir = kt__env(KT_ENV_NAME(RUN_DIR));
    if (!dir || !*dir || kti_secure())
        return;
    kti_exit_early = 1;
    atexit(kti_write_run_snapshot);
}

/* Call once something is being timed. */
static inline void kti_run_exit_register(void)
{
    if (kti_secure())
        return;
    pthread_once(&kti_exit_once, kti_register_exit);
}

#endif
