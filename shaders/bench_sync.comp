#version 450
// bench_sync: what a dependency between two steps costs (fish_bench_vk_span
// --sync). Each phase streams phase_v4 16-byte words of binding 1 with the
// whole grid (a matvec's weight traffic without its arithmetic), then
//   mode 0: nothing (the host records one dispatch per phase, with or without
//           a pipeline barrier between them);
//   mode 1: a grid-wide barrier inside the dispatch (every workgroup counts
//           itself in at word cnt_off and spins on a volatile read until all
//           have), so one dispatch runs every phase;
//   mode 2: the same, spinning on atomic reads.
// A spin gives up after 2^21 reads and sets word cnt_off + 1: a grid larger
// than what the device keeps resident would otherwise never finish.
layout(local_size_x = 128) in;
// VARIANT: any value gives the same work in a distinct pipeline (the table's
// "alternating pipelines" columns: does a change of pipeline between
// dispatches cost on its own?).
layout(constant_id = 0) const uint VARIANT = 0;

layout(set = 0, binding = 0) buffer ArenaU { uint AU[]; };
layout(set = 0, binding = 1) readonly buffer Stream4 { uvec4 S4[]; };
layout(set = 0, binding = 4) coherent volatile buffer ArenaCU { uint ACU[]; };

layout(push_constant) uniform Params {
  uint iters;     // phases in this dispatch
  uint mode;      // 0, 1, 2 (above)
  uint phase_v4;  // 16-byte words each phase reads (0: none)
  uint out_off;   // word: where a (never taken) result goes, keeping the loads alive
  uint cnt_off;   // word: the grid counter, zero before the dispatch; +1: timeout flag
  uint phase0;    // the first phase's index
  uint span_v4;   // 16-byte words of binding 1 the phases rotate over
};

void grid_sync(uint k) {
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    memoryBarrierBuffer();
    atomicAdd(ACU[cnt_off], 1u);
    const uint target = k * gl_NumWorkGroups.x;
    uint spins = 0u;
    if (mode == 1u) {
      while (ACU[cnt_off] < target && spins < (1u << 21)) ++spins;
    } else {
      while (atomicAdd(ACU[cnt_off], 0u) < target && spins < (1u << 21)) ++spins;
    }
    if (spins >= (1u << 21)) atomicOr(ACU[cnt_off + 1u], 1u);
    memoryBarrierBuffer();
  }
  barrier();
}

void main() {
  const uint lid = gl_LocalInvocationIndex, nthreads = gl_NumWorkGroups.x * 128u;
  uvec4 acc = uvec4(0u);
  for (uint it = 0u; it < iters; ++it) {
    if (phase_v4 > 0u) {
      const uint base = ((phase0 + it) * phase_v4) % (span_v4 - phase_v4 + 1u);
      uint i = gl_WorkGroupID.x * 512u + lid;
      for (; i + 384u < phase_v4; i += nthreads * 4u) {
        const uvec4 a = S4[base + i], b = S4[base + i + 128u], c = S4[base + i + 256u], d = S4[base + i + 384u];
        acc ^= (a + b) ^ (c + d);
      }
      for (; i < phase_v4; i += 128u) acc ^= S4[base + i];
    }
    if (mode != 0u) grid_sync(it + 1u);
  }
  if (acc.x == 0x9E3779B9u && acc.y == 0x7F4A7C15u) AU[out_off + gl_WorkGroupID.x] = acc.z ^ acc.w ^ VARIANT;
}
