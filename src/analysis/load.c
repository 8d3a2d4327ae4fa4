/* load.c — kt_snapshot_parse() and kt_snapshot_load(): JSON (schema ktiming.snapshot, docs/json-schema.md)
 * back into a kt_snapshot_t, with every value type-, range- and consistency-checked and every failure a
 * KT_EPARSE with a message naming the position or the member. */
#include <ktiming/analysis.h>

#include "analysis/compare_match.h"
#include "analysis/json_scan.h"
#include "analysis/load_sink.h"
#include "export/escape.h" /* the schema a file names, escaped in the message */
#include "shared/shared.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

#define SCHEMA_NAME KT_SNAPSHOT_SCHEMA_NAME
#define MAX_SAFE_INT 9007199254740991.0 /* 2^53 - 1: above it a JSON number may already have been rounded */

/* The document's large members: arrays whose elements are parsed one at a time from the text (json_scan.h),
 * and the span table, cut out unread when spans are skipped. */
enum { LAZY_ENTRIES, LAZY_SPANS, LAZY_SPAN_TABLE, LAZY_COUNT };

/* A slot of the member table: a member, its name's hash, and whether another member has the same name. */
typedef struct idx_slot_t {
    const cJSON *item; /* NULL: the slot is free */
    uint32_t hash;     /* name_hash(item->string) */
    int twice;         /* the name appears more than once in the object */
} idx_slot_t;

/* Parsing state: where errors go, which member is being read, the text, and the member index. */
typedef struct load_ctx_t {
    char *err;        /* caller's buffer, may be NULL */
    size_t errlen;    /* its size */
    char where[96];   /* path of the object being read, e.g. "entries[3]"; "" at the top level */
    const char *text; /* the whole document (NUL-terminated), for lazy elements and error positions */
    size_t len;       /* its length */
    kt__json_array_at_t lazy[LAZY_COUNT]; /* found: that array's elements are parsed when read */
    const cJSON *idx_obj; /* the object idx describes (NULL: none) */
    idx_slot_t *idx;      /* its members by name, for member(): a hash table of idx_n slots (a power of 2) */
    size_t idx_n, idx_cap;
    struct fast_t *fast;  /* the element reader's node pool and string space (NULL until first used) */
    /* The entries' text already read is given back to the system (zero pages from then on: see give_back) up to
     * an anchor, an element's first byte, from where line, column and depth are then counted. */
    size_t anchor;        /* 0: none given back; else that element's offset (nesting depth 2, outside strings) */
    size_t anchor_line;   /* its line (1-based) */
    size_t anchor_bol;    /* the offset of that line's first byte */
    size_t anchor_max;    /* the deepest nesting before it (depth_at(anchor - 1)) */
    size_t read_max;      /* the deepest nesting (in the document) of the elements read since the anchor */
    size_t given;         /* text below this offset is given back (0: none) */
    int may_give_back;    /* the text is the loader's own copy (kt_snapshot_parse's, kt_snapshot_load's) */
    int skip_spans;       /* kt_load_opts_t.skip_spans: the span sections are neither read nor checked */
    int version;          /* the document's schema version */
    const kt__entry_sink_t *sink; /* non-NULL: each entry goes there as it is read, none is kept */
    size_t sunk;          /* entries given to the sink (what spans' indices are checked against) */
    kt_kernel_timing_t *spent; /* entries the sink has seen, what it left of them freed a batch at a time */
    size_t nspent;
} load_ctx_t;

static void ctx_init(load_ctx_t *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->err = err;
    c->errlen = errlen;
}

/* ---------------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------------- */

static int fail(load_ctx_t *c, int code, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Fails for member `key` of the current object: "entries[3].min_ns: <what>". */
static int fail_member(load_ctx_t *c, const char *key, const char *what)
{
    return fail(c, KT_EPARSE, "%s%s%s: %s", c->where, *c->where ? "." : "", key, what);
}

/* c->where = "array[index]", as snprintf("%s[%zu]") would write it (truncated to fit): not snprintf, which was
 * 3 % of reading a snapshot (once per entry). */
static void set_where(load_ctx_t *c, const char *array, size_t index)
{
    char num[24], *d = num + sizeof num;
    *--d = ']';
    do {
        *--d = (char)('0' + index % 10);
        index /= 10;
    } while (index);
    *--d = '[';
    size_t na = strlen(array), nn = (size_t)(num + sizeof num - d), cap = sizeof c->where - 1;
    if (na > cap)
        na = cap;
    if (nn > cap - na)
        nn = cap - na;
    memcpy(c->where, array, na);
    memcpy(c->where + na, d, nn);
    c->where[na + nn] = '\0';
}

/* ---------------------------------------------------------------------------------------------------
 * Member lookup: a member named twice is ambiguous (RFC 8259 leaves it to the reader), so it is refused.
 * The members of the object being read are put in a hash table by name once, so reading an object of k members
 * costs O(k), not a scan of every member per lookup (nor a sort: a million entries were seconds of strcmp).
 * ------------------------------------------------------------------------------------------------- */

/* A name of up to 16 bytes (every name the schema has) is hashed from two 8-byte loads that cover all of it, not
 * a byte at a time (that loop was a tenth of a load: about 30 lookups and 20 members an entry); longer names
 * byte by byte (FNV-1a), so every byte of every name counts. */
static uint32_t name_hash(const char *s)
{
    size_t n = strlen(s);
    if (n > 16) {
        uint32_t h = 2166136261u;
        for (; *s; s++)
            h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
    }
    uint64_t a, b = 0;
    if (n >= 8) { /* whole 8- and 4-byte loads, overlapping: no bytes assembled in memory and read back wider */
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
    } else if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, s + n - 4, 4);
        a = lo | (uint64_t)hi << 32;
    } else {
        a = n ? (unsigned char)s[0] | (uint64_t)(unsigned char)s[n / 2] << 8 | (uint64_t)(unsigned char)s[n - 1] << 16
              : 0;
    }
    uint64_t h = (a ^ (uint64_t)n << 59) * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 31;
    h *= 0xff51afd7ed558ccdull;
    return (uint32_t)(h ^ h >> 32);
}

/* Puts obj's named members into c->idx (open addressing, at most half full); -1 when out of memory (member()
 * then scans). */
static int index_build(load_ctx_t *c, const cJSON *obj)
{
    const cJSON *it;
    size_t n = 0, cap = 32;
    c->idx_obj = NULL;
    cJSON_ArrayForEach(it, obj)
        n++;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > c->idx_cap) {
        idx_slot_t *bigger = realloc(c->idx, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        c->idx = bigger;
        c->idx_cap = cap;
    }
    memset(c->idx, 0, cap * sizeof *c->idx);
    c->idx_n = cap;
    cJSON_ArrayForEach(it, obj)
    {
        if (!it->string)
            continue;
        uint32_t h = name_hash(it->string);
        size_t k = h & (cap - 1);
        for (; c->idx[k].item; k = (k + 1) & (cap - 1))
            if (c->idx[k].hash == h && !strcmp(c->idx[k].item->string, it->string))
                break;
        if (c->idx[k].item) {
            c->idx[k].twice = 1;
        } else {
            c->idx[k].item = it;
            c->idx[k].hash = h;
        }
    }
    c->idx_obj = obj;
    return 0;
}

static const cJSON *member(load_ctx_t *c, const cJSON *obj, const char *key, int *rc)
{
    const cJSON *found = NULL, *it;
    *rc = 0;
    if (obj == c->idx_obj || index_build(c, obj) == 0) {
        uint32_t h = name_hash(key);
        for (size_t k = h & (c->idx_n - 1); c->idx[k].item; k = (k + 1) & (c->idx_n - 1)) {
            if (c->idx[k].hash != h || strcmp(c->idx[k].item->string, key))
                continue;
            if (c->idx[k].twice) {
                *rc = fail_member(c, key, "member appears more than once");
                return NULL;
            }
            return c->idx[k].item;
        }
        return NULL;
    }
    cJSON_ArrayForEach(it, obj)
    {
        if (it->string && !strcmp(it->string, key)) {
            if (found) {
                *rc = fail_member(c, key, "member appears more than once");
                return NULL;
            }
            found = it;
        }
    }
    return found;
}

/* ---------------------------------------------------------------------------------------------------
 * Elements of an array member: from the tree, or -- the large arrays -- parsed one at a time from the text,
 * each freed before the next is parsed, so the document is never held whole as a tree.
 * ------------------------------------------------------------------------------------------------- */

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

typedef struct elems_t {
    int present;                    /* the member exists and is not null */
    const cJSON *dom;               /* tree: the next element */
    const kt__json_array_at_t *lz;  /* text: the array's elements (NULL: tree) */
    size_t i;                       /* text: the next element's index */
    cJSON *own;                     /* text: the element returned last */
    int own_fast;                   /* own is in the fast reader's pool (not cJSON's to free) */
} elems_t;

/* ---------------------------------------------------------------------------------------------------
 * The fast element reader. A snapshot's large arrays hold plain elements: objects of unescaped strings, numbers
 * in JSON's grammar, and small arrays and objects of those. Such an element is read here into cJSON nodes from a
 * pool that every element reuses (no allocation per node, no strdup per name), with the same values cJSON gives
 * (the same bytes for strings, strtod's double for numbers); the typed readers below then see no difference.
 * Anything else (an escape, a literal or number outside the plain grammar, deep nesting, any syntax error) makes
 * it give up, and the element is parsed by cJSON as before, so every error and its position stay cJSON's.
 * ------------------------------------------------------------------------------------------------- */

#define FAST_BLOCK 1024 /* nodes per pool block */
#define FAST_DEPTH 16   /* deeper elements are left to cJSON */

/* One block of nodes. */
typedef struct fast_block_t {
    struct fast_block_t *next; /* the next block (kept for the next element) */
    cJSON node[FAST_BLOCK];    /* the nodes */
} fast_block_t;

/* The pool: blocks reused element after element, and the strings' bytes. */
typedef struct fast_t {
    fast_block_t *first;  /* the blocks */
    fast_block_t *cur;    /* the one being filled */
    size_t used;          /* nodes used in cur */
    char *str;            /* names and string values, NUL-terminated, back to back */
    size_t str_n, str_cap;
    const char *t;        /* the text being read */
    size_t lim;           /* where the element must end by */
    int depth;            /* the deepest nesting of the element read last (its object: 1) */
} fast_t;

static cJSON *fast_node(fast_t *f)
{
    if (f->used == FAST_BLOCK) {
        if (!f->cur->next) {
            fast_block_t *b = malloc(sizeof *b);
            if (!b)
                return NULL;
            b->next = NULL;
            f->cur->next = b;
        }
        f->cur = f->cur->next;
        f->used = 0;
    }
    cJSON *n = &f->cur->node[f->used++];
    memset(n, 0, sizeof *n);
    return n;
}

static size_t fast_ws(const fast_t *f, size_t i)
{
    while (i < f->lim && is_ws(f->t[i]))
        i++;
    return i;
}

/* A string without escapes at i (its quote): copied into the pool, *i moved past its closing quote. */
static char *fast_string(fast_t *f, size_t *i)
{
    const char *s = f->t + *i + 1, *q = kt__json_quote_or_escape(s, f->t + f->lim);
    if (q >= f->t + f->lim || *q != '"')
        return NULL;
    size_t n = (size_t)(q - s);
    char *out = f->str + f->str_n; /* room: the caller sized str to the element's bytes */
    memcpy(out, s, n);
    out[n] = '\0';
    f->str_n += n + 1;
    *i += n + 2;
    return out;
}

/* A number in JSON's grammar at i, followed by a byte that ends a value: its double, as strtod reads it. */
static int fast_number(fast_t *f, size_t *i, double *out)
{
    const char *t = f->t;
    size_t k = *i, digits = 0;
    int neg = t[k] == '-', plain = 1;
    uint64_t v = 0;
    if (neg)
        k++;
    if (k >= f->lim || t[k] < '0' || t[k] > '9')
        return -1;
    if (t[k] == '0') {
        k++;
        digits = 1;
    } else {
        for (; k < f->lim && t[k] >= '0' && t[k] <= '9'; k++, digits++)
            v = v * 10 + (uint64_t)(t[k] - '0'); /* wraps past 19 digits: then not plain */
    }
    if (k < f->lim && t[k] == '.') {
        plain = 0;
        if (++k >= f->lim || t[k] < '0' || t[k] > '9')
            return -1;
        while (k < f->lim && t[k] >= '0' && t[k] <= '9')
            k++;
    }
    if (k < f->lim && (t[k] == 'e' || t[k] == 'E')) {
        plain = 0;
        k++;
        if (k < f->lim && (t[k] == '+' || t[k] == '-'))
            k++;
        if (k >= f->lim || t[k] < '0' || t[k] > '9')
            return -1;
        while (k < f->lim && t[k] >= '0' && t[k] <= '9')
            k++;
    }
    /* cJSON reads at most 63 bytes of a number; what follows must end the value */
    if (k - *i > 63 || k >= f->lim || !(is_ws(t[k]) || t[k] == ',' || t[k] == ']' || t[k] == '}'))
        return -1;
    if (plain && digits <= 15) { /* exact as an integer, so exactly what strtod gives */
        *out = neg ? -(double)v : (double)v;
    } else {
        char *end = NULL;
        *out = strtod(t + *i, &end);
        if (end != t + k)
            return -1;
    }
    *i = k;
    return 0;
}

/* The value at i into n; *i moved past it. -1: not a plain value (cJSON reads it instead). */
static int fast_value(fast_t *f, size_t *i, cJSON *n, int depth)
{
    const char *t = f->t;
    size_t k = *i;
    if (k >= f->lim)
        return -1;
    switch (t[k]) {
    case '"':
        n->type = cJSON_String;
        return (n->valuestring = fast_string(f, i)) ? 0 : -1;
    case '{':
    case '[': {
        int obj = t[k] == '{';
        char close = obj ? '}' : ']';
        cJSON *last = NULL;
        if (depth >= FAST_DEPTH)
            return -1;
        if (depth > f->depth)
            f->depth = depth;
        n->type = obj ? cJSON_Object : cJSON_Array;
        k = fast_ws(f, k + 1);
        if (k < f->lim && t[k] == close) {
            *i = k + 1;
            return 0;
        }
        for (;;) {
            cJSON *item = fast_node(f);
            if (!item)
                return -1;
            if (obj) {
                if (k >= f->lim || t[k] != '"' || !(item->string = fast_string(f, &k)))
                    return -1;
                k = fast_ws(f, k);
                if (k >= f->lim || t[k] != ':')
                    return -1;
                k = fast_ws(f, k + 1);
            }
            if (fast_value(f, &k, item, depth + 1))
                return -1;
            if (last) {
                last->next = item;
                item->prev = last;
            } else {
                n->child = item;
            }
            last = item;
            k = fast_ws(f, k);
            if (k < f->lim && t[k] == ',') {
                k = fast_ws(f, k + 1);
                continue;
            }
            if (k < f->lim && t[k] == close)
                break;
            return -1;
        }
        n->child->prev = last; /* as cJSON links a list: the first item's prev is the last */
        *i = k + 1;
        return 0;
    }
    case 't':
    case 'f':
    case 'n': {
        static const char *const kWord[] = {"true", "false", "null"};
        static const int kType[] = {cJSON_True, cJSON_False, cJSON_NULL};
        int w = t[k] == 't' ? 0 : t[k] == 'f' ? 1 : 2;
        size_t len = strlen(kWord[w]);
        if (f->lim - k <= len || memcmp(t + k, kWord[w], len))
            return -1;
        char after = t[k + len];
        if (!(is_ws(after) || after == ',' || after == ']' || after == '}'))
            return -1;
        n->type = kType[w];
        n->valueint = w == 0;
        *i = k + len;
        return 0;
    }
    default: {
        double d;
        if (fast_number(f, i, &d))
            return -1;
        n->type = cJSON_Number;
        n->valuedouble = d;
        /* cJSON's valueint: saturated */
        n->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
        return 0;
    }
    }
}

/* The element text[at..lim) as a plain object (it must start with '{'): its tree, valid until the next call, and
 * *end just past it; NULL when it is not plain (or out of memory): the caller parses it with cJSON. */
static cJSON *fast_parse(load_ctx_t *c, size_t at, size_t lim, size_t *end)
{
    if (at >= lim || c->text[at] != '{')
        return NULL;
    if (!c->fast && !(c->fast = calloc(1, sizeof *c->fast)))
        return NULL;
    fast_t *f = c->fast;
    if (!f->first && !(f->first = calloc(1, sizeof *f->first)))
        return NULL;
    if (f->str_cap < lim - at + 1) { /* every string's bytes and NUL fit in its quoted text */
        char *bigger = realloc(f->str, lim - at + 1);
        if (!bigger)
            return NULL;
        f->str = bigger;
        f->str_cap = lim - at + 1;
    }
    f->str_n = 0;
    f->cur = f->first;
    f->used = 0;
    f->t = c->text;
    f->lim = lim;
    f->depth = 0;
    cJSON *root = fast_node(f);
    size_t k = at;
    if (!root || fast_value(f, &k, root, 1))
        return NULL;
    *end = k;
    return root;
}

static void fast_free(load_ctx_t *c)
{
    if (!c->fast)
        return;
    for (fast_block_t *b = c->fast->first, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(c->fast->str);
    free(c->fast);
    c->fast = NULL;
}

/* 1-based line and column (in bytes) of offset pos in text. */
static void line_col(const char *text, size_t pos, size_t *line, size_t *col)
{
    size_t l = 1, start = 0;
    for (size_t i = 0; i < pos; i++)
        if (text[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *col = pos - start + 1;
}

/* The deepest nesting of arrays and objects in text[from..to) (strings skipped; text is NUL-terminated, and a NUL
 * ends the span), which starts outside any string at nesting depth base: how deep an element that cJSON read
 * goes, or the text past the anchor. */
static size_t depth_in(const char *text, size_t from, size_t to, size_t base)
{
    size_t depth = base, max = base;
    int in_string = 0;
    for (size_t i = from; i < to && text[i]; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\' && text[i + 1])
                i++;
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max)
                max = depth;
        } else if ((ch == ']' || ch == '}') && depth) {
            depth--;
        }
    }
    return max;
}

/* The deepest nesting up to and including text[pos]: what tells a document cJSON refused for its nesting limit
 * from one with a syntax error. Only ever run on the error path. */
static size_t depth_at(const char *text, size_t pos)
{
    return depth_in(text, 0, pos + 1, 0);
}

/* line_col and depth_at for a position in the text being read, which may lie past text given back. */
static void text_line_col(const load_ctx_t *c, size_t pos, size_t *line, size_t *col)
{
    if (!c->anchor || pos < c->anchor) {
        line_col(c->text, pos, line, col);
        return;
    }
    size_t l = c->anchor_line, start = c->anchor_bol;
    for (size_t i = c->anchor; i < pos; i++)
        if (c->text[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *col = pos - start + 1;
}

static size_t text_depth_at(const load_ctx_t *c, size_t pos)
{
    if (!c->anchor || pos < c->anchor)
        return depth_at(c->text, pos);
    size_t after = depth_in(c->text, c->anchor, pos + 1, 2); /* the anchor is inside the root and an array */
    return after > c->anchor_max ? after : c->anchor_max;
}

/* A syntax error at byte pos of the document ("too deep" when that is why cJSON stopped there). */
static int fail_syntax(load_ctx_t *c, size_t pos)
{
    size_t line, col;
    text_line_col(c, pos, &line, &col);
    if (text_depth_at(c, pos) > CJSON_NESTING_LIMIT)
        return fail(c, KT_EPARSE, "nesting too deep at line %zu, column %zu (byte %zu): more than %d levels of arrays "
                    "and objects", line, col, pos, CJSON_NESTING_LIMIT);
    return fail(c, KT_EPARSE, "JSON syntax error at line %zu, column %zu (byte %zu of %zu)%s", line, col, pos, c->len,
                pos + 1 >= c->len ? ": the input ends early (truncated?)" : "");
}

static void elems_release(load_ctx_t *c, elems_t *e)
{
    if (!e->own)
        return;
    c->idx_obj = NULL; /* the next element may be (the fast reader's always is) at the same address */
    if (!e->own_fast)
        cJSON_Delete(e->own);
    e->own = NULL;
    e->own_fast = 0;
}

/* Before entry element i is read: when the entries read since the anchor fill KT_GIVE_BACK bytes, the anchor moves
 * to element i and the whole pages of text below it go back to the system (MADV_DONTNEED: they read as zeros from
 * then on). The text is the loader's own copy, and nothing reads the entries' text again but an error message's
 * line, column and depth, which count from the anchor. So a snapshot being loaded holds the text of a few
 * elements, not all of it beside the entries built from it. */
#define KT_GIVE_BACK ((size_t)4 << 20) /* 16 MiB before: a merge of two 55 MB files held 1.6 times its input */

static void give_back(load_ctx_t *c, const elems_t *e)
{
    const kt__json_array_at_t *lz = e->lz;
    size_t at = lz->start[e->i], from = c->anchor ? c->anchor : lz->start[0];
    if (lz != &c->lazy[LAZY_ENTRIES] || at - from < KT_GIVE_BACK)
        return;
    /* spans read after the entries must lie after them in the text: their errors count from the anchor too */
    if (c->lazy[LAZY_SPANS].found && c->lazy[LAZY_SPANS].open < lz->open)
        return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    if (!c->anchor) {
        line_col(c->text, at, &c->anchor_line, &c->anchor_bol);
        c->anchor_bol = at + 1 - c->anchor_bol; /* line_col gives the column; the line starts column - 1 before */
        /* the nesting up to here: the array's own (what precedes it) and its elements', measured as they were
         * read (read_max), not by a scan of the whole text before the anchor */
        size_t before = depth_in(c->text, 0, lz->open + 1, 0);
        c->anchor_max = before > c->read_max ? before : c->read_max;
    } else {
        for (const char *nl = c->text + c->anchor; (nl = memchr(nl, '\n', (size_t)(c->text + at - nl))); nl++) {
            c->anchor_line++;
            c->anchor_bol = (size_t)(nl - c->text) + 1;
        }
        if (c->read_max > c->anchor_max)
            c->anchor_max = c->read_max;
    }
    c->anchor = at;
    c->read_max = 0;
    uintptr_t lo = ((uintptr_t)(c->text + (c->given ? c->given : lz->open)) + (uintptr_t)page - 1) &
                   ~((uintptr_t)page - 1),
              hi = (uintptr_t)(c->text + at) & ~((uintptr_t)page - 1);
    if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0)
        c->given = (size_t)((const char *)hi - c->text);
}

/* The next element in *out, NULL after the last; 0, or KT_EPARSE for a syntax error in an element read from
 * the text. The element stays valid until the next call or elems_release. */
static int elems_next(load_ctx_t *c, elems_t *e, const cJSON **out)
{
    elems_release(c, e);
    *out = NULL;
    if (!e->lz) {
        if (e->dom) {
            *out = e->dom;
            e->dom = e->dom->next;
        }
        return 0;
    }
    if (e->i >= e->lz->count)
        return 0;
    if (c->may_give_back)
        give_back(c, e);
    size_t at = e->lz->start[e->i], lim = e->lz->close, fast_end = 0;
    int last = e->i + 1 == e->lz->count;
    const char *end = NULL;
    /* the fast reader looks no further than the next element's start */
    cJSON *v = fast_parse(c, at, last ? lim : e->lz->start[e->i + 1], &fast_end);
    e->own_fast = v != NULL;
    if (v)
        end = c->text + fast_end;
    else
        v = at < lim ? cJSON_ParseWithLengthOpts(c->text + at, lim - at, &end, 0) : NULL;
    if (!v)
        return fail_syntax(c, end && end >= c->text + at && end <= c->text + lim ? (size_t)(end - c->text) : at);
    size_t p = (size_t)(end - c->text), next,
           depth = 2 + (e->own_fast ? (size_t)c->fast->depth : depth_in(c->text, at, p, 0));
    if (depth > c->read_max)
        c->read_max = depth;
    while (p < lim && is_ws(c->text[p]))
        p++;
    for (next = p + 1; !last && next < lim && is_ws(c->text[next]); next++)
        ;
    if (last ? p != lim : c->text[p] != ',' || e->lz->start[e->i + 1] != next) {
        if (!e->own_fast)
            cJSON_Delete(v);
        e->own_fast = 0;
        return fail_syntax(c, p);
    }
    e->i++;
    e->own = v;
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Typed member readers. Each returns 0 or KT_EPARSE/KT_ENOMEM; absent optional members keep *out.
 * ------------------------------------------------------------------------------------------------- */

/* A JSON value as a uint64: a non-negative integral number up to 2^53-1, or a string of decimal digits. */
static int value_u64(const cJSON *v, uint64_t *out, const char **why)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d < 0.0 || d != floor(d)) {
            *why = "expected a non-negative integer";
            return KT_EPARSE;
        }
        if (d > MAX_SAFE_INT) {
            *why = "integer above 2^53-1 must be written as a decimal string to stay exact";
            return KT_EPARSE;
        }
        *out = (uint64_t)d;
        return 0;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        const char *s = v->valuestring;
        uint64_t x = 0;
        if (!*s) {
            *why = "expected a non-negative integer (empty string)";
            return KT_EPARSE;
        }
        for (; *s; s++) {
            unsigned dgt = (unsigned)(*s - '0');
            if (dgt > 9) {
                *why = "expected a non-negative integer (string with a non-digit)";
                return KT_EPARSE;
            }
            if (x > (UINT64_MAX - dgt) / 10) {
                *why = "integer does not fit in 64 bits";
                return KT_EPARSE;
            }
            x = x * 10 + dgt;
        }
        *out = x;
        return 0;
    }
    *why = "expected a non-negative integer";
    return KT_EPARSE;
}

static int get_u64(load_ctx_t *c, const cJSON *obj, const char *key, int required, uint64_t *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    const char *why = NULL;
    if (rc)
        return rc;
    if (!v)
        return required ? fail_member(c, key, "missing") : 0;
    if (value_u64(v, out, &why))
        return fail_member(c, key, why);
    return 0;
}

static int get_u32(load_ctx_t *c, const cJSON *obj, const char *key, int required, uint32_t *out)
{
    uint64_t v = *out;
    int rc = get_u64(c, obj, key, required, &v);
    if (rc)
        return rc;
    if (v > UINT32_MAX)
        return fail_member(c, key, "integer does not fit in 32 bits");
    *out = (uint32_t)v;
    return 0;
}

/* An unsigned 128-bit integer: a number up to 2^53-1 or a decimal string (as kt__json_write_u128 writes). */
static int get_u128(load_ctx_t *c, const cJSON *obj, const char *key, int *present, kt_u128_t *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    const char *why = NULL;
    *present = 0;
    if (rc || !v)
        return rc;
    if (cJSON_IsString(v) && v->valuestring && *v->valuestring) {
        unsigned __int128 x = 0;
        for (const char *p = v->valuestring; *p; p++) {
            unsigned dgt = (unsigned)(*p - '0');
            if (dgt > 9)
                return fail_member(c, key, "expected a non-negative integer (string with a non-digit)");
            if (x > (~(unsigned __int128)0 - dgt) / 10)
                return fail_member(c, key, "integer does not fit in 128 bits");
            x = x * 10 + dgt;
        }
        out->lo = (uint64_t)x;
        out->hi = (uint64_t)(x >> 64);
    } else {
        out->hi = 0;
        if (value_u64(v, &out->lo, &why))
            return fail_member(c, key, why);
    }
    *present = 1;
    return 0;
}

/* A double: a finite number, or null for "not a number" (what the writer emits for non-finite values). */
static int get_double(load_ctx_t *c, const cJSON *obj, const char *key, double *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    if (rc || !v)
        return rc;
    if (cJSON_IsNull(v)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fail_member(c, key, "expected a number or null");
    *out = v->valuedouble;
    return 0;
}

/* Whether s is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). JSON text
 * must be; cJSON passes raw bytes through unchecked, so this is where a file with stray bytes is refused. */
static int utf8_valid(const unsigned char *s)
{
    size_t len = strlen((const char *)s), i = 0;
    while (i < len) {
        /* ASCII eight bytes at a time: a snapshot's strings are nearly all ASCII, its span columns 2 MB of it */
        uint64_t w;
        while (i + 8 <= len && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ull)))
            i += 8;
        if (i >= len)
            break;
        size_t n = s[i] < 0x80 ? 1 : kt__utf8_len(s + i, len - i);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

/* A string member; *out is borrowed from the cJSON tree. */
static int get_str(load_ctx_t *c, const cJSON *obj, const char *key, int required, const char **out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    if (rc)
        return rc;
    if (!v)
        return required ? fail_member(c, key, "missing") : 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return fail_member(c, key, "expected a string");
    if (!utf8_valid((const unsigned char *)v->valuestring))
        return fail_member(c, key, "string is not valid UTF-8");
    *out = v->valuestring;
    return 0;
}

/* A string member copied into a fixed char array of the snapshot. */
static int get_str_into(load_ctx_t *c, const cJSON *obj, const char *key, int required, char *dst, size_t cap)
{
    const char *s = NULL;
    int rc = get_str(c, obj, key, required, &s);
    if (rc || !s)
        return rc;
    size_t n = strlen(s);
    if (n >= cap) {
        char why[64];
        snprintf(why, sizeof why, "string longer than %zu bytes", cap - 1);
        return fail_member(c, key, why);
    }
    memcpy(dst, s, n + 1);
    return 0;
}

static int get_str_dup(load_ctx_t *c, const cJSON *obj, const char *key, int required, const char *dflt,
                       const char **out)
{
    const char *s = dflt;
    int rc = get_str(c, obj, key, required, &s);
    if (rc)
        return rc;
    char *copy = strdup(s);
    if (!copy)
        return fail(c, KT_ENOMEM, "out of memory");
    *out = copy;
    return 0;
}

static int get_backend(load_ctx_t *c, const cJSON *obj, kt_backend_t *out)
{
    const char *s = NULL;
    int rc = get_str(c, obj, "backend", 1, &s);
    if (rc)
        return rc;
    for (int b = 0; b < KT_BACKEND_COUNT; b++)
        if (!strcasecmp(s, kt__backend_id((kt_backend_t)b))) {
            *out = (kt_backend_t)b;
            return 0;
        }
    return fail_member(c, "backend", "unknown backend (expected cpu, opencl, vulkan, cuda, metal, webgpu or host-api)");
}

/* An optional array member: *arr is NULL when absent, *n its length. */
static int get_array(load_ctx_t *c, const cJSON *obj, const char *key, const cJSON **arr, size_t *n)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    const cJSON *it;
    *arr = NULL;
    *n = 0;
    if (rc || !v || cJSON_IsNull(v))
        return rc;
    if (!cJSON_IsArray(v))
        return fail_member(c, key, "expected an array");
    cJSON_ArrayForEach(it, v)(*n)++;
    *arr = v;
    return 0;
}

/* A signed integer member in [lo, hi] (a JSON number; absent keeps *out). */
static int get_i64(load_ctx_t *c, const cJSON *obj, const char *key, double lo, double hi, int64_t *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    if (rc || !v)
        return rc;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return fail_member(c, key, "expected an integer in range");
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* The "source" member of a thread or queue: an index into sources (absent: 0). */
static int get_source(load_ctx_t *c, const cJSON *obj, const kt_snapshot_t *s, uint32_t *out)
{
    int rc = get_u32(c, obj, "source", 0, out);
    if (rc)
        return rc;
    if (*out && *out >= s->source_count)
        return fail_member(c, "source", "index out of range of sources");
    return 0;
}

static int expect_object(load_ctx_t *c, const cJSON *v)
{
    return cJSON_IsObject(v) ? 0 : fail(c, KT_EPARSE, "%s: expected an object", c->where);
}

/* ---------------------------------------------------------------------------------------------------
 * Sections
 * ------------------------------------------------------------------------------------------------- */

/* Members schema 2 added (all optional; a version-1 file derives what it can): exact sums, bytes, the last
 * error's name, drops by reason. */
static int read_entry_v2(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e)
{
    int rc, has_sum = 0, has_sq = 0;
    const cJSON *by;
    if ((rc = get_u128(c, o, "sum_ns", &has_sum, &e->total128)) ||
        (rc = get_u128(c, o, "sumsq_ns2", &has_sq, &e->sumsq128)) || (rc = get_u64(c, o, "bytes", 0, &e->bytes)) ||
        (rc = get_str_into(c, o, "last_error", 0, e->last_error, sizeof e->last_error)))
        return rc;
    if (has_sum && (e->total128.hi ? UINT64_MAX : e->total128.lo) != e->total_ns)
        return fail_member(c, "sum_ns", "does not match total_ns (total_ns is the sum, saturated at 2^64-1)");
    if (!has_sum || !has_sq) { /* version 1: derive them */
        if (!has_sum)
            e->total128 = (kt_u128_t){0, 0};
        e->sumsq128 = (kt_u128_t){0, 0};
        kt__entry_sums(e, &e->total128, &e->sumsq128);
    }
    by = member(c, o, "dropped_by", &rc);
    if (rc)
        return rc;
    if (!by) {
        e->dropped_by[KT_DROP_UNSPECIFIED] = e->dropped;
        return 0;
    }
    if (!cJSON_IsObject(by))
        return fail_member(c, "dropped_by", "expected an object of reason: count");
    uint64_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, by)
    {
        int r;
        for (r = 0; r < KT_DROP_REASON_COUNT && strcmp(it->string ? it->string : "", kt__drop_reason_id(r)); r++)
            ;
        if (r == KT_DROP_REASON_COUNT)
            r = KT_DROP_UNSPECIFIED; /* a reason from a newer ktiming: still counted */
        uint64_t v = 0;
        const char *why = NULL;
        if (value_u64(it, &v, &why))
            return fail_member(c, "dropped_by", why);
        if (v > UINT64_MAX - e->dropped_by[r] || v > UINT64_MAX - total)
            return fail_member(c, "dropped_by", "counts overflow 64 bits");
        e->dropped_by[r] += v;
        total += v;
    }
    if (total != e->dropped)
        return fail_member(c, "dropped_by", "counts do not add up to dropped");
    return 0;
}

/* "hist": [[lower_ns, count], ...] -- the non-empty buckets of the log-linear histogram, ascending, each lower_ns a
 * bucket's lowest value, each count > 0, together at most dispatch_count. */
static int read_hist(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e)
{
    const cJSON *arr, *it;
    size_t n, i = 0;
    int rc;
    if ((rc = get_array(c, o, "hist", &arr, &n)) || !n)
        return rc;
    if (n > KT__HIST_BUCKETS)
        return fail_member(c, "hist", "more buckets than the histogram has");
    e->hist = malloc(n * sizeof *e->hist);
    if (!e->hist)
        return fail(c, KT_ENOMEM, "out of memory");
    uint64_t total = 0;
    cJSON_ArrayForEach(it, arr)
    {
        const char *why = NULL;
        kt_hist_bin_t *b = &e->hist[i];
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || value_u64(it->child, &b->lower_ns, &why) ||
            value_u64(it->child->next, &b->count, &why))
            return fail(c, KT_EPARSE, "%s.hist[%zu]: %s", c->where, i, why ? why : "expected [lower_ns, count]");
        if (kt__hist_lower(kt__hist_index(b->lower_ns)) != b->lower_ns)
            return fail(c, KT_EPARSE, "%s.hist[%zu]: %" PRIu64 " is not the lower bound of a bucket", c->where, i,
                        b->lower_ns);
        if (!b->count || (i && b->lower_ns <= e->hist[i - 1].lower_ns))
            return fail(c, KT_EPARSE, "%s.hist[%zu]: buckets must be ascending with non-zero counts", c->where, i);
        if (b->count > e->dispatch_count - total)
            return fail(c, KT_EPARSE, "%s.hist: counts add up to more than dispatch_count", c->where);
        total += b->count;
        e->hist_count = (uint32_t)++i;
    }
    return 0;
}

/* "by_source": [[source, dispatch_count, total_ns], ...] -- a merged entry's share per source, ascending. */
static int read_by_source(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e, size_t nsources)
{
    const cJSON *arr, *it;
    size_t n, i = 0;
    int rc;
    if ((rc = get_array(c, o, "by_source", &arr, &n)) || !n)
        return rc;
    if (n > nsources)
        return fail_member(c, "by_source", "more items than sources");
    e->by_source = malloc(n * sizeof *e->by_source);
    if (!e->by_source)
        return fail(c, KT_ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, arr)
    {
        const char *why = NULL;
        uint64_t src = 0;
        kt_source_total_t *b = &e->by_source[i];
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 3 || value_u64(it->child, &src, &why) ||
            value_u64(it->child->next, &b->dispatch_count, &why) ||
            value_u64(it->child->next->next, &b->total_ns, &why))
            return fail(c, KT_EPARSE, "%s.by_source[%zu]: %s", c->where, i,
                        why ? why : "expected [source, dispatch_count, total_ns]");
        if (src >= nsources || (i && src <= e->by_source[i - 1].source))
            return fail(c, KT_EPARSE, "%s.by_source[%zu]: source out of range or not ascending", c->where, i);
        b->source = (uint32_t)src;
        e->by_source_count = (uint32_t)++i;
    }
    return 0;
}

/* One [v, ...] of 1 to 3 sizes of a configuration row; *dims is the count (it must match across arrays). */
static int read_config_sizes(load_ctx_t *c, const cJSON *o, const char *key, uint64_t out[3], uint32_t *dims)
{
    const cJSON *arr, *it;
    size_t n, i = 0;
    int rc;
    if ((rc = get_array(c, o, key, &arr, &n)))
        return rc;
    if (!arr || n < 1 || n > 3 || (*dims && n != *dims))
        return fail_member(c, key, *dims ? "expected as many sizes as \"size\"" : "expected 1 to 3 sizes");
    cJSON_ArrayForEach(it, arr)
    {
        const char *why = NULL;
        if (value_u64(it, &out[i], &why))
            return fail(c, KT_EPARSE, "%s.%s[%zu]: %s", c->where, key, i, why);
        i++;
    }
    *dims = (uint32_t)n;
    return 0;
}

/* "configs" (version 5): the entry's breakdown by launch configuration, [{"kind", "size", "local",
 * "dispatch_count", "total_ns", "min_ns", "max_ns"}, ...], at most KT_LAUNCH_CONFIGS_MAX rows and one "other";
 * counts add up to at most dispatch_count. Older files have none. */
static int read_configs(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e)
{
    const cJSON *arr, *it;
    size_t n, i = 0;
    int rc;
    if ((rc = get_array(c, o, "configs", &arr, &n)) || !n)
        return rc;
    if (n > KT_LAUNCH_CONFIGS_MAX + 1u)
        return fail_member(c, "configs", "more rows than the cap and an \"other\" row");
    if (!(e->configs = calloc(n, sizeof *e->configs)))
        return fail(c, KT_ENOMEM, "out of memory");
    char outer[sizeof c->where];
    memcpy(outer, c->where, sizeof outer);
    uint64_t total = 0;
    int others = 0;
    cJSON_ArrayForEach(it, arr)
    {
        kt_config_timing_t *r = &e->configs[i];
        const char *kind = NULL;
        snprintf(c->where, sizeof c->where, "%s.configs[%zu]", outer, i);
        if ((rc = expect_object(c, it)) || (rc = get_str(c, it, "kind", 1, &kind)))
            return rc;
        for (uint32_t k = 1; kt__launch_kind_id(k) && !r->launch.kind; k++)
            if (!strcmp(kt__launch_kind_id(k), kind))
                r->launch.kind = k;
        if (!r->launch.kind)
            return fail_member(c, "kind", "expected \"items\", \"groups\", \"indirect\" or \"other\"");
        others += r->launch.kind == KT_LAUNCH_OTHER;
        if (r->launch.kind == KT_LAUNCH_ITEMS || r->launch.kind == KT_LAUNCH_GROUPS) {
            if ((rc = read_config_sizes(c, it, "size", r->launch.size, &r->launch.dims)) ||
                (rc = read_config_sizes(c, it, "local", r->launch.local, &r->launch.dims)))
                return rc;
        }
        if ((rc = get_u64(c, it, "dispatch_count", 1, &r->dispatch_count)) ||
            (rc = get_u64(c, it, "total_ns", 1, &r->total_ns)) || (rc = get_u64(c, it, "min_ns", 1, &r->min_ns)) ||
            (rc = get_u64(c, it, "max_ns", 1, &r->max_ns)))
            return rc;
        if (!r->dispatch_count || r->min_ns > r->max_ns)
            return fail(c, KT_EPARSE, "%s: expected dispatch_count > 0 and min_ns <= max_ns", c->where);
        if (r->dispatch_count > e->dispatch_count - total || others > 1)
            return fail(c, KT_EPARSE, "%s.configs: %s", outer,
                        others > 1 ? "more than one \"other\" row" : "counts add up to more than dispatch_count");
        total += r->dispatch_count;
        e->config_count = (uint32_t)++i;
    }
    memcpy(c->where, outer, sizeof outer);
    return 0;
}

static int read_entry(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e, size_t nsources)
{
    const cJSON *samples;
    size_t n;
    uint32_t declared = 0;
    int rc;
    if ((rc = expect_object(c, o)) || (rc = get_str_dup(c, o, "name", 1, "", &e->name)) ||
        (rc = get_backend(c, o, &e->backend)) ||
        (rc = get_str_dup(c, o, "device", 0, e->backend == KT_BACKEND_CPU ? "host" : "", &e->device)) ||
        (rc = get_u64(c, o, "dispatch_count", 1, &e->dispatch_count)) ||
        (rc = get_u64(c, o, "total_ns", 1, &e->total_ns)) || (rc = get_u64(c, o, "min_ns", 1, &e->min_ns)) ||
        (rc = get_u64(c, o, "max_ns", 1, &e->max_ns)) || (rc = get_u64(c, o, "last_ns", 0, &e->last_ns)))
        return rc;
    const cJSON *mean = member(c, o, "mean_ns", &rc); /* absent: derived again below from the exact sum */
    if (rc)
        return rc;
    e->mean_ns = e->dispatch_count ? (double)e->total_ns / (double)e->dispatch_count : 0.0; /* what v1 sums use */
    if ((rc = get_double(c, o, "mean_ns", &e->mean_ns)) || (rc = get_double(c, o, "stddev_ns", &e->stddev_ns)) ||
        (rc = get_u64(c, o, "p50_ns", 0, &e->p50_ns)) || (rc = get_u64(c, o, "p90_ns", 0, &e->p90_ns)) ||
        (rc = get_u64(c, o, "p99_ns", 0, &e->p99_ns)) || (rc = get_u64(c, o, "errors", 0, &e->errors)) ||
        (rc = get_u64(c, o, "dropped", 0, &e->dropped)) ||
        (rc = get_u64(c, o, "spans_dropped", 0, &e->spans_dropped)) ||
        (rc = get_array(c, o, "samples", &samples, &n)))
        return rc;
    /* durations are u64 ns: a mean or stddev that is negative or beyond 2^64 (1e308) is no statistic of them,
     * and would be printed as a 23-digit number (null, written for a value not known, stays NaN) */
    if (!isnan(e->mean_ns) && !(e->mean_ns >= 0 && e->mean_ns <= 0x1p64))
        return fail_member(c, "mean_ns", "expected a duration between 0 and 2^64 ns");
    if (!isnan(e->stddev_ns) && !(e->stddev_ns >= 0 && e->stddev_ns <= 0x1p64))
        return fail_member(c, "stddev_ns", "expected a duration between 0 and 2^64 ns");
    if ((rc = read_entry_v2(c, o, e)) || (rc = read_hist(c, o, e)) ||
        (rc = read_by_source(c, o, e, nsources)) || (rc = read_configs(c, o, e)))
        return rc;
    if (!mean) /* the exact sum (sum_ns, or derived), not total_ns, which saturates at 2^64-1 */
        e->mean_ns = e->dispatch_count
                         ? ((double)e->total128.hi * 0x1p64 + (double)e->total128.lo) / (double)e->dispatch_count
                         : 0.0;
    declared = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
    if ((rc = get_u32(c, o, "sample_count", 0, &declared)))
        return rc;
    if (n > UINT32_MAX)
        return fail_member(c, "samples", "more than 2^32-1 samples");
    if (declared != n) {
        char why[96];
        snprintf(why, sizeof why, "%u does not match the %zu values in samples", declared, n);
        return fail_member(c, "sample_count", why);
    }
    if (n > e->dispatch_count)
        return fail_member(c, "sample_count", "larger than dispatch_count");
    if (e->dispatch_count && e->min_ns > e->max_ns)
        return fail_member(c, "min_ns", "larger than max_ns");
    if (n) {
        const cJSON *it;
        size_t i = 0;
        e->samples = malloc(n * sizeof *e->samples);
        if (!e->samples)
            return fail(c, KT_ENOMEM, "out of memory");
        cJSON_ArrayForEach(it, samples)
        {
            const char *why = NULL;
            if (value_u64(it, &e->samples[i], &why))
                return fail(c, KT_EPARSE, "%s.samples[%zu]: %s", c->where, i, why);
            i++;
        }
        e->sample_count = (uint32_t)n;
    }
    return 0;
}

/* How many entries the document has (kept, or given to the sink). */
static size_t entries_read(const load_ctx_t *c, const kt_snapshot_t *s) { return c->sink ? c->sunk : s->count; }

static int read_span(load_ctx_t *c, const cJSON *o, kt_span_t *s, const kt_snapshot_t *snap)
{
    const cJSON *q;
    int rc;
    if ((rc = expect_object(c, o)) || (rc = get_u32(c, o, "entry", 1, &s->entry)) ||
        (rc = get_u32(c, o, "thread", 1, &s->thread)) || (rc = get_u32(c, o, "flags", 0, &s->flags)) ||
        (rc = get_u64(c, o, "duration_ns", 0, &s->duration_ns)) ||
        (rc = get_u64(c, o, "enqueue_ns", 0, &s->enqueue_ns)) ||
        (rc = get_u64(c, o, "queued_ns", 0, &s->queued_ns)) || (rc = get_u64(c, o, "submit_ns", 0, &s->submit_ns)) ||
        (rc = get_u64(c, o, "start_ns", 1, &s->start_ns)) || (rc = get_u64(c, o, "end_ns", 1, &s->end_ns)) ||
        (rc = get_u64(c, o, "uncertainty_ns", 0, &s->uncertainty_ns)))
        return rc;
    s->queue = UINT32_MAX;
    q = member(c, o, "queue", &rc);
    if (rc || (q && !cJSON_IsNull(q) && (rc = get_u32(c, o, "queue", 1, &s->queue))))
        return rc;
    if (s->entry >= entries_read(c, snap))
        return fail_member(c, "entry", "index out of range of entries");
    if (s->queue != UINT32_MAX && s->queue >= snap->queue_count)
        return fail_member(c, "queue", "index out of range of queues");
    if (s->thread >= snap->thread_count)
        return fail_member(c, "thread", "index out of range of threads");
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * span_table (schema 2 and 3): one string per column, `count` space-separated decimal integers each; start_ns as
 * deltas from the previous span's start, enqueue/queued/submit as offsets from the span's start, end_ns from the
 * start (version 2) or from start + duration (version 3), all signed, modulo 2^64; "-" marks an absent value.
 * Version 3: "v*n" is v repeated n times (n >= 1).
 * ------------------------------------------------------------------------------------------------- */

/* A column being read: where its text is, and the value of the current run with how many copies are left. */
typedef struct col_reader_t {
    const char *p; /* next token */
    uint64_t v;    /* current run's value */
    int absent;    /* ... "-" */
    uint64_t left; /* copies of it still to hand out */
    int runs;      /* "v*n" allowed (version 3) */
} col_reader_t;

/* Parses a decimal u64 at *pp (at least one digit); 0, or -1 when there is none or it overflows. */
static int col_decimal(const char **pp, uint64_t *out)
{
    const char *p = *pp;
    if (*p < '0' || *p > '9')
        return -1;
    uint64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        /* overflow, against constants: (UINT64_MAX - d) / 10 was a division per digit, most of the column reads */
        if (x > UINT64_MAX / 10 || (x == UINT64_MAX / 10 && d > UINT64_MAX % 10))
            return -1;
        x = x * 10 + d;
    }
    *pp = p;
    *out = x;
    return 0;
}

/* The next value of a column: 0 with *v (and *absent) set, 1 at the end, -1 on a malformed value. Inlined: called
 * once per value (1.1 million for 100,000 spans), a call kept *v and *absent in memory (load 6.5 -> 4.8 ms). */
static inline __attribute__((always_inline)) int col_next(col_reader_t *r, uint64_t *v, int *absent)
{
    if (r->left) {
        r->left--;
        *v = r->v;
        *absent = r->absent;
        return 0;
    }
    const char *p = r->p;
    while (*p == ' ')
        p++;
    if (!*p)
        return 1;
    int neg = 0;
    *absent = 0;
    uint64_t x = 0;
    if (*p == '-') {
        p++;
        if (*p == ' ' || *p == '*' || !*p)
            *absent = 1;
        else
            neg = 1;
    }
    if (!*absent) {
        if (col_decimal(&p, &x) != 0 || (neg && x > (uint64_t)INT64_MAX + 1))
            return -1;
        x = neg ? 0 - x : x;
    }
    uint64_t n = 1;
    if (*p == '*') {
        p++;
        if (!r->runs || col_decimal(&p, &n) != 0 || n == 0)
            return -1;
    }
    if (*p && *p != ' ')
        return -1;
    r->p = p;
    r->v = x;
    r->absent = *absent;
    r->left = n - 1;
    *v = x;
    return 0;
}

static int alloc_array(load_ctx_t *c, void **out, size_t count, size_t size);

/* The most spans a span_table may expand to: KT_SPAN_TABLE_BASE + KT_SPANS_PER_INPUT_BYTE x the input's size
 * (docs/json-schema.md). ktiming's writer takes at least 2 bytes a span (the start_ns column alone). */
#define KT_SPAN_TABLE_BASE 65536u
#define KT_SPANS_PER_INPUT_BYTE 16u

static int read_span_table(load_ctx_t *c, const cJSON *t, kt_snapshot_t *s)
{
    static const char *const cols[] = {"entry",      "queue",     "thread",     "flags",
                                       "duration_ns", "start_ns", "end_ns",     "enqueue_ns",
                                       "queued_ns",  "submit_ns", "uncertainty_ns"};
    enum { NCOL = sizeof cols / sizeof cols[0] };
    int rc;
    uint64_t count = 0;
    snprintf(c->where, sizeof c->where, "span_table");
    if ((rc = expect_object(c, t)) || (rc = get_u64(c, t, "count", 1, &count)))
        return rc;
    if (count > SIZE_MAX / sizeof *s->spans)
        return fail_member(c, "count", "too many spans");
    /* "v*n" runs make a few bytes stand for any number of spans: the expansion is bounded by the input's size
     * (a written snapshot takes several bytes a span), so a 2 KB file cannot ask for gigabytes */
    if (count > KT_SPAN_TABLE_BASE + (uint64_t)KT_SPANS_PER_INPUT_BYTE * c->len) {
        char why[160];
        snprintf(why, sizeof why, "%llu spans from a %zu-byte input: more than %u + %u per input byte",
                 (unsigned long long)count, c->len, (unsigned)KT_SPAN_TABLE_BASE, (unsigned)KT_SPANS_PER_INPUT_BYTE);
        return fail_member(c, "count", why);
    }
    const char *text[NCOL];
    for (int k = 0; k < NCOL; k++) {
        text[k] = "";
        if ((rc = get_str(c, t, cols[k], k < 7, &text[k])))
            return rc;
    }
    if ((rc = alloc_array(c, (void **)&s->spans, (size_t)count, sizeof *s->spans)))
        return rc;
    s->span_count = (size_t)count;
    for (int k = 0; k < NCOL; k++) {
        col_reader_t rd = {.p = text[k], .runs = c->version >= 3};
        uint64_t prev = 0;
        int optional_empty = k >= 7 && !*rd.p; /* an optional column left out entirely */
        for (size_t i = 0; i < count; i++) {
            kt_span_t *sp = &s->spans[i];
            uint64_t v = 0;
            int absent = 1, r = optional_empty ? 0 : col_next(&rd, &v, &absent);
            if (r != 0) {
                char why[96];
                if (r > 0)
                    snprintf(why, sizeof why, "%zu values, count says %llu", i, (unsigned long long)count);
                else
                    snprintf(why, sizeof why, "malformed value at span %zu", i);
                return fail_member(c, cols[k], why);
            }
            if (absent && k != 1 && k < 7)
                return fail_member(c, cols[k], "absent value in a required column");
            switch (k) {
            case 0:
            case 2:
            case 3:
                if (v > UINT32_MAX)
                    return fail_member(c, cols[k], "integer does not fit in 32 bits");
                if (k == 0)
                    sp->entry = (uint32_t)v;
                else if (k == 2)
                    sp->thread = (uint32_t)v;
                else
                    sp->flags = (uint32_t)v;
                break;
            case 1:
                if (!absent && v >= UINT32_MAX)
                    return fail_member(c, cols[k], "integer does not fit in 32 bits");
                sp->queue = absent ? UINT32_MAX : (uint32_t)v;
                break;
            case 4: sp->duration_ns = v; break;
            case 5:
                sp->start_ns = prev + v;
                prev = sp->start_ns;
                break;
            case 6: sp->end_ns = sp->start_ns + (c->version >= 3 ? sp->duration_ns : 0) + v; break;
            case 7: sp->enqueue_ns = absent ? 0 : sp->start_ns + v; break;
            case 8: sp->queued_ns = absent ? 0 : sp->start_ns + v; break;
            case 9: sp->submit_ns = absent ? 0 : sp->start_ns + v; break;
            default: sp->uncertainty_ns = v; break;
            }
        }
        uint64_t extra;
        int absent;
        if (!optional_empty && col_next(&rd, &extra, &absent) != 1)
            return fail_member(c, cols[k], "more values than count");
    }
    /* the error's place is formatted only for a span that fails: for every span it was a third of the load of a
     * 100,000-span snapshot */
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        const char *col = NULL, *why = NULL;
        if (sp->entry >= entries_read(c, s))
            col = "entry", why = "index out of range of entries";
        else if (sp->queue != UINT32_MAX && sp->queue >= s->queue_count)
            col = "queue", why = "index out of range of queues";
        else if (sp->thread >= s->thread_count)
            col = "thread", why = "index out of range of threads";
        if (col) {
            set_where(c, "span_table", i);
            return fail_member(c, col, why);
        }
    }
    c->where[0] = '\0';
    return 0;
}

/* A device record. Version 4 adds its identity (docs/devices.md); an older file's device is known by its name only
 * (id_kind "name", ordinal unknown), in the file's host and rank. */
static int read_device(load_ctx_t *c, const cJSON *o, kt_device_info_t *d, const kt_snapshot_t *s)
{
    int rc;
    int64_t ord = -1, part = -1, rank = s->rank;
    strcpy(d->clock_domain, "unknown");
    if ((rc = expect_object(c, o)) || (rc = get_backend(c, o, &d->backend)) ||
        (rc = get_str_into(c, o, "name", 1, d->name, sizeof d->name)) ||
        (rc = get_str_into(c, o, "clock_domain", 0, d->clock_domain, sizeof d->clock_domain)) ||
        (rc = get_u64(c, o, "resolution_ns", 0, &d->resolution_ns)) ||
        (rc = get_u64(c, o, "frequency_hz", 0, &d->frequency_hz)) ||
        (rc = get_u32(c, o, "valid_bits", 0, &d->valid_bits)) ||
        (rc = get_u64(c, o, "error_bound_ns", 0, &d->error_bound_ns)) ||
        (rc = get_double(c, o, "drift_ppm", &d->drift_ppm)) ||
        (rc = get_u32(c, o, "model_samples", 0, &d->model_samples)) ||
        (rc = get_str_into(c, o, "key", 0, d->key, sizeof d->key)) ||
        (rc = get_str_into(c, o, "model", 0, d->id.model, sizeof d->id.model)) ||
        (rc = get_str_into(c, o, "id_kind", 0, d->id.id_kind, sizeof d->id.id_kind)) ||
        (rc = get_str_into(c, o, "vendor", 0, d->id.vendor, sizeof d->id.vendor)) ||
        (rc = get_str_into(c, o, "uuid", 0, d->id.uuid, sizeof d->id.uuid)) ||
        (rc = get_str_into(c, o, "pci", 0, d->id.pci, sizeof d->id.pci)) ||
        (rc = get_str_into(c, o, "driver_uuid", 0, d->id.driver_uuid, sizeof d->id.driver_uuid)) ||
        (rc = get_str_into(c, o, "platform", 0, d->id.platform, sizeof d->id.platform)) ||
        (rc = get_str_into(c, o, "parent", 0, d->id.parent, sizeof d->id.parent)) ||
        (rc = get_i64(c, o, "partition", -1, INT32_MAX, &part)) ||
        (rc = get_i64(c, o, "ordinal", -1, INT32_MAX, &ord)) ||
        (rc = get_str_into(c, o, "host", 0, d->host, sizeof d->host)) ||
        (rc = get_i64(c, o, "rank", -1, INT32_MAX, &rank)))
        return rc;
    d->id.partition = d->id.parent[0] ? (int32_t)part : -1;
    d->id.ordinal = (int32_t)ord;
    d->rank = (int32_t)rank;
    if (!d->key[0])
        snprintf(d->key, sizeof d->key, "%s", d->name);
    if (!d->id.model[0])
        snprintf(d->id.model, sizeof d->id.model, "%s", d->name);
    if (!d->id.id_kind[0])
        snprintf(d->id.id_kind, sizeof d->id.id_kind, "%s", d->backend == KT_BACKEND_CPU ? "host" : "name");
    if (!d->host[0])
        snprintf(d->host, sizeof d->host, "%s", s->host);
    return 0;
}

/* Allocates count zeroed elements (NULL, and success, when count is 0). */
static int alloc_array(load_ctx_t *c, void **out, size_t count, size_t size)
{
    *out = NULL;
    if (!count)
        return 0;
    *out = calloc(count, size);
    return *out ? 0 : fail(c, KT_ENOMEM, "out of memory");
}

/* ---------------------------------------------------------------------------------------------------
 * Ordering: entries by (name, backend, device), spans by start_ns, as kt_snapshot() delivers them
 * ------------------------------------------------------------------------------------------------- */

/* An element with its position in the file, so sorts are stable and indices can be remapped. */
typedef struct entry_pos_t {
    kt_kernel_timing_t e; /* the entry */
    size_t from;          /* its index in the file */
} entry_pos_t;

typedef struct span_pos_t {
    kt_span_t s; /* the span */
    size_t from; /* its index in the file */
} span_pos_t;

static int entry_pos_cmp(const void *a, const void *b)
{
    const entry_pos_t *x = a, *y = b;
    int r = kt__entry_order(&x->e, &y->e);
    return r ? r : (x->from < y->from ? -1 : x->from > y->from);
}

static int span_pos_cmp(const void *a, const void *b)
{
    const span_pos_t *x = a, *y = b;
    if (x->s.start_ns != y->s.start_ns)
        return x->s.start_ns < y->s.start_ns ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

#define DUPLICATE_MSG "entries[%zu] and entries[%zu]: the same (name, backend, device) twice"

static int sort_entries(load_ctx_t *c, kt_snapshot_t *s)
{
    size_t i;
    for (i = 1; i < s->count; i++)
        if (kt__entry_order(&s->entries[i - 1], &s->entries[i]) >= 0)
            break;
    if (i >= s->count)
        return 0;
    entry_pos_t *tmp = malloc(s->count * sizeof *tmp);
    size_t *to = malloc(s->count * sizeof *to);
    if (!tmp || !to) {
        free(tmp);
        free(to);
        return fail(c, KT_ENOMEM, "out of memory");
    }
    for (i = 0; i < s->count; i++) {
        tmp[i].e = s->entries[i];
        tmp[i].from = i;
    }
    qsort(tmp, s->count, sizeof *tmp, entry_pos_cmp);
    for (i = 0; i < s->count; i++) {
        s->entries[i] = tmp[i].e;
        to[tmp[i].from] = i;
    }
    for (i = 0; i < s->span_count; i++)
        s->spans[i].entry = (uint32_t)to[s->spans[i].entry];
    for (i = 1; i < s->count; i++)
        if (kt__entry_order(&tmp[i - 1].e, &tmp[i].e) == 0)
            break;
    int rc = 0;
    if (i < s->count)
        rc = fail(c, KT_EPARSE, DUPLICATE_MSG, tmp[i - 1].from, tmp[i].from);
    free(tmp);
    free(to);
    return rc;
}

static int sort_spans(load_ctx_t *c, kt_snapshot_t *s)
{
    size_t i;
    for (i = 1; i < s->span_count; i++)
        if (s->spans[i - 1].start_ns > s->spans[i].start_ns)
            break;
    if (i >= s->span_count)
        return 0;
    span_pos_t *tmp = malloc(s->span_count * sizeof *tmp);
    if (!tmp)
        return fail(c, KT_ENOMEM, "out of memory");
    for (i = 0; i < s->span_count; i++) {
        tmp[i].s = s->spans[i];
        tmp[i].from = i;
    }
    qsort(tmp, s->span_count, sizeof *tmp, span_pos_cmp);
    for (i = 0; i < s->span_count; i++)
        s->spans[i] = tmp[i].s;
    free(tmp);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Document
 * ------------------------------------------------------------------------------------------------- */

/* An array member's elements (absent or null: none). lazy is the member's LAZY_* slot, or -1: when the scan
 * found that array in the text, its elements are parsed from there one at a time. */
static int get_elems(load_ctx_t *c, const cJSON *obj, const char *key, int lazy, elems_t *e, size_t *n)
{
    const cJSON *arr;
    int rc = get_array(c, obj, key, &arr, n);
    memset(e, 0, sizeof *e);
    if (rc)
        return rc;
    e->present = arr != NULL;
    e->dom = arr ? arr->child : NULL;
    if (arr && lazy >= 0 && c->lazy[lazy].found) {
        e->lz = &c->lazy[lazy];
        *n = e->lz->count;
    }
    return 0;
}

/* The top level's "clock_anchor" (absent: none): three u64, a pair of non-zero times. */
static int read_clock_anchor(load_ctx_t *c, const cJSON *root, kt_clock_anchor_t *a)
{
    int rc;
    const cJSON *o = member(c, root, "clock_anchor", &rc);
    if (rc || !o)
        return rc;
    snprintf(c->where, sizeof c->where, "clock_anchor");
    if (!(rc = expect_object(c, o)) && !(rc = get_u64(c, o, "host_ns", 1, &a->host_ns)) &&
        !(rc = get_u64(c, o, "monotonic_ns", 1, &a->monotonic_ns)) && !(rc = get_u64(c, o, "bound_ns", 1, &a->bound_ns)) &&
        (!a->host_ns || !a->monotonic_ns))
        rc = fail(c, KT_EPARSE, "clock_anchor: host_ns and monotonic_ns must be non-zero");
    c->where[0] = 0;
    return rc;
}

/* schema, version, and the scalars of the top level. */
static int read_header(load_ctx_t *c, const cJSON *root, kt_snapshot_t *s)
{
    const cJSON *ver;
    const char *schema = NULL;
    int rc;
    if (!cJSON_IsObject(root))
        return fail(c, KT_EPARSE, "not a ktiming snapshot: the document is not a JSON object");
    if ((rc = get_str(c, root, "schema", 0, &schema)))
        return rc;
    if (!schema)
        return fail(c, KT_EPARSE, "not a ktiming snapshot: no \"schema\" member");
    if (strcmp(schema, SCHEMA_NAME)) { /* the file's bytes, escaped: a message is printed on a terminal */
        char *shown = kt__escape(schema, 64, KT_ESC_TEXT, NULL);
        rc = fail(c, KT_EPARSE, "not a ktiming snapshot: schema is \"%s\", expected \"" SCHEMA_NAME "\"",
                  shown ? shown : "?");
        free(shown);
        return rc;
    }
    ver = member(c, root, "version", &rc);
    if (rc)
        return rc;
    if (!ver)
        return fail(c, KT_EPARSE, "version: missing");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != floor(ver->valuedouble) || ver->valuedouble < 1.0)
        return fail(c, KT_EPARSE, "version: expected a positive integer");
    if (ver->valuedouble > KT_SNAPSHOT_SCHEMA_VERSION)
        return fail(c, KT_EPARSE,
                    "unsupported schema version %.0f: this ktiming (%s) reads versions up to %d; use a newer ktiming",
                    ver->valuedouble > 1e15 ? 1e15 : ver->valuedouble, KT_VERSION_STRING,
                    KT_SNAPSHOT_SCHEMA_VERSION);
    c->version = (int)ver->valuedouble;

    if ((rc = get_str_into(c, root, "host", 0, s->host, sizeof s->host)) ||
        (rc = get_u64(c, root, "taken_ns", 0, &s->taken_ns)) ||
        (rc = get_u64(c, root, "kernels_dropped", 0, &s->kernels_dropped)) ||
        (rc = get_u64(c, root, "names_truncated", 0, &s->names_truncated)) ||
        (rc = get_str_into(c, root, "ended", 0, s->ended, sizeof s->ended)) ||
        (rc = get_str_into(c, root, "clock_domain", 0, s->clock_domain, sizeof s->clock_domain)) ||
        (rc = read_clock_anchor(c, root, &s->clock_anchor)))
        return rc;
    const cJSON *pv = member(c, root, "pid", &rc), *rv = rc ? NULL : member(c, root, "rank", &rc);
    if (rc)
        return rc;
    if (pv && (!cJSON_IsNumber(pv) || pv->valuedouble != floor(pv->valuedouble) || pv->valuedouble < 0 ||
               pv->valuedouble > MAX_SAFE_INT))
        return fail(c, KT_EPARSE, "pid: expected a non-negative integer");
    if (rv && (!cJSON_IsNumber(rv) || rv->valuedouble != floor(rv->valuedouble) || rv->valuedouble < -1 ||
               rv->valuedouble > 2147483647.0))
        return fail(c, KT_EPARSE, "rank: expected an integer from -1 (none) to 2^31-1");
    s->pid = pv ? (int64_t)pv->valuedouble : 0;
    s->rank = rv ? (int32_t)rv->valuedouble : -1;
    return 0;
}

static int read_source(load_ctx_t *c, const cJSON *o, kt_source_info_t *so)
{
    uint64_t pid = 0, off = 0;
    int64_t v = 0;
    int rc;
    so->rank = -1;
    if ((rc = expect_object(c, o)) || (rc = get_str_into(c, o, "host", 0, so->host, sizeof so->host)) ||
        (rc = get_u64(c, o, "pid", 0, &pid)) || (rc = get_i64(c, o, "rank", -1, INT32_MAX, &v)))
        return rc;
    so->rank = (int32_t)v;
    so->pid = (int64_t)(pid > INT64_MAX ? INT64_MAX : pid);
    v = 0;
    if ((rc = get_i64(c, o, "offset_ns", -(double)MAX_SAFE_INT, MAX_SAFE_INT, &v)) ||
        (rc = get_u64(c, o, "offset_bound_ns", 0, &off)) ||
        (rc = get_str_into(c, o, "clock_domain", 0, so->clock_domain, sizeof so->clock_domain)))
        return rc;
    so->offset_ns = v;
    so->offset_bound_ns = off;
    return 0;
}

static int read_queue(load_ctx_t *c, const cJSON *o, kt_queue_info_t *q, const kt_snapshot_t *s)
{
    int rc;
    if ((rc = expect_object(c, o)) || (rc = get_backend(c, o, &q->backend)) ||
        (rc = get_str_into(c, o, "device", 0, q->device, sizeof q->device)) ||
        (rc = get_str_into(c, o, "label", 0, q->label, sizeof q->label)) || (rc = get_source(c, o, s, &q->source)))
        return rc;
    return 0;
}

static int read_thread(load_ctx_t *c, const cJSON *o, kt_thread_info_t *t, const kt_snapshot_t *s)
{
    int rc;
    if ((rc = expect_object(c, o)) || (rc = get_u64(c, o, "os_tid", 0, &t->os_tid)) ||
        (rc = get_str_into(c, o, "name", 0, t->name, sizeof t->name)) || (rc = get_source(c, o, s, &t->source)))
        return rc;
    return 0;
}

/* The sections that are arrays of objects, in the order they are read: spans refer to entries, queues and
 * threads by index, and entries, queues and threads to sources. */
typedef enum section_t { SEC_SOURCES, SEC_ENTRIES, SEC_QUEUES, SEC_THREADS, SEC_DEVICES, SEC_SPANS } section_t;

/* Reads element i of a section into its array. */
static int read_element(load_ctx_t *c, section_t sec, const cJSON *o, size_t i, kt_snapshot_t *s)
{
    switch (sec) {
    case SEC_SOURCES: return read_source(c, o, &s->sources[i]);
    case SEC_ENTRIES: return read_entry(c, o, &s->entries[i], s->source_count);
    case SEC_QUEUES: return read_queue(c, o, &s->queues[i], s);
    case SEC_THREADS: return read_thread(c, o, &s->threads[i], s);
    case SEC_DEVICES: return read_device(c, o, &s->devices[i], s);
    default: return read_span(c, o, &s->spans[i], s);
    }
}

void kt__entries_free(kt_kernel_timing_t *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kt__entry_release(&entries[i]);
    free(entries);
}

#define SPENT_BATCH 256u

static void spent_flush(load_ctx_t *c)
{
    kt__entries_free(c->spent, c->nspent);
    c->spent = NULL;
    c->nspent = 0;
}

/* Entry i of n read into a scratch entry and handed to the sink, which keeps what it needs; what it leaves is
 * freed with the next batch. */
static int sink_entry(load_ctx_t *c, const cJSON *o, size_t i, size_t n, const kt_snapshot_t *s)
{
    if (!c->spent && !(c->spent = malloc(SPENT_BATCH * sizeof *c->spent)))
        return fail(c, KT_ENOMEM, "out of memory");
    kt_kernel_timing_t *e = &c->spent[c->nspent++];
    memset(e, 0, sizeof *e);
    int rc = read_entry(c, o, e, s->source_count);
    if (!rc && (rc = c->sink->take(c->sink->user, e, i, n)))
        rc = fail(c, rc, "out of memory");
    if (c->nspent == SPENT_BATCH)
        spent_flush(c);
    if (!rc)
        c->sunk = i + 1;
    return rc;
}

/* One section: its array allocated, then each element read (and, for the large ones, parsed) in turn. */
static int read_section(load_ctx_t *c, const cJSON *root, section_t sec, kt_snapshot_t *s)
{
    static const struct {
        const char *key;
        int lazy;
        size_t size;
    } kSec[] = {{"sources", -1, sizeof *s->sources}, {"entries", LAZY_ENTRIES, sizeof *s->entries},
                {"queues", -1, sizeof *s->queues},   {"threads", -1, sizeof *s->threads},
                {"devices", -1, sizeof *s->devices}, {"spans", LAZY_SPANS, sizeof *s->spans}};
    void **arrays[] = {(void **)&s->sources, (void **)&s->entries, (void **)&s->queues,
                       (void **)&s->threads, (void **)&s->devices, (void **)&s->spans};
    size_t *counts[] = {&s->source_count, &s->count, &s->queue_count, &s->thread_count, &s->device_count,
                        &s->span_count};
    elems_t e;
    size_t n = 0;
    const cJSON *it;
    int rc;
    c->where[0] = '\0';
    if ((rc = get_elems(c, root, kSec[sec].key, kSec[sec].lazy, &e, &n)))
        return rc;
    if (sec == SEC_ENTRIES && !e.present)
        return fail(c, KT_EPARSE, "entries: missing");
    if (sec == SEC_SPANS && n) {
        const cJSON *table = member(c, root, "span_table", &rc);
        if (rc)
            return rc;
        if (table)
            return fail(c, KT_EPARSE, "spans and span_table: only one may hold spans");
    }
    int sunk = sec == SEC_ENTRIES && c->sink;
    if (!sunk && (rc = alloc_array(c, arrays[sec], n, kSec[sec].size)))
        return rc;
    if (!sunk)
        *counts[sec] = n; /* only now: kt_snapshot_free() walks entries[0..count) */
    for (size_t i = 0; i < n; i++) {
        if ((rc = elems_next(c, &e, &it)))
            break;
        set_where(c, kSec[sec].key, i);
        if ((rc = sunk ? sink_entry(c, it, i, n, s) : read_element(c, sec, it, i, s)))
            break;
    }
    elems_release(c, &e);
    if (!rc)
        c->where[0] = '\0';
    return rc;
}

static int read_document(load_ctx_t *c, const cJSON *root, kt_snapshot_t *s)
{
    int rc;
    s->rank = -1;
    if ((rc = read_header(c, root, s)))
        return rc;
    for (section_t sec = SEC_SOURCES; sec < SEC_SPANS; sec++)
        if ((rc = read_section(c, root, sec, s)))
            return rc;
    c->where[0] = '\0';
    if (c->skip_spans)
        return sort_entries(c, s);
    const cJSON *table = member(c, root, "span_table", &rc);
    if (rc)
        return rc;
    if ((rc = read_section(c, root, SEC_SPANS, s)))
        return rc;
    if (!s->span_count && table && !cJSON_IsNull(table) && (rc = read_span_table(c, table, s)))
        return rc;
    c->where[0] = '\0';
    if ((rc = sort_entries(c, s)) || (rc = sort_spans(c, s)))
        return rc;
    return 0;
}

/* Offset of the first "\u0000" escape inside a JSON string of text[0..len), or len when there is none. A C string
 * cannot hold U+0000: cJSON would cut the string there, so a name "a\u0000b" would silently become "a" (and could
 * then merge with the real "a"). The loader refuses such a document instead (docs/json-schema.md). */
static size_t find_escaped_nul(const char *text, size_t len)
{
    /* the usual case, without a byte-by-byte pass: no backslash at all (memchr runs several times faster than
     * memmem's search for the six bytes, and a snapshot's text rarely holds an escape) */
    if (!memchr(text, '\\', len) || !memmem(text, len, "\\u0000", 6))
        return len;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (!in_string) {
            in_string = ch == '"';
            continue;
        }
        if (ch == '"') {
            in_string = 0;
        } else if (ch == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && text[i + 2] == '0' && text[i + 3] == '0' && text[i + 4] == '0' &&
                text[i + 5] == '0')
                return i;
            i++; /* the escaped character (a quote or backslash among them) */
        }
    }
    return len;
}

/* Offset of the first byte 0x00-0x1F other than tab, LF and CR in text[0..len), or len when there is none. JSON
 * allows such a byte nowhere (in a string it must be escaped), and cJSON would copy it into a name: a raw 0x00
 * would cut "al\0pha" to "al". Checked 64 bytes at a time without a branch per byte (the compiler vectorises it),
 * so it costs little of a load. */
static size_t find_raw_control(const char *text, size_t len)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    for (; i + 64 <= len; i += 64) {
        unsigned bad = 0;
        for (size_t k = 0; k < 64; k++) {
            unsigned char ch = u[i + k];
            bad |= (unsigned)(ch < 0x20) & (unsigned)(ch != '\t') & (unsigned)(ch != '\n') & (unsigned)(ch != '\r');
        }
        if (bad)
            break;
    }
    for (; i < len; i++)
        if (u[i] < 0x20 && u[i] != '\t' && u[i] != '\n' && u[i] != '\r')
            return i;
    return len;
}

/* The root object without the insides of its large arrays (their elements are parsed from the full text when
 * read): at most LAZY_COUNT cuts, each keeping the brackets. Offsets in it map back to the full text. */
typedef struct root_text_t {
    char *text;                  /* NUL-terminated (NULL: the full text is parsed as it is) */
    size_t len;
    size_t cut_at[LAZY_COUNT];   /* offset in text where cut k's removed bytes were (ascending) */
    size_t cut_len[LAZY_COUNT];  /* how many */
    int cuts;
} root_text_t;

static int root_text_build(const load_ctx_t *c, size_t root_end, root_text_t *r)
{
    const kt__json_array_at_t *order[LAZY_COUNT];
    int n = 0;
    memset(r, 0, sizeof *r);
    for (int k = 0; k < LAZY_COUNT; k++) {
        if (!c->lazy[k].found)
            continue;
        int at = n++; /* in text order */
        for (; at > 0 && order[at - 1]->open > c->lazy[k].open; at--)
            order[at] = order[at - 1];
        order[at] = &c->lazy[k];
    }
    size_t removed = 0;
    for (int k = 0; k < n; k++)
        removed += order[k]->close - order[k]->open - 1;
    if (!n)
        return 0;
    /* nor what follows the root object (parse_root checks it in the full text): a valid document followed by
     * gigabytes of junk would otherwise be copied whole before the junk is refused */
    r->text = malloc(root_end - removed + 1);
    if (!r->text)
        return KT_ENOMEM;
    size_t from = 0;
    for (int k = 0; k < n; k++) {
        size_t keep = order[k]->open + 1 - from;
        memcpy(r->text + r->len, c->text + from, keep);
        r->len += keep;
        r->cut_at[k] = r->len;
        r->cut_len[k] = order[k]->close - order[k]->open - 1;
        from = order[k]->close;
    }
    memcpy(r->text + r->len, c->text + from, root_end - from);
    r->len += root_end - from;
    r->text[r->len] = '\0';
    r->cuts = n;
    return 0;
}

/* An offset in the root text as an offset in the full text. */
static size_t root_to_full(const root_text_t *r, size_t pos)
{
    size_t full = pos;
    for (int k = 0; k < r->cuts; k++)
        if (pos >= r->cut_at[k])
            full += r->cut_len[k];
    return full;
}

/* Parses the (root) text: the tree in *root, or KT_EPARSE naming the position in the full text. */
static int parse_root(load_ctx_t *c, const root_text_t *r, cJSON **root)
{
    const char *text = r->text ? r->text : c->text;
    size_t len = r->text ? r->len : c->len;
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*root)
        return fail_syntax(c, end && end >= text && end <= text + len ? root_to_full(r, (size_t)(end - text)) : c->len);
    /* Only whitespace may follow the document (read in the full text: the root text stops at the root's end). */
    size_t full = root_to_full(r, (size_t)(end - text));
    while (full < c->len && is_ws(c->text[full]))
        full++;
    if (full < c->len) {
        size_t line, col;
        line_col(c->text, full, &line, &col);
        cJSON_Delete(*root);
        *root = NULL;
        return fail(c, KT_EPARSE, "unexpected data after the JSON document at line %zu, column %zu (byte %zu of %zu)",
                    line, col, full, c->len);
    }
    /* bytes JSON allows only escaped, and \u0000: refused rather than let a name be cut short */
    size_t raw = find_raw_control(c->text, c->len), nul = find_escaped_nul(c->text, c->len);
    if (raw < c->len || nul < c->len) {
        size_t line, col, at = raw < nul ? raw : nul;
        line_col(c->text, at, &line, &col);
        cJSON_Delete(*root);
        *root = NULL;
        if (at == raw)
            return fail(c, KT_EPARSE, "raw control character 0x%02x at line %zu, column %zu (byte %zu): JSON allows "
                        "it only escaped; refused rather than cut short", (unsigned)(unsigned char)c->text[raw], line,
                        col, raw);
        return fail(c, KT_EPARSE, "a string holds \\u0000 (NUL) at line %zu, column %zu: names cannot contain NUL; "
                    "refused rather than cut short", line, col);
    }
    return 0;
}

/* Parses text[0..len), NUL-terminated at len, into *out. The large arrays ("entries", the version-1 "spans")
 * are found by a structural scan and their elements parsed one at a time, so the peak memory is the text, the
 * snapshot and one element's tree; a document the scan cannot follow is parsed whole (cJSON then names the
 * error). */
static int parse_text(load_ctx_t *c, const char *text, size_t len, kt_snapshot_t **out)
{
    c->text = text;
    c->len = len;
    c->lazy[LAZY_ENTRIES].key = "entries";
    c->lazy[LAZY_SPANS].key = "spans";
    /* Skipping spans: the span table's text (most of a snapshot with a timeline) is not even tokenised. */
    c->lazy[LAZY_SPAN_TABLE].key = c->skip_spans ? "span_table" : NULL;
    c->lazy[LAZY_SPAN_TABLE].any = 1;
    size_t root_end = len;
    if (kt__json_scan_root(text, len, c->lazy, LAZY_COUNT, &root_end) != 0)
        kt__json_arrays_free(c->lazy, LAZY_COUNT); /* parsed whole */
    root_text_t r;
    int rc = root_text_build(c, root_end, &r);
    if (rc) {
        kt__json_arrays_free(c->lazy, LAZY_COUNT);
        return fail(c, rc, "out of memory");
    }
    /* cJSON reads numbers with strtod, which follows LC_NUMERIC: parse under the C locale (this thread only). */
    locale_t c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t previous = c_numeric ? uselocale(c_numeric) : (locale_t)0;
    cJSON *root = NULL;
    kt_snapshot_t *snap = NULL;
    rc = parse_root(c, &r, &root);
    free(r.text);
    if (!rc && !(snap = calloc(1, sizeof *snap)))
        rc = fail(c, KT_ENOMEM, "out of memory");
    if (!rc)
        rc = read_document(c, root, snap);
    if (c_numeric) {
        uselocale(previous);
        freelocale(c_numeric);
    }
    c->idx_obj = NULL;
    cJSON_Delete(root);
    free(c->idx);
    c->idx = NULL;
    c->idx_n = c->idx_cap = 0;
    kt__json_arrays_free(c->lazy, LAZY_COUNT);
    fast_free(c);
    spent_flush(c);
    if (rc) {
        kt_snapshot_free(snap);
        return rc;
    }
    *out = snap;
    return 0;
}

int kt_snapshot_parse(const char *json, size_t len, kt_snapshot_t **out, char *errbuf, size_t errlen)
{
    load_ctx_t c;
    ctx_init(&c, errbuf, errlen);
    if (errbuf && errlen)
        errbuf[0] = '\0';
    if (!out)
        return fail(&c, KT_EINVAL, "no output pointer");
    *out = NULL;
    if (!json && len)
        return fail(&c, KT_EINVAL, "no input");
    if (len == 0)
        return fail(&c, KT_EPARSE, "empty input: expected a JSON object");
    /* A private NUL-terminated copy: cJSON then never reads past the data, whatever the caller passed. */
    char *text = malloc(len + 1);
    if (!text)
        return fail(&c, KT_ENOMEM, "out of memory");
    memcpy(text, json, len);
    text[len] = '\0';
    c.may_give_back = 1;
    int rc = parse_text(&c, text, len, out);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------------------------------- */

/* Reads all of f into a malloc'd buffer with at least one byte to spare after the data, refusing early what cannot be a snapshot: more than max bytes
 * (KT_EFULL, nothing more is read), or a first byte after leading whitespace that cannot start a JSON object
 * (KT_EPARSE, *bad holds the byte and *bad_at its offset), checked before the rest is read. */
static int read_all(FILE *f, size_t max, size_t size_hint, char **data, size_t *len, int *bad, size_t *bad_at)
{
    /* a regular file's size (size_hint, from fstat) read in one go when it fits: no buffer regrown and copied */
    size_t cap = size_hint && size_hint < max ? size_hint + 2 : 1 << 16, n = 0;
    int seen_start = 0;
    char *buf = malloc(cap);
    if (!buf)
        return KT_ENOMEM;
    for (;;) {
        size_t want = cap - n;
        if (max - n < want) /* one byte past the limit tells "too large" */
            want = max - n + 1;
        size_t got = fread(buf + n, 1, want, f);
        for (size_t i = n; !seen_start && i < n + got; i++) {
            unsigned char ch = (unsigned char)buf[i];
            if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
                continue;
            seen_start = 1;
            if (ch != '{') {
                *bad = ch;
                *bad_at = i;
                free(buf);
                return KT_EPARSE;
            }
        }
        n += got;
        if (n > max) {
            free(buf);
            return KT_EFULL;
        }
        if (got == 0) {
            if (ferror(f)) {
                free(buf);
                return KT_EIO;
            }
            break;
        }
        if (n == cap) {
            char *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return KT_ENOMEM;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    *data = buf;
    *len = n;
    return 0;
}

int kt__load_duplicate_error(const char *path, size_t first, size_t second, char *errbuf, size_t errlen)
{
    load_ctx_t c;
    ctx_init(&c, errbuf, errlen);
    char msg[160];
    snprintf(msg, sizeof msg, DUPLICATE_MSG, first, second);
    return fail(&c, KT_EPARSE, "%s: %s", path, msg);
}

static int load_file(const char *path, const kt_load_opts_t *opts, const kt__entry_sink_t *sink, kt_snapshot_t **out,
                     char *errbuf, size_t errlen);

int kt_snapshot_load(const char *path, const kt_load_opts_t *opts, kt_snapshot_t **out, char *errbuf, size_t errlen)
{
    return load_file(path, opts, NULL, out, errbuf, errlen);
}

int kt__snapshot_load_sink(const char *path, const kt_load_opts_t *opts, const kt__entry_sink_t *sink,
                           kt_snapshot_t **out, char *errbuf, size_t errlen)
{
    if (!sink || !sink->take) {
        load_ctx_t c;
        ctx_init(&c, errbuf, errlen);
        return fail(&c, KT_EINVAL, "no entry sink");
    }
    return load_file(path, opts, sink, out, errbuf, errlen);
}

static int load_file(const char *path, const kt_load_opts_t *opts, const kt__entry_sink_t *sink, kt_snapshot_t **out,
                     char *errbuf, size_t errlen)
{
    size_t max_bytes = opts && opts->max_bytes ? opts->max_bytes : KT_SNAPSHOT_MAX_INPUT_DEFAULT;
    load_ctx_t c;
    ctx_init(&c, errbuf, errlen);
    if (out)
        *out = NULL;
    if (!path || !out || !max_bytes)
        return fail(&c, KT_EINVAL, "no path, output pointer or size limit");
    int from_stdin = !strcmp(path, "-");
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        int saved = errno;
        fail(&c, KT_EIO, "%s: %s", path, strerror(saved));
        errno = saved;
        return KT_EIO;
    }
    const double mib = (double)max_bytes / (1024.0 * 1024.0);
    struct stat st;
    int have_st = fstat(fileno(f), &st) == 0;
    if (have_st && S_ISREG(st.st_mode) && (uint64_t)st.st_size > (uint64_t)max_bytes) {
        if (!from_stdin)
            fclose(f);
        return fail(&c, KT_EFULL, "%s: %lld bytes, larger than the input limit of %.0f MiB (--max-input-mb)",
                    path, (long long)st.st_size, mib);
    }
    char *data = NULL;
    size_t len = 0, bad_at = 0;
    int bad = 0;
    size_t hint = have_st && S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 0;
    int rc = read_all(f, max_bytes, hint, &data, &len, &bad, &bad_at);
    int saved = errno;
    if (!from_stdin)
        fclose(f);
    if (rc == KT_EFULL)
        return fail(&c, rc, "%s: larger than the input limit of %.0f MiB (--max-input-mb); stopped reading",
                    path, mib);
    if (rc == KT_EPARSE)
        return fail(&c, rc, "%s: not a ktiming snapshot: byte 0x%02x at offset %zu (a JSON object starts with '{')",
                    path, bad, bad_at);
    if (rc) {
        fail(&c, rc, "%s: %s", path, rc == KT_EIO ? strerror(saved) : "out of memory");
        errno = saved;
        return rc;
    }
    char msg[512] = "";
    load_ctx_t pc;
    ctx_init(&pc, msg, sizeof msg);
    pc.skip_spans = opts && opts->skip_spans;
    pc.sink = sink;
    if (len == 0) {
        rc = fail(&pc, KT_EPARSE, "empty input: expected a JSON object");
    } else {
        data[len] = '\0'; /* read_all leaves room: parsed in place, not copied */
        pc.may_give_back = 1;
        rc = parse_text(&pc, data, len, out);
    }
    free(data);
    if (rc)
        fail(&c, rc, "%s: %s", path, msg);
    return rc;
}

static const char *record_str(const char *r, size_t off)
{
    const char *s;
    memcpy(&s, r + off, sizeof s);
    return s;
}

static size_t record_from(const char *r, const kt__key_layout_t *k)
{
    size_t from;
    memcpy(&from, r + k->from, sizeof from);
    return from;
}

static int record_key_cmp(const char *a, const char *b, const kt__key_layout_t *k)
{
    kt_backend_t ab, bb;
    memcpy(&ab, a + k->backend, sizeof ab);
    memcpy(&bb, b + k->backend, sizeof bb);
    return kt__key_cmp(record_str(a, k->name), ab, record_str(a, k->device), record_str(b, k->name), bb,
                       record_str(b, k->device));
}

static int record_cmp(const void *x, const void *y, void *layout)
{
    const kt__key_layout_t *k = layout;
    int r = record_key_cmp(x, y, k);
    if (r)
        return r;
    size_t fa = record_from(x, k), fb = record_from(y, k);
    return fa < fb ? -1 : fa > fb;
}

int kt__records_order(void *v, size_t n, size_t size, const kt__key_layout_t *k, const char *path, char *errbuf,
                      size_t errlen)
{
    char *p = v;
    size_t i;
    for (i = 1; i < n && record_cmp(p + (i - 1) * size, p + i * size, (void *)k) < 0; i++)
        ;
    if (i < n)
        qsort_r(v, n, size, record_cmp, (void *)k);
    for (i = 1; i < n; i++)
        if (!record_key_cmp(p + (i - 1) * size, p + i * size, k))
            return kt__load_duplicate_error(path, record_from(p + (i - 1) * size, k), record_from(p + i * size, k),
                                            errbuf, errlen);
    return 0;
}
