/* output.c — kt_output_*: the one file writer (atomic replacement of regular files, write-through of special
 * files, symlinks resolved to the target they name unless the kernel's protected_symlinks rule would refuse them,
 * a replaced file's mode kept); see src/shared/output.h. */
#include "export/export.h"

#include "shared/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KT__LINK_HOPS 40 /* as the kernel's own limit on symlinks followed in one lookup */

struct kt_output_t {
    FILE *f;     /* the stream the document is written to */
    int through; /* 1: an existing special file written in place; 0: `path` replaced at commit */
    int nosync;  /* KT_OUTPUT_NOSYNC */
    int anon;    /* replaced through an O_TMPFILE file (linked at commit); 0: through the named `tmp` */
    char *path;  /* the path written or replaced (symlinks resolved) */
    char *tmp;   /* the named temporary (anon == 0, through == 0) */
};

static atomic_uint g_tmp_counter;

/* Paths that name a file descriptor of the process (/dev/stdout -> /proc/self/fd/1 -> "pipe:[..]" or a file
 * the shell opened): always written through, never resolved further nor replaced. */
static int is_fd_path(const char *p)
{
    return !strncmp(p, "/proc/", 6) || !strncmp(p, "/dev/fd/", 8) || !strcmp(p, "/dev/stdout") ||
           !strcmp(p, "/dev/stderr") || !strcmp(p, "/dev/stdin");
}

/* The directory part of p ("." when it has none), malloc'ed. */
static char *dir_of(const char *p);

/* 0 when the kernel's fs.protected_symlinks rule would refuse to follow the link at `link` (lstat'ed into *st)
 * for this process: a link in a sticky, world-writable directory (/tmp), owned by neither this process's user
 * nor the directory's owner. Applied whatever the sysctl says: resolving links here (to replace the final target
 * by rename) must never give a planted link more than the kernel would. */
static int link_followable(const char *link, const struct stat *st)
{
    if (st->st_uid == geteuid())
        return 1;
    char *dir = dir_of(link);
    struct stat ds;
    int ok = dir && stat(dir, &ds) == 0 &&
             (!(ds.st_mode & S_ISVTX) || !(ds.st_mode & S_IWOTH) || ds.st_uid == st->st_uid);
    free(dir);
    return ok;
}

/* path with its symbolic links followed (malloc'ed); *fd_path = 1 when the chain reaches a descriptor path.
 * NULL with errno on failure (ELOOP, ENOMEM, EACCES for a link the kernel would not follow, readlink's errors). */
static char *path_resolve(const char *path, int *fd_path)
{
    char *cur = strdup(path);
    *fd_path = 0;
    for (int hop = 0; cur; hop++) {
        struct stat st;
        if (is_fd_path(cur)) {
            *fd_path = 1;
            return cur;
        }
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        if (!link_followable(cur, &st)) {
            free(cur);
            errno = EACCES;
            return NULL;
        }
        char target[PATH_MAX];
        ssize_t n = hop < KT__LINK_HOPS ? readlink(cur, target, sizeof target - 1) : -1;
        if (n < 0) {
            int e = hop < KT__LINK_HOPS ? errno : ELOOP;
            free(cur);
            errno = e;
            return NULL;
        }
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dl = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1; /* relative to the link's dir */
        char *next = malloc(dl + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dl);
            memcpy(next + dl, target, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

static char *dir_of(const char *p)
{
    const char *slash = strrchr(p, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == p ? 1 : (size_t)(slash - p);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

static void output_free(kt_output_t *o)
{
    free(o->path);
    free(o->tmp);
    free(o);
}

/* A fresh name beside o->path into o->tmp (malloc'ed once). */
static int tmp_name(kt_output_t *o)
{
    size_t len = strlen(o->path) + 64;
    if (!o->tmp && !(o->tmp = malloc(len)))
        return -1;
    snprintf(o->tmp, len, "%s.tmp.%ld.%u", o->path, (long)getpid(), atomic_fetch_add(&g_tmp_counter, 1u));
    return 0;
}

/* The replacement of an existing file gets that file's permission bits (a 0600 file stays 0600; set-id bits are
 * not carried over). 0 or -1 with errno. */
static int keep_mode(int fd, const struct stat *old)
{
    return fchmod(fd, old->st_mode & 0777) == 0 ? 0 : -1;
}

/* Opens a FIFO for writing without blocking for ever: a FIFO nobody reads fails the non-blocking open (ENXIO),
 * retried every 10 ms for KT_OUTPUT_FIFO_WAIT_MS, then given up with ENXIO. Once open the descriptor blocks
 * again (a reader that is there gets the whole document). */
static int fifo_open(const char *path)
{
    for (int waited = 0;; waited += 10) {
        int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) {
            int fl = fcntl(fd, F_GETFL);
            if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
            }
            return fd;
        }
        if (errno != ENXIO || waited >= KT_OUTPUT_FIFO_WAIT_MS)
            return -1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Opens the file the document goes to; the descriptor, or -1 with errno. */
static int output_fd(kt_output_t *o, int fd_path)
{
    struct stat st;
    int exists = stat(o->path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    if (exists && S_ISFIFO(st.st_mode)) {
        o->through = 1;
        return fifo_open(o->path);
    }
    if (fd_path || (exists && !S_ISREG(st.st_mode))) {
        o->through = 1; /* no O_CREAT: a descriptor path that is gone is an error, not a new file */
        return open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (exists && S_ISREG(st.st_mode) ? O_TRUNC : 0));
    }
#ifdef O_TMPFILE
    char *dir = dir_of(o->path);
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666); /* 0666 & ~umask */
    int e = errno;
    free(dir);
    if (fd >= 0) {
        o->anon = 1;
        if (exists && keep_mode(fd, &st) != 0) {
            e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        return fd;
    }
    if (e != EOPNOTSUPP && e != EISDIR && e != EINVAL) { /* file system or kernel without O_TMPFILE: fall back */
        errno = e;
        return -1;
    }
#endif
    for (int attempt = 0; attempt < 100; attempt++) {
        if (tmp_name(o) != 0) {
            errno = ENOMEM;
            return -1;
        }
        int nfd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (nfd >= 0 && exists && keep_mode(nfd, &st) != 0) {
            int e2 = errno;
            close(nfd);
            unlink(o->tmp);
            errno = e2;
            return -1;
        }
        if (nfd >= 0 || errno != EEXIST)
            return nfd;
    }
    return -1;
}

int kt_output_open(const char *path, unsigned flags, kt_output_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    if (!path || !*path)
        return KT_EINVAL;
    kt_output_t *o = calloc(1, sizeof *o);
    if (!o)
        return KT_ENOMEM;
    o->nosync = (flags & KT_OUTPUT_NOSYNC) != 0;
    int fd_path = 0;
    if (!(o->path = path_resolve(path, &fd_path))) {
        int e = errno;
        free(o);
        errno = e;
        return e == ENOMEM ? KT_ENOMEM : KT_EIO;
    }
    int fd = output_fd(o, fd_path);
    if (fd < 0) {
        int e = errno;
        output_free(o);
        errno = e;
        return KT_EIO;
    }
    if (!(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        if (o->tmp && !o->anon && !o->through)
            unlink(o->tmp);
        output_free(o);
        errno = e;
        return KT_ENOMEM;
    }
    *out = o;
    return 0;
}

FILE *kt_output_file(kt_output_t *o) { return o ? o->f : NULL; }

void kt_output_abort(kt_output_t *o)
{
    if (!o)
        return;
    int e = errno;
    fclose(o->f);
    if (!o->through && !o->anon && o->tmp)
        unlink(o->tmp);
    output_free(o);
    errno = e;
}

/* rename(from, to) for a document not synced to disk (NOSYNC). ext4 (auto_da_alloc) writes out a file's data
 * before a rename that replaces another file, which for a 0.7 MB snapshot was ~1.5 ms of `ktiming run -o` onto
 * an existing file: the two names are exchanged instead (atomic as a rename: the path always names the old or
 * the new document), and the old one, now at `from`, is removed. A plain rename where the exchange is not
 * supported. */
static int replace_unsynced(const char *from, const char *to)
{
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0) {
        if (unlink(from) == 0 || errno == ENOENT)
            return 0;
        /* what was at `to` is no file (a directory swapped in since it was checked): put both back */
        int e = errno == EPERM ? EISDIR : errno;
        renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
        errno = e;
        return -1;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != ENOENT)
        return -1;
#endif
    return rename(from, to);
}

/* Gives the anonymous file a name: the path itself when it is still free, else a temporary to rename. */
static int anon_link(int fd, const char *to)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno == ENOENT && access("/proc/self/fd", F_OK) != 0) /* no /proc: needs CAP_DAC_READ_SEARCH */
        return linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH);
    return -1;
}

int kt_output_commit(kt_output_t *o)
{
    if (!o)
        return KT_EINVAL;
    int rc = 0, e = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) {
        rc = KT_EIO;
        e = errno ? errno : EIO;
    }
    if (rc == 0 && !o->through && !o->nosync && fsync(fileno(o->f)) != 0) {
        rc = KT_EIO;
        e = errno;
    }
    if (rc == 0 && o->anon) {
        /* Straight to the path when nothing is there (no temporary name ever exists), else link + rename. */
        if (anon_link(fileno(o->f), o->path) != 0) {
            if (errno != EEXIST || tmp_name(o) != 0 || anon_link(fileno(o->f), o->tmp) != 0) {
                rc = KT_EIO;
                e = errno ? errno : ENOMEM;
            } else if ((o->nosync ? replace_unsynced(o->tmp, o->path) : rename(o->tmp, o->path)) != 0) {
                rc = KT_EIO;
                e = errno;
                unlink(o->tmp);
            }
        }
    }
    if (fclose(o->f) != 0 && rc == 0) {
        rc = KT_EIO;
        e = errno;
    }
    if (!o->through && !o->anon) {
        if (rc == 0 && (o->nosync ? replace_unsynced(o->tmp, o->path) : rename(o->tmp, o->path)) != 0) {
            rc = KT_EIO;
            e = errno;
        }
        if (rc != 0)
            unlink(o->tmp);
    }
    output_free(o);
    errno = e;
    return rc;
}

/* Copies the file `from` to `to` through the writer. 0, or a KT_E* code with errno set. */
static int place_by_copy(const char *from, const char *to, unsigned flags)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return KT_EIO;
    kt_output_t *o = NULL;
    int rc = kt_output_open(to, flags, &o);
    if (rc != 0) {
        int e = errno;
        fclose(in);
        errno = e;
        return rc;
    }
    char buf[65536];
    size_t n;
    int bad = 0;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, o->f) != n;
    int e = errno;
    bad = bad || ferror(in);
    fclose(in);
    if (bad) {
        kt_output_abort(o);
        errno = e ? e : EIO;
        return KT_EIO;
    }
    return kt_output_commit(o);
}

int kt_output_place(const char *from, const char *to, unsigned flags)
{
    if (!from || !*from || !to || !*to)
        return KT_EINVAL;
    int fd_path = 0;
    char *path = path_resolve(to, &fd_path);
    if (!path)
        return errno == ENOMEM ? KT_ENOMEM : KT_EIO;
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (!fd_path && (!exists || S_ISREG(st.st_mode))) {
        /* the file itself becomes the document: synced first unless NOSYNC, then one rename */
        int ok = 1;
        if (!(flags & KT_OUTPUT_NOSYNC)) {
            int fd = open(from, O_RDONLY | O_CLOEXEC);
            ok = fd >= 0 && fsync(fd) == 0;
            if (fd >= 0)
                close(fd);
        }
        mode_t mode = exists ? st.st_mode & 0777 : 0; /* a replaced file keeps its mode */
        if (!exists) {
            mode_t mask = umask(0); /* 0666 & ~umask, as every file the writer makes */
            umask(mask);
            mode = 0666 & ~mask;
        }
        if (ok && chmod(from, mode) == 0 &&
            ((flags & KT_OUTPUT_NOSYNC) && exists ? replace_unsynced(from, path) : rename(from, path)) == 0) {
            free(path);
            return 0;
        }
    }
    free(path);
    /* another file system, a descriptor path, a special file: through the writer */
    int rc = place_by_copy(from, to, flags);
    if (rc == 0)
        unlink(from);
    return rc;
}

/* The identity of what path would write: its inode when it exists, else its directory's real path + name. */
typedef struct out_id_t {
    int exists;    /* 1: dev/ino valid */
    int device;    /* a character device (/dev/null may be named by several outputs) */
    dev_t dev;     /* st_dev */
    ino_t ino;     /* st_ino */
    char *name;    /* exists == 0: canonical new path (malloc'ed) */
} out_id_t;

static int out_id(const char *path, out_id_t *id)
{
    memset(id, 0, sizeof *id);
    int fd_path;
    char *p = path_resolve(path, &fd_path);
    if (!p)
        return -1;
    struct stat st;
    if (stat(p, &st) == 0) {
        id->exists = 1;
        id->device = S_ISCHR(st.st_mode);
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        free(p);
        return 0;
    }
    char *dir = dir_of(p), *real = dir ? realpath(dir, NULL) : NULL;
    const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
    size_t n = real ? strlen(real) + strlen(base) + 2 : 0;
    if (real && (id->name = malloc(n)) != NULL)
        snprintf(id->name, n, "%s/%s", real, base);
    free(real);
    free(dir);
    free(p);
    return id->name ? 0 : -1;
}

int kt_output_same(const char *a, const char *b)
{
    if (!a || !b || !*a || !*b)
        return 0;
    out_id_t x, y;
    int e = errno, same = 0;
    if (out_id(a, &x) == 0 && out_id(b, &y) == 0) {
        if (x.exists && y.exists)
            same = x.dev == y.dev && x.ino == y.ino && !x.device;
        else if (!x.exists && !y.exists)
            same = strcmp(x.name, y.name) == 0;
        free(y.name);
    } else {
        same = strcmp(a, b) == 0; /* unresolvable (e.g. a missing directory): compare as written */
    }
    free(x.name);
    errno = e;
    return same;
}
