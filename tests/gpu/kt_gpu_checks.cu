// kt_gpu_checks.cu — small CUDA programs for tests/gpu/run.sh, one per check of issue 36, run on a real GPU only
// (built by run.sh with nvcc; not part of the CMake build, which has no GPU). Each subcommand prints one line
// "PASS <check>: ..." or "FAIL <check>: ..." (or "INFO <check>: ..." for a measurement with no pass rule) and
// exits 0 on PASS/INFO, 1 on FAIL.
//   capture          a thread captures a graph in global mode while another thread times a kernel, calls
//                    kt_flush, kt_snapshot and a kt_cuda_timer: the capture must end with cudaSuccess and the
//                    span be recorded (no error)
//   held N           kt_cuda_time_held with N launches of a short kernel: returns 0, well inside the hold timeout
//   held-many N      kt_cuda_time_held of 64 trials that each launch N kernels (default 48: 32 trials would queue
//                    1,536, more than an H200's launch queue of ~1,021): returns 0 twice (the batch halves until it
//                    fits, then the context keeps it); one trial of 2,000 launches fails with KT_ETIMEDOUT naming the
//                    launch queue, and the stream works afterwards
//   queue-depth      how many launches the driver queues behind a spinning kernel before cuLaunchKernel blocks
//   reset [M]        spans in flight across cudaDeviceReset, then more spans: none is an error, no crash (run
//                    under compute-sanitizer by run.sh where it accepts the device); M=1 with kt_cuda_watch_resets
//                    (the 64 spans before are recorded, none dropped), M=2 under CUDA_INJECTION64_PATH (the
//                    injection library tells the backend; the program's kt_cuda_watch_resets(1) succeeds); a
//                    span open and a timer read across the reset answer KT_ESTATE
//   globaltimer      %globaltimer resolution and a calibration's bound (run.sh runs it with and without CUPTI)
//   calib S          calibrate, wait S seconds, compare a fresh globaltimer read with the model (to_host refreshes a
//                    model over 1 s old first) and its bound
//   devices          every device's name, UUID-derived label as ktiming keys it (the snapshot's device name)
//   graphs N MS      a graph of 3 kernels + a memset, launched N times, MS ms apart (for ktiming run / SIGKILL)
//   cupti-live MS    (under CUDA_INJECTION64_PATH) 100 kernels, then MS ms idle: all 100 CUPTI records reached the
//                    recorder while the program still runs
//   cupti-configs MS (under CUDA_INJECTION64_PATH) one kernel launched at two grid/block configurations (3 + 2
//                    times): its entry carries exactly these two configuration rows (issue 40.2)
//   cupti-bracket    (under CUDA_INJECTION64_PATH) each CUPTI kernel span lies within the host's bracket around
//                    its launch and synchronisation, widened by the span's stated bound
//   stamps S         KT_KERNEL_ENTER/EXIT stamps recorded every 250 ms for S s: each within its host bracket
//                    widened by its bound (the %globaltimer model is refreshed as it ages)
//   cupti-holder M   a profiler of the program subscribes to CUPTI with cuptiSubscribe_v2: M=0 (no injection) the
//                    slot is free; M=1 (under CUDA_INJECTION64_PATH) it is refused and CUPTI names the holder as
//                    the library named itself (src/shared/cupti_subscribe.h); INFO with what CUPTI wrote otherwise
//   ptds             (built with --default-stream per-thread) stream 0 spans and the timer use the per-thread
//                    stream: a span on stream 0 of thread 2 is not serialised behind thread 1's held work
#include <cuda.h>
#include <cuda_runtime.h>

#include <ktiming.h>
#include <ktiming/cuda.h>
#include <ktiming/cuda_device.cuh>

#include "../../src/shared/cupti_subscribe.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

__device__ unsigned long long gpu_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Spins until ns of %globaltimer passed, or (flag given) until *flag is set.
__device__ void spin_ns(unsigned long long ns, volatile unsigned *flag)
{
    unsigned long long t0 = gpu_now();
    while (!(flag && *flag) && gpu_now() - t0 < ns) {
    }
}

__global__ void kt_gpu_spin(unsigned long long ns)
{
    spin_ns(ns, nullptr);
}

__global__ void kt_gpu_add(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

static int result(bool ok, const char *check, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int result(bool ok, const char *check, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", check, msg);
    std::fflush(stdout);
    return ok ? 0 : 1;
}

// Sums over the snapshot's entries whose name starts with `prefix`.
struct totals {
    unsigned long long n, errors, dropped;
    char last_error[48];
    char device[160];
};
static totals snapshot_totals(const char *prefix)
{
    totals t = {};
    kt_snapshot_t *s = kt_snapshot();
    for (size_t i = 0; s && i < s->count; i++) {
        const kt_kernel_timing_t *e = &s->entries[i];
        if (std::strncmp(e->name, prefix, std::strlen(prefix)) != 0)
            continue;
        t.n += e->dispatch_count;
        t.errors += e->errors;
        t.dropped += e->dropped;
        if (e->last_error[0])
            std::snprintf(t.last_error, sizeof t.last_error, "%s", e->last_error);
        std::snprintf(t.device, sizeof t.device, "%s", e->device ? e->device : "");
    }
    kt_snapshot_free(s);
    return t;
}

// ---- capture ------------------------------------------------------------------------------------------------
static std::atomic<int> g_phase{0};
static cudaError_t g_end_capture = cudaErrorUnknown;
static cudaStream_t g_cap_stream;

static void *capture_thread(void *)
{
    cudaStreamBeginCapture(g_cap_stream, cudaStreamCaptureModeGlobal);
    kt_gpu_spin<<<1, 1, 0, g_cap_stream>>>(1000);
    g_phase.store(1);
    while (g_phase.load() != 2)
        usleep(100);
    cudaGraph_t graph = nullptr;
    g_end_capture = cudaStreamEndCapture(g_cap_stream, &graph);
    if (graph) {
        cudaGraphExec_t exec = nullptr;
        if (cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
            cudaGraphLaunch(exec, g_cap_stream);
            cudaStreamSynchronize(g_cap_stream);
            cudaGraphExecDestroy(exec);
        }
        cudaGraphDestroy(graph);
    }
    return nullptr;
}

static int check_capture()
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&g_cap_stream, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaFree(nullptr);
    pthread_t th;
    pthread_create(&th, nullptr, capture_thread, nullptr);
    while (g_phase.load() != 1)
        usleep(100);
    // While the other thread captures in global mode: a span, a flush, a snapshot and a timer.
    kt_cuda_span_t span;
    int rb = kt_cuda_begin(&span, nullptr, s, "capture_other_stream");
    kt_gpu_spin<<<1, 1, 0, s>>>(200000);
    int re = kt_cuda_end(&span);
    kt_cuda_timer_t timer;
    int rt = kt_cuda_timer_init(&timer, nullptr, s);
    kt_cuda_timer_start(&timer);
    kt_gpu_spin<<<1, 1, 0, s>>>(1000);
    kt_cuda_timer_stop(&timer);
    kt_flush();
    kt_snapshot_free(kt_snapshot());
    g_phase.store(2);
    pthread_join(th, nullptr);
    double ms = kt_cuda_timer_elapsed_ms(&timer);
    kt_cuda_timer_destroy(&timer);
    cudaStreamSynchronize(s);
    kt_flush();
    totals t = snapshot_totals("capture_other_stream");
    return result(g_end_capture == cudaSuccess && rb == 0 && re == 0 && rt == 0 && t.n == 1 && t.errors == 0,
                  "capture", "cudaStreamEndCapture=%s; span begin=%d end=%d recorded=%llu errors=%llu (%s); "
                  "timer init=%d %.3f ms",
                  cudaGetErrorName(g_end_capture), rb, re, t.n, t.errors, t.last_error, rt, ms);
}

// ---- the driver's launch queue behind a spinning kernel ----------------------------------------------------------
// A kernel spins on host-mapped memory; the host launches up to 4096 tiny kernels behind it on the same stream
// while a watchdog thread notes after 1 s how many launches had returned, then releases the spinner. Fewer than
// 4096 means cuLaunchKernel blocked there: the queue was full (what the held stream's batches of 32 avoid).
__global__ void kt_gpu_wait_flag(volatile unsigned *flag, unsigned long long timeout_ns)
{
    spin_ns(timeout_ns, flag);
}

static std::atomic<unsigned> g_launched{0};
static volatile unsigned *g_flag;
static unsigned g_seen_at_1s;

static void *queue_watchdog(void *)
{
    usleep(1000000);
    g_seen_at_1s = g_launched.load();
    *g_flag = 1;
    return nullptr;
}

static int check_queue_depth()
{
    enum { N = 4096 };
    unsigned *host = nullptr;
    if (cudaHostAlloc((void **)&host, 64, cudaHostAllocMapped) != cudaSuccess)
        return result(false, "queue-depth", "cudaHostAlloc failed");
    host[0] = 0;
    g_flag = host;
    unsigned *dev = nullptr;
    cudaHostGetDevicePointer((void **)&dev, host, 0);
    float *x = nullptr;
    cudaMalloc(&x, 4096);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    kt_gpu_add<<<1, 32, 0, s>>>(x, 32); // loaded before the hold
    cudaStreamSynchronize(s);
    kt_gpu_wait_flag<<<1, 1, 0, s>>>(dev, 5000000000ull);
    pthread_t th;
    pthread_create(&th, nullptr, queue_watchdog, nullptr);
    for (unsigned i = 0; i < N; i++) {
        kt_gpu_add<<<1, 32, 0, s>>>(x, 32);
        g_launched.store(i + 1);
    }
    pthread_join(th, nullptr);
    cudaStreamSynchronize(s);
    std::printf("INFO queue-depth: %u of %u launches behind a spinning kernel had returned after 1 s (%s)\n",
                g_seen_at_1s, (unsigned)N, g_seen_at_1s < N ? "the launch queue was full: cuLaunchKernel blocked"
                                                           : "no launch blocked");
    cudaFreeHost(host);
    cudaFree(x);
    return 0;
}

// ---- held -----------------------------------------------------------------------------------------------------
static int enqueue_adds(void *user, CUstream_st *stream, uint32_t trials)
{
    float *x = (float *)user;
    for (uint32_t i = 0; i < trials; i++)
        kt_gpu_add<<<1, 32, 0, (cudaStream_t)stream>>>(x, 32);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

static int check_held(unsigned trials)
{
    float *x = nullptr;
    cudaMalloc(&x, 32 * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    kt_cuda_held_t h = {};
    h.stream = (CUstream_st *)s;
    h.enqueue = enqueue_adds;
    h.user = x;
    uint64_t ns = 0;
    double t0 = now_s();
    int rc = kt_cuda_time_held(&h, trials, &ns);
    double wall = now_s() - t0;
    uint64_t ns2 = 0;
    double t1 = now_s();
    int rc2 = kt_cuda_time_held(&h, trials, &ns2);
    double wall2 = now_s() - t1;
    kt_cuda_held_t legacy = h;
    legacy.stream = nullptr;
    uint64_t ns3 = 0;
    int rc3 = kt_cuda_time_held(&legacy, 4, &ns3);
    char why[160];
    std::snprintf(why, sizeof why, "%s", rc3 ? kt_cuda_last_error() : "accepted");
    cudaFree(x);
    return result(rc == 0 && rc2 == 0 && wall < 5.0 && wall2 < 5.0, "held",
                  "%u launches: rc=%d %.1f us GPU (%.3f us/launch), %.3f s wall; again rc=%d %.1f us, %.3f s wall; "
                  "legacy stream: rc=%d (%s)",
                  trials, rc, ns / 1e3, ns / 1e3 / trials, wall, rc2, ns2 / 1e3, wall2, rc3, why);
}

// ---- held-many: trials of many launches each ----------------------------------------------------------------
struct many_job_t {
    float *x;
    unsigned per_trial; // launches per trial
};

static int enqueue_many(void *user, CUstream_st *stream, uint32_t trials)
{
    many_job_t *j = (many_job_t *)user;
    for (uint32_t i = 0; i < trials * j->per_trial; i++)
        kt_gpu_add<<<1, 32, 0, (cudaStream_t)stream>>>(j->x, 32);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

static int check_held_many(unsigned per_trial)
{
    many_job_t j = {nullptr, per_trial};
    cudaMalloc(&j.x, 32 * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    kt_cuda_held_t h = {};
    h.stream = (CUstream_st *)s;
    h.enqueue = enqueue_many;
    h.user = &j;
    uint64_t ns = 0, ns2 = 0, ns3 = 0;
    double t0 = now_s();
    int rc = kt_cuda_time_held(&h, 64, &ns);
    double wall = now_s() - t0;
    double t1 = now_s();
    int rc2 = kt_cuda_time_held(&h, 64, &ns2);
    double wall2 = now_s() - t1;
    j.per_trial = 2000;
    int rc3 = kt_cuda_time_held(&h, 2, &ns3);
    char why[200];
    std::snprintf(why, sizeof why, "%s", kt_cuda_last_error());
    bool named = std::strstr(why, "launch queue") != nullptr;
    j.per_trial = 1;
    uint64_t ns4 = 0;
    int rc4 = kt_cuda_time_held(&h, 4, &ns4);
    cudaStreamDestroy(s);
    cudaFree(j.x);
    return result(rc == 0 && rc2 == 0 && rc3 == KT_ETIMEDOUT && named && rc4 == 0, "held-many",
                  "64 x %u launches: rc=%d %.1f us GPU, %.3f s wall; again rc=%d %.1f us, %.3f s wall; 1 trial of "
                  "2000: rc=%d (%.80s); then 4 x 1: rc=%d",
                  per_trial, rc, ns / 1e3, wall, rc2, ns2 / 1e3, wall2, rc3, why, rc4);
}

// ---- reset ----------------------------------------------------------------------------------------------------
// mode 0: ktiming notices the reset by the context's id; 1: kt_cuda_watch_resets (CUPTI tells ktiming before
// the reset frees anything: the spans done by then are recorded, none dropped); 2: under CUDA_INJECTION64_PATH,
// where the injection library holds CUPTI's subscription and tells the backend itself (the backend's own watch
// must be refused, naming the other client)
static int check_reset(unsigned mode)
{
    const char *check = mode == 1 ? "reset-watch" : mode == 2 ? "reset-inject" : "reset";
    int watch = mode ? kt_cuda_watch_resets(1) : 0;
    if (mode == 1 && watch != 0)
        return result(false, check, "watch refused: %s", kt_cuda_last_error());
    if (mode == 2 && watch != 0) // the injection library watches and says so: the program's call succeeds
        return result(false, check, "the backend's watch beside the injection library: rc=%d (%s)", watch,
                      kt_cuda_last_error());
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; i < 64; i++) {
        kt_cuda_span_t span;
        kt_cuda_begin(&span, nullptr, s, "reset_before");
        kt_gpu_spin<<<1, 1, 0, s>>>(20000);
        kt_cuda_end(&span);
    }
    // a span left open and a timer read across the reset: ended/read after it, they touch no freed event (the
    // end asks the context's id itself; compute-sanitizer would report a call on a freed event)
    kt_cuda_span_t open_span;
    kt_cuda_begin(&open_span, nullptr, s, "reset_open");
    kt_cuda_timer_t t = {};
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    usleep(300);
    cudaError_t e = cudaDeviceReset();
    int end_rc = kt_cuda_end(&open_span);
    double timer_ms = 0.0;
    int timer_rc = kt_cuda_timer_elapsed(&t, &timer_ms);
    kt_cuda_timer_destroy(&t);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; i < 64; i++) {
        kt_cuda_span_t span;
        kt_cuda_begin(&span, nullptr, s, "reset_after");
        kt_gpu_spin<<<1, 1, 0, s>>>(2000);
        kt_cuda_end(&span);
    }
    cudaStreamSynchronize(s);
    kt_flush();
    totals b = snapshot_totals("reset_before"), a = snapshot_totals("reset_after");
    bool told = mode == 0 || (b.n == 64 && b.dropped == 0); // told in time: collected inside the callback
    return result(e == cudaSuccess && b.errors == 0 && a.errors == 0 && a.n == 64 && b.n + b.dropped == 64 && told &&
                  end_rc == KT_ESTATE && timer_rc == KT_ESTATE,
                  check, "cudaDeviceReset=%s; before: recorded %llu dropped %llu errors %llu (%s); after: "
                  "recorded %llu errors %llu; open span's end %d, timer's read %d (both KT_ESTATE %d)",
                  cudaGetErrorName(e), b.n, b.dropped, b.errors, b.last_error, a.n, a.errors, end_rc, timer_rc,
                  KT_ESTATE);
}

// ---- globaltimer / calibration ---------------------------------------------------------------------------------
static int check_globaltimer()
{
    cudaFree(nullptr);
    uint64_t res = 0;
    int rc = kt_cuda_globaltimer_resolution(nullptr, &res);
    kt_clock_model_t m;
    kt_clock_domain_t dom = KT_DOMAIN_UNKNOWN;
    int rc2 = kt_cuda_calibrate(nullptr, 64, KT_FIT_WEIGHTED, &m, &dom);
    std::printf("INFO globaltimer: resolution rc=%d %llu ns (CUPTI %s); calibrate rc=%d domain %s\n", rc,
                (unsigned long long)res, getenv("CUDA_INJECTION64_PATH") ? "on" : "off", rc2,
                kt_clock_domain_name(dom));
    return rc == 0 && rc2 == 0 ? 0 : 1;
}

static int check_calib(unsigned wait_s)
{
    cudaFree(nullptr);
    kt_clock_model_t m;
    kt_clock_domain_t dom = KT_DOMAIN_UNKNOWN;
    int rc = kt_cuda_calibrate(nullptr, 64, KT_FIT_WEIGHTED, &m, &dom);
    if (rc)
        return result(false, "calib", "kt_cuda_calibrate rc=%d %s", rc, kt_cuda_last_error());
    sleep(wait_s);
    unsigned worst_err = 0, worst_unc = 0, over = 0;
    for (int i = 0; i < 20; i++) {
        uint64_t h0 = kt_now_ns(), dev = 0;
        int r = kt_cuda_globaltimer_read(nullptr, &dev);
        uint64_t h1 = kt_now_ns();
        uint64_t host = 0, unc = 0;
        if (r || kt_cuda_globaltimer_to_host(nullptr, dev, &host, &unc))
            return result(false, "calib", "read rc=%d %s", r, kt_cuda_last_error());
        // the read happened inside [h0, h1]: the model's host time must be within unc of that bracket
        uint64_t err = host < h0 ? h0 - host : host > h1 ? host - h1 : 0;
        if (err > unc)
            over++;
        if (err > worst_err)
            worst_err = (unsigned)err;
        if (unc > worst_unc)
            worst_unc = (unsigned)unc;
    }
    return result(over == 0, "calib", "after %u s: worst distance from the read's bracket %u ns, worst stated "
                  "bound %u ns, %u of 20 outside their bound (domain %s)",
                  wait_s, worst_err, worst_unc, over, kt_clock_domain_name(dom));
}

// ---- spans against host brackets ----------------------------------------------------------------------------
// Every span of entries named `prefix` (sorted by start, as the snapshot keeps them) must lie inside the host's
// bracket [h0[i], h1[i]] around the launch and the synchronisation of launch i, widened by its stated bound.
static int bracket_check(const char *check, const char *prefix, const uint64_t *h0, const uint64_t *h1, unsigned n)
{
    kt_snapshot_t *s = kt_snapshot();
    unsigned k = 0, outside = 0;
    uint64_t worst_unc = 0, min_unc = UINT64_MAX, worst_gap = 0;
    for (size_t i = 0; s && i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (std::strncmp(s->entries[sp->entry].name, prefix, std::strlen(prefix)) != 0 || k >= n)
            continue;
        uint64_t u = sp->uncertainty_ns;
        uint64_t gap = sp->start_ns + u < h0[k] ? h0[k] - sp->start_ns : sp->end_ns > h1[k] + u ? sp->end_ns - h1[k] : 0;
        if (sp->start_ns + u < h0[k] || sp->end_ns > h1[k] + u)
            outside++;
        if (gap > worst_gap)
            worst_gap = gap;
        if (u > worst_unc)
            worst_unc = u;
        if (u < min_unc)
            min_unc = u;
        k++;
    }
    kt_snapshot_free(s);
    return result(k == n && outside == 0, check, "%u of %u spans placed; %u outside their host bracket widened by "
                  "their bound (worst by %llu ns); stated bounds %llu..%llu ns",
                  k, n, outside, (unsigned long long)worst_gap, (unsigned long long)(k ? min_unc : 0),
                  (unsigned long long)worst_unc);
}

// CUPTI's records (under CUDA_INJECTION64_PATH): 20 kernels, each launched and synchronised between host reads.
static int check_cupti_bracket()
{
    if (!getenv("CUDA_INJECTION64_PATH"))
        return result(false, "cupti-bracket", "run it with CUDA_INJECTION64_PATH");
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    kt_gpu_spin<<<1, 1, 0, s>>>(1000); // warm-up (module load)
    cudaStreamSynchronize(s);
    enum { N = 20 };
    uint64_t h0[N], h1[N];
    for (int i = 0; i < N; i++) {
        h0[i] = kt_now_ns();
        kt_gpu_spin<<<1, 1, 0, s>>>(20000);
        cudaStreamSynchronize(s);
        h1[i] = kt_now_ns();
        usleep(20000);
    }
    usleep(400000); // the flusher delivers them
    // the warm-up kernel is the first kt_gpu_spin span: skip it by bracketing it too
    uint64_t b0[N + 1], b1[N + 1];
    b0[0] = 0;
    b1[0] = h0[0];
    for (int i = 0; i < N; i++) {
        b0[i + 1] = h0[i];
        b1[i + 1] = h1[i];
    }
    return bracket_check("cupti-bracket", "kt_gpu_spin", b0, b1, N + 1);
}

// %globaltimer stamps (KT_KERNEL_ENTER/EXIT) recorded over S seconds: the calibration keeps its bound (the model is
// refreshed as it ages) and every stamped span lies in its host bracket.
__global__ void kt_gpu_stamped(unsigned long long ns)
{
    KT_KERNEL_ENTER();
    spin_ns(ns, nullptr);
    KT_KERNEL_EXIT();
}

static int check_stamps(unsigned seconds)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    kt_cuda_slots_t *slots = nullptr;
    if (kt_cuda_slots_create(&slots, nullptr, 1) != 0)
        return result(false, "stamps", "kt_cuda_slots_create: %s", kt_cuda_last_error());
    kt_gpu_stamped<<<1, 1, 0, s>>>(1000); // warm-up
    cudaStreamSynchronize(s);
    enum { MAXN = 64 };
    uint64_t h0[MAXN], h1[MAXN];
    unsigned n = seconds * 4 < MAXN ? seconds * 4 : MAXN;
    for (unsigned i = 0; i < n; i++) {
        kt_cuda_slot_bind(kt_cuda_slots_device_ptr(slots, 0), s);
        cudaStreamSynchronize(s);
        h0[i] = kt_now_ns();
        kt_gpu_stamped<<<4, 64, 0, s>>>(20000);
        cudaStreamSynchronize(s);
        h1[i] = kt_now_ns();
        if (kt_cuda_slots_record(slots, 0, "kt_stamped") != 0)
            return result(false, "stamps", "kt_cuda_slots_record: %s", kt_cuda_last_error());
        usleep(250000);
    }
    kt_cuda_slots_destroy(slots);
    return bracket_check("stamps", "kt_stamped", h0, h1, n);
}

// ---- devices ----------------------------------------------------------------------------------------------------
static int check_devices()
{
    int n = kt_cuda_device_count();
    for (int i = 0; i < n; i++) {
        kt_cuda_device_t d;
        if (kt_cuda_device_info(i, &d) == 0)
            std::printf("INFO device %d: %s cc %d.%d, %d SMs, driver %d, %s%s, PCI %s, key %s\n", i, d.name,
                        d.cc_major, d.cc_minor, d.sm_count, d.driver_version, d.uuid_text[0] ? d.uuid_text : "no UUID",
                        d.mig ? " (MIG instance)" : "", d.pci_bus_id[0] ? d.pci_bus_id : "unknown", d.key);
        cudaSetDevice(i);
        cudaStream_t s;
        cudaStreamCreate(&s);
        kt_cuda_span_t span;
        kt_cuda_begin(&span, nullptr, s, "devices_probe");
        kt_gpu_spin<<<1, 1, 0, s>>>(1000);
        kt_cuda_end(&span);
        cudaStreamSynchronize(s);
    }
    kt_flush();
    totals t = snapshot_totals("devices_probe");
    return result(n > 0 && t.n == (unsigned)n, "device-label", "%d device(s); spans recorded %llu, last device label "
                  "'%s'", n, t.n, t.device);
}

// ---- graphs (for ktiming run) ------------------------------------------------------------------------------
static int run_graphs(unsigned n, unsigned gap_ms)
{
    float *x = nullptr;
    cudaMalloc(&x, 1 << 20);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    kt_gpu_add<<<1024, 256, 0, s>>>(x, 1 << 18);
    cudaMemsetAsync(x, 0, 4096, s);
    kt_gpu_add<<<1024, 256, 0, s>>>(x, 1 << 18);
    kt_gpu_spin<<<1, 1, 0, s>>>(5000);
    cudaGraph_t g;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    cudaGraphExec_t exec;
    if (e != cudaSuccess || cudaGraphInstantiate(&exec, g, 0) != cudaSuccess)
        return result(false, "graphs", "capture failed: %s", cudaGetErrorName(e));
    for (unsigned i = 0; i < n; i++) {
        cudaGraphLaunch(exec, s);
        kt_gpu_add<<<1, 32, 0, s>>>(x, 32);
        if (i == 9) {
            cudaStreamSynchronize(s);
            std::printf("graphs: 10 launched\n");
            std::fflush(stdout);
        }
        if (gap_ms)
            usleep(gap_ms * 1000);
    }
    cudaStreamSynchronize(s);
    std::printf("graphs: %u launched\n", n);
    return 0;
}

// ---- CUPTI records arrive while the program runs (run under CUDA_INJECTION64_PATH) ----------------------------
// 100 kernels, then the program idles: a flush period alone returns only full buffers (a 1 MiB buffer holds ~4k
// kernel records), so without a flusher thread none of them reaches the recorder before exit; the injection
// library shares this process's libktiming, so kt_snapshot sees what CUPTI delivered so far.
static int check_cupti_live(unsigned wait_ms)
{
    float *x = nullptr;
    cudaMalloc(&x, 4096);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; i < 100; i++)
        kt_gpu_add<<<1, 32, 0, s>>>(x, 32);
    cudaStreamSynchronize(s);
    usleep(wait_ms * 1000);
    totals t = snapshot_totals("kt_gpu_add");
    cudaFree(x);
    if (!getenv("CUDA_INJECTION64_PATH"))
        return result(false, "cupti-live", "run it with CUDA_INJECTION64_PATH");
    return result(t.n == 100, "cupti-live", "%llu of 100 kernel records delivered %u ms after the last kernel "
                  "(program still running), dropped %llu", t.n, wait_ms, t.dropped);
}

// ---- launch configurations from CUPTI's kernel records (run under CUDA_INJECTION64_PATH; issue 40.2) --------------
__global__ void kt_gpu_cfg(float *x, int n)
{
    int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= 1.0001f;
}

// One kernel at two configurations: <<<64, 128>>> three times, <<<(4, 2, 1), (32, 4, 1)>>> twice. Its entry must
// carry exactly these two rows (groups = grid, local = block, 3 dimensions), with 3 and 2 dispatches.
static int check_cupti_configs(unsigned wait_ms)
{
    if (!getenv("CUDA_INJECTION64_PATH"))
        return result(false, "cupti-configs", "run it with CUDA_INJECTION64_PATH");
    float *x = nullptr;
    cudaMalloc(&x, 64 * 128 * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; i < 3; i++)
        kt_gpu_cfg<<<64, 128, 0, s>>>(x, 64 * 128);
    for (int i = 0; i < 2; i++)
        kt_gpu_cfg<<<dim3(4, 2, 1), dim3(32, 4, 1), 0, s>>>(x, 64 * 128);
    cudaStreamSynchronize(s);
    const kt_kernel_timing_t *e = nullptr;
    kt_snapshot_t *snap = nullptr;
    for (unsigned waited = 0; waited <= wait_ms; waited += 50) { // the flusher delivers within its period
        kt_snapshot_free(snap);
        snap = kt_snapshot();
        e = nullptr;
        for (size_t i = 0; snap && i < snap->count; i++)
            if (!std::strncmp(snap->entries[i].name, "kt_gpu_cfg", 10))
                e = &snap->entries[i];
        if (e && e->dispatch_count >= 5)
            break;
        usleep(50000);
    }
    static const unsigned long long want[2][7] = {{64, 1, 1, 128, 1, 1, 3}, {4, 2, 1, 32, 4, 1, 2}};
    int found[2] = {0, 0};
    char rows[320] = "";
    size_t len = 0;
    for (uint32_t i = 0; e && i < e->config_count; i++) {
        const kt_config_timing_t *c = &e->configs[i];
        len += (size_t)std::snprintf(rows + len, len < sizeof rows ? sizeof rows - len : 0,
                                     "%sgroups=%llux%llux%llu local=%llux%llux%llu x%llu mean %.3f us", i ? "; " : "",
                                     (unsigned long long)c->launch.size[0], (unsigned long long)c->launch.size[1],
                                     (unsigned long long)c->launch.size[2], (unsigned long long)c->launch.local[0],
                                     (unsigned long long)c->launch.local[1], (unsigned long long)c->launch.local[2],
                                     (unsigned long long)c->dispatch_count,
                                     c->dispatch_count ? (double)c->total_ns / (double)c->dispatch_count / 1e3 : 0.0);
        for (int w = 0; w < 2; w++)
            found[w] += c->launch.kind == KT_LAUNCH_GROUPS && c->launch.dims == 3 && c->launch.size[0] == want[w][0] &&
                        c->launch.size[1] == want[w][1] && c->launch.size[2] == want[w][2] &&
                        c->launch.local[0] == want[w][3] && c->launch.local[1] == want[w][4] &&
                        c->launch.local[2] == want[w][5] && c->dispatch_count == want[w][6];
    }
    bool ok = e && e->dispatch_count == 5 && e->config_count == 2 && found[0] == 1 && found[1] == 1;
    int rc = result(ok, "cupti-configs", "%llu dispatches of kt_gpu_cfg, %u configuration rows: %s",
                    e ? (unsigned long long)e->dispatch_count : 0ull, e ? e->config_count : 0u, rows);
    kt_snapshot_free(snap);
    cudaFree(x);
    cudaStreamDestroy(s);
    return rc;
}

// ---- per-thread default stream (built with --default-stream per-thread) -----------------------------------------
static int check_ptds()
{
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    cudaFree(nullptr);
    kt_cuda_span_t span;
    int rb = kt_cuda_begin(&span, nullptr, 0, "ptds_span");
    kt_gpu_spin<<<1, 1>>>(1000);
    int re = kt_cuda_end(&span);
    kt_cuda_timer_t t = {};
    kt_cuda_timer_start(&t);
    kt_gpu_spin<<<1, 1>>>(100000);
    kt_cuda_timer_stop(&t);
    double ms = kt_cuda_timer_elapsed_ms(&t);
    kt_cuda_timer_destroy(&t);
    cudaDeviceSynchronize();
    kt_flush();
    totals tt = snapshot_totals("ptds_span");
    // the timer's events are on the per-thread stream with the 100 us kernel: >= 0.09 ms
    return result(rb == 0 && re == 0 && tt.n == 1 && ms >= 0.09, "ptds", "span recorded %llu; timer %.3f ms "
                  "around a 100 us kernel on stream 0", tt.n, ms);
#else
    return result(false, "ptds", "not built with --default-stream per-thread");
#endif
}

// ---- who holds CUPTI's one subscription, as a profiler of the program is told (issue 36.5) ------------------------
static int check_cupti_holder(unsigned injected)
{
    cudaFree(nullptr); // the driver loads the injection library (if any) when CUDA initialises
    const char *path = getenv("KTIMING_CUPTI_LIBRARY");
    void *lib = dlopen(path && path[0] ? path : "libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen("/usr/local/cuda/lib64/libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    CUresult (*subscribe)(void **, void *, void *, kt__cupti_subscriber_params_t *) = nullptr;
    int (*unsubscribe)(void *) = nullptr;
    if (lib) {
        *(void **)&subscribe = dlsym(lib, "cuptiSubscribe_v2");
        *(void **)&unsubscribe = dlsym(lib, "cuptiUnsubscribe");
    }
    if (!subscribe || !unsubscribe) {
        std::printf("INFO cupti-holder: no libcupti with cuptiSubscribe_v2 (%s)\n", lib ? "old CUPTI" : dlerror());
        return 0;
    }
    char holder[KT__CUPTI_HOLDER_NAME_LEN];
    kt__cupti_subscriber_params_t p = kt__cupti_subscriber_params("kt_gpu_checks", holder);
    void *sub = nullptr;
    int r = (int)subscribe(&sub, nullptr, nullptr, &p);
    holder[sizeof holder - 1] = '\0';
    if (r == 0)
        unsubscribe(sub);
    if (!injected)
        return result(r == 0, "cupti-holder", "without ktiming run: cuptiSubscribe_v2 %d (0: the slot is free)", r);
    if (r == 0)
        return result(false, "cupti-holder", "under the injection library the slot was free (it should hold it)");
    if (!std::strstr(holder, "ktiming run")) {
        std::printf("INFO cupti-holder: refused (%d); CUPTI named the holder \"%s\"\n", r, holder);
        return 0;
    }
    return result(true, "cupti-holder", "refused (%d); CUPTI named the holder \"%s\"", r, holder);
}

// The checks by name; `arg` is argv[2] as a number, or the check's default.
struct check_t {
    const char *name;
    int (*run)(unsigned arg);
    unsigned default_arg;
};
static int no_arg(int (*f)(), unsigned) { return f(); }
static const check_t kChecks[] = {
    {"capture", [](unsigned a) { return no_arg(check_capture, a); }, 0},
    {"held", check_held, 1000},
    {"held-many", check_held_many, 48},
    {"reset", check_reset, 0},
    {"globaltimer", [](unsigned a) { return no_arg(check_globaltimer, a); }, 0},
    {"calib", check_calib, 3},
    {"devices", [](unsigned a) { return no_arg(check_devices, a); }, 0},
    {"queue-depth", [](unsigned a) { return no_arg(check_queue_depth, a); }, 0},
    {"cupti-bracket", [](unsigned a) { return no_arg(check_cupti_bracket, a); }, 0},
    {"stamps", check_stamps, 4},
    {"cupti-live", check_cupti_live, 1000},
    {"cupti-configs", check_cupti_configs, 2000},
    {"ptds", [](unsigned a) { return no_arg(check_ptds, a); }, 0},
    {"cupti-holder", check_cupti_holder, 0},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s CHECK [N] | graphs N MS (checks: see the top of kt_gpu_checks.cu)\n", argv[0]);
        return 2;
    }
    const char *cmd = argv[1];
    if (!std::strcmp(cmd, "graphs"))
        return run_graphs(argc > 2 ? (unsigned)atoi(argv[2]) : 100, argc > 3 ? (unsigned)atoi(argv[3]) : 0);
    for (const check_t &c : kChecks) {
        if (std::strcmp(cmd, c.name) != 0)
            continue;
        kt_desc_t desc = {};
        kt_init(&desc);
        int rc = c.run(argc > 2 ? (unsigned)atoi(argv[2]) : c.default_arg);
        kt_shutdown();
        return rc;
    }
    std::fprintf(stderr, "unknown check %s\n", cmd);
    return 2;
}
