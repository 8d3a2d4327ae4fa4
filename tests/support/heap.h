/* support/heap.h — heap bytes in use, for tests that bound what a reader or writer holds: glibc's count, or the
 * sanitizer allocator's under ASan (glibc's then says 0). */
#ifndef KT_TESTS_SUPPORT_HEAP_H
#define KT_TESTS_SUPPORT_HEAP_H

#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

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

/* A stream that samples the heap at each of its writes (the writer's buffer set small, so that is all along a
 * write): the most heap seen in peak, the bytes written in bytes. */
typedef struct ktt_heap_sink_t {
    size_t peak;
    size_t bytes;
} ktt_heap_sink_t;

static inline ssize_t ktt__heap_sink_write(void *cookie, const char *buf, size_t size)
{
    (void)buf;
    ktt_heap_sink_t *k = (ktt_heap_sink_t *)cookie;
    size_t h = ktt_heap_used();
    if (h > k->peak)
        k->peak = h;
    k->bytes += size;
    return (ssize_t)size;
}

/* A write-only FILE over k, buffered in buf[size]; NULL on failure. */
static inline FILE *ktt_heap_sink_open(ktt_heap_sink_t *k, char *buf, size_t size)
{
    cookie_io_functions_t io = {NULL, ktt__heap_sink_write, NULL, NULL};
    FILE *out = fopencookie(k, "w", io);
    if (out)
        setvbuf(out, buf, _IOFBF, size);
    return out;
}

#endif
