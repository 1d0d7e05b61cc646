#version 450
// dst[i] = src[i] for i < n (uvec4 elements), grid-stride: a plain device copy
// through the SMs. Used to measure the bandwidth the matvec kernels are read
// against (a transfer-queue vkCmdCopyBuffer may run on a copy engine instead),
// and by spans to move activations.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly restrict buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly restrict buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform CopyParams { uint n; } pc;

void main() {
  const uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) dst[i] = src[i];
}
