// The AVX2 family's strip kernels: matmul_strip_ymm.h compiled for AVX2
// (vpmaddubsw + vpmaddwd).
#if defined(__x86_64__) || defined(_M_X64)
#include "cpu/matmul_avx2_common.h"
#include "cpu/matmul_strip_ymm.h"

namespace fish::mm::avx2 {

void kernel_q4_k_s16(const KernelArgs& a) { ymm_strips<Q45Strip<false>>(a); }
void kernel_q5_k_s16(const KernelArgs& a) { ymm_strips<Q45Strip<true>>(a); }
void kernel_q6_k_s16(const KernelArgs& a) { ymm_strips<Q6Strip>(a); }
void kernel_q4_0_s16(const KernelArgs& a) { ymm_strips<Legacy32Strip<Strip32::Q4_0>>(a); }
void kernel_q4_1_s16(const KernelArgs& a) { ymm_strips<Legacy32Strip<Strip32::Q4_1>>(a); }
void kernel_q5_0_s16(const KernelArgs& a) { ymm_strips<Legacy32Strip<Strip32::Q5_0>>(a); }
void kernel_q5_1_s16(const KernelArgs& a) { ymm_strips<Legacy32Strip<Strip32::Q5_1>>(a); }
void kernel_q8_0_s16(const KernelArgs& a) { ymm_strips<Legacy32Strip<Strip32::Q8_0>>(a); }

}  // namespace fish::mm::avx2
#endif
