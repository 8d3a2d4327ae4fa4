/* kt_mpi.c — libktiming_mpi: PMPI interception of MPI_Init/MPI_Init_thread/MPI_Finalize and kt_mpi_gather():
 * every rank's snapshot on the root's timeline (ping-pong clock samples fitted by the calibration module). */
#include <ktiming/analysis.h>
#include <ktiming/clock_model.h>
#include <ktiming/mpi.h>

#include "core/env.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KT_MPI_EXPORT __attribute__((visibility("default")))

#define PINGS 32                      /* ping-pong samples per rank, at MPI_Init and at the gather */
#define TAG_PING 0x6b70               /* root -> rank: "read your clock" */
#define TAG_PONG 0x6b71               /* rank -> root: the reading */
#define TAG_LEN 0x6b72                /* rank -> root: snapshot length */
#define TAG_DATA 0x6b73               /* rank -> root: snapshot bytes (chunks) */
#define CHUNK ((size_t)1 << 30)       /* largest message (an int count) */
#define SPAN_RANKS_DEFAULT 64         /* above this many ranks, spans stay in per-rank files */

/* State from MPI_Init (world, root 0): the first clock samples, kept on the root. */
static struct {
    int active;                   /* interception on (KTIMING_MPI not 0) and MPI_Init succeeded */
    int size;                     /* world size at MPI_Init */
    kt_clock_sample_t *init;      /* root only: PINGS samples per rank, [rank * PINGS + i]; NULL elsewhere */
    uint64_t *init_bound;         /* root only: each rank's host-counter bound during those samples (pingpong) */
} g_mpi;

/* KTIMING_TEST_CLOCK_OFFSET_NS * rank (see ktiming/mpi.h), for this process's world rank: a test hook, compiled
 * only into the copy of this library the tests link (tests/mpi: KT_TEST_HOOKS=1); the shipped one reads 0. */
static int64_t test_offset_ns(void)
{
#if defined(KT_TEST_HOOKS) && KT_TEST_HOOKS
    const char *v = kt__env(KT_ENV_NAME(TEST_CLOCK_OFFSET_NS));
    int rank = 0;
    if (!v || !*v)
        return 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return strtoll(v, NULL, 10) * (int64_t)rank;
#else
    return 0;
#endif
}

/* This rank's clock (the host timeline, shifted by the test offset). */
static uint64_t local_clock(int64_t test_off) { return (uint64_t)((int64_t)kt_now_ns() + test_off); }

/* This process's host-counter bound now: how far a kt_now_ns() reading may be from CLOCK_MONOTONIC_RAW (0 when
 * kt_now_ns is clock_gettime itself), rounded up. */
static uint64_t host_bound_ns(void)
{
    kt_host_clock_info_t hi;
    return kt_host_clock_info(&hi) == 0 && hi.error_bound_ns > 0 ? (uint64_t)ceil(hi.error_bound_ns) : 0;
}

/* PINGS bracketed samples of every rank's clock against the root's, into out[rank * PINGS + i] on the root
 * (out NULL: taken part in, not kept). Each pong also carries the rank's host-counter bound, read once before the
 * exchange (nothing is added between a reading and its pong): the samples compare two processes' kt_now_ns
 * readings, each within its own bound of CLOCK_MONOTONIC_RAW, so an offset's stated bound must add both. bound
 * (root only, `size` entries, may be NULL) receives per rank the largest bound seen, the root's own at [root]; it
 * is raised, never lowered, so the caller can carry it across calls. Collective over comm. 0 or KT_EBACKEND. */
static int pingpong(MPI_Comm comm, int root, kt_clock_sample_t *out, int64_t test_off, uint64_t *bound)
{
    int rank, size;
    if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return KT_EBACKEND;
    uint64_t mine = host_bound_ns();
    for (int r = 0; r < size; r++) {
        if (r == root)
            continue;
        for (int i = 0; i < PINGS; i++) {
            uint64_t v[2] = {0, 0}; /* the rank's reading and its host-counter bound */
            if (rank == root) {
                uint64_t t0 = local_clock(test_off);
                if (PMPI_Send(NULL, 0, MPI_BYTE, r, TAG_PING, comm) != MPI_SUCCESS ||
                    PMPI_Recv(v, 2, MPI_UINT64_T, r, TAG_PONG, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    return KT_EBACKEND;
                uint64_t t1 = local_clock(test_off);
                if (out)
                    out[(size_t)r * PINGS + (size_t)i] = (kt_clock_sample_t){v[0], t0, t1};
                if (bound && v[1] > bound[r])
                    bound[r] = v[1];
            } else if (rank == r) {
                if (PMPI_Recv(NULL, 0, MPI_BYTE, root, TAG_PING, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    return KT_EBACKEND;
                v[0] = local_clock(test_off);
                v[1] = mine; /* read before the exchange: nothing between the reading and the pong */
                if (PMPI_Send(v, 2, MPI_UINT64_T, root, TAG_PONG, comm) != MPI_SUCCESS)
                    return KT_EBACKEND;
            }
        }
    }
    if (bound && rank == root && mine > bound[root])
        bound[root] = mine;
    return 0;
}

/* Moves every time of a snapshot by off ns (the test offset: the rank's clock as it would read). */
static void shift_snapshot(kt_snapshot_t *s, int64_t off)
{
    if (!off)
        return;
    s->taken_ns = (uint64_t)((int64_t)s->taken_ns + off);
    for (size_t i = 0; i < s->span_count; i++) {
        kt_span_t *sp = &s->spans[i];
        uint64_t *t[5] = {&sp->enqueue_ns, &sp->queued_ns, &sp->submit_ns, &sp->start_ns, &sp->end_ns};
        for (int k = 0; k < 5; k++)
            if (*t[k])
                *t[k] = (uint64_t)((int64_t)*t[k] + off);
    }
}

/* Maps a rank's snapshot onto the root's timeline with its clock model; spans' uncertainty grows by the
 * model's bound at them. */
static void map_snapshot(kt_snapshot_t *s, const kt_clock_model_t *m, uint64_t floor_ns)
{
    uint64_t h, u;
    if (s->taken_ns && kt_clock_to_host(m, s->taken_ns, &h, NULL) == 0)
        s->taken_ns = h;
    for (size_t i = 0; i < s->span_count; i++) {
        kt_span_t *sp = &s->spans[i];
        uint64_t *t[5] = {&sp->enqueue_ns, &sp->queued_ns, &sp->submit_ns, &sp->start_ns, &sp->end_ns};
        uint64_t worst = 0;
        for (int k = 0; k < 5; k++)
            if (*t[k] && kt_clock_to_host(m, *t[k], &h, &u) == 0) {
                *t[k] = h ? h : 1;
                worst = u > worst ? u : worst;
            }
        worst = worst > floor_ns ? worst : floor_ns; /* never tighter than the rank's stated offset bound */
        sp->uncertainty_ns = sp->uncertainty_ns > UINT64_MAX - worst ? UINT64_MAX : sp->uncertainty_ns + worst;
    }
    /* sorted by start again (mapping is monotonic per rank, but keep the contract even for odd models) */
    for (size_t i = 1; i < s->span_count; i++)
        for (size_t j = i; j > 0 && s->spans[j - 1].start_ns > s->spans[j].start_ns; j--) {
            kt_span_t tmp = s->spans[j];
            s->spans[j] = s->spans[j - 1];
            s->spans[j - 1] = tmp;
        }
}

/* The snapshot as JSON in memory. 0, KT_ENOMEM or the exporter's code. */
static int serialise(const kt_snapshot_t *s, char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    if (!f)
        return KT_ENOMEM;
    int rc = kt_report_print(f, s, KT_FORMAT_JSON, NULL);
    if (fclose(f) != 0 && !rc)
        rc = KT_ENOMEM;
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

/* "<path minus .json>.rank<R>.json": where a rank keeps its spans when they do not travel to the root. */
static int rank_path(const char *path, int rank, char *out, size_t size)
{
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".json"))
        n -= 5;
    int k = snprintf(out, size, "%.*s.rank%d.json", (int)n, path, rank);
    return k > 0 && (size_t)k < size ? 0 : KT_EFULL;
}

static size_t span_rank_limit(void)
{
    const char *v = kt__env(KT_ENV_NAME(MPI_SPAN_RANKS));
    long n = v && *v ? strtol(v, NULL, 10) : SPAN_RANKS_DEFAULT;
    return n < 0 ? 0 : (size_t)n;
}

/* The offset's hard bound from the gather's own samples of one rank: each bracket [before, after] of the root's
 * clock holds the rank's reading plus the true offset, so the truth lies in the intersection [lo, hi] of
 * (before - reading, after - reading) over the samples (32 pings within a millisecond: no drift to speak of). The
 * fit's bound is statistical (a multiple of the residuals' spread): on a loaded machine, where a rank's wake-up
 * after a ping is late in most samples, it missed the truth now and then. Returns how far `offset` is from the
 * farther end of [lo, hi], or 0 when the samples do not intersect (a clock stepped: only the fit can say). */
static uint64_t bracket_bound(const kt_clock_sample_t *s, size_t n, int64_t offset)
{
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        int64_t a = (int64_t)(s[i].host_before_ns - s[i].device_ns), b = (int64_t)(s[i].host_after_ns - s[i].device_ns);
        if (a > lo)
            lo = a;
        if (b < hi)
            hi = b;
    }
    if (!n || lo > hi)
        return 0;
    uint64_t dl = offset > lo ? (uint64_t)(offset - lo) : (uint64_t)(lo - offset);
    uint64_t dh = offset > hi ? (uint64_t)(offset - hi) : (uint64_t)(hi - offset);
    return dl > dh ? dl : dh;
}

/* Rank r's alignment bound: the larger of the fit's bound and the gather's brackets' (around the model's
 * offset), plus both processes' host-counter bounds (pingpong). The source records it; each of the rank's spans
 * carries at least it, since the same model placed them (a span bound tighter than its source's was seen to
 * miss the true time on a loaded machine). */
static uint64_t offset_bound(const kt_clock_model_t *m, const kt_clock_sample_t *pings, const uint64_t *hbound, int r,
                             int root)
{
    uint64_t fitb = (uint64_t)ceil(m->error_ns);
    uint64_t brk = bracket_bound(pings, PINGS, kt_clock_model_offset_ns(m));
    return (fitb > brk ? fitb : brk) + (hbound ? hbound[r] + hbound[root] : 0);
}

/* Root: receives every rank's JSON (always all of it, so no sender is left blocked), then, unless rc is
 * already an error, parses, aligns and merges. */
static int root_collect(MPI_Comm comm, int root, int size, char *own, size_t own_len, const kt_clock_sample_t *init,
                        const kt_clock_sample_t *now, const uint64_t *hbound, int rc, kt_snapshot_t **merged)
{
    char **bufs = calloc((size_t)size, sizeof *bufs);
    uint64_t *lens = calloc((size_t)size, sizeof *lens);
    kt_snapshot_t **snaps = calloc((size_t)size, sizeof *snaps);
    kt_clock_model_t *models = calloc((size_t)size, sizeof *models);
    kt_clock_sample_t *fit = malloc(2 * PINGS * sizeof *fit);
    char err[512], sink[4096];
    if (!rc && (!bufs || !lens || !snaps || !models || !fit))
        rc = KT_ENOMEM;
    for (int r = 0; r < size; r++) {
        uint64_t len = 0;
        if (r == root)
            continue;
        if (PMPI_Recv(&len, 1, MPI_UINT64_T, r, TAG_LEN, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            rc = rc ? rc : KT_EBACKEND;
            continue;
        }
        char *buf = !rc && bufs ? malloc(len ? len : 1) : NULL;
        if (!buf && !rc)
            rc = KT_ENOMEM;
        for (uint64_t off = 0; off < len; off += CHUNK) {
            size_t n = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
            if (!buf) { /* drain */
                for (size_t got = 0; got < n; got += sizeof sink) {
                    int c = (int)(n - got < sizeof sink ? n - got : sizeof sink);
                    PMPI_Recv(sink, c, MPI_BYTE, r, TAG_DATA, comm, MPI_STATUS_IGNORE);
                }
                continue;
            }
            if (PMPI_Recv(buf + off, (int)n, MPI_BYTE, r, TAG_DATA, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                rc = rc ? rc : KT_EBACKEND;
        }
        if (bufs) {
            bufs[r] = buf;
            lens[r] = len;
        } else {
            free(buf);
        }
    }
    for (int r = 0; r < size && !rc; r++) {
        const char *buf = r == root ? own : bufs[r];
        uint64_t len = r == root ? own_len : lens[r];
        if (!len) { /* the rank failed before sending */
            rc = KT_EBACKEND;
            break;
        }
        if ((rc = kt_snapshot_parse(buf, len, &snaps[r], err, sizeof err)) != 0) {
            fprintf(stderr, "ktiming mpi: rank %d's snapshot: %s\n", r, err);
            break;
        }
        if (r == root)
            continue;
        size_t n = 0;
        for (int i = 0; init && i < PINGS; i++)
            fit[n++] = init[(size_t)r * PINGS + (size_t)i];
        for (int i = 0; i < PINGS; i++)
            fit[n++] = now[(size_t)r * PINGS + (size_t)i];
        if ((rc = kt_clock_fit(fit, n, KT_FIT_WEIGHTED, KT_DOMAIN_MONOTONIC_RAW, &models[r])) != 0) {
            fprintf(stderr, "ktiming mpi: rank %d's clock fit: %s\n", r, kt_strerror(rc));
            break;
        }
        map_snapshot(snaps[r], &models[r], offset_bound(&models[r], now + (size_t)r * PINGS, hbound, r, root));
    }
    if (!rc) {
        int64_t *zero = calloc((size_t)size, sizeof *zero);
        uint64_t *zb = calloc((size_t)size, sizeof *zb);
        kt_merge_opts_t opts = {.offset_ns = zero, .bound_ns = zb}; /* the mapping above placed every span already */
        rc = zero && zb ? kt_snapshot_merge((const kt_snapshot_t *const *)snaps, (size_t)size, &opts, merged)
                        : KT_ENOMEM;
        free(zero);
        free(zb);
    }
    if (!rc)
        for (int r = 0; r < size && (size_t)r < (*merged)->source_count; r++) {
            kt_source_info_t *so = &(*merged)->sources[r];
            so->offset_ns = r == root ? 0 : kt_clock_model_offset_ns(&models[r]);
            if (r == root) {
                so->offset_bound_ns = 0;
                continue;
            }
            so->offset_bound_ns = offset_bound(&models[r], now + (size_t)r * PINGS, hbound, r, root);
        }
    for (int r = 0; r < size; r++) {
        if (snaps)
            kt_snapshot_free(snaps[r]);
        if (bufs)
            free(bufs[r]);
    }
    free(bufs);
    free(lens);
    free(snaps);
    free(models);
    free(fit);
    return rc;
}

int kt_mpi_gather_snapshot(MPI_Comm comm, int root, const char *path, kt_snapshot_t **out)
{
    int rank, size, rc = 0, cmp = MPI_UNEQUAL;
    if (out)
        *out = NULL;
    if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return KT_EBACKEND;
    if (root < 0 || root >= size)
        return KT_EINVAL;
    int64_t toff = test_offset_ns();
    PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
    const kt_clock_sample_t *init =
        (cmp == MPI_IDENT || cmp == MPI_CONGRUENT) && root == 0 && g_mpi.init && g_mpi.size == size ? g_mpi.init
                                                                                                 : NULL;
    kt_clock_sample_t *now = rank == root ? calloc((size_t)size * PINGS, sizeof *now) : NULL;
    uint64_t *hbound = rank == root ? calloc((size_t)size, sizeof *hbound) : NULL;
    if (rank == root && (!now || !hbound))
        rc = KT_ENOMEM;
    if (init && hbound && g_mpi.init_bound) /* the samples fitted include MPI_Init's: so do their bounds */
        memcpy(hbound, g_mpi.init_bound, (size_t)size * sizeof *hbound);
    int prc = pingpong(comm, root, now, toff, hbound);
    if (!rc)
        rc = prc;

    /* This rank's snapshot, as its clock reads. */
    kt_snapshot_t *snap = kt_snapshot();
    char *buf = NULL;
    size_t len = 0;
    if (!snap && !rc)
        rc = KT_ENOMEM;
    if (snap) {
        shift_snapshot(snap, toff);
        const char *run_dir = kt__env(KT_ENV_NAME(RUN_DIR)); /* `ktiming run`: leave this rank's snapshot there */
        if (run_dir && *run_dir) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%ld.json", run_dir, (long)getpid()) < (int)sizeof p)
                kt_report_write(p, snap, KT_FORMAT_JSON, NULL);
        }
        if (path && (size_t)size > span_rank_limit()) { /* spans stay in this rank's own file */
            char tmpl[4096], p[4096];
            int wrc = kt_path_expand(path, -1, tmpl, sizeof tmpl);
            if (!wrc)
                wrc = rank_path(tmpl, rank, p, sizeof p);
            if (!wrc)
                wrc = kt_report_write(p, snap, KT_FORMAT_JSON, NULL);
            if (wrc)
                fprintf(stderr, "ktiming mpi: rank %d's own snapshot: %s\n", rank, kt_strerror(wrc));
            free(snap->spans);
            snap->spans = NULL;
            snap->span_count = 0;
        }
        int src = serialise(snap, &buf, &len);
        if (!rc)
            rc = src;
        kt_snapshot_free(snap);
    }

    kt_snapshot_t *merged = NULL;
    if (rank != root) {
        uint64_t n = rc ? 0 : len;
        if (PMPI_Send(&n, 1, MPI_UINT64_T, root, TAG_LEN, comm) != MPI_SUCCESS && !rc)
            rc = KT_EBACKEND;
        for (uint64_t off = 0; off < n && !rc; off += CHUNK) {
            size_t c = n - off < CHUNK ? (size_t)(n - off) : CHUNK;
            if (PMPI_Send(buf + off, (int)c, MPI_BYTE, root, TAG_DATA, comm) != MPI_SUCCESS)
                rc = KT_EBACKEND;
        }
    } else {
        rc = root_collect(comm, root, size, buf, len, init, now, hbound, rc, &merged);
        if (!rc && path) {
            char p[4096];
            rc = kt_path_expand(path, -1, p, sizeof p);
            if (!rc && (rc = kt_report_write(p, merged, KT_FORMAT_JSON, NULL)) != 0)
                fprintf(stderr, "ktiming mpi: cannot write %s: %s\n", p, kt_strerror(rc));
            const char *trace = kt__env(KT_ENV_NAME(MPI_TRACE));
            if (!rc && trace && *trace && !(rc = kt_path_expand(trace, -1, p, sizeof p)) &&
                (rc = kt_report_write(p, merged, KT_FORMAT_CHROME, NULL)) != 0)
                fprintf(stderr, "ktiming mpi: cannot write %s: %s\n", p, kt_strerror(rc));
        }
    }
    free(buf);
    free(now);
    free(hbound);
    /* Every rank returns the root's verdict (a rank's own failure wins on that rank). */
    int verdict = rc;
    if (PMPI_Bcast(&verdict, 1, MPI_INT, root, comm) != MPI_SUCCESS)
        verdict = KT_EBACKEND;
    if (!rc)
        rc = verdict;
    if (rank == root && out && !rc)
        *out = merged;
    else
        kt_snapshot_free(merged);
    return rc;
}

int kt_mpi_gather(MPI_Comm comm, int root, const char *path) { return kt_mpi_gather_snapshot(comm, root, path, NULL); }

/* ---------------------------------------------------------------------------------------------------
 * PMPI interception
 * ------------------------------------------------------------------------------------------------- */

static int enabled_by_env(void)
{
    const char *v = kt__env(KT_ENV_NAME(MPI));
    return !(v && (!strcmp(v, "0") || !strcmp(v, "off")));
}

static void on_init(void)
{
    int rank, size;
    if (!enabled_by_env() || PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
        PMPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS)
        return;
    g_mpi.active = 1;
    g_mpi.size = size;
    kt_clock_sample_t *s = rank == 0 ? calloc((size_t)size * PINGS, sizeof *s) : NULL;
    uint64_t *b = rank == 0 ? calloc((size_t)size, sizeof *b) : NULL;
    /* every rank takes part even if the root could not allocate: the exchange is collective */
    if (pingpong(MPI_COMM_WORLD, 0, s, test_offset_ns(), b) != 0 || !b) {
        free(s);
        s = NULL;
        free(b);
        b = NULL;
    }
    g_mpi.init = s;
    g_mpi.init_bound = b;
}

KT_MPI_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        on_init();
    return rc;
}

KT_MPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        on_init();
    return rc;
}

KT_MPI_EXPORT int MPI_Finalize(void)
{
    if (g_mpi.active) {
        const char *path = kt__env(KT_ENV_NAME(MPI_OUTPUT));
        int rank = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        int rc = kt_mpi_gather(MPI_COMM_WORLD, 0, path && *path ? path : "ktiming-mpi.json");
        if (rc && rank == 0)
            fprintf(stderr, "ktiming mpi: gathering the ranks' snapshots failed: %s\n", kt_strerror(rc));
        free(g_mpi.init);
        g_mpi.init = NULL;
        free(g_mpi.init_bound);
        g_mpi.init_bound = NULL;
        g_mpi.active = 0;
    }
    return PMPI_Finalize();
}
