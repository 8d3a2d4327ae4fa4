// kt_cuda_device_check.cu — compiled to PTX by nvcc in the build; tests check the PTX holds what
// ktiming/cuda_device.cuh promises (%globaltimer reads, the min/max atomics, the block barrier, and the slot
// pointer under the plain name kt_cuda_slot_ptr that kt_cuda_slots_bind looks up).
#include <ktiming/cuda_device.cuh>

extern "C" __global__ void kt_check_stamped(const float *x, float *y, int n)
{
    KT_KERNEL_ENTER();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += x[i];
    KT_KERNEL_EXIT();
}

extern "C" __global__ void kt_check_early_exit(float *y, int n)
{
    KT_KERNEL_ENTER();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] *= 2.0f;
    KT_KERNEL_EXIT_WARP();
}

extern "C" __global__ void kt_check_timers(unsigned long long *out)
{
    out[0] = KT_GLOBALTIMER();
    out[1] = KT_CLOCK64();
}

// Keeps the header's batch kernel in this module.
void kt_check_launch_batch(unsigned long long *out, unsigned n, cudaStream_t s)
{
    kt_cuda_batch_timestamps<<<1, 1, 0, s>>>(out, n);
}
