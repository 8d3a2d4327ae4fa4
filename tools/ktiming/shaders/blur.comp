// blur.comp — 3x3 box blur of a w x h float image, edges clamped (ktiming demo kernel).
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform P { uint w; uint h; } p;
void main()
{
    uint x = gl_GlobalInvocationID.x, y = gl_GlobalInvocationID.y;
    if (x >= p.w || y >= p.h)
        return;
    float sum = 0.0;
    for (int dy = -1; dy <= 1; dy++) {
        uint yy = uint(clamp(int(y) + dy, 0, int(p.h) - 1));
        for (int dx = -1; dx <= 1; dx++) {
            uint xx = uint(clamp(int(x) + dx, 0, int(p.w) - 1));
            sum += src[yy * p.w + xx];
        }
    }
    dst[y * p.w + x] = sum / 9.0;
}
