// Integer dot products and the exact float arithmetic of the int8 path.
//
// Debian 12's glslang (11.13) has no GL_EXT_integer_dot_product, so the
// instruction is reached through GL_EXT_spirv_intrinsics: OpSDotKHR (4450) of
// SPV_KHR_integer_dot_product with capabilities DotProductKHR (6019) and
// DotProductInput4x8BitPackedKHR (6018); format 0 = PackedVectorFormat4x8Bit.
// sdot4(a, b) = Σ_k int8(byte k of a) · int8(byte k of b), exact in int32.
// The device must have shaderIntegerDotProduct (the host checks).
#extension GL_EXT_spirv_intrinsics : require

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4_(uint a, uint b, spirv_literal int fmt);
int sdot4(uint a, uint b) { return sdot4_(a, b, 0); }
int sdot16(uvec4 a, uvec4 b) { return (sdot4(a.x, b.x) + sdot4(a.y, b.y)) + (sdot4(a.z, b.z) + sdot4(a.w, b.w)); }

#include "exact_float.glsl"
