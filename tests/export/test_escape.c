/* test_escape.c — white-box checks of escape.c (compiled in: its functions are internal to libktiming). */
#include "../../src/export/escape.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* A field of a `-v` log line: escaped like terminal text, its commas too, cut only between whole units. */
static void test_escape_field(void **state)
{
    (void)state;
    char f[64];
    kt__escape_field(f, sizeof f, "blur,3x3\x1b[2J\xe2\x80\xae");
    assert_string_equal(f, "blur\\x2c3x3\\x1b[2J\\u202e");
    kt__escape_field(f, sizeof f, NULL);
    assert_string_equal(f, "");
    kt__escape_field(f, 4, "\xc3\xa9\xc3\xa9"); /* room for one "é" (2 bytes) and the NUL, not two */
    assert_string_equal(f, "\xc3\xa9");
    kt__escape_field(f, 5, "a\x1b"); /* "\x1b" needs 4 bytes: it is left out whole, not cut */
    assert_string_equal(f, "a");
    kt__escape_field(f, 1, "abc");
    assert_string_equal(f, "");
    char *full = kt__escape("x,y\\z", SIZE_MAX, KT_ESC_TEXT, NULL); /* the field rule alone adds the comma */
    assert_string_equal(full, "x,y\\\\z");
    free(full);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
