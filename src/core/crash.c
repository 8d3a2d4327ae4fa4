/* crash.c — KTIMING_ON_CRASH=write: a program outside `ktiming run` that dies of a signal still writes its
 * snapshot to KTIMING_OUTPUT, from the signal handler, with async-signal-safe code only.
 *
 * The handler takes no lock and allocates nothing: it walks the recorder's tables as a snapshot does (shards of
 * the current generation, each kernel's slot scalars, read once without waiting on a seqlock), sums them per kernel
 * and writes a JSON snapshot with write(2) through a fixed buffer to PATH.crash.tmp, renamed onto PATH. It holds
 * what a snapshot's aggregates hold (count, total, min, max, last, mean, errors, dropped), marked
 * "ended": "signal N"; no percentiles, samples, spans or launch configurations (those need memory the handler cannot
 * allocate: a breakdown adds up rows of every thread by configuration). It writes only when the process is about
 * to end: a handler the program had before runs first, from inside ours, and one that recovers (a guard-page fault
 * undone) leaves no snapshot and ours armed; with the default action next, the snapshot is written and the
 * process dies as it would have.
 */
#include "core/internal.h"
#include "core/service.h"
#include "shared/shared.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* Signals the handler is installed for: faults and abort always (a handler the program had, a sanitizer's, runs
 * first, from ours), the terminating ones only where their action is the default (a program that handles SIGTERM
 * itself goes on or exits through its exit handlers, which write the snapshot anyway). */
static const int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS,
                                    SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGXCPU, SIGXFSZ};
#define N_CRASH (sizeof kCrashSignals / sizeof kCrashSignals[0])
#define N_FAULTS 7u /* kCrashSignals[0, N_FAULTS): faults and abort */

static struct sigaction g_old[N_CRASH]; /* what each signal did before */
static char g_path[PATH_MAX];           /* KTIMING_OUTPUT expanded at install */
static char g_tmp[PATH_MAX + 16];       /* g_path + ".crash.tmp" */
static pid_t g_pid;                     /* the process that installed (a forked child writes nothing here) */
static atomic_int g_writing;            /* 1 while a thread writes the snapshot (one at a time) */

/* ---------------------------------------------------------------------------------------------------
 * Output without stdio: a fixed buffer flushed with write(2)
 * ------------------------------------------------------------------------------------------------- */

typedef struct wbuf_t {
    int fd;
    int failed;       /* a write failed: nothing renamed */
    size_t n;         /* bytes in buf */
    char buf[8192];
} wbuf_t;

/* The one buffer, used under g_writing: not on the stack, which may be the program's small sigaltstack. */
static wbuf_t g_wbuf;

static void w_flush(wbuf_t *w)
{
    size_t off = 0;
    while (off < w->n && !w->failed) {
        ssize_t k = write(w->fd, w->buf + off, w->n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->failed = 1;
        else
            off += (size_t)k;
    }
    w->n = 0;
}

static void w_bytes(wbuf_t *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (w->n == sizeof w->buf)
            w_flush(w);
        w->buf[w->n++] = s[i];
    }
}

static void w_str(wbuf_t *w, const char *s) { w_bytes(w, s, strlen(s)); }

static void w_u64(wbuf_t *w, uint64_t v)
{
    char d[24];
    int i = (int)sizeof d;
    do {
        d[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    w_bytes(w, d + i, sizeof d - (size_t)i);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 when the byte there starts none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c >= 0xF0u && c <= 0xF4u ? 4 : c >= 0xE0u ? 3 : c >= 0xC2u && c <= 0xDFu ? 2 : 0;
    if (c >= 0xF5u || !len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
    if ((c == 0xE0u && s[1] < 0xA0u) || (c == 0xEDu && s[1] >= 0xA0u) || (c == 0xF0u && s[1] < 0x90u) ||
        (c == 0xF4u && s[1] >= 0x90u))
        return 0; /* overlong, surrogate, or past U+10FFFF */
    return len;
}

/* A JSON string: quotes and backslashes escaped, control characters as \u00XX, an invalid UTF-8 byte as U+FFFD and
 * the byte in two upper-case hex digits, as the snapshot writer does (json_out.c). */
static void w_json(wbuf_t *w, const char *s)
{
    static const char hex[] = "0123456789abcdef", hex_up[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    w_bytes(w, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            w_bytes(w, e, 2);
            i++;
        } else if (c < 0x20u || c == 0x7fu) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15u]};
            w_bytes(w, e, 6);
            i++;
        } else if (c < 0x80u) {
            w_bytes(w, (const char *)p + i, 1);
            i++;
        } else {
            size_t len = utf8_len(p + i, n - i);
            if (len) {
                w_bytes(w, (const char *)p + i, len);
                i += len;
            } else {
                char e[8] = {'\\', 'u', 'f', 'f', 'f', 'd', hex_up[c >> 4], hex_up[c & 15u]};
                w_bytes(w, e, 8);
                i++;
            }
        }
    }
    w_bytes(w, "\"", 1);
}

/* ---------------------------------------------------------------------------------------------------
 * The snapshot, from the tables as they stand
 * ------------------------------------------------------------------------------------------------- */

/* One kernel summed over the shards of generation gen; 0 when it has nothing to report. */
typedef struct crash_sum_t {
    uint64_t count, total, min, max, last, last_stamp, errors, dropped;
    unsigned __int128 sum, sq; /* exact sums of durations and of their squares */
    int saturated;             /* the total passed 2^64 ns */
} crash_sum_t;

static int kernel_sum(uint32_t id, uint64_t gen, crash_sum_t *k)
{
    memset(k, 0, sizeof *k);
    k->min = UINT64_MAX;
    int any = 0;
    for (kt__shard_t *s = kt__shards_head(); s; s = s->next) {
        if (KT__LDA(&s->gen) != gen)
            continue;
        kt__slot_t *chunk = KT__LDA(&s->dir[id >> KT__CHUNK_BITS]);
        kt__slot_t *sl = chunk ? &chunk[id & (KT__CHUNK - 1u)] : NULL;
        kt__slot_cold_t *c = sl ? KT__LDA(&sl->cold) : NULL;
        if (!c)
            continue;
        k->errors += KT__LD(&c->errors);
        k->dropped += KT__LD(&c->dropped);
        uint64_t n = KT__LDA(&sl->count);
        any |= k->errors || k->dropped;
        if (!n)
            continue;
        uint64_t t = KT__LDA(&sl->total), mn = KT__LDA(&sl->min), mx = KT__LDA(&sl->max);
        k->saturated |= KT__LDA(&sl->total_hi) != 0 || k->total + t < t;
        k->total += t;
        k->sum += (unsigned __int128)KT__LDA(&sl->total_hi) << 64 | t;
        k->sq += (unsigned __int128)KT__LDA(&sl->sq_hi) << 64 | KT__LDA(&sl->sq_lo);
        k->count += n;
        k->min = mn < k->min ? mn : k->min;
        k->max = mx > k->max ? mx : k->max;
        uint64_t st = KT__LDA(&sl->last_stamp);
        if (!any || st >= k->last_stamp) {
            k->last = KT__LDA(&sl->last);
            k->last_stamp = st;
        }
        any = 1;
    }
    if (!k->count)
        k->min = 0;
    if (k->min > k->max) /* a record torn by the crash */
        k->min = k->max;
    if (k->saturated)
        k->total = UINT64_MAX;
    return any;
}

/* The sample standard deviation, rounded to ns (arithmetic only: safe in a signal handler). */
static uint64_t crash_stddev(const crash_sum_t *k)
{
    if (k->count < 2)
        return 0;
    long double n = (long double)k->count, sum = (long double)k->sum;
    long double var = ((long double)k->sq - sum * sum / n) / (n - 1);
    if (!(var > 0))
        return 0;
    long double r = var; /* Newton's method: no libm call */
    for (int i = 0; i < 200; i++) {
        long double nr = 0.5L * (r + var / r);
        if (nr == r)
            break;
        r = nr;
    }
    return r >= 1.8e19L ? UINT64_MAX : (uint64_t)(r + 0.5L);
}

static void write_snapshot(int sig)
{
    wbuf_t *w = &g_wbuf;
    w->fd = open(g_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    w->failed = w->fd < 0;
    w->n = 0;
    if (w->failed)
        return;
    struct utsname u;
    struct timespec ts;
    if (uname(&u) != 0)
        u.nodename[0] = '\0';
    u.nodename[63] = '\0'; /* as kt_snapshot_t.host keeps it */
    uint64_t now = clock_gettime(CLOCK_MONOTONIC_RAW, &ts) == 0
                       ? (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec
                       : 0;
    char ended[24] = "signal ";
    {
        char d[8];
        int i = (int)sizeof d, v = sig;
        do {
            d[--i] = (char)('0' + v % 10);
            v /= 10;
        } while (v && i > 0);
        memcpy(ended + 7, d + i, sizeof d - (size_t)i);
        ended[7 + sizeof d - (size_t)i] = '\0';
    }
    w_str(w, "{\n  \"schema\": \"" KT_SNAPSHOT_SCHEMA_NAME "\",\n  \"version\": ");
    w_u64(w, KT_SNAPSHOT_SCHEMA_WRITTEN);
    w_str(w, ",\n  \"generator\": \"ktiming " KT_VERSION_STRING " (crash handler)\",\n  \"host\": ");
    w_json(w, u.nodename);
    w_str(w, ",\n  \"pid\": ");
    w_u64(w, (uint64_t)getpid());
    w_str(w, ", \"rank\": -1, \"kernels_dropped\": ");
    w_u64(w, kt__kernels_dropped());
    w_str(w, ",\n  \"taken_ns\": ");
    w_u64(w, now);
    w_str(w, ", \"ended\": ");
    w_json(w, ended);
    w_str(w, ",\n  \"entries\": [");
    uint64_t gen = kt__generation();
    uint32_t nk = kt__kernel_count();
    int first = 1;
    for (uint32_t id = 1; id <= nk; id++) {
        const kt__kernel_t *k = kt__kernel_get(id);
        crash_sum_t s;
        if (!k || !kernel_sum(id, gen, &s))
            continue;
        w_str(w, first ? "\n    {\"name\": " : ",\n    {\"name\": ");
        first = 0;
        w_json(w, k->name);
        w_str(w, ", \"backend\": \"");
        w_str(w, kt__backend_id(k->backend));
        w_str(w, "\", \"device\": ");
        w_json(w, k->device);
        w_str(w, ",\n     \"dispatch_count\": ");
        w_u64(w, s.count);
        w_str(w, ", \"total_ns\": ");
        w_u64(w, s.total);
        w_str(w, ", \"min_ns\": ");
        w_u64(w, s.min);
        w_str(w, ", \"max_ns\": ");
        w_u64(w, s.max);
        w_str(w, ", \"last_ns\": ");
        w_u64(w, s.last);
        w_str(w, ", \"mean_ns\": ");
        w_u64(w, s.count ? s.total / s.count : 0);
        w_str(w, ", \"stddev_ns\": ");
        w_u64(w, crash_stddev(&s));
        w_str(w, ", \"errors\": ");
        w_u64(w, s.errors);
        w_str(w, ", \"dropped\": ");
        w_u64(w, s.dropped);
        w_str(w, "}");
    }
    w_str(w, first ? "]\n}\n" : "\n  ]\n}\n");
    w_flush(w);
    if (close(w->fd) != 0)
        w->failed = 1;
    if (w->failed || rename(g_tmp, g_path) != 0)
        unlink(g_tmp);
}

/* Writes the snapshot, one thread at a time: a thread that finds another writing waits for it (bounded) and
 * writes nothing itself, since its default action would end the process in the middle of the other's write. */
static void write_once_now(int sig)
{
    if (getpid() != g_pid)
        return;
    int idle = 0;
    if (atomic_compare_exchange_strong(&g_writing, &idle, 1)) {
        write_snapshot(sig);
        atomic_store(&g_writing, 0); /* a later fatal signal (after a recovered one) writes again */
        return;
    }
    struct timespec nap = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&g_writing); i++)
        nanosleep(&nap, NULL);
}

/* Does a fault the kernel raised (it comes back when the faulting instruction runs again) end here? */
static int is_fault(int sig, const siginfo_t *info)
{
    return info && info->si_code > 0 &&
           (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS);
}

static int is_default(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

/* The handler the program had before ours, called as the kernel would have called it: with the mask of the
 * interrupted code, its own sa_mask and (unless SA_NODEFER) the signal blocked, and SA_RESETHAND honoured. It
 * may not return (siglongjmp out of a recovered fault, _exit). */
static void chain(size_t i, int sig, siginfo_t *info, void *ctx)
{
    struct sigaction old = g_old[i];
    sigset_t mask = ctx ? ((ucontext_t *)ctx)->uc_sigmask : old.sa_mask;
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&old.sa_mask, s) == 1)
            sigaddset(&mask, s);
    if (!(old.sa_flags & SA_NODEFER))
        sigaddset(&mask, sig);
    if (old.sa_flags & SA_RESETHAND) { /* the kernel would have reset it to the default: so do we, in our table */
        g_old[i].sa_handler = SIG_DFL;
        g_old[i].sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
    }
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    if (old.sa_flags & SA_SIGINFO)
        old.sa_sigaction(sig, info, ctx);
    else
        old.sa_handler(sig);
}

/* Writes the snapshot only where the signal's default action -- the process's end -- follows: a handler the
 * program had before ours runs first, from inside ours, and when it recovers (a GC or JIT guard page, a probe
 * fault undone with siglongjmp) nothing is written and ours stays in place for the next signal. */
static void on_crash(int sig, siginfo_t *info, void *ctx)
{
    int saved = errno;
    size_t i = 0;
    while (i < N_CRASH && kCrashSignals[i] != sig)
        i++;
    if (i == N_CRASH) {
        errno = saved;
        return;
    }
    sigset_t all;
    sigfillset(&all);
    if (!is_default(&g_old[i])) {
        chain(i, sig, info, ctx);
        pthread_sigmask(SIG_SETMASK, &all, NULL);
        /* It returned. Unless it put the default action back (a crash reporter that is done and lets the
         * signal end the process: a fault runs again into it, another signal it raised again is pending), the
         * program goes on -- except from abort(), which puts the default back itself once a SIGABRT handler
         * returns (a SIGABRT that is not abort()'s and that the program survives is rare enough to write for). */
        struct sigaction now;
        sigset_t pending;
        if (sig != SIGABRT &&
            (sigaction(sig, NULL, &now) != 0 || !is_default(&now) ||
             !(is_fault(sig, info) || (sigpending(&pending) == 0 && sigismember(&pending, sig) == 1)))) {
            errno = saved;
            return;
        }
        write_once_now(sig);
        errno = saved;
        return;
    }
    write_once_now(sig);
    sigaction(sig, &g_old[i], NULL); /* the default action from here: the process ends as it would have */
    if (!is_fault(sig, info)) /* raised again, pending until this handler returns */
        raise(sig);
    errno = saved;
}

/* From the first initialisation: KTIMING_ON_CRASH=write with KTIMING_OUTPUT set, outside `ktiming run` (which
 * keeps a dead program's timings itself). */
void kt__crash_install(void)
{
    const char *mode = kt__env(KT_ENV_NAME(ON_CRASH));
    const char *out = kt__env(KT_ENV_NAME(OUTPUT));
    if (!mode || strcmp(mode, "write") != 0)
        return;
    if (!out || !*out) {
        fprintf(stderr, "ktiming: KTIMING_ON_CRASH=write needs KTIMING_OUTPUT: no crash handler\n");
        return;
    }
    if (kt__arena || (kt__env(KT_ENV_NAME(RUN_DIR)) && *kt__env(KT_ENV_NAME(RUN_DIR))))
        return; /* under ktiming run */
    if (kt__path_expand(out, -1, g_path, sizeof g_path) != 0 ||
        snprintf(g_tmp, sizeof g_tmp, "%s.crash.tmp", g_path) >= (int)sizeof g_tmp) {
        fprintf(stderr, "ktiming: KTIMING_OUTPUT=%s: %s: no crash handler\n", out, strerror(ENAMETOOLONG));
        return;
    }
    g_pid = getpid();
    /* A stack of its own for the thread that set ktiming up, so a stack overflow there is written too; a stack
     * the program set up itself is kept (and used: the handler needs little, its buffer is static). */
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE)) {
        size_t alt = 64 * 1024;
        void *stk = mmap(NULL, alt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        stack_t ss = {.ss_sp = stk, .ss_size = alt, .ss_flags = 0};
        if (stk != MAP_FAILED && sigaltstack(&ss, NULL) != 0)
            munmap(stk, alt);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK; /* no effect on a thread without an alternate stack */
    sigfillset(&sa.sa_mask); /* nothing else runs in this thread while the snapshot is written */
    for (size_t i = 0; i < N_CRASH; i++)
        if (sigaction(kCrashSignals[i], NULL, &g_old[i]) == 0 && g_old[i].sa_handler != SIG_IGN &&
            (i < N_FAULTS || (!(g_old[i].sa_flags & SA_SIGINFO) && g_old[i].sa_handler == SIG_DFL)))
            sigaction(kCrashSignals[i], &sa, NULL);
}
