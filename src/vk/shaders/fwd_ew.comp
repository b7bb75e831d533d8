// SPDX-License-Identifier: MIT
// Elementwise ops over n floats (index = (group y * groups x + group x) * 64 + thread):
//   mode 0: d *= sigmoid(s)                     (the attention output gate)
//   mode 1: d = silu(d) * s                     (SwiGLU: d the gate, s the up projection)
//   mode 2: d = cap * tanh(d * scale / cap), or d * scale when cap == 0 (logit scale, soft-cap)
// Same float steps as backend_cpu.c's rows_run / cap_span; exp and tanh are the device's.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer DBuf { float d[]; };
layout(std430, set = 0, binding = 1) readonly buffer SBuf { float s[]; };
layout(push_constant) uniform Push {
    uint n;
    uint mode;
    float scale;
    float cap;
} p;

void main()
{
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u +
             gl_LocalInvocationID.x;
    if (i >= p.n)
        return;
    if (p.mode == 0u) {
        d[i] *= 1.0 / (1.0 + exp(-s[i]));
    } else if (p.mode == 1u) {
        float g = d[i];
        d[i] = g / (1.0 + exp(-g)) * s[i];
    } else {
        float v = d[i] * p.scale;
        // tanh(10) rounds to 1.0f; the clamp keeps a driver's exp-based tanh from overflowing
        d[i] = p.cap != 0.0 ? p.cap * tanh(clamp(v / p.cap, -10.0, 10.0)) : v;
    }
}
