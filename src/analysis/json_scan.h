/* json_scan.h — internal to the analysis library: finding a JSON document's large top-level arrays by their
 * bytes, without building them, so the loader (load.c) can parse their elements one at a time instead of
 * holding the whole document as a tree (a snapshot of 100,000 kernels is ~55 MB of text and was ~600 MB of
 * cJSON nodes). The scan follows structure only (strings, nesting, commas); cJSON still parses every byte. */
#ifndef KT_ANALYSIS_JSON_SCAN_H
#define KT_ANALYSIS_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The first '"' or '\\' in [p, end), or end: eight bytes a step where the machine is little-endian (a snapshot's
 * strings are names, keys and short labels: two memchr calls a string cost more than the search). The scan below
 * and the loader's fast reader (load.c) both find a string's end with it. */
static inline const char *kt__json_quote_or_escape(const char *p, const char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (; end - p >= 8; p += 8) {
        uint64_t x, q, b;
        memcpy(&x, p, 8);
        q = x ^ (ones * '"');
        b = x ^ (ones * '\\');
        /* a zero byte of q or b sets its high bit here; the lowest set bit is always a true one */
        uint64_t hit = ((q - ones) & ~q & highs) | ((b - ones) & ~b & highs);
        if (hit)
            return p + __builtin_ctzll(hit) / 8;
    }
#endif
    while (p < end && *p != '"' && *p != '\\')
        p++;
    return p;
}

/* One top-level array member to locate. */
typedef struct kt__json_array_at_t {
    const char *key; /* its name as written between the quotes (a name written with escapes is not matched);
                      * NULL: this slot matches nothing */
    int any;         /* set by the caller: an object is taken too, and only its brackets are recorded (open,
                      * close; no element starts): a member to be cut out unread */
    int found;       /* set: the member exists and holds an array (or, with any, an object); open, close and
                      * start[] describe it */
    size_t open;     /* offset of its '[' */
    size_t close;    /* offset of its ']' */
    size_t *start;   /* offset of each element's first byte (malloc'd; NULL when count is 0) */
    size_t count;    /* its elements */
} kt__json_array_at_t;

/* Scans the object that text[0..len) holds for the members arrays[0..n) name. Returns 0 when the structure
 * was followed to the end of the root object (*root_end, when root_end is not NULL, then holds the offset just
 * past its '}': what follows is not the document's), -1 when not (not an object, unbalanced, unterminated, a
 * member named twice, out of memory): the caller then parses the document whole, and cJSON reports what is wrong.
 * Release with kt__json_arrays_free whatever the result. */
int kt__json_scan_root(const char *text, size_t len, kt__json_array_at_t *arrays, size_t n, size_t *root_end);
void kt__json_arrays_free(kt__json_array_at_t *arrays, size_t n);

#endif
