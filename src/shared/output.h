/* shared/output.h — the one writer behind every file ktiming writes (kt_report_write, KTIMING_OUTPUT and
 * KTIMING_TRACE at exit, `ktiming report/compare/run -o`, the interception libraries' run snapshots).
 *
 * What a path gets:
 *   - a regular file, or a path that does not exist yet: replaced atomically. The document is written to an
 *     anonymous file in the same directory (O_TMPFILE), flushed to disk (fsync), given a temporary name
 *     (linkat) and renamed over the path. Readers see the old file or the whole new one; a writer killed
 *     before the rename leaves nothing behind (where O_TMPFILE is unavailable a named temporary
 *     "PATH.tmp.PID.N" is used, removed on every failure the process survives). A failed write (full disk,
 *     file size limit) leaves the old file as it was.
 *   - a symbolic link: its final target is what gets replaced (the link stays a link) -- unless the kernel's
 *     fs.protected_symlinks rule would refuse to follow it for this process (a link in a sticky world-writable
 *     directory such as /tmp, owned by neither this user nor the directory's owner): KT_EIO with errno EACCES,
 *     whatever the sysctl is set to.
 *   - an existing FIFO: opened without blocking; when nobody reads it within KT_OUTPUT_FIFO_WAIT_MS, KT_EIO
 *     with errno ENXIO (a program exiting never hangs on it).
 *   - an existing character or block device, socket, or a path through /dev or /proc (/dev/stdout,
 *     /dev/fd/N, /proc/self/fd/N): written through -- opened for writing (regular targets truncated, as a
 *     shell's `>` does) and never replaced, renamed or created.
 *   - a directory: KT_EIO with errno EISDIR.
 * New files get mode 0666 & ~umask; a replaced file's permission bits are kept (a 0600 file stays 0600). On failure the functions return a
 * negative KT_E* code with errno saying why (strerror(errno) names it).
 *
 * Not installed (docs/abi.md): the library's exports for its own tools (CLI, interception libraries) and tests.
 */
#ifndef KTIMING_OUTPUT_H
#define KTIMING_OUTPUT_H

#include <ktiming.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An output being written: open, write through kt_output_file(), then commit (or abort). */
typedef struct kt_output_t kt_output_t;

/* kt_output_open flags. */
#define KT_OUTPUT_NOSYNC 1u /* skip the fsync: scratch files read back at once (still atomic, not durable) */

/* How long writing to a FIFO waits for a reader to open it, in ms. */
#define KT_OUTPUT_FIFO_WAIT_MS 1000

/* Starts writing `path` as described above. 0, KT_EINVAL, KT_ENOMEM or KT_EIO (errno set). */
KT_API int kt_output_open(const char *path, unsigned flags, kt_output_t **out);
/* The stream to write the document to (fully buffered). */
KT_API FILE *kt_output_file(kt_output_t *o);
/* Flushes, syncs and puts the document in place; frees o in every case. 0 or KT_EIO (errno set). */
KT_API int kt_output_commit(kt_output_t *o);
/* Discards what was written (a replaced file keeps its old content); frees o. NULL is a no-op. */
KT_API void kt_output_abort(kt_output_t *o);
/* Puts the finished file `from` at `to` as the writer would have written it there, and removes `from`. Where
 * `to` (its links followed) is new or a regular file on the same file system as `from`, `from` itself is
 * renamed over it: no copy, atomic, fsynced first unless KT_OUTPUT_NOSYNC, mode 0666 & ~umask (or the replaced
 * file's). Anything else
 * (another file system, a descriptor path, a FIFO or device) is copied through kt_output_open/commit. For a
 * scratch file the caller owns (`ktiming run`'s per-process snapshots). 0, KT_EINVAL, KT_ENOMEM or KT_EIO
 * (errno set); on failure `from` is left where it was. */
KT_API int kt_output_place(const char *from, const char *to, unsigned flags);
/* 1 when a and b would write the same file (same inode, or the same resolved new path), else 0. */
KT_API int kt_output_same(const char *a, const char *b);

#ifdef __cplusplus
}
#endif

#endif
