/* test_cuda_cupti_inject.c — the CUPTI injection library builds as a loadable shared object exporting
 * InitializeInjection (what CUDA_INJECTION64_PATH needs); where no CUDA driver can be loaded, calling it reports
 * failure (0) instead of crashing and the process writes no `ktiming run` snapshot; with the CUPTI test double it
 * flushes CUPTI's buffers at exit before writing KTIMING_RUN_DIR/<pid>.json. Its kernel recording has not been
 * run on a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int driver_installed(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver)
        dlclose(driver);
    return driver != NULL;
}

static void test_exports_initialize_injection(void **state)
{
    (void)state;
    const char *path = getenv("KT_TEST_CUPTI_INJECT");
    assert_non_null(path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        print_message("dlopen: %s\n", dlerror());
    assert_non_null(lib);
    int (*init)(void) = NULL;
    *(void **)&init = dlsym(lib, "InitializeInjection");
    assert_non_null(init);
    /* Internal helpers stay hidden. */
    assert_null(dlsym(lib, "buffer_completed"));

    if (driver_installed())
        print_message("a CUDA driver is installed: InitializeInjection is not called by this test\n");
    else
        assert_int_equal(init(), 0);
    dlclose(lib);
}

/* In a child with KTIMING_RUN_DIR=run_dir: loads `first` (RTLD_GLOBAL) when given, then the injection library,
 * calls InitializeInjection and exits normally (exit handlers run); its exit status is 10 + the result. Returns
 * that status and the child's pid. */
static int child_initialize(const char *run_dir, const char *first, pid_t *pid)
{
    fflush(NULL);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid == 0) {
        setenv("KTIMING_RUN_DIR", run_dir, 1);
        unsetenv("KTIMING_OUTPUT");
        unsetenv("KTIMING_TRACE");
        unsetenv("KTIMING_REPORT");
        if (first && !dlopen(first, RTLD_NOW | RTLD_GLOBAL))
            _exit(2);
        void *lib = dlopen(getenv("KT_TEST_CUPTI_INJECT"), RTLD_NOW | RTLD_LOCAL);
        int (*init)(void) = NULL;
        if (!lib || !(*(void **)&init = dlsym(lib, "InitializeInjection")))
            _exit(3);
        exit(10 + init());
    }
    int st = 0;
    assert_int_equal(waitpid(*pid, &st, 0), *pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static size_t count_files(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    assert_non_null(d);
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Without a driver, InitializeInjection fails and the process's exit writes nothing for `ktiming run` (which then
 * says "nothing was timed"), rather than an empty or partial snapshot. */
static void test_no_driver_writes_no_snapshot(void **state)
{
    (void)state;
    if (driver_installed())
        skip();
    char dir[] = "/tmp/kt_cupti_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t pid = 0;
    assert_int_equal(child_initialize(dir, NULL, &pid), 10);
    assert_int_equal(count_files(dir), 0);
    rmdir(dir);
}

/* With the CUPTI test double, whose only kernel record is delivered by cuptiActivityFlushAll: the snapshot the
 * process writes at exit holds it, so CUPTI was flushed before the snapshot was taken. */
static void test_exit_flushes_then_writes_snapshot(void **state)
{
    (void)state;
    const char *fake = getenv("KT_TEST_FAKE_CUPTI");
    if (!fake)
        skip();
    char dir[] = "/tmp/kt_cupti_run_XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t pid = 0;
    assert_int_equal(child_initialize(dir, fake, &pid), 11);
    assert_int_equal(count_files(dir), 1);
    char path[128];
    snprintf(path, sizeof path, "%s/%ld.json", dir, (long)pid);
    const char *json = read_all(path);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"kt_fake_cupti_kernel\""));
    assert_non_null(strstr(json, "stream 7"));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exports_initialize_injection),
                                       cmocka_unit_test(test_no_driver_writes_no_snapshot),
                                       cmocka_unit_test(test_exit_flushes_then_writes_snapshot)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
