/* json_scan.c — locating a JSON object's large array members without building them (json_scan.h). */
#include "analysis/json_scan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static size_t skip_ws(const char *t, size_t i, size_t len)
{
    while (i < len && is_ws(t[i]))
        i++;
    return i;
}

/* At the opening quote of a string: moves *i past its closing quote; -1 when it is unterminated. Up to its first
 * backslash (to its end, for most strings) eight bytes a step. */
static int skip_string(const char *t, size_t len, size_t *i)
{
    const char *q = kt__json_quote_or_escape(t + *i + 1, t + len);
    if (q < t + len && *q == '"') {
        *i = (size_t)(q - t) + 1;
        return 0;
    }
    for (size_t k = (size_t)(q - t); k < len; k++) {
        if (t[k] == '\\')
            k++; /* the escaped character, a quote among them */
        else if (t[k] == '"') {
            *i = k + 1;
            return 0;
        }
    }
    return -1;
}

static int push_start(kt__json_array_at_t *a, size_t at, size_t *cap)
{
    if (a->count == *cap) {
        size_t grown = *cap ? 2 * *cap : 1024;
        size_t *bigger = grown > SIZE_MAX / sizeof *bigger ? NULL : realloc(a->start, grown * sizeof *bigger);
        if (!bigger)
            return -1;
        a->start = bigger;
        *cap = grown;
    }
    a->start[a->count++] = at;
    return 0;
}

/* Moves *i past the value that starts there. With arr (the value must then be an array, or with arr->any an
 * array or an object), records its brackets and, unless arr->any, the first byte of each of its elements.
 * Only structure is checked; -1 when it cannot be followed. */
static int skip_value(const char *t, size_t len, size_t *i, kt__json_array_at_t *arr)
{
    size_t k = *i, cap = 0;
    int starts = arr && !arr->any;
    if (k >= len)
        return -1;
    if (t[k] == '"')
        return skip_string(t, len, i);
    if (t[k] != '{' && t[k] != '[') { /* a number, true, false or null: no structural byte inside */
        while (k < len && t[k] != ',' && t[k] != '}' && t[k] != ']' && !is_ws(t[k]))
            k++;
        *i = k;
        return k < len ? 0 : -1;
    }
    if (arr) {
        if (t[k] != '[' && !arr->any)
            return -1;
        arr->open = k;
    }
    size_t depth = 0;
    do {
        if (k >= len)
            return -1;
        char ch = t[k];
        if (ch == '"') {
            if (skip_string(t, len, &k))
                return -1;
            continue;
        }
        if (ch == '{' || ch == '[') {
            depth++;
            k++;
            if (starts && depth == 1) {
                size_t first = skip_ws(t, k, len);
                if (first < len && t[first] != ']' && push_start(arr, first, &cap))
                    return -1;
            }
        } else if (ch == '}' || ch == ']') {
            depth--;
            k++;
            if (arr && depth == 0)
                arr->close = k - 1;
        } else if (ch == ',' && starts && depth == 1) {
            k++;
            if (push_start(arr, skip_ws(t, k, len), &cap))
                return -1;
        } else { /* a number, literal, colon or blank: on to the next byte that is structure */
            static const unsigned char kStop[256] = {['"'] = 1, ['{'] = 1, ['['] = 1, ['}'] = 1, [']'] = 1, [','] = 1};
            for (k++; k < len && !kStop[(unsigned char)t[k]]; k++)
                ;
        }
    } while (depth > 0);
    *i = k;
    return 0;
}

int kt__json_scan_root(const char *text, size_t len, kt__json_array_at_t *arrays, size_t n, size_t *root_end)
{
    for (size_t a = 0; a < n; a++) {
        arrays[a].found = 0;
        arrays[a].start = NULL;
        arrays[a].count = 0;
    }
    size_t i = skip_ws(text, 0, len);
    if (i >= len || text[i] != '{')
        return -1;
    i = skip_ws(text, i + 1, len);
    if (i < len && text[i] == '}') {
        if (root_end)
            *root_end = i + 1;
        return 0;
    }
    for (;;) {
        if (i >= len || text[i] != '"')
            return -1;
        size_t key = i + 1;
        if (skip_string(text, len, &i))
            return -1;
        size_t key_len = i - 1 - key;
        i = skip_ws(text, i, len);
        if (i >= len || text[i] != ':')
            return -1;
        i = skip_ws(text, i + 1, len);
        kt__json_array_at_t *want = NULL;
        for (size_t a = 0; a < n && !want; a++)
            if (arrays[a].key && strlen(arrays[a].key) == key_len && !memcmp(text + key, arrays[a].key, key_len))
                want = &arrays[a];
        if (want && want->found)
            return -1; /* named twice: the whole-document path reports it */
        int is_array = want && i < len && (text[i] == '[' || (want->any && text[i] == '{'));
        if (skip_value(text, len, &i, is_array ? want : NULL))
            return -1;
        if (is_array)
            want->found = 1;
        i = skip_ws(text, i, len);
        if (i < len && text[i] == '}') {
            if (root_end)
                *root_end = i + 1;
            return 0;
        }
        if (i >= len || text[i] != ',')
            return -1;
        i = skip_ws(text, i + 1, len);
    }
}

void kt__json_arrays_free(kt__json_array_at_t *arrays, size_t n)
{
    for (size_t a = 0; a < n; a++) {
        free(arrays[a].start);
        arrays[a].start = NULL;
        arrays[a].count = 0;
        arrays[a].found = 0;
    }
}
