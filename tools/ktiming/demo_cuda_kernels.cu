// demo_cuda_kernels.cu — the kernels `ktiming demo` runs on CUDA devices. Compiled to PTX by nvcc at build time
// (tools/ktiming/cuda.cmake) and embedded in the CLI; the driver JIT-compiles it. extern "C": plain names for
// cuModuleGetFunction.

extern "C" __global__ void kt_demo_saxpy(float a, const float *x, float *y, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

extern "C" __global__ void kt_demo_scale(float a, float *y, unsigned int n)
{
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] *= a;
}
