/* registry.c — interned kernels (name, backend, device) → dense ids; queues, threads and devices for reports. */
#include "core/internal.h"
#include "core/device_label.h"
#include "shared/shared.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;

#define KT__KEY_BUILD 512u /* room for a key before it is cut to KT_DEVICE_KEY_MAX */

/* ---------------------------------------------------------------------------------------------------
 * Kernels
 * ------------------------------------------------------------------------------------------------- */

static _Atomic(kt__kernel_t *) g_kdir[KT__DIR]; /* chunks of KT__CHUNK kernels; slot 0 of chunk 0 unused */
static _Atomic uint32_t g_kcount;               /* highest id published */
static uint32_t *g_htab;                        /* open addressing over ids, 0 = empty (under g_reg_lock) */
static uint32_t g_hcap;                         /* g_htab size, a power of two */

static const char *default_device(kt_backend_t backend)
{
    return backend == KT_BACKEND_CPU ? "host" : "default";
}

static uint32_t fnv(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static uint32_t hash_triple(const char *name, kt_backend_t backend, const char *device)
{
    uint32_t h = fnv(2166136261u, name);
    h = (h ^ (uint32_t)backend ^ 0xffu) * 16777619u;
    return fnv(h, device);
}

const kt__kernel_t *kt__kernel_get(kt_kernel_id_t id)
{
    if (id == 0 || id > KT__LDA(&g_kcount))
        return NULL;
    return &KT__LDA(&g_kdir[id >> KT__CHUNK_BITS])[id & (KT__CHUNK - 1u)];
}

static const char *kept_form(const char *name, char **buf, uint32_t *keep);

int kt__kernel_named(const kt__kernel_t *k, const char *name)
{
    /* the common cases without a copy: the same bytes, or a cut name's kept bytes and more than the limit */
    if (!k->name_keep ? !strcmp(k->name, name)
                      : !strncmp(k->name, name, k->name_keep) && strnlen(name, KT__NAME_MAX + 1) > KT__NAME_MAX)
        return 1;
    char *buf;
    uint32_t keep;
    const char *form = kept_form(name, &buf, &keep); /* a name holding bytes that are not UTF-8 */
    int same = form && !strcmp(k->name, form);
    free(buf);
    return same;
}

uint32_t kt__kernel_count(void) { return KT__LDA(&g_kcount); }

_Atomic(kt__kernel_t *) *kt__kernel_dir(void) { return g_kdir; }

static const kt__kernel_t *kernel_at(uint32_t id)
{
    return &KT__LD(&g_kdir[id >> KT__CHUNK_BITS])[id & (KT__CHUNK - 1u)];
}

/* A copy of s from kt__zalloc (the arena under `ktiming run`); NULL when out of memory. */
static char *str_copy(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = kt__zalloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static int htab_grow(void)
{
    uint32_t cap = g_hcap ? g_hcap * 2 : 256;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return KT_ENOMEM;
    for (uint32_t i = 0; i < g_hcap; i++) {
        uint32_t id = g_htab[i];
        if (!id)
            continue;
        uint32_t j = kernel_at(id)->hash & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = id;
    }
    free(g_htab);
    g_htab = t;
    g_hcap = cap;
    return 0;
}

static _Atomic uint64_t g_names_truncated;

/* The form a kernel name is kept in: valid UTF-8 of at most KT__NAME_MAX bytes. A byte that is not UTF-8 becomes
 * U+FFFD and the byte in two upper-case hex digits, as the JSON writer writes it (docs/json-schema.md), so every
 * writer and reader takes the registry's names as they are, and "k\xff" and "k\xfe" stay two kernels (a real
 * "k\uFFFDFF" is one kernel with "k\xff": the registry, hence every snapshot, never holds one name twice). A longer
 * name keeps its first bytes, cut where a UTF-8 sequence starts, and KT__NAME_MARK (*keep: the bytes kept before
 * it; 0: not cut). Reads at most KT__NAME_MAX + 1 bytes of name. Returns name itself or *buf (malloc'd, for the
 * caller to free; NULL when not needed); NULL when out of memory. */
static const char *kept_form(const char *name, char **buf, uint32_t *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)name;
    size_t len = strnlen(name, KT__NAME_MAX + 1), bad = 0;
    *buf = NULL;
    *keep = 0;
    for (size_t i = 0, n; i < len; i += n)
        if (!(n = p[i] < 0x80u ? 1 : kt__utf8_len(p + i, len - i)))
            bad++, n = 1;
    const char *form = name;
    size_t flen = len;
    if (bad) { /* each stray byte: 1 byte -> 5 (EF BF BD and two hex digits) */
        char *o = malloc(len + 4 * bad + 1);
        if (!o)
            return NULL;
        flen = 0;
        for (size_t i = 0, n; i < len; i += n) {
            if ((n = p[i] < 0x80u ? 1 : kt__utf8_len(p + i, len - i))) {
                memcpy(o + flen, p + i, n);
                flen += n;
                continue;
            }
            n = 1;
            const char e[5] = {'\xef', '\xbf', '\xbd', hex[p[i] >> 4], hex[p[i] & 15u]};
            memcpy(o + flen, e, 5);
            flen += 5;
        }
        o[flen] = 0;
        form = *buf = o;
    }
    if (flen > KT__NAME_MAX) { /* its first bytes, cut where a UTF-8 sequence starts, and the marker */
        uint32_t k = KT__NAME_MAX - (uint32_t)(sizeof KT__NAME_MARK - 1);
        while (k && ((unsigned char)form[k] & 0xC0u) == 0x80u)
            k--;
        char *cut = malloc(k + sizeof KT__NAME_MARK);
        if (cut) {
            memcpy(cut, form, k);
            memcpy(cut + k, KT__NAME_MARK, sizeof KT__NAME_MARK);
        }
        free(*buf);
        if (!(form = *buf = cut))
            return NULL;
        *keep = k;
    }
    return form;
}

uint64_t kt__names_truncated(void) { return KT__LDA(&g_names_truncated); }

kt_kernel_id_t kt_kernel_intern(const char *name, kt_backend_t backend, const char *device)
{
    if (!name || (unsigned)backend >= KT_BACKEND_COUNT)
        return 0;
    if (!device)
        device = default_device(backend);
    char *cut = NULL;
    uint32_t keep = 0;
    if (!(name = kept_form(name, &cut, &keep)))
        return 0;
    uint32_t h = hash_triple(name, backend, device);
    kt_kernel_id_t id = 0;

    pthread_mutex_lock(&g_reg_lock);
    if (g_hcap) {
        for (uint32_t i = h & (g_hcap - 1); g_htab[i]; i = (i + 1) & (g_hcap - 1)) {
            const kt__kernel_t *k = kernel_at(g_htab[i]);
            if (k->hash == h && k->backend == backend && !strcmp(k->name, name) && !strcmp(k->device, device)) {
                id = g_htab[i];
                goto out;
            }
        }
    }
    uint32_t next = KT__LD(&g_kcount) + 1;
    if (next > KT__MAX_KERNELS)
        goto out;
    if ((uint64_t)next * 2 > g_hcap && htab_grow() != 0)
        goto out;
    kt__kernel_t *chunk = KT__LD(&g_kdir[next >> KT__CHUNK_BITS]);
    if (!chunk) {
        chunk = kt__zalloc(KT__CHUNK * sizeof *chunk);
        if (!chunk)
            goto out;
        KT__STR(&g_kdir[next >> KT__CHUNK_BITS], chunk);
        if (kt__arena)
            KT__STR(&kt__arena->kdir[next >> KT__CHUNK_BITS], chunk);
    }
    kt__kernel_t *k = &chunk[next & (KT__CHUNK - 1u)];
    char *n = str_copy(name), *d = str_copy(device);
    if (!n || !d) {
        kt__zfree(n);
        kt__zfree(d);
        goto out;
    }
    k->name = n;
    k->name_len = strlen(n);
    k->name_keep = keep;
    if (keep) {
        atomic_fetch_add_explicit(&g_names_truncated, 1, memory_order_relaxed);
        if (kt__arena)
            atomic_fetch_add_explicit(&kt__arena->names_truncated, 1, memory_order_relaxed);
    }
    k->device = d;
    k->backend = backend;
    k->hash = h;
    uint32_t i = h & (g_hcap - 1);
    while (g_htab[i])
        i = (i + 1) & (g_hcap - 1);
    g_htab[i] = next;
    KT__STR(&g_kcount, next);
    if (kt__arena)
        KT__STR(&kt__arena->kcount, next);
    id = next;
out:
    pthread_mutex_unlock(&g_reg_lock);
    free(cut);
    return id;
}

/* ---------------------------------------------------------------------------------------------------
 * Queues, threads, devices (all under g_reg_lock; snapshots copy them)
 * ------------------------------------------------------------------------------------------------- */

static kt_queue_info_t *g_queues;   /* index = queue id - 1 */
static uint32_t g_queue_count, g_queue_cap;
static kt_thread_info_t *g_threads; /* index = thread ordinal - 1 */
static uint32_t g_thread_count, g_thread_cap;
static kt_device_info_t *g_devices; /* one per (backend, key): registered identities and published clock facts */
static uint32_t g_device_count, g_device_cap;

/* Registered device keys: interned copies handed to backends, never freed (a backend keeps the pointer). */
#define KT__MAX_DEVICES 1024u
static struct {
    kt_backend_t backend;
    const char *key;
} g_keys[KT__MAX_DEVICES];
static uint32_t g_key_count;

static __thread uint32_t tl_ordinal __attribute__((tls_model("initial-exec")));

/* Grows *arr (elements of size `size`) so one more fits; 0 or KT_ENOMEM. */
static int reserve(void **arr, uint32_t *cap, uint32_t count, size_t size)
{
    if (count < *cap)
        return 0;
    uint32_t nc = *cap ? *cap * 2 : 16;
    void *p;
    if (kt__arena) { /* grown by copying: a reader of the arena may still read the old array */
        if (!(p = kt__zalloc(nc * size)))
            return KT_ENOMEM;
        if (count)
            memcpy(p, *arr, count * size);
        kt__zfree(*arr);
    } else if (!(p = realloc(*arr, nc * size))) {
        return KT_ENOMEM;
    }
    *arr = p;
    *cap = nc;
    return 0;
}

/* src into dst[cap]; one too long is cut where a UTF-8 sequence starts (as kernel names are), never inside one. */
static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    if (src[n])
        while (n && ((unsigned char)src[n] & 0xC0u) == 0x80u)
            n--;
    memcpy(dst, src, n);
    dst[n] = 0;
}

uint32_t kt_queue_register(kt_backend_t backend, const char *device, const char *label)
{
    if ((unsigned)backend >= KT_BACKEND_COUNT)
        return 0;
    if (!device)
        device = default_device(backend);
    if (!label)
        label = "";
    kt_queue_info_t q;
    memset(&q, 0, sizeof q);
    q.backend = backend;
    copy_str(q.device, sizeof q.device, device);
    copy_str(q.label, sizeof q.label, label);
    uint32_t id = 0;
    pthread_mutex_lock(&g_reg_lock);
    for (uint32_t i = 0; i < g_queue_count; i++) {
        if (g_queues[i].backend == backend && !strcmp(g_queues[i].device, q.device) &&
            !strcmp(g_queues[i].label, q.label)) {
            id = i + 1;
            goto out;
        }
    }
    if (reserve((void **)&g_queues, &g_queue_cap, g_queue_count, sizeof q) == 0) {
        g_queues[g_queue_count++] = q;
        id = g_queue_count;
        if (kt__arena) {
            KT__STR(&kt__arena->queues, g_queues);
            KT__STR(&kt__arena->queue_count, g_queue_count);
        }
    }
out:
    pthread_mutex_unlock(&g_reg_lock);
    return id;
}

static void thread_info_fill(kt_thread_info_t *t)
{
    t->os_tid = (uint64_t)syscall(SYS_gettid);
    if (pthread_getname_np(pthread_self(), t->name, sizeof t->name) != 0)
        t->name[0] = 0;
}

uint32_t kt_thread_ordinal(void)
{
    if (tl_ordinal)
        return tl_ordinal;
    kt_thread_info_t t;
    memset(&t, 0, sizeof t);
    thread_info_fill(&t);
    pthread_mutex_lock(&g_reg_lock);
    if (reserve((void **)&g_threads, &g_thread_cap, g_thread_count, sizeof t) == 0) {
        g_threads[g_thread_count++] = t;
        tl_ordinal = g_thread_count;
        if (kt__arena) {
            KT__STR(&kt__arena->threads, g_threads);
            KT__STR(&kt__arena->thread_count, g_thread_count);
        }
    }
    pthread_mutex_unlock(&g_reg_lock);
    return tl_ordinal;
}

void kt__thread_refresh(uint32_t ordinal)
{
    kt_thread_info_t t;
    memset(&t, 0, sizeof t);
    thread_info_fill(&t);
    pthread_mutex_lock(&g_reg_lock);
    if (ordinal >= 1 && ordinal <= g_thread_count)
        g_threads[ordinal - 1] = t;
    pthread_mutex_unlock(&g_reg_lock);
}

/* The record of (backend, key), or g_device_count (under g_reg_lock). */
static uint32_t device_index(kt_backend_t backend, const char *key)
{
    uint32_t i;
    for (i = 0; i < g_device_count; i++)
        if (g_devices[i].backend == backend && !strcmp(g_devices[i].key, key))
            break;
    return i;
}

/* The device table as a dead program's reader finds it (under g_reg_lock, after any change of it). */
static void devices_to_arena(void)
{
    if (kt__arena) {
        KT__STR(&kt__arena->devices, g_devices);
        KT__STR(&kt__arena->device_count, g_device_count);
    }
}

void kt_device_publish(const kt_device_info_t *info)
{
    if (!info || (unsigned)info->backend >= KT_BACKEND_COUNT)
        return;
    kt_device_info_t d = *info;
    d.name[sizeof d.name - 1] = 0;
    d.clock_domain[sizeof d.clock_domain - 1] = 0;
    d.key[sizeof d.key - 1] = 0;
    if (!d.key[0])
        copy_str(d.key, sizeof d.key, d.name);
    pthread_mutex_lock(&g_reg_lock);
    uint32_t i = device_index(d.backend, d.key);
    if (i < g_device_count) {
        /* clock facts replaced; identity kept as registered (or as first published by name) */
        d.id = g_devices[i].id;
        copy_str(d.name, sizeof d.name, g_devices[i].name);
        g_devices[i] = d;
    } else if (reserve((void **)&g_devices, &g_device_cap, g_device_count, sizeof d) == 0) {
        /* a device known by name only: no identity beyond it */
        memset(&d.id, 0, sizeof d.id);
        copy_str(d.id.model, sizeof d.id.model, d.name);
        copy_str(d.id.id_kind, sizeof d.id.id_kind, d.backend == KT_BACKEND_CPU ? "host" : "name");
        d.id.ordinal = d.id.partition = -1;
        g_devices[g_device_count++] = d;
    }
    devices_to_arena();
    pthread_mutex_unlock(&g_reg_lock);
}

/* Appends src to the key being built, from *len; the caller checks for overflow by the final length. */
static void key_add(char *key, size_t *len, const char *src)
{
    size_t n = strlen(src);
    if (*len + n >= KT__KEY_BUILD)
        n = *len < KT__KEY_BUILD - 1 ? KT__KEY_BUILD - 1 - *len : 0;
    memcpy(key + *len, src, n);
    *len += n;
    key[*len] = 0;
}

/* Lowercase copy, for ids given in either case ("GPU-8C1F..." and "gpu-8c1f..." are one device). */
static void lower_copy(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] - 'A' + 'a' : src[i]);
    dst[i] = 0;
}

/* Copies into `have` what it lacks of `more` (vendor, PCI address, driver UUID); 1 if anything was filled. */
static int id_fill_missing(kt_device_id_t *have, const kt_device_id_t *more)
{
    int filled = 0;
#define KT__FILL(f)                                                                                            \
    if (!have->f[0] && more->f[0]) {                                                                           \
        copy_str(have->f, sizeof have->f, more->f);                                                            \
        filled = 1;                                                                                            \
    }
    KT__FILL(vendor)
    KT__FILL(pci)
    KT__FILL(driver_uuid)
#undef KT__FILL
    return filled;
}

const char *kt_device_register(kt_backend_t backend, const kt_device_id_t *id_in)
{
    if (!id_in || (unsigned)backend >= KT_BACKEND_COUNT)
        return NULL;
    kt_device_id_t id = *id_in;
    id.vendor[sizeof id.vendor - 1] = id.model[sizeof id.model - 1] = 0;
    id.id_kind[sizeof id.id_kind - 1] = id.uuid[sizeof id.uuid - 1] = id.pci[sizeof id.pci - 1] = 0;
    id.driver_uuid[sizeof id.driver_uuid - 1] = id.platform[sizeof id.platform - 1] = 0;
    id.parent[sizeof id.parent - 1] = 0;
    if (!id.model[0])
        return NULL;
    if (!id.parent[0])
        id.partition = -1;
    char uuid_lc[sizeof id.uuid], pci_lc[sizeof id.pci]; /* the key's: one device whatever the case given */
    lower_copy(uuid_lc, sizeof uuid_lc, id.uuid);
    lower_copy(pci_lc, sizeof pci_lc, id.pci);

    const char *result = NULL;
    pthread_mutex_lock(&g_reg_lock);
    /* the key: from the strongest id the record has */
    char key[KT__KEY_BUILD], num[24];
    size_t len = 0;
    key[0] = 0;
    const char *kind = "enumeration";
    if (id.parent[0]) {
        uint32_t p = device_index(backend, id.parent);
        kind = p < g_device_count && g_devices[p].id.id_kind[0] ? g_devices[p].id.id_kind : "enumeration";
        key_add(key, &len, id.parent);
        snprintf(num, sizeof num, "/%d", (int)id.partition);
        key_add(key, &len, num);
    } else if (id.uuid[0]) {
        kind = "uuid";
        key_add(key, &len, "uuid:");
        key_add(key, &len, uuid_lc);
    } else if (id.pci[0]) {
        kind = "pci";
        key_add(key, &len, "pci:");
        key_add(key, &len, pci_lc);
    } else if (backend == KT_BACKEND_CPU) {
        kind = "host";
        key_add(key, &len, "host:");
        key_add(key, &len, id.model);
    } else {
        snprintf(num, sizeof num, "enumeration:%d:", (int)id.ordinal);
        key_add(key, &len, num);
        key_add(key, &len, id.model);
    }
    if (id.platform[0] && !id.parent[0]) { /* a sub-device's parent key carries the platform already */
        key_add(key, &len, "@");
        key_add(key, &len, id.platform);
    }
    if (!id.id_kind[0])
        copy_str(id.id_kind, sizeof id.id_kind, kind);
    if (len >= KT_DEVICE_KEY_MAX) { /* too long: its first bytes and a hash of the whole key */
        uint32_t h = fnv(2166136261u, key);
        snprintf(key + KT_DEVICE_KEY_MAX - 10, 10, "~%08x", (unsigned)h);
    }
    for (uint32_t i = 0; i < g_key_count; i++)
        if (g_keys[i].backend == backend && !strcmp(g_keys[i].key, key)) {
            result = g_keys[i].key;
            /* The same device registered again may be known better (CUPTI's DEVICE record has no PCI address,
             * the CUDA backend's attributes do): fields the record lacks are filled, none replaced. */
            uint32_t d = device_index(backend, key);
            if (d < g_device_count && id_fill_missing(&g_devices[d].id, &id))
                devices_to_arena();
            goto out;
        }
    if (g_key_count == KT__MAX_DEVICES)
        goto out;
    uint32_t i = device_index(backend, key);
    if (i == g_device_count && reserve((void **)&g_devices, &g_device_cap, g_device_count, sizeof *g_devices) != 0)
        goto out;
    char *copy = strdup(key);
    if (!copy)
        goto out;
    if (i == g_device_count) {
        memset(&g_devices[i], 0, sizeof g_devices[i]);
        g_devices[i].backend = backend;
        copy_str(g_devices[i].clock_domain, sizeof g_devices[i].clock_domain, "unknown");
        g_device_count++;
    }
    kt_device_info_t *d = &g_devices[i];
    copy_str(d->key, sizeof d->key, key);
    copy_str(d->name, sizeof d->name, id.model);
    d->id = id;
    d->rank = -1;
    g_keys[g_key_count].backend = backend;
    g_keys[g_key_count++].key = copy;
    result = copy;
    devices_to_arena();
out:
    pthread_mutex_unlock(&g_reg_lock);
    return result;
}

static void *copy_array(const void *src, uint32_t n, size_t size, size_t *count)
{
    void *p = NULL;
    *count = 0;
    if (n && (p = malloc(n * size)) != NULL) {
        memcpy(p, src, n * size);
        *count = n;
    }
    return p;
}

kt_queue_info_t *kt__queues_copy(size_t *count)
{
    pthread_mutex_lock(&g_reg_lock);
    void *p = copy_array(g_queues, g_queue_count, sizeof *g_queues, count);
    pthread_mutex_unlock(&g_reg_lock);
    return p;
}

kt_thread_info_t *kt__threads_copy(size_t *count)
{
    pthread_mutex_lock(&g_reg_lock);
    void *p = copy_array(g_threads, g_thread_count, sizeof *g_threads, count);
    pthread_mutex_unlock(&g_reg_lock);
    return p;
}

kt_device_info_t *kt__devices_copy(size_t *count)
{
    pthread_mutex_lock(&g_reg_lock);
    void *p = copy_array(g_devices, g_device_count, sizeof *g_devices, count);
    pthread_mutex_unlock(&g_reg_lock);
    return p;
}

const char *kt__device_label_now(kt_backend_t backend, const char *key, const char *fallback, char *out, size_t cap)
{
    size_t n = 0;
    kt_device_info_t *dev = key && cap ? kt__devices_copy(&n) : NULL;
    const char *label = fallback;
    if (dev) {
        kt__device_labels(dev, n);
        const kt_device_info_t *d = kt__device_by_key(dev, n, backend, key);
        if (d) {
            snprintf(out, cap, "%s", d->name);
            label = out;
        }
        free(dev);
    }
    return label;
}

/* ---------------------------------------------------------------------------------------------------
 * Last error per kernel (rare: a lock is fine)
 * ------------------------------------------------------------------------------------------------- */

typedef struct kt__last_error_t {
    uint64_t gen;  /* reset generation it was set in; another generation reads as none */
    char name[48]; /* the API's error name */
} kt__last_error_t;

static pthread_mutex_t g_err_lock = PTHREAD_MUTEX_INITIALIZER;
static kt__last_error_t *g_errs; /* index = kernel id, grown on demand (under g_err_lock) */
static uint32_t g_err_cap;

void kt__kernel_set_error(kt_kernel_id_t id, const char *name)
{
    if (!id || !name)
        return;
    pthread_mutex_lock(&g_err_lock);
    if (id >= g_err_cap) {
        uint32_t cap = g_err_cap ? g_err_cap : 64;
        while (cap <= id)
            cap *= 2;
        kt__last_error_t *n = realloc(g_errs, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_err_lock);
            return; /* the error is still counted; only its name is lost */
        }
        memset(n + g_err_cap, 0, (cap - g_err_cap) * sizeof *n);
        g_errs = n;
        g_err_cap = cap;
    }
    g_errs[id].gen = kt__generation();
    copy_str(g_errs[id].name, sizeof g_errs[id].name, name);
    pthread_mutex_unlock(&g_err_lock);
}

void kt__kernel_last_error(kt_kernel_id_t id, char *buf, size_t size)
{
    if (!size)
        return;
    buf[0] = 0;
    pthread_mutex_lock(&g_err_lock);
    if (id < g_err_cap && g_errs[id].gen == kt__generation())
        copy_str(buf, size, g_errs[id].name);
    pthread_mutex_unlock(&g_err_lock);
}

/* fork (core.c's handlers): the registry and last-error locks are held across fork, so the child gets them
 * unlocked and consistent. */
void kt__registry_fork_prepare(void)
{
    pthread_mutex_lock(&g_reg_lock);
    pthread_mutex_lock(&g_err_lock);
}

void kt__registry_fork_release(void)
{
    pthread_mutex_unlock(&g_err_lock);
    pthread_mutex_unlock(&g_reg_lock);
}
