/* cache.c — the CPU's cache size (sysfs, then sysconf) and the flush that evicts it between harness samples. */
#include "harness/harness_internal.h"

#include <ktiming/harness.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KT_CACHE_FALLBACK_BYTES (32u * 1024u * 1024u)

static size_t g_cache_bytes;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

/* "32768K", "1M", "512" → bytes; 0 when unreadable. */
static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    if (*end == 'K' || *end == 'k') v *= 1024ull;
    else if (*end == 'M' || *end == 'm') v *= 1024ull * 1024ull;
    else if (*end == 'G' || *end == 'g') v *= 1024ull * 1024ull * 1024ull;
    return (size_t)v;
}

static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* Largest data or unified cache of cpu0 at its highest level, as the kernel describes it. */
static size_t sysfs_cache_bytes(void)
{
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (read_line(path, buf, sizeof buf)) continue;
        if (strcmp(buf, "Data") && strcmp(buf, "Unified")) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_line(path, buf, sizeof buf)) continue;
        int level = atoi(buf);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_line(path, buf, sizeof buf)) continue;
        size_t bytes = parse_size(buf);
        if (level > best_level || (level == best_level && bytes > best)) {
            best_level = level;
            best = bytes;
        }
    }
    return best;
}

static void cache_init(void)
{
    /* sysfs first: glibc's sysconf can report a package-wide (or summed) L3 far larger than one core sees. */
    size_t bytes = sysfs_cache_bytes();
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!bytes) {
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (v > 0) bytes = (size_t)v;
    }
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (!bytes) {
        long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
        if (v > 0) bytes = (size_t)v;
    }
#endif
    g_cache_bytes = bytes ? bytes : KT_CACHE_FALLBACK_BYTES;
}

size_t kt_harness_cache_size(void)
{
    pthread_once(&g_cache_once, cache_init);
    return g_cache_bytes;
}

void kt__cache_flush(unsigned char *buf, size_t bytes, unsigned pass)
{
    volatile unsigned char sink;
    memset(buf, (int)(pass & 0xffu), bytes);
    unsigned char acc = 0;
    for (size_t i = 0; i < bytes; i += 64) acc ^= buf[i];
    sink = acc;
    (void)sink;
}
