/* load_many.c — kt_snapshot_load_many(_opts)(): many snapshot files read and parsed on several threads (merging the
 * files of a 1,000-rank job is dominated by parsing them). */
#include <ktiming/analysis.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Work shared by the loader threads. */
typedef struct many_t {
    const char *const *paths; /* files */
    size_t n;                 /* how many */
    const kt_load_opts_t *opts; /* each file's load options (NULL: the defaults) */
    kt_snapshot_t **out;      /* results, by index */
    _Atomic size_t next;      /* next file to take */
    _Atomic int failed;       /* set by the first failure: the others stop taking files */
    pthread_mutex_t lock;     /* guards rc and err */
    int rc;                   /* first failure's code */
    char err[512];            /* and its message */
} many_t;

static void *loader(void *arg)
{
    many_t *m = arg;
    char err[512];
    for (;;) {
        size_t i = atomic_fetch_add(&m->next, 1);
        if (i >= m->n || atomic_load(&m->failed))
            return NULL;
        int rc = kt_snapshot_load(m->paths[i], m->opts, &m->out[i], err, sizeof err);
        if (rc) {
            pthread_mutex_lock(&m->lock);
            if (!m->rc) {
                m->rc = rc;
                snprintf(m->err, sizeof m->err, "%s", err);
            }
            pthread_mutex_unlock(&m->lock);
            atomic_store(&m->failed, 1);
        }
    }
}

int kt_snapshot_load_many(const char *const *paths, size_t n, kt_snapshot_t **out, int threads, char *errbuf,
                          size_t errlen)
{
    return kt_snapshot_load_many_opts(paths, n, NULL, out, threads, errbuf, errlen);
}

int kt_snapshot_load_many_opts(const char *const *paths, size_t n, const kt_load_opts_t *opts, kt_snapshot_t **out,
                               int threads, char *errbuf, size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = '\0';
    if (!out || (n && !paths))
        return KT_EINVAL;
    memset(out, 0, n * sizeof *out);
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)(c > 16 ? 16 : c) : 1;
    }
    if ((size_t)threads > n)
        threads = n ? (int)n : 1;
    many_t m = {.paths = paths, .n = n, .opts = opts, .out = out, .lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int started = 0;
    for (int t = 1; tid && t < threads; t++) /* the caller is one of them */
        if (pthread_create(&tid[started], NULL, loader, &m) == 0)
            started++;
    loader(&m);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    if (m.rc) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s", m.err);
        for (size_t i = 0; i < n; i++) {
            kt_snapshot_free(out[i]);
            out[i] = NULL;
        }
    }
    return m.rc;
}
