// reduce.comp — sum of n floats: each 256-wide workgroup sums PER_THREAD * 256 consecutive values (each thread a
// strided run, then a shared-memory tree) into one partial sum (ktiming demo kernel).
#version 450
#define PER_THREAD 32u
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float v[]; };
layout(std430, binding = 1) writeonly buffer Out { float partial[]; };
layout(push_constant) uniform P { uint n; } p;
shared float s[256];
void main()
{
    uint l = gl_LocalInvocationID.x;
    uint base = gl_WorkGroupID.x * 256u * PER_THREAD + l;
    float acc = 0.0;
    for (uint k = 0u; k < PER_THREAD; k++) {
        uint i = base + k * 256u;
        if (i < p.n)
            acc += v[i];
    }
    s[l] = acc;
    barrier();
    for (uint stride = 128u; stride > 0u; stride >>= 1u) {
        if (l < stride)
            s[l] += s[l + stride];
        barrier();
    }
    if (l == 0u)
        partial[gl_WorkGroupID.x] = s[0];
}
