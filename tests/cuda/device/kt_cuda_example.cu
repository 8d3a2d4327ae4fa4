// kt_cuda_example.cu — compile-and-link test of device and host code together (nvcc + cudart_static +
// libktiming): a kernel stamped with KT_KERNEL_ENTER/EXIT, timed with kt_cuda_begin/end, its stamps bound with
// the runtime helper and recorded. On a machine without an NVIDIA driver it says why and exits 77 (skipped):
// tests/gpu/run.sh requires it to run (not skip) on a GPU.
#include <cuda_runtime.h>

#include <ktiming.h>
#include <ktiming/cuda.h>
#include <ktiming/cuda_device.cuh>

#include <cstdio>

__global__ void kt_example_saxpy(float a, const float *x, float *y, int n)
{
    KT_KERNEL_ENTER();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
    KT_KERNEL_EXIT();
}

int main()
{
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    int rc = kt_cuda_init(NULL);
    if (e != cudaSuccess || devices == 0 || rc != 0) {
        std::printf("CUDA unavailable: runtime: %s; ktiming: %s (%s)\n", cudaGetErrorName(e), kt_strerror(rc),
                    kt_cuda_last_error());
        return (e != cudaSuccess && rc == KT_EUNAVAILABLE) ? 77 : 1;
    }
    const int n = 1 << 20;
    float *x = nullptr, *y = nullptr;
    if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess || cudaMalloc(&y, n * sizeof(float)) != cudaSuccess)
        return 1;
    cudaMemset(x, 0, n * sizeof(float));
    cudaMemset(y, 0, n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreate(&s);
    kt_cuda_slots_t *slots = nullptr;
    if (kt_cuda_slots_create(&slots, nullptr, 16) != 0)
        return 1;
    for (int i = 0; i < 16; i++) {
        kt_cuda_span_t span;
        kt_cuda_slot_bind(kt_cuda_slots_device_ptr(slots, (uint32_t)i), s);
        kt_cuda_begin(&span, nullptr, s, "saxpy");
        kt_example_saxpy<<<(n + 255) / 256, 256, 0, s>>>(2.0f, x, y, n);
        kt_cuda_end(&span);
    }
    cudaStreamSynchronize(s);
    for (int i = 0; i < 16; i++)
        kt_cuda_slots_record(slots, (uint32_t)i, "saxpy (stamps)");
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    for (size_t i = 0; snap && i < snap->count; i++)
        std::printf("%-16s %-6s n=%llu mean=%.3f us min=%.3f us\n", snap->entries[i].name,
                    kt_backend_name(snap->entries[i].backend), (unsigned long long)snap->entries[i].dispatch_count,
                    snap->entries[i].mean_ns / 1e3, snap->entries[i].min_ns / 1e3);
    kt_snapshot_free(snap);
    kt_cuda_slots_destroy(slots);
    cudaStreamDestroy(s);
    cudaFree(x);
    cudaFree(y);
    kt_cuda_shutdown();
    return 0;
}
