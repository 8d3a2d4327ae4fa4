/* snapshot_assert.h — cmocka assertions over snapshots shared by the merge tests (tests/analysis, tests/mpi).
 * Header-only; include after <cmocka.h> as "support/snapshot_assert.h". */
#ifndef KT_TEST_SUPPORT_SNAPSHOT_ASSERT_H
#define KT_TEST_SUPPORT_SNAPSHOT_ASSERT_H

#include <ktiming.h>

/* Two entries' per-source counts are the same, field by field (the structs have padding). */
static inline void ktt_assert_by_source_same(const kt_kernel_timing_t *a, const kt_kernel_timing_t *b)
{
    assert_int_equal(a->by_source_count, b->by_source_count);
    for (uint32_t i = 0; i < a->by_source_count; i++) {
        assert_int_equal(a->by_source[i].source, b->by_source[i].source);
        assert_int_equal(a->by_source[i].dispatch_count, b->by_source[i].dispatch_count);
        assert_int_equal(a->by_source[i].total_ns, b->by_source[i].total_ns);
    }
}

#endif
