/* test_report_memory.c — what the text and markdown reports hold while they write a large snapshot (issue 39.9):
 * a few dozen bytes a kernel beside the snapshot (the sort order, a row and its escaped name), not the kernel's
 * formatted cells and a copy of an entry (760 bytes a kernel before, with glibc). The heap is sampled each time
 * the report writes to its stream, which is when every row is allocated. */
#include "support/heap.h"
#include "support/snapshot_fixture.h"

#include <ktiming.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#define N 20000
/* bytes held per kernel while writing, beside the snapshot: 88 measured (a row, the order, the escaped name), 152
 * while each escaped name kept its worst-case buffer (six bytes a byte), 760 with formatted cells and entry copies */
#define BOUND_PER_KERNEL 120

static void check_format(kt_format_t fmt)
{
    kt_snapshot_t *s = fx_snapshot_new(N);
    for (size_t i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "kernel_%05zu", i);
        fx_entry(s, i, name, KT_BACKEND_OPENCL, "gpu", 10 + i % 7, 1000 + i, 900, 1200 + i);
    }
    ktt_heap_sink_t k = {0, 0};
    static char buf[256]; /* small: the report writes (and the heap is sampled) all along */
    FILE *out = ktt_heap_sink_open(&k, buf, sizeof buf);
    assert_non_null(out);
    size_t base = ktt_heap_used();
    k.peak = base;
    assert_int_equal(kt_report_print(out, s, fmt, NULL), 0);
    fclose(out);
    assert_true(k.bytes > (size_t)N * 40); /* every kernel's row was written */
    size_t held = k.peak > base ? k.peak - base : 0;
    print_message("format %d: %zu bytes held a kernel while writing (bound %d)\n", (int)fmt, held / N,
                  BOUND_PER_KERNEL);
    assert_true(held / N <= BOUND_PER_KERNEL);
    assert_true(held > 0); /* the sampling saw the rows: the check above is not vacuous */
    fx_free(s);
}

static void test_text_rows_are_narrow(void **state)
{
    (void)state;
    check_format(KT_FORMAT_TEXT);
}

static void test_markdown_rows_are_narrow(void **state)
{
    (void)state;
    check_format(KT_FORMAT_MARKDOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_rows_are_narrow),
        cmocka_unit_test(test_markdown_rows_are_narrow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
