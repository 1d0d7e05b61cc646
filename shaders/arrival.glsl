// The last workgroup to arrive: a dispatch's workgroups each count
// themselves in at one word of the arena, and the one that brings the count
// to n (the last) goes on to read what all of them wrote. The includer
// defines ARRIVAL_U, a coherent uint view of the arena.
//
// arrive_last(word, n): every invocation calls it (barriers inside). The
// workgroup's buffer writes (through coherent views) are made visible before
// it counts itself in; true in the last to arrive (uniform), which then sees
// every other workgroup's writes. The last leaves the count at 0 for the next
// dispatch itself (arrival_reset), after its reads.
shared uint arrival_last_sh;
bool arrive_last(uint word, uint n) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationID.x == 0u) arrival_last_sh = atomicAdd(ARRIVAL_U[word], 1u) == n - 1u ? 1u : 0u;
  barrier();
  if (arrival_last_sh == 0u) return false;
  memoryBarrierBuffer();
  return true;
}
void arrival_reset(uint word) {
  if (gl_LocalInvocationID.x == 0u) ARRIVAL_U[word] = 0u;
}
