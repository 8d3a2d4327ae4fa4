/* kti_map.h — a small hash map from 64-bit handles to pointers for the interception libraries (not
 * thread-safe: callers hold their own lock). Linear probing, backward-shift deletion, key 0 is never stored. */
#ifndef KTI_MAP_H
#define KTI_MAP_H

#include <stdint.h>
#include <stdlib.h>

/* The map. Zero-initialised is an empty map. */
typedef struct kti_map_t {
    uint64_t *keys; /* 0 = empty slot */
    void **vals;    /* value per slot */
    size_t cap;     /* slots, a power of two (0 before the first put) */
    size_t n;       /* keys stored */
} kti_map_t;

static inline size_t kti_map_slot(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static inline void *kti_map_get(const kti_map_t *m, uint64_t key)
{
    if (!m->cap || !key)
        return NULL;
    for (size_t i = kti_map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (!m->keys[i])
            return NULL;
    }
}

static inline int kti_map_grow(kti_map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = kti_map_slot(m->keys[i], cap);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

/* Inserts or replaces; 0 or -1 (out of memory). */
static inline int kti_map_put(kti_map_t *m, uint64_t key, void *val)
{
    if (!key)
        return -1;
    if ((m->n + 1) * 4 > m->cap * 3 && kti_map_grow(m) != 0)
        return -1;
    size_t i = kti_map_slot(key, m->cap);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->keys[i])
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

/* Removes key; returns its value (NULL when absent). */
static inline void *kti_map_del(kti_map_t *m, uint64_t key)
{
    if (!m->cap || !key)
        return NULL;
    size_t i = kti_map_slot(key, m->cap);
    while (m->keys[i] != key) {
        if (!m->keys[i])
            return NULL;
        i = (i + 1) & (m->cap - 1);
    }
    void *val = m->vals[i];
    m->n--;
    for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = kti_map_slot(m->keys[j], m->cap);
        /* move j back into the hole at i when its home slot does not lie in (i, j] (cyclically) */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->vals[i] = NULL;
    return val;
}

static inline void kti_map_free(kti_map_t *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

#endif
