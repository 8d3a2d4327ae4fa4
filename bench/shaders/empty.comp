#version 450
// empty.comp — a compute shader that does nothing (vulkan_latency: the submit-and-wait floor).
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Out { uint v[]; } o;
layout(push_constant) uniform Push { uint unused; } p;
void main() {}
