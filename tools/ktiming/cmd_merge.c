/* cmd_merge.c — `ktiming merge A.json B.json ... [-o all.json]`: several snapshots (ranks, processes, runs) into
 * one, with every source's spans kept and per-rank load balance available (`--by-rank`). */
#include "cli.h"

#include "analysis/by_rank.h"       /* --by-rank from what it reads of each entry, kept as they are merged */
#include "analysis/merge_consume.h" /* the merge made and written an entry at a time, its inputs released */

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <ktiming/analysis.h>

static void merge_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming merge A.json B.json ... [-o OUT.json] [--by-rank] [--by-model]\n"
            "                     [--trace OUT.trace.json] [--allow-same-process] [--max-input-mb N]\n"
            "\n"
            "Merges snapshots (e.g. one per MPI rank: `mpirun -np 4 ktiming run -o prof-%%r.json -- ./app`, then\n"
            "`ktiming merge prof-*.json -o all.json`). Entries with the same (kernel, backend, device) are merged\n"
            "exactly (counts, totals, min/max, mean, stddev; percentiles from the summed histograms); every input\n"
            "becomes a source with its own process group in the timeline. Snapshots of another host keep their\n"
            "own clock (offset unknown); the MPI library (libktiming_mpi) aligns ranks' clocks itself.\n"
            "A snapshot of the Node WebGPU package (CLOCK_MONOTONIC) is put on a C snapshot's timeline of its host\n"
            "(CLOCK_MONOTONIC_RAW) through that snapshot's clock anchor, its spans' uncertainty grown by the\n"
            "anchor's bound and 500 ppm of their distance from it; where no anchor serves, one line says so and it\n"
            "keeps its own clock, marked in the output (sources[].offset_bound_ns unknown).\n"
            "Devices are kept apart by (host, device id): \"GPU 0\" of two nodes, or two GPUs of one model, stay\n"
            "two devices with their own entries, labelled uniquely (docs/devices.md).\n"
            "\n"
            "  -o, --output OUT     write the merged snapshot (JSON) to OUT; default (and -): standard output,\n"
            "                       except with --by-rank, whose report is then all that is printed\n"
            "  -r, --by-rank        print the per-rank load-balance report on standard output (per kernel over\n"
            "                       every device it ran on, each rank's device named)\n"
            "  -m, --by-model       fold devices of one model together (one entry per kernel and model: a\n"
            "                       per-model summary instead of one entry per device)\n"
            "  -t, --trace OUT      write the merged timeline as a Chrome trace (one process group per source;\n"
            "                       - for standard output, with -o naming a file)\n"
            "  --allow-same-process merge inputs that hold the same process (host, pid, rank) anyway; refused by\n"
            "                       default: the same file twice, or a glob catching an earlier merge, would count\n"
            "                       its dispatches twice (only a reused pid makes two processes look the same)\n"
            "  --max-input-mb N     refuse an input larger than N MiB (default 1024)\n"
            "  -h, --help           this help\n"
            "\n"
            "exit status: 0 done, 1 unreadable or invalid snapshot or failed write, 2 usage error\n");
}

/* One process an input holds: the input itself, or each source of a merged input. */
static int same_process(const char *host_a, int64_t pid_a, int32_t rank_a, const char *host_b, int64_t pid_b,
                        int32_t rank_b)
{
    return pid_a != 0 && pid_a == pid_b && rank_a == rank_b && !strcmp(host_a, host_b);
}

/* The process at index k of input s: host, pid, rank (k < max(1, source_count)). */
static void process_of(const kt_snapshot_t *s, size_t k, const char **host, int64_t *pid, int32_t *rank)
{
    if (s->source_count) {
        *host = s->sources[k].host;
        *pid = s->sources[k].pid;
        *rank = s->sources[k].rank;
    } else {
        *host = s->host;
        *pid = s->pid;
        *rank = s->rank;
    }
}

/* 1 (and a message naming both files) when two inputs hold the same process: merging would count its
 * dispatches twice. */
static int report_same_process(kt_snapshot_t *const *in, size_t n, char *const *paths)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++)
            for (size_t i = 0; i < (in[a]->source_count ? in[a]->source_count : 1); i++)
                for (size_t j = 0; j < (in[b]->source_count ? in[b]->source_count : 1); j++) {
                    const char *ha, *hb;
                    int64_t pa, pb;
                    int32_t ra, rb;
                    process_of(in[a], i, &ha, &pa, &ra);
                    process_of(in[b], j, &hb, &pb, &rb);
                    if (!same_process(ha, pa, ra, hb, pb, rb))
                        continue;
                    /* the host name is not printed: it comes from the file (a name is escaped for a terminal
                     * only by the report writers) */
                    if (ra >= 0)
                        fprintf(stderr, "ktiming merge: %s and %s both hold rank %" PRId32 " (pid %" PRId64 ") of "
                                "the same host", paths[a], paths[b], ra, pa);
                    else
                        fprintf(stderr, "ktiming merge: %s and %s both hold process %" PRId64 " of the same host",
                                paths[a], paths[b], pa);
                    fprintf(stderr, ": merging would count its dispatches twice (the same file twice, or an earlier "
                                    "merge among the inputs?); --allow-same-process merges anyway\n");
                    return 1;
                }
    return 0;
}

/* One line per source of the result whose clock is not the merged timeline's and that no anchor placed: it kept its
 * own clock (offset unknown). nsrc[i]: sources input i gave (max(1, its source_count)). */
static void report_unaligned(const kt_snapshot_t *m, const size_t *nsrc, size_t n, char *const *paths)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < nsrc[i] && k < m->source_count; j++, k++) {
            const kt_source_info_t *so = &m->sources[k];
            if (!so->clock_domain[0] || !m->clock_domain[0] || !strcmp(so->clock_domain, m->clock_domain) ||
                so->offset_bound_ns != UINT64_MAX)
                continue;
            const char *why = strcmp(so->clock_domain, "CLOCK_MONOTONIC") || strcmp(m->clock_domain, "CLOCK_MONOTONIC_RAW")
                                  ? "no anchor relates the two clocks"
                              : strncmp(so->host, m->host, sizeof so->host)
                                  ? "it is from another host than the first input"
                                  : "no snapshot of its host among the inputs has a clock anchor (older ktiming?)";
            /* the clock names come from the files: printed only when they are plain names */
            int plain = strspn(so->clock_domain, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.") ==
                        strlen(so->clock_domain);
            fprintf(stderr, "ktiming merge: %s: host times on %s, not the merged timeline's %s: %s; merged with its "
                            "offset unknown (sources[%zu])\n",
                    paths[i], plain ? so->clock_domain : "another clock", m->clock_domain, why, k);
        }
}

/* The by-rank report's failure rc (err: errno after it) said in one line. */
static void by_rank_failed(int rc, int err)
{
    if (rc == KT_EIO)
        fprintf(stderr, "ktiming merge: cannot write standard output: %s\n", strerror(err));
    else
        fprintf(stderr, "ktiming merge: by-rank report: %s\n", kt_strerror(rc));
}

/* The merge written as it is made, each entry as soon as it is merged (merge_consume.h): no array of merged
 * entries is held. The merged snapshot (JSON) to out_path (NULL or "-": standard output, unless by_rank), and with
 * by_rank the by-rank report on standard output after it, from what it reads of each entry (by_rank.h). The same
 * bytes and messages as the merge made whole, then written. Returns the exit status. */
static int merge_streamed(kt_snapshot_t *const *in, size_t n, int by_model, int by_rank, const char *out_path,
                          const size_t *nsrc, char *const *paths)
{
    kt__merge_iter_t *it = NULL;
    kt__by_rank_t *keep = NULL;
    int rc = kt__merge_begin((const kt_snapshot_t *const *)in, in, n, &(kt_merge_opts_t){.by_model = by_model}, &it);
    if (!rc && by_rank && !(keep = kt__by_rank_new(kt__merge_count(it)))) {
        kt__merge_end(it);
        rc = KT_ENOMEM;
    }
    if (rc) {
        fprintf(stderr, "ktiming merge: %s\n", kt_strerror(rc));
        kt__by_rank_free(keep);
        return 1;
    }
    const kt_snapshot_t *meta = kt__merge_result(it);
    report_unaligned(meta, nsrc, n, paths);
    kt__by_rank_keeping_t k = {.rc = 0};
    kt__entry_view_t v;
    kt__merge_view(it, &v);
    if (keep) { /* each entry kept for the report as the writer asks for it */
        kt__by_rank_keeping(&k, &v, keep);
        v = k.view;
    }
    const char *target = out_path && strcmp(out_path, "-") ? out_path : NULL;
    if (target)
        rc = kt__report_write_view(target, meta, &v, KT_FORMAT_JSON, NULL);
    else if (!by_rank)
        rc = kt__report_print_view(stdout, meta, &v, KT_FORMAT_JSON, NULL);
    else /* the report only: the entries made and kept, not written */
        for (size_t i = 0; i < v.count && !rc; i++) {
            kt_kernel_timing_t tmp;
            rc = kt__view_entry(&v, i, &tmp) ? 0 : KT_ENOMEM;
        }
    int err = errno, merge_rc = kt__merge_status(it), status = 1;
    if (merge_rc) /* the merge failed, not the write (the output left as a failed write leaves it) */
        fprintf(stderr, "ktiming merge: %s\n", kt_strerror(merge_rc));
    else if (rc)
        fprintf(stderr, "ktiming merge: cannot write %s: %s\n", target ? target : "standard output",
                rc == KT_EIO ? strerror(err) : kt_strerror(rc));
    else if (keep && ((rc = k.rc) || (rc = kt__by_rank_print(stdout, meta, keep))))
        by_rank_failed(rc, errno);
    else
        status = 0;
    kt__merge_end(it);
    kt__by_rank_free(keep);
    return status;
}

int ktcli_cmd_merge(int argc, char **argv)
{
    static const struct option kLong[] = {
        KTCLI_OPT_OUTPUT, {"by-rank", no_argument, NULL, 'r'}, {"by-model", no_argument, NULL, 'm'},
        {"trace", required_argument, NULL, 't'}, {"allow-same-process", no_argument, NULL, 'S'},
        {"max-input-mb", required_argument, NULL, 'M'}, KTCLI_OPT_HELP, KTCLI_OPT_END};
    const char *out_path = NULL, *trace_path = NULL;
    int by_rank = 0, by_model = 0, allow_same = 0, c;
    size_t max_input = (size_t)KTCLI_MAX_INPUT_MB_DEFAULT << 20; /* each input's */
    ktcli_getopt_begin();
    while ((c = getopt_long(argc, argv, ":o:rmt:h", kLong, NULL)) != -1) {
        switch (c) {
        case 'o': out_path = optarg; break;
        case 'r': by_rank = 1; break;
        case 'm': by_model = 1; break;
        case 't': trace_path = optarg; break;
        case 'S': allow_same = 1; break;
        case 'M':
            if (ktcli_parse_max_input_mb(optarg, &max_input))
                return ktcli_usage_error("merge", "--max-input-mb: not a size in MiB (1..1048576): '%s'", optarg);
            break;
        case 'h': merge_usage(stdout); return 0;
        default: return ktcli_getopt_error("merge", c, argc, argv);
        }
    }
    size_t n = (size_t)(argc - optind);
    if (n < 1)
        return ktcli_usage_error("merge", "no snapshot file given");
    /* "-" is standard output, which takes one of the three: nothing asked for is dropped silently */
    int out_stdout = !out_path || !strcmp(out_path, "-");
    if (by_rank && out_path && !strcmp(out_path, "-"))
        return ktcli_usage_error("merge", "-o - and --by-rank both write standard output: give -o a file");
    if (trace_path && !strcmp(trace_path, "-") && (by_rank || out_stdout))
        return ktcli_usage_error("merge", "--trace - and %s both write standard output: give %s a file",
                                 by_rank ? "--by-rank" : "the merged snapshot", by_rank ? "--trace" : "-o");
    kt_snapshot_t **in = calloc(n, sizeof *in), *merged = NULL;
    size_t *nsrc = calloc(n, sizeof *nsrc);
    int rc = in && nsrc ? 0 : KT_ENOMEM, status = 1;
    char err[512];
    if (!rc && (rc = kt_snapshot_load_many_opts((const char *const *)argv + optind, n,
                                                         &(kt_load_opts_t){.max_bytes = max_input}, in, 0, err,
                                                         sizeof err)))
        fprintf(stderr, "ktiming merge: %s\n", err);
    for (size_t i = 0; !rc && i < n; i++)
        nsrc[i] = in[i]->source_count ? in[i]->source_count : 1;
    if (!rc && !allow_same && report_same_process(in, n, argv + optind))
        rc = KT_EINVAL;
    else if (!rc && !trace_path) {
        status = merge_streamed(in, n, by_model, by_rank, out_path, nsrc, argv + optind);
        rc = KT_EINVAL; /* done: the inputs are freed below */
    } else if (!rc && (rc = kt__snapshot_merge_consume(in, n, &(kt_merge_opts_t){.by_model = by_model}, &merged)))
        fprintf(stderr, "ktiming merge: %s\n", kt_strerror(rc));
    else if (!rc)
        report_unaligned(merged, nsrc, n, argv + optind);
    for (size_t i = 0; in && i < n; i++)
        kt_snapshot_free(in[i]);
    free(in);
    free(nsrc);
    if (rc)
        return status;
    const char *target = out_path && strcmp(out_path, "-") ? out_path : NULL;
    if (target)
        rc = kt_report_write(target, merged, KT_FORMAT_JSON, NULL);
    else if (!by_rank)
        rc = kt_report_print(stdout, merged, KT_FORMAT_JSON, NULL);
    if (rc) {
        fprintf(stderr, "ktiming merge: cannot write %s: %s\n", target ? target : "standard output",
                rc == KT_EIO ? strerror(errno) : kt_strerror(rc));
        goto done;
    }
    if (trace_path) {
        int trace_stdout = !strcmp(trace_path, "-");
        rc = trace_stdout ? kt_report_print(stdout, merged, KT_FORMAT_CHROME, NULL)
                          : kt_report_write(trace_path, merged, KT_FORMAT_CHROME, NULL);
        if (!rc && trace_stdout && fflush(stdout) != 0)
            rc = KT_EIO;
        if (rc) {
            fprintf(stderr, "ktiming merge: cannot write %s: %s\n", trace_stdout ? "standard output" : trace_path,
                    rc == KT_EIO ? strerror(errno) : kt_strerror(rc));
            goto done;
        }
    }
    if (by_rank && (rc = kt_report_by_rank(stdout, merged))) {
        by_rank_failed(rc, errno);
        goto done;
    }
    status = 0;
done:
    kt_snapshot_free(merged);
    return status;
}
