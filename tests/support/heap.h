/* support/heap.h — heap bytes in use, for tests that bound what a reader or writer holds: glibc's count, or the
 * sanitizer allocator's under ASan (glibc's then says 0). */
#ifndef KT_TESTS_SUPPORT_HEAP_H
#define KT_TESTS_SUPPORT_HEAP_H

#include <malloc.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define KTT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KTT_ASAN 1
#endif
#endif
#ifdef KTT_ASAN
size_t __sanitizer_get_current_allocated_bytes(void); /* the sanitizer runtime's (its header is not installed) */
#endif

static inline size_t ktt_heap_used(void)
{
#ifdef KTT_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#endif
}

#endif
