// vadd.comp — c = a + b (entry point renamed to "vadd" at compile time, so the layer can name the kernel).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer C { float c[]; };
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length())
        c[i] = a[i] + b[i];
}
