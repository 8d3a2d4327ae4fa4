/* ktiming/cuda_device.cuh — device-side timing for CUDA kernels (nvcc): %globaltimer reads, entry/exit stamps
 * injected into a slot buffer without changing the kernel's signature, and a batch-timestamp kernel.
 *
 *     #include <ktiming/cuda_device.cuh>
 *     __global__ void blur(const float *in, float *out) {
 *         KT_KERNEL_ENTER();          // first statement: earliest block entry → slot.enter_ns
 *         ...                         // the kernel, unchanged
 *         KT_KERNEL_EXIT();           // last statement, reached by every thread of the block
 *     }
 *     // host, driver API:  kt_cuda_slots_bind(slots, module, stream, i); cuLaunchKernel(...);
 *     // host, runtime API: kt_cuda_slot_bind(kt_cuda_slots_device_ptr(slots, i), stream); blur<<<...>>>(...);
 *     // later:             kt_cuda_slots_record(slots, i, "blur");   // mapped to host time via calibration
 *
 * Why a module variable and not a "parameter slot 0": injecting a `long *timestamps` first parameter
 * changes every kernel signature and every launch site, and breaks kernels launched by code you do not own.
 * Here each module (translation unit) has one `__device__` pointer, kt_cuda_slot_ptr, that the host sets with a
 * stream-ordered copy just before the launch (cuModuleGetGlobal/cudaMemcpyToSymbolAsync), so successive launches
 * on a stream each see their own slot and the kernel's parameters stay as they are. The costs: two small async
 * copies per bound launch, and one launch per stream between binds (launches on different streams racing for
 * the same module variable must use KT_KERNEL_ENTER_AT(ptr)/KT_KERNEL_EXIT_AT(ptr) with a pointer you pass, which
 * is that older scheme, kept for that case). When no slot is bound (kt_cuda_slot_ptr NULL) the macros do nothing.
 *
 * Stamps are %globaltimer values (ns, update granularity GPU-dependent, 1 us has been seen): enter_ns is the
 * minimum over blocks of thread 0's read at KT_KERNEL_ENTER (one atomicMin per block, skipped when a smaller
 * value is already there); exit_ns the maximum over blocks after __syncthreads() at KT_KERNEL_EXIT (one atomicMax
 * per block). KT_KERNEL_EXIT needs every thread of the block to reach it (it synchronises the block); for kernels
 * whose threads return early use KT_KERNEL_EXIT_WARP (one atomic per warp, no block barrier).
 *
 * kt_cuda_slot_ptr is `static __device__`: each translation unit has its own, so including this header in many
 * files never clashes. In whole-program compilation (nvcc's default) its PTX/cubin name is plain
 * "kt_cuda_slot_ptr", which kt_cuda_slots_bind() finds with cuModuleGetGlobal. With -rdc=true nvcc renames
 * static variables per file: bind through the runtime helper below (the runtime knows the name) or pass your
 * own pointer with the *_AT macros.
 */
#ifndef KTIMING_CUDA_DEVICE_CUH
#define KTIMING_CUDA_DEVICE_CUH

#if !defined(__CUDACC__)
#error "ktiming/cuda_device.cuh is for CUDA translation units (nvcc); host code includes <ktiming/cuda.h>"
#endif

#include <stdint.h>

/* One launch's stamps; same layout as kt_cuda_stamp_t in <ktiming/cuda.h>. */
typedef struct kt_cuda_slot_t {
    unsigned long long enter_ns; /* earliest block entry (reset to ~0 by the host) */
    unsigned long long exit_ns;  /* latest block exit (reset to 0 by the host) */
} kt_cuda_slot_t;

/* This translation unit's slot pointer, set by the host before each bound launch (NULL: stamp nothing). */
static __device__ kt_cuda_slot_t *kt_cuda_slot_ptr = 0;

/* ---------------------------------------------------------------------------------------------------
 * Timer reads
 * ------------------------------------------------------------------------------------------------- */

/* %globaltimer: a 64-bit nanosecond counter shared by all SMs of the GPU. */
static __device__ __forceinline__ unsigned long long kt_globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define KT_GLOBALTIMER() kt_globaltimer()

/* The SM's cycle counter (per SM, not synchronised across SMs; cycles at the SM clock). */
#define KT_CLOCK64() ((unsigned long long)clock64())

/* ---------------------------------------------------------------------------------------------------
 * Entry/exit stamps
 * ------------------------------------------------------------------------------------------------- */

static __device__ __forceinline__ int kt__cuda_is_block_leader(void)
{
    return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

static __device__ __forceinline__ void kt_cuda_stamp_enter(kt_cuda_slot_t *slot)
{
    if (slot && kt__cuda_is_block_leader()) {
        unsigned long long t = kt_globaltimer();
        if (*(volatile unsigned long long *)&slot->enter_ns > t)
            atomicMin(&slot->enter_ns, t);
    }
}

static __device__ __forceinline__ void kt_cuda_stamp_exit(kt_cuda_slot_t *slot)
{
    __syncthreads();
    if (slot && kt__cuda_is_block_leader()) {
        unsigned long long t = kt_globaltimer();
        if (*(volatile unsigned long long *)&slot->exit_ns < t)
            atomicMax(&slot->exit_ns, t);
    }
}

/* Exit stamp without a block barrier: the lowest active lane of each warp stamps after its warp converges. */
static __device__ __forceinline__ void kt_cuda_stamp_exit_warp(kt_cuda_slot_t *slot)
{
    unsigned int active = __activemask();
    __syncwarp(active);
    unsigned int lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
    if (slot && lane == (unsigned int)(__ffs(active) - 1)) {
        unsigned long long t = kt_globaltimer();
        if (*(volatile unsigned long long *)&slot->exit_ns < t)
            atomicMax(&slot->exit_ns, t);
    }
}

#define KT_KERNEL_ENTER_AT(slot) kt_cuda_stamp_enter(slot)
#define KT_KERNEL_EXIT_AT(slot) kt_cuda_stamp_exit(slot)
#define KT_KERNEL_EXIT_WARP_AT(slot) kt_cuda_stamp_exit_warp(slot)
#define KT_KERNEL_ENTER() kt_cuda_stamp_enter(kt_cuda_slot_ptr)
#define KT_KERNEL_EXIT() kt_cuda_stamp_exit(kt_cuda_slot_ptr)
#define KT_KERNEL_EXIT_WARP() kt_cuda_stamp_exit_warp(kt_cuda_slot_ptr)

/* ---------------------------------------------------------------------------------------------------
 * Batch timestamps
 * ------------------------------------------------------------------------------------------------- */

/* Launch <<<1, 1>>>: one thread writes n consecutive %globaltimer reads (minimal skew between them; the smallest
 * non-zero step is the timer's update granularity). The host library has the same kernel as embedded PTX
 * (kt_cuda_globaltimer_batch), so driver-API programs need no nvcc. */
static __global__ void kt_cuda_batch_timestamps(unsigned long long *out, unsigned int n)
{
    for (unsigned int i = 0; i < n; i++)
        out[i] = kt_globaltimer();
}

/* ---------------------------------------------------------------------------------------------------
 * Runtime-API host helpers (this translation unit's kt_cuda_slot_ptr)
 * ------------------------------------------------------------------------------------------------- */
#if defined(__CUDA_RUNTIME_H__)
/* Bind a slot (device address from kt_cuda_slots_device_ptr) for the next launch on `stream` of a kernel
 * compiled in this translation unit: resets the slot and sets kt_cuda_slot_ptr, both stream-ordered. */
static inline cudaError_t kt_cuda_slot_bind(unsigned long long slot_addr, cudaStream_t stream)
{
    const kt_cuda_slot_t reset = {~0ull, 0ull};
    kt_cuda_slot_t *p = (kt_cuda_slot_t *)(uintptr_t)slot_addr;
    cudaError_t e = cudaMemcpyAsync(p, &reset, sizeof reset, cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess)
        return e;
    return cudaMemcpyToSymbolAsync(kt_cuda_slot_ptr, &p, sizeof p, 0, cudaMemcpyHostToDevice, stream);
}
/* Unbind: later launches of this translation unit's kernels stamp nothing. */
static inline cudaError_t kt_cuda_slot_unbind(cudaStream_t stream)
{
    kt_cuda_slot_t *p = 0;
    return cudaMemcpyToSymbolAsync(kt_cuda_slot_ptr, &p, sizeof p, 0, cudaMemcpyHostToDevice, stream);
}
#endif

#endif /* KTIMING_CUDA_DEVICE_CUH */
