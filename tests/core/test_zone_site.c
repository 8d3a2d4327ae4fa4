/* test_zone_site.c — a KT_CPU_BEGIN site caches its kernel id from its first name. With KTIMING_CHECK=1 (or in a
 * debug build) a different name at a cached site is said once per kernel on stderr; a site whose name never
 * varies says nothing, and kt_zone_begin(NULL, name) takes every name as it comes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ktiming.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Runs fn with stderr sent to a temporary file; returns what it wrote (malloc). */
static char *capture_stderr(void (*fn)(void))
{
    char path[] = "/tmp/kt_zone_site_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    fn();
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *text = calloc(1, (size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(pread(fd, text, (size_t)n, 0), n);
    close(fd);
    unlink(path);
    return text;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void varying_site(void)
{
    static const char *const kNames[] = {"site_first", "site_second", "site_third"};
    for (int i = 0; i < 30; i++) {
        KT_CPU_BEGIN(z, kNames[i % 3]);
        KT_CPU_END(z);
    }
}

static void steady_site(void)
{
    for (int i = 0; i < 30; i++) {
        KT_CPU_BEGIN(z, "steady");
        KT_CPU_END(z);
    }
    for (int i = 0; i < 30; i++) { /* no cache: each name is its own kernel, nothing to say */
        kt_zone_t z = kt_zone_begin(NULL, i % 2 ? "uncached_a" : "uncached_b");
        kt_zone_end(&z);
    }
}

/* A site whose name runs past the 4096 bytes kept (report core.md item 8): the same name every time, here with no
 * NUL before an unreadable page, as "reads at most 4097 bytes of a name" allows; nothing to say. */
static const char *g_long_name;

static void long_site(void)
{
    for (int i = 0; i < 3; i++) {
        KT_CPU_BEGIN(z, g_long_name);
        KT_CPU_END(z);
    }
}

static void test_long_name_silent(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    assert_true(page > 0 && page <= 65536);
    size_t pg = (size_t)page, span = 4098; /* the bytes a name may be read for: KT__NAME_MAX + 1, and one more */
    size_t pages = (span + pg - 1) / pg + 1;
    char *base = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(base != MAP_FAILED);
    char *guard = base + (pages - 1) * pg;
    assert_int_equal(mprotect(guard, pg, PROT_NONE), 0);
    char *name = guard - span; /* 4098 'n' bytes, then the unreadable page: no terminator in reach */
    memset(name, 'n', span);
    g_long_name = name;
    char *err = capture_stderr(long_site);
    assert_string_equal(err, "");
    free(err);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    int found = 0;
    for (size_t i = 0; i < s->count; i++)
        if (!strncmp(s->entries[i].name, "nnnnnnnn", 8)) {
            assert_int_equal(s->entries[i].dispatch_count, 3);
            found++;
        }
    assert_int_equal(found, 1);
    kt_snapshot_free(s);
    munmap(base, pages * pg);
}

static void test_varying_name_said_once(void **state)
{
    (void)state;
    char *err = capture_stderr(varying_site);
    assert_int_equal(count(err, "a KT_CPU_BEGIN site first named 'site_first' was given"), 1);
    assert_int_equal(count(err, "ktiming:"), 1);
    free(err);
    /* what it warns about: all 30 dispatches under the first name */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "site_first", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 30);
    kt_snapshot_free(s);
}

static void test_steady_site_silent(void **state)
{
    (void)state;
    char *err = capture_stderr(steady_site);
    assert_string_equal(err, "");
    free(err);
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(kt_snapshot_find(s, "uncached_a", KT_BACKEND_CPU, NULL)->dispatch_count, 15);
    assert_int_equal(kt_snapshot_find(s, "uncached_b", KT_BACKEND_CPU, NULL)->dispatch_count, 15);
    kt_snapshot_free(s);
}

int main(void)
{
    setenv("KTIMING_CHECK", "1", 1); /* before the first zone: the library reads it once */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varying_name_said_once),
        cmocka_unit_test(test_steady_site_silent),
        cmocka_unit_test(test_long_name_silent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
