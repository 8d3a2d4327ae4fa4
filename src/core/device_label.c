/* device_label.c — labels people can read for a snapshot's devices, computed once per snapshot (kt_snapshot, the
 * loader and merge) and used by every output: the model plus the shortest suffix that makes it unique. */
#include "core/device_label.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parts a label may add to the model, tried in the order of kCands until a group's labels are all distinct. */
enum { P_ORD = 1, P_ID = 2, P_HOST = 4, P_RANK = 8, P_KEY = 16 };
static const unsigned kCands[] = {0,      P_ORD,          P_ORD | P_ID, P_HOST, P_HOST | P_ORD, P_HOST | P_ORD | P_ID,
                                  P_HOST | P_RANK | P_ORD | P_ID, P_ORD | P_ID | P_HOST | P_RANK | P_KEY};
#define NCANDS (sizeof kCands / sizeof kCands[0])

static void add(char *buf, size_t cap, size_t *len, const char *s)
{
    int w = snprintf(buf + *len, cap - *len, "%s", s);
    if (w > 0)
        *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

/* The short stable id shown in a label: the PCI address, else the UUID's first 12 characters, else the
 * platform; NULL if none. */
static const char *short_id(const kt_device_info_t *d, char *buf, size_t cap)
{
    if (d->id.pci[0])
        return d->id.pci;
    if (d->id.uuid[0]) {
        snprintf(buf, cap, "%.12s", d->id.uuid);
        return buf;
    }
    return d->id.platform[0] ? d->id.platform : NULL;
}

static void make_label(const kt_device_info_t *d, unsigned parts, char *out, size_t cap)
{
    size_t len = 0;
    char tmp[64];
    out[0] = 0;
    add(out, cap, &len, d->id.model[0] ? d->id.model : d->key[0] ? d->key : d->name);
    if ((parts & P_ORD) && d->id.ordinal >= 0) {
        snprintf(tmp, sizeof tmp, " #%d", (int)d->id.ordinal);
        add(out, cap, &len, tmp);
    }
    if (d->id.parent[0] && d->id.partition >= 0) {
        snprintf(tmp, sizeof tmp, " sub #%d", (int)d->id.partition);
        add(out, cap, &len, tmp);
    }
    const char *sid;
    if ((parts & P_ID) && (sid = short_id(d, tmp, sizeof tmp)) != NULL) {
        add(out, cap, &len, " (");
        add(out, cap, &len, sid);
        add(out, cap, &len, ")");
    }
    if ((parts & P_HOST) && d->host[0]) {
        add(out, cap, &len, " @");
        add(out, cap, &len, d->host);
    }
    if ((parts & P_RANK) && d->rank >= 0) {
        snprintf(tmp, sizeof tmp, " rank %d", (int)d->rank);
        add(out, cap, &len, tmp);
    }
    if (parts & P_KEY) {
        add(out, cap, &len, " [");
        add(out, cap, &len, d->key);
        add(out, cap, &len, "]");
    }
}

typedef char label_t[sizeof(((kt_device_info_t *)0)->name)];

/* 1 when the labels of the group members (indices g[0..ng)) are pairwise distinct. */
static int distinct(label_t *lab, const size_t *g, size_t ng)
{
    for (size_t a = 0; a < ng; a++)
        for (size_t b = a + 1; b < ng; b++)
            if (!strcmp(lab[g[a]], lab[g[b]]))
                return 0;
    return 1;
}

void kt__device_labels(kt_device_info_t *dev, size_t n)
{
    if (!n)
        return;
    label_t *base = malloc(n * sizeof *base), *lab = malloc(n * sizeof *lab);
    size_t *g = malloc(n * sizeof *g);
    unsigned char *done = calloc(n, 1);
    if (!base || !lab || !g || !done) { /* out of memory: the models, as before labels */
        for (size_t i = 0; i < n; i++)
            if (dev[i].id.model[0])
                snprintf(dev[i].name, sizeof dev[i].name, "%s", dev[i].id.model);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        make_label(&dev[i], 0, base[i], sizeof base[i]);
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        size_t ng = 0; /* the group: same backend, same plain label */
        for (size_t j = i; j < n; j++)
            if (!done[j] && dev[j].backend == dev[i].backend && !strcmp(base[j], base[i])) {
                g[ng++] = j;
                done[j] = 1;
            }
        for (size_t c = 0; c < NCANDS; c++) {
            for (size_t k = 0; k < ng; k++)
                make_label(&dev[g[k]], kCands[c], lab[g[k]], sizeof lab[g[k]]);
            if (distinct(lab, g, ng))
                break;
        }
        for (size_t k = 0; k < ng; k++) /* records alike in every part (a duplicate): numbered in order */
            for (size_t m = 0; m < k; m++)
                if (!strcmp(lab[g[k]], lab[g[m]])) {
                    char tmp[24];
                    snprintf(tmp, sizeof tmp, " ~%zu", k);
                    size_t len = strlen(lab[g[k]]);
                    if (len + strlen(tmp) >= sizeof lab[g[k]])
                        len = sizeof lab[g[k]] - 1 - strlen(tmp);
                    memcpy(lab[g[k]] + len, tmp, strlen(tmp) + 1);
                    break;
                }
    }
    for (size_t i = 0; i < n; i++)
        memcpy(dev[i].name, lab[i], sizeof dev[i].name);
    /* a sub-device is its parent's label and "sub #k" (parents first: nested partitions, a few levels) */
    for (int depth = 0; depth < 8; depth++) {
        int changed = 0;
        for (size_t i = 0; i < n; i++) {
            const kt_device_info_t *p = dev[i].id.parent[0] && dev[i].id.partition >= 0
                                            ? kt__device_by_key(dev, n, dev[i].backend, dev[i].id.parent)
                                            : NULL;
            if (!p || p == &dev[i])
                continue;
            char tmp[sizeof dev[i].name];
            snprintf(tmp, sizeof tmp, "%.100s sub #%d", p->name, (int)dev[i].id.partition);
            if (strcmp(tmp, dev[i].name)) {
                memcpy(dev[i].name, tmp, sizeof tmp);
                changed = 1;
            }
        }
        if (!changed)
            break;
    }
out:
    free(base);
    free(lab);
    free(g);
    free(done);
}

const kt_device_info_t *kt__device_by_key(const kt_device_info_t *dev, size_t n, kt_backend_t backend,
                                          const char *key)
{
    for (size_t i = 0; key && i < n; i++)
        if (dev[i].backend == backend && !strcmp(dev[i].key, key))
            return &dev[i];
    return NULL;
}

const kt_device_info_t *kt__device_lookup(const kt_device_info_t *dev, size_t n, kt_backend_t backend,
                                          const char *device)
{
    if (!device)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (dev[i].backend == backend && !strcmp(dev[i].name, device))
            return &dev[i];
    return kt__device_by_key(dev, n, backend, device);
}

int kt__device_stable(const kt_device_info_t *d)
{
    return !strcmp(d->id.id_kind, "uuid") || !strcmp(d->id.id_kind, "pci");
}
