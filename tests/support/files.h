/* files.h — a test's private directory and its files: created under TMPDIR (or /tmp), removed with everything in
 * it, whole files read and written. Header-only; include as "support/files.h". */
#ifndef KT_TESTS_SUPPORT_FILES_H
#define KT_TESTS_SUPPORT_FILES_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh private directory (mode 0700) named kt-<tag>-XXXXXX; malloc'd path (free it), or NULL. */
static inline char *ktt_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/kt-%s-XXXXXX", base && *base ? base : "/tmp", tag ? tag : "test");
    return mkdtemp(tmpl) ? strdup(tmpl) : NULL;
}

/* dir/name in a malloc'd string (free it). */
static inline char *ktt_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static inline int ktt__remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "could not remove %s\n", path);
    return 0; /* go on: remove what can be removed */
}

/* Removes dir and everything under it (symbolic links themselves, never what they point to). */
static inline void ktt_rmtree(const char *dir)
{
    if (dir)
        nftw(dir, ktt__remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A cmocka group's setup and teardown for a test file that works in one private directory: `dir` (a `char *` the
 * file declares) is made with ktt_tmpdir(tag) before the group's first test and removed after its last. */
#define KTT_TMPDIR_GROUP(dir, tag)                                                                                    \
    static int setup(void **state)                                                                                 \
    {                                                                                                              \
        (void)state;                                                                                               \
        return (dir = ktt_tmpdir(tag)) ? 0 : -1;                                                                   \
    }                                                                                                              \
    static int teardown(void **state)                                                                              \
    {                                                                                                              \
        (void)state;                                                                                               \
        ktt_rmtree(dir);                                                                                           \
        free(dir);                                                                                                 \
        dir = NULL;                                                                                                \
        return 0;                                                                                                  \
    }

/* The integer a file starts with (a pid a program published), or -1 when there is none (yet). */
static inline long ktt_read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* The whole file in a malloc'd NUL-terminated buffer (*len its size when len is given), or NULL. */
static inline char *ktt_read_file(const char *path, size_t *len)
{
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, got = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + got, 1, cap - got - 1, f)) > 0;) {
        got += n;
        if (cap - got < 1024) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

/* Writes len bytes to path (created or truncated); 0 or -1. */
static inline int ktt_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && put == len) ? 0 : -1;
}

#endif
