/* compare_match.c — matching kernels of two snapshots by device identity (issue 34, docs/devices.md): a kernel on
 * "GPU 3" of one run is compared with the same physical GPU of the other run, whatever its ordinal there. */
#include "analysis/compare_match.h"

#include "core/device_label.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One entry of one side during matching. */
typedef struct item_t {
    const kt__cmp_entry_t *e;    /* the entry */
    const kt_device_info_t *d;   /* its device record, NULL if the snapshot has none */
    int matched;
} item_t;

enum { PASS_STABLE, PASS_PCI, PASS_ORDINAL, PASS_NAME, PASS_COUNT };
static const char *const kPassName[PASS_COUNT] = {NULL, "pci", "model+ordinal", "name"};

/* Whether the item takes part in pass p (has the id the pass matches by). */
static int in_pass(const item_t *it, int p)
{
    const kt_device_info_t *d = it->d;
    switch (p) {
    case PASS_STABLE: return d && kt__device_stable(d);
    case PASS_PCI: return d && d->id.pci[0];
    case PASS_ORDINAL: return d && d->id.ordinal >= 0;
    default: return 1;
    }
}

static int int_cmp(int a, int b) { return a < b ? -1 : a > b; }

static int part(const kt_device_info_t *d) { return d->id.parent[0] ? (int)d->id.partition : -1; }

static const char *dev_label(const item_t *it) { return it->e->device ? it->e->device : ""; }

/* (name, backend, the pass's device id) of two items: 0 when they match in pass p. */
static int key_order(const item_t *a, const item_t *b, int p)
{
    int c = strcmp(a->e->name ? a->e->name : "", b->e->name ? b->e->name : "");
    if (c)
        return c;
    if (a->e->backend != b->e->backend)
        return a->e->backend < b->e->backend ? -1 : 1;
    switch (p) {
    case PASS_STABLE: return strcmp(a->d->key, b->d->key);
    case PASS_PCI: return (c = strcasecmp(a->d->id.pci, b->d->id.pci)) ? c : int_cmp(part(a->d), part(b->d));
    case PASS_ORDINAL:
        if ((c = strcmp(a->d->id.model, b->d->id.model)))
            return c;
        return (c = int_cmp(a->d->id.ordinal, b->d->id.ordinal)) ? c : int_cmp(part(a->d), part(b->d));
    default: return strcmp(dev_label(a), dev_label(b));
    }
}

static int item_cmp(const void *x, const void *y, void *pass)
{
    const item_t *a = *(const item_t *const *)x, *b = *(const item_t *const *)y;
    int c = key_order(a, b, *(const int *)pass);
    return c ? c : strcmp(dev_label(a), dev_label(b)); /* ties (several hosts): in label order */
}

/* The side's items that take part in pass p, sorted; their count. */
static size_t pass_items(item_t *items, size_t count, int p, item_t **v)
{
    size_t n = 0, sorted = 1;
    for (size_t i = 0; i < count; i++)
        if (!items[i].matched && in_pass(&items[i], p)) {
            v[n] = &items[i];
            if (n && sorted && item_cmp(&v[n - 1], &v[n], &p) > 0)
                sorted = 0;
            n++;
        }
    if (!sorted) /* by label, a snapshot's entries are in this order already: no sort then */
        qsort_r(v, n, sizeof *v, item_cmp, &p);
    return n;
}

static item_t *side_items(const kt__cmp_side_t *s)
{
    item_t *it = calloc(s->count ? s->count : 1, sizeof *it);
    for (size_t i = 0; it && i < s->count; i++) {
        it[i].e = &s->entries[i];
        it[i].d = kt__device_lookup(s->devices, s->devices ? s->device_count : 0, s->entries[i].backend,
                                    s->entries[i].device);
    }
    return it;
}

static const char *pair_device(const kt__cmp_pair_t *p) { return (p->b ? p->b : p->a)->device; }

static int pair_cmp(const void *x, const void *y)
{
    const kt__cmp_pair_t *p = x, *q = y;
    const kt__cmp_entry_t *a = p->b ? p->b : p->a, *b = q->b ? q->b : q->a;
    int c = strcmp(a->name ? a->name : "", b->name ? b->name : "");
    if (c)
        return c;
    if (a->backend != b->backend)
        return a->backend < b->backend ? -1 : 1;
    if ((c = strcmp(pair_device(p) ? pair_device(p) : "", pair_device(q) ? pair_device(q) : "")))
        return c;
    return (p->b ? 0 : 1) - (q->b ? 0 : 1); /* BEFORE-only ahead of AFTER-only */
}

int kt__compare_match(const kt__cmp_side_t *before, const kt__cmp_side_t *after, kt__cmp_pair_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    item_t *ib = side_items(before), *ia = side_items(after);
    item_t **vb = malloc((before->count ? before->count : 1) * sizeof *vb);
    item_t **va = malloc((after->count ? after->count : 1) * sizeof *va);
    kt__cmp_pair_t *pairs = malloc((before->count + after->count + 1) * sizeof *pairs);
    int rc = ib && ia && vb && va && pairs ? 0 : KT_ENOMEM;
    size_t np = 0;
    for (int p = 0; !rc && p < PASS_COUNT; p++) {
        size_t nb = pass_items(ib, before->count, p, vb), na = pass_items(ia, after->count, p, va);
        for (size_t x = 0, y = 0; x < nb && y < na;) {
            int c = key_order(vb[x], va[y], p);
            if (c < 0) {
                x++;
            } else if (c > 0) {
                y++;
            } else {
                vb[x]->matched = va[y]->matched = 1;
                const char *how = kPassName[p];
                if (p == PASS_STABLE) /* both stable with one key: the kind says which id */
                    how = !strcmp(vb[x]->d->id.id_kind, "uuid") ? "uuid" : "pci";
                pairs[np++] = (kt__cmp_pair_t){vb[x]->e, va[y]->e, how};
                x++;
                y++;
            }
        }
    }
    for (size_t i = 0; !rc && i < before->count; i++)
        if (!ib[i].matched)
            pairs[np++] = (kt__cmp_pair_t){ib[i].e, NULL, NULL};
    for (size_t i = 0; !rc && i < after->count; i++)
        if (!ia[i].matched)
            pairs[np++] = (kt__cmp_pair_t){NULL, ia[i].e, NULL};
    if (!rc) {
        size_t sorted = 1;
        for (size_t i = 1; i < np && sorted; i++)
            sorted = pair_cmp(&pairs[i - 1], &pairs[i]) <= 0;
        if (!sorted)
            qsort(pairs, np, sizeof *pairs, pair_cmp);
        *out = pairs;
        *n = np;
    } else {
        free(pairs);
    }
    free(ib);
    free(ia);
    free(vb);
    free(va);
    return rc;
}

#define NAME_BLOCK ((size_t)1 << 20)

struct kt__names_t {
    struct kt__names_t *next;
    size_t used, cap;
    char data[];
};

const char *kt__names_copy(kt__names_t **names, const char *s)
{
    size_t n = strlen(s) + 1;
    kt__names_t *b = *names;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > NAME_BLOCK ? n : NAME_BLOCK;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->next = *names;
        b->used = 0;
        b->cap = cap;
        *names = b;
    }
    char *d = b->data + b->used;
    memcpy(d, s, n);
    b->used += n;
    return d;
}

void kt__names_free(kt__names_t *names)
{
    for (kt__names_t *next; names; names = next) {
        next = names->next;
        free(names);
    }
}

int kt__key_cmp(const char *an, kt_backend_t ab, const char *ad, const char *bn, kt_backend_t bb, const char *bd)
{
    int r = strcmp(an, bn);
    if (!r && ab != bb)
        r = ab < bb ? -1 : 1;
    return r ? r : strcmp(ad ? ad : "", bd ? bd : "");
}
