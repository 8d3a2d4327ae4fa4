/* cl_layer_double.h — for the loader doubles of the layer tests: the entry points of the driver double
 * (fake_opencl.c) a loader puts into the target dispatch it hands to the layer. */
#ifndef KT_CL_LAYER_DOUBLE_H
#define KT_CL_LAYER_DOUBLE_H

#include <CL/cl_icd.h>
#include <dlfcn.h>

#define CL_LAYER_DOUBLE_FUNCS(X)                                                                                 \
    X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)             \
    X(clReleaseContext) X(clCreateCommandQueue) X(clCreateCommandQueueWithProperties) X(clRetainCommandQueue)    \
    X(clReleaseCommandQueue) X(clGetCommandQueueInfo) X(clFlush) X(clFinish) X(clCreateKernel) X(clReleaseKernel) \
    X(clSetKernelArg) X(clGetKernelInfo) X(clCreateBuffer) X(clReleaseMemObject) X(clEnqueueReadBuffer)          \
    X(clEnqueueWriteBuffer) X(clEnqueueNDRangeKernel) X(clEnqueueMarker) X(clEnqueueMarkerWithWaitList)          \
    X(clWaitForEvents) X(clGetEventInfo) X(clGetEventProfilingInfo) X(clRetainEvent) X(clReleaseEvent)           \
    X(clSetEventCallback) X(clCreateUserEvent) X(clSetUserEventStatus) X(clGetDeviceAndHostTimer)

/* Fills the dispatch table t from the double's handle h. */
static inline void cl_layer_double_fill(cl_icd_dispatch *t, void *h)
{
#define CL_LAYER_DOUBLE_ONE_(fn) *(void **)&t->fn = dlsym(h, #fn);
    CL_LAYER_DOUBLE_FUNCS(CL_LAYER_DOUBLE_ONE_)
#undef CL_LAYER_DOUBLE_ONE_
}

#endif
