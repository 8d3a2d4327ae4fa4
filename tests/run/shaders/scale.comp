// scale.comp — c *= k (push constant); entry point "main": the test names its pipeline with debug utils.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 2) buffer C { float c[]; };
layout(push_constant) uniform P { float k; } p;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length())
        c[i] = c[i] * p.k;
}
