/* test_names.c — kernel names are capped (issue 39 item 8): a name past 4,096 bytes is interned as its first bytes
 * and "...[truncated]", counted in names_truncated, and no path from kt_record reads more than 4,097 bytes of it,
 * however long it is. The name sits right before an unreadable page: a read past the cap is a crash, so the test
 * asserts the bound without timing anything. */
#include "test_util.h"

#include <sys/mman.h>
#include <unistd.h>

#define CAP 4096u
#define MARK "...[truncated]"

/* A "name" of CAP + 1 readable 'a'..'z' bytes followed by a PROT_NONE page: as far as the library may read, a
 * name longer than the cap (its end is never reached). */
static char *long_name(void **map, size_t *len, char first)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), body = ((CAP + 1 + page - 1) / page) * page;
    char *m = mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(mprotect(m + body, page, PROT_NONE), 0);
    char *name = m + body - (CAP + 1);
    for (size_t i = 0; i < CAP + 1; i++)
        name[i] = (char)('a' + (i % 26));
    name[0] = first;
    *map = m;
    *len = body + page;
    return name;
}

static void test_long_name_capped(void **state)
{
    (void)state;
    kt_reset();
    void *map;
    size_t maplen;
    char *name = long_name(&map, &maplen, 'Q');
    for (int i = 0; i < 1000; i++)
        kt_record(name, KT_BACKEND_CPU, 100 + (uint64_t)i); /* the cache hit must stop at the cap too */
    kt_kernel_id_t id = kt_kernel_intern(name, KT_BACKEND_CPU, NULL);
    assert_int_not_equal(id, 0);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *t = NULL;
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].name[0] == 'Q')
            t = &s->entries[i];
    assert_non_null(t);
    size_t n = strlen(t->name);
    assert_true(n <= CAP);
    assert_true(n > CAP - 64);
    assert_string_equal(t->name + n - strlen(MARK), MARK);
    assert_memory_equal(t->name, name, n - strlen(MARK));
    assert_int_equal(t->dispatch_count, 1000); /* one entry: every record found the same kernel */
    assert_int_equal(s->names_truncated, 1);
    /* not silent in the outputs either: a key of the JSON, a note under the text table */
    static const struct {
        kt_format_t format; /* written */
        const char *want;   /* in it */
    } kOut[] = {{KT_FORMAT_JSON, "\"names_truncated\": 1"},
                {KT_FORMAT_TEXT, "[timing] note: 1 kernel name was longer than 4,096 bytes"}};
    for (size_t k = 0; k < sizeof kOut / sizeof kOut[0]; k++) {
        FILE *f = tmpfile();
        assert_non_null(f);
        assert_int_equal(kt_report_print(f, s, kOut[k].format, NULL), 0);
        long len = ftell(f);
        char *text = calloc(1, (size_t)len + 1);
        assert_non_null(text);
        rewind(f);
        assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        if (!strstr(text, kOut[k].want))
            fail_msg("output %d lacks '%s'", (int)kOut[k].format, kOut[k].want);
        free(text);
    }
    kt_snapshot_free(s);
    munmap(map, maplen);
}

/* The cut never splits a UTF-8 sequence: a name of 3-byte characters keeps whole characters only. */
static void test_cut_at_utf8_boundary(void **state)
{
    (void)state;
    size_t n = 3 * 2000;
    char *name = malloc(n + 1);
    for (size_t i = 0; i < n; i += 3)
        memcpy(name + i, "\xe2\x82\xac", 3); /* U+20AC */
    name[n] = 0;
    kt_record(name, KT_BACKEND_CPU, 5);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = NULL;
    for (size_t i = 0; i < s->count; i++)
        if ((unsigned char)s->entries[i].name[0] == 0xe2)
            t = &s->entries[i];
    assert_non_null(t);
    size_t len = strlen(t->name), kept = len - strlen(MARK);
    assert_true(len <= CAP);
    assert_int_equal(kept % 3, 0);
    assert_memory_equal(t->name, name, kept);
    kt_snapshot_free(s);
    free(name);
}

/* A name of exactly the cap is whole, and not counted. */
static void test_name_at_cap_whole(void **state)
{
    (void)state;
    kt_reset();
    char *name = malloc(CAP + 1);
    memset(name, 'z', CAP);
    name[CAP] = 0;
    kt_record(name, KT_BACKEND_CPU, 7);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_CPU, "host");
    assert_non_null(t);
    assert_int_equal(strlen(t->name), CAP);
    kt_snapshot_free(s);
    free(name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_name_capped),
        cmocka_unit_test(test_cut_at_utf8_boundary),
        cmocka_unit_test(test_name_at_cap_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
