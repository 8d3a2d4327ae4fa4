// reduce.comp — sum of n floats: one partial sum per 256-wide workgroup (ktiming demo kernel).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float v[]; };
layout(std430, binding = 1) writeonly buffer Out { float partial[]; };
layout(push_constant) uniform P { uint n; } p;
shared float s[256];
void main()
{
    uint i = gl_GlobalInvocationID.x, l = gl_LocalInvocationID.x;
    s[l] = i < p.n ? v[i] : 0.0;
    barrier();
    for (uint stride = 128u; stride > 0u; stride >>= 1u) {
        if (l < stride)
            s[l] += s[l + stride];
        barrier();
    }
    if (l == 0u)
        partial[gl_WorkGroupID.x] = s[0];
}
