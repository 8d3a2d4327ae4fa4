/* test_output.c — the output writer: regular files replaced atomically with 0666 & ~umask (a replaced file's
 * mode kept), symlink targets replaced (not a link the kernel's protected_symlinks would refuse), a FIFO without
 * a reader given up, FIFOs / devices / descriptor paths written through, failures and killed writers leave the old
 * file and no temporary, two outputs naming one file refused; a finished file put in place (kt_output_place). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include "shared/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.h"

static char *g_dir; /* the test's private directory */
static kt_snapshot_t *g_snap;

static const char *in_dir(const char *name)
{
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", g_dir, name);
    return b;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static size_t slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

/* Entries of the test directory other than . and .. */
static int dir_entries(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void clear_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            unlink(in_dir(de->d_name));
    if (d)
        closedir(d);
}

static int setup(void **state)
{
    (void)state;
    clear_dir();
    return 0;
}

static void test_new_and_replaced_modes(void **state)
{
    (void)state;
    const char *p = in_dir("a.json");
    mode_t old = umask(022);
    assert_int_equal(kt_report_write(p, g_snap, KT_FORMAT_JSON, NULL), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* an existing 0600 file is replaced by a new inode that keeps its mode (never widened by the umask) */
    assert_int_equal(chmod(p, 0600), 0);
    ino_t ino = st.st_ino;
    umask(0);
    assert_int_equal(kt_report_write(p, g_snap, KT_FORMAT_CSV, NULL), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(st.st_ino != ino);
    /* kt_output_place keeps it too */
    put(in_dir("scratch"), "x");
    assert_int_equal(chmod(in_dir("scratch"), 0644), 0);
    assert_int_equal(kt_output_place(in_dir("scratch"), p, KT_OUTPUT_NOSYNC), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    umask(old);
    assert_int_equal(dir_entries(), 1); /* no temporary left */
}

static void test_symlink_target_replaced(void **state)
{
    (void)state;
    put(in_dir("target.json"), "old");
    assert_int_equal(symlink("target.json", in_dir("link.json")), 0); /* relative to the link's directory */
    assert_int_equal(kt_report_write(in_dir("link.json"), g_snap, KT_FORMAT_JSON, NULL), 0);
    struct stat st;
    assert_int_equal(lstat(in_dir("link.json"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    char buf[256];
    assert_true(slurp(in_dir("target.json"), buf, sizeof buf) > 3);
    assert_int_equal(buf[0], '{');
    /* a dangling link: its target is created */
    assert_int_equal(symlink(in_dir("new.json"), in_dir("dangling.json")), 0);
    assert_int_equal(kt_report_write(in_dir("dangling.json"), g_snap, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(lstat(in_dir("dangling.json"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(in_dir("new.json"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(dir_entries(), 4);
}

/* A link planted in a sticky world-writable directory by another user is not followed (fs.protected_symlinks):
 * the root-only file it names keeps its content. Needs root (to own the link as someone else). */
static void test_protected_symlink(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    const char *sticky = in_dir("sticky");
    assert_int_equal(mkdir(sticky, 0777), 0);
    assert_int_equal(chmod(sticky, 01777), 0);
    put(in_dir("secret"), "secret");
    assert_int_equal(chmod(in_dir("secret"), 0600), 0);
    char link[600], target[600];
    snprintf(link, sizeof link, "%s/out.json", sticky);
    snprintf(target, sizeof target, "%s", in_dir("secret"));
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(lchown(link, 65534, 65534), 0); /* nobody's link */
    errno = 0;
    assert_int_equal(kt_report_write(link, g_snap, KT_FORMAT_JSON, NULL), KT_EIO);
    assert_int_equal(errno, EACCES);
    kt_output_t *o = NULL;
    assert_int_equal(kt_output_open(link, 0, &o), KT_EIO);
    char buf[64];
    assert_true(slurp(target, buf, sizeof buf) == 6 && !strcmp(buf, "secret"));
    /* the same link owned by the directory's owner (or by us) is followed */
    assert_int_equal(lchown(link, 0, 0), 0);
    assert_int_equal(kt_report_write(link, g_snap, KT_FORMAT_JSON, NULL), 0);
    assert_true(slurp(target, buf, sizeof buf) > 6);
    struct stat st;
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    unlink(link);
    rmdir(sticky);
}

/* A FIFO nobody reads: the writer gives up after its bounded wait instead of blocking for ever. */
static void test_fifo_without_reader(void **state)
{
    (void)state;
    const char *p = in_dir("lonely");
    assert_int_equal(mkfifo(p, 0600), 0);
    pid_t pid = fork();
    if (pid == 0) { /* in a child, so a hang is seen as a kill below, not a stuck test */
        alarm(30);
        errno = 0;
        int rc = kt_report_write(p, g_snap, KT_FORMAT_JSON, NULL);
        _exit(rc == KT_EIO && errno == ENXIO ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    unlink(p);
}

static void test_fifo_written_through(void **state)
{
    (void)state;
    const char *p = in_dir("fifo");
    assert_int_equal(mkfifo(p, 0600), 0);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) { /* reader: copies what comes through the FIFO to the pipe */
        close(pfd[0]);
        int fd = open(p, O_RDONLY);
        char buf[4096];
        ssize_t n;
        while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0)
            if (write(pfd[1], buf, (size_t)n) != n)
                _exit(2);
        _exit(fd >= 0 ? 0 : 1);
    }
    close(pfd[1]);
    assert_int_equal(kt_report_write(p, g_snap, KT_FORMAT_JSON, NULL), 0);
    char buf[65536];
    size_t got = 0;
    ssize_t n;
    while ((n = read(pfd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(buf, "\"edge_kernel\""));
    struct stat sb;
    assert_int_equal(lstat(p, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode)); /* still the FIFO */
    assert_int_equal(dir_entries(), 1);
}

static void test_char_devices(void **state)
{
    (void)state;
    struct stat before, after;
    assert_int_equal(stat("/dev/null", &before), 0);
    assert_int_equal(kt_report_write("/dev/null", g_snap, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(stat("/dev/null", &after), 0);
    assert_true(S_ISCHR(after.st_mode));
    assert_int_equal(after.st_ino, before.st_ino);
    assert_int_equal(after.st_rdev, before.st_rdev);
    if (stat("/dev/full", &before) == 0 && S_ISCHR(before.st_mode)) {
        errno = 0;
        assert_int_equal(kt_report_write("/dev/full", g_snap, KT_FORMAT_JSON, NULL), KT_EIO);
        assert_int_equal(errno, ENOSPC);
        assert_int_equal(stat("/dev/full", &after), 0);
        assert_true(S_ISCHR(after.st_mode));
        assert_int_equal(after.st_ino, before.st_ino);
    }
    /* a symlink to a device: the device is written through, the link stays */
    assert_int_equal(symlink("/dev/null", in_dir("null")), 0);
    assert_int_equal(kt_report_write(in_dir("null"), g_snap, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(lstat(in_dir("null"), &after), 0);
    assert_true(S_ISLNK(after.st_mode));
    assert_int_equal(dir_entries(), 1);
}

/* /dev/stdout redirected to a regular file: that file is written in place, not replaced. */
static void test_dev_stdout(void **state)
{
    (void)state;
    const char *p = in_dir("stdout.json");
    put(p, "old content that is longer than nothing");
    struct stat before, after;
    assert_int_equal(stat(p, &before), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(p, O_WRONLY);
        if (fd < 0 || dup2(fd, 1) < 0)
            _exit(3);
        _exit(kt_report_write("/dev/stdout", g_snap, KT_FORMAT_JSON, NULL) == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(stat(p, &after), 0);
    assert_int_equal(after.st_ino, before.st_ino);
    char buf[65536];
    assert_true(slurp(p, buf, sizeof buf) > 0);
    assert_int_equal(buf[0], '{');
    assert_int_equal(dir_entries(), 1);
}

/* A writer killed mid-document leaves the old file and nothing else (O_TMPFILE). */
static void test_killed_writer(void **state)
{
    (void)state;
    const char *p = in_dir("k.json");
    put(p, "previous");
    pid_t pid = fork();
    if (pid == 0) {
        kt_output_t *o = NULL;
        if (kt_output_open(p, 0, &o) != 0)
            _exit(1);
        for (int i = 0; i < 100000; i++)
            fprintf(kt_output_file(o), "{\"partial\": %d}\n", i);
        fflush(kt_output_file(o));
        raise(SIGKILL);
        _exit(2);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    char buf[64];
    slurp(p, buf, sizeof buf);
    assert_string_equal(buf, "previous");
    assert_int_equal(dir_entries(), 1);
}

/* A write that fails part way (file size limit, as a full disk would) leaves the old file intact. */
static void test_failed_write_keeps_old(void **state)
{
    (void)state;
    const char *p = in_dir("f.json");
    put(p, "previous");
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {64, 64};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        errno = 0;
        int rc = kt_report_write(p, g_snap, KT_FORMAT_JSON, NULL);
        _exit(rc == KT_EIO && errno == EFBIG ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char buf[64];
    slurp(p, buf, sizeof buf);
    assert_string_equal(buf, "previous");
    assert_int_equal(dir_entries(), 1);
}

static void test_directory_refused(void **state)
{
    (void)state;
    errno = 0;
    assert_int_equal(kt_report_write(g_dir, g_snap, KT_FORMAT_JSON, NULL), KT_EIO);
    assert_int_equal(errno, EISDIR);
    assert_int_equal(kt_output_open(NULL, 0, NULL), KT_EINVAL);
}

static void test_same(void **state)
{
    (void)state;
    put(in_dir("x.json"), "x");
    assert_int_equal(symlink("x.json", in_dir("lx.json")), 0);
    assert_true(kt_output_same(in_dir("x.json"), in_dir("x.json")));
    assert_true(kt_output_same(in_dir("x.json"), in_dir("lx.json")));
    char dotted[600];
    snprintf(dotted, sizeof dotted, "%s/./new.json", g_dir);
    assert_true(kt_output_same(in_dir("new.json"), dotted)); /* neither exists yet */
    assert_false(kt_output_same(in_dir("x.json"), in_dir("new.json")));
    assert_false(kt_output_same(in_dir("a.json"), in_dir("b.json")));
    assert_false(kt_output_same("/dev/null", "/dev/null")); /* a sink two outputs may share */
}

/* KTIMING_OUTPUT and KTIMING_TRACE naming one file: neither is written (checked in a child's exit). */
static void test_exit_same_file(void **state)
{
    (void)state;
    const char *p = in_dir("both.json");
    pid_t pid = fork();
    if (pid == 0) {
        setenv("KTIMING_OUTPUT", p, 1);
        setenv("KTIMING_TRACE", p, 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        kt_record("edge_kernel", KT_BACKEND_CPU, 5);
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct stat sb;
    assert_int_not_equal(stat(p, &sb), 0);
    assert_int_equal(dir_entries(), 0);
}

/* kt_output_place: a finished file moved where the writer would write (new path, replaced regular file with the
 * mode rule, a link's target), the same inode (renamed, not copied); a /dev path written through; the source
 * gone on success and kept on failure. */
static void test_place(void **state)
{
    (void)state;
    mode_t old = umask(022);
    struct stat st, src;
    put(in_dir("from1"), "one");
    assert_int_equal(chmod(in_dir("from1"), 0600), 0);
    assert_int_equal(stat(in_dir("from1"), &src), 0);
    assert_int_equal(kt_output_place(in_dir("from1"), in_dir("new.json"), KT_OUTPUT_NOSYNC), 0);
    assert_int_equal(stat(in_dir("new.json"), &st), 0);
    assert_int_equal(st.st_ino, src.st_ino);          /* moved, not copied */
    assert_int_equal(st.st_mode & 0777, 0644);        /* 0666 & ~umask, whatever the scratch file had */
    assert_int_not_equal(access(in_dir("from1"), F_OK), 0);
    char buf[64];
    put(in_dir("from2"), "two");
    assert_int_equal(kt_output_place(in_dir("from2"), in_dir("new.json"), 0), 0); /* replaced, synced first */
    assert_true(slurp(in_dir("new.json"), buf, sizeof buf) == 3 && !strcmp(buf, "two"));
    /* a link stays a link; its target gets the file */
    assert_int_equal(symlink("new.json", in_dir("link.json")), 0);
    put(in_dir("from3"), "three");
    assert_int_equal(stat(in_dir("from3"), &src), 0);
    /* an existing file replaced without the sync (names exchanged, the old one removed): the old document is
     * left untouched under its other name, the new one is the source's inode */
    assert_int_equal(link(in_dir("new.json"), in_dir("old.json")), 0);
    assert_int_equal(kt_output_place(in_dir("from3"), in_dir("link.json"), KT_OUTPUT_NOSYNC), 0);
    assert_int_equal(lstat(in_dir("link.json"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(slurp(in_dir("new.json"), buf, sizeof buf) == 5 && !strcmp(buf, "three"));
    assert_int_equal(stat(in_dir("new.json"), &st), 0);
    assert_int_equal(st.st_ino, src.st_ino);
    assert_int_equal(st.st_nlink, 1);
    assert_true(slurp(in_dir("old.json"), buf, sizeof buf) == 3 && !strcmp(buf, "two"));
    assert_int_not_equal(access(in_dir("from3"), F_OK), 0);
    assert_int_equal(unlink(in_dir("old.json")), 0);
    /* a device: written through (copied), the source removed */
    put(in_dir("from4"), "four");
    assert_int_equal(kt_output_place(in_dir("from4"), "/dev/null", 0), 0);
    assert_int_not_equal(access(in_dir("from4"), F_OK), 0);
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    /* failure: a directory that does not exist; the source stays */
    put(in_dir("from5"), "five");
    errno = 0;
    assert_int_equal(kt_output_place(in_dir("from5"), in_dir("no/such/dir.json"), 0), KT_EIO);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(access(in_dir("from5"), F_OK), 0);
    assert_int_equal(kt_output_place(NULL, in_dir("x"), 0), KT_EINVAL);
    assert_int_equal(kt_output_place(in_dir("from5"), "", 0), KT_EINVAL);
    assert_int_equal(dir_entries(), 3); /* new.json, link.json, from5: nothing temporary left */
    umask(old);
}

int main(void)
{
    if (!(g_dir = ktt_tmpdir("output")))
        return 1;
    kt_record("edge_kernel", KT_BACKEND_CPU, 1000);
    g_snap = kt_snapshot();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_new_and_replaced_modes, setup),
        cmocka_unit_test_setup(test_symlink_target_replaced, setup),
        cmocka_unit_test_setup(test_fifo_written_through, setup),
        cmocka_unit_test_setup(test_protected_symlink, setup),
        cmocka_unit_test_setup(test_fifo_without_reader, setup),
        cmocka_unit_test_setup(test_char_devices, setup),
        cmocka_unit_test_setup(test_dev_stdout, setup),
        cmocka_unit_test_setup(test_killed_writer, setup),
        cmocka_unit_test_setup(test_failed_write_keeps_old, setup),
        cmocka_unit_test_setup(test_directory_refused, setup),
        cmocka_unit_test_setup(test_same, setup),
        cmocka_unit_test_setup(test_exit_same_file, setup),
        cmocka_unit_test_setup(test_place, setup),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_snapshot_free(g_snap);
    ktt_rmtree(g_dir);
    free(g_dir);
    return rc;
}
