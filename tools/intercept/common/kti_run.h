/* kti_run.h — shared by the interception libraries: write the process's snapshot for `ktiming run` at exit. */
#ifndef KTI_RUN_H
#define KTI_RUN_H

#include <ktiming.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_once_t kti_exit_once = PTHREAD_ONCE_INIT;
static pid_t kti_exit_pid; /* the process that registered (a forked child that exits skips the write) */

/* Runs before the core's own exit handler (registered earlier, so called later): one bounded wait for the
 * commands in flight (kt_shutdown: KTIMING_EXIT_WAIT_MS, default 2 s; what is left is counted as dropped, in
 * flight at exit) and writes the snapshot to KTIMING_RUN_DIR/<pid>.json. Both interception libraries may
 * do so in one process; the later write holds everything. A scratch file read once the process is gone: no
 * fsync (which kt_report_write does and which can cost tens of ms). */
static void kti_write_run_snapshot(void)
{
    const char *dir = getenv("KTIMING_RUN_DIR");
    if (!dir || !*dir || getpid() != kti_exit_pid)
        return;
    kt_shutdown(); /* the backends are then unregistered: kt_snapshot does not wait again */
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%ld.json", dir, (long)getpid());
    FILE *f = fopen(path, "w");
    int rc = f ? kt_report_print(f, snap, KT_FORMAT_JSON) : KT_EIO;
    if (f && fclose(f) != 0 && rc == 0)
        rc = KT_EIO;
    if (rc != 0) {
        fprintf(stderr, "ktiming: could not write %s: %s\n", path, kt_strerror(rc));
        unlink(path);
    }
    kt_snapshot_free(snap);
}

static void kti_register_exit(void)
{
    kti_exit_pid = getpid();
    kt_is_enabled(); /* sets the core up, registering its exit handler before ours */
    atexit(kti_write_run_snapshot);
}

/* Call once something is being timed. */
static inline void kti_run_exit_register(void)
{
    pthread_once(&kti_exit_once, kti_register_exit);
}

#endif
