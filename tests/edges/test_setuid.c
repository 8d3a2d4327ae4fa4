/* test_setuid.c — a setuid-root program run by an unprivileged user ignores KTIMING_OUTPUT (secure_getenv).
 * Needs root (to make the setuid copy and switch to `nobody`); skipped (77) otherwise or where the file system
 * does not honour the setuid bit. The same copy without the bit, run by the same user, does write: the check
 * is able to fail. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.h"

static char *g_dir; /* the test's private directory (0777: the unprivileged run writes in it) */
static char g_probe[4200], g_out[4200];

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    char buf[65536];
    ssize_t n;
    int rc = in >= 0 && out >= 0 ? 0 : -1;
    while (rc == 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            rc = -1;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        rc = -1;
    return rc;
}

/* The probe into the test's directory, with libktiming beside it (found through $ORIGIN by the unprivileged
 * control run, which may not be able to read the build tree). */
static int copy_probe(void)
{
    if (copy_file(KT_SETUID_PROBE, g_probe) != 0)
        return -1;
#ifdef KT_SETUID_LIB
    char *lib = ktt_path(g_dir, KT_SETUID_LIB_NAME);
    int rc = lib ? copy_file(KT_SETUID_LIB, lib) : -1;
    free(lib);
    return rc;
#else
    return 0;
#endif
}

/* Runs the probe as uid/gid of `pw` with KTIMING_OUTPUT set; returns the AT_SECURE it printed, -1 on failure. */
static int run_as(const struct passwd *pw)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        setenv("KTIMING_OUTPUT", g_out, 1);
        if (setgroups(0, NULL) != 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
            _exit(3);
        execl(g_probe, g_probe, (char *)NULL);
        _exit(4);
    }
    close(pfd[1]);
    char buf[64] = "";
    ssize_t n = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || strncmp(buf, "secure=", 7) != 0)
        return -1;
    return buf[7] == '1';
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_setuid: not root, skipping\n");
        return 77;
    }
    struct passwd *pw = getpwnam("nobody");
    if (!pw || pw->pw_uid == 0) {
        fprintf(stderr, "test_setuid: no unprivileged user 'nobody', skipping\n");
        return 77;
    }
    if (!(g_dir = ktt_tmpdir("setuid")) || chmod(g_dir, 0777) != 0)
        return 1;
    snprintf(g_probe, sizeof g_probe, "%s/probe", g_dir);
    snprintf(g_out, sizeof g_out, "%s/out.json", g_dir);
    int rc = 1;
    struct stat st;
    if (copy_probe() != 0 || chown(g_probe, 0, 0) != 0 || chmod(g_probe, 04755) != 0) {
        fprintf(stderr, "test_setuid: cannot prepare %s: %s\n", g_probe, strerror(errno));
        goto out;
    }
    int secure = run_as(pw);
    if (secure != 1) {
        fprintf(stderr, "test_setuid: the setuid bit did not take effect here (nosuid mount?), skipping\n");
        rc = 77;
        goto out;
    }
    if (stat(g_out, &st) == 0) {
        fprintf(stderr, "FAIL: the setuid program wrote KTIMING_OUTPUT=%s\n", g_out);
        goto out;
    }
    /* Control: without the bit the same user's run writes the file. */
    if (chmod(g_probe, 0755) != 0 || run_as(pw) != 0 || stat(g_out, &st) != 0 || st.st_uid != pw->pw_uid) {
        fprintf(stderr, "FAIL: the control run (no setuid bit) did not write %s\n", g_out);
        goto out;
    }
    printf("test_setuid: setuid run wrote nothing, plain run wrote its file\n");
    rc = 0;
out:
    ktt_rmtree(g_dir);
    free(g_dir);
    return rc;
}
