// The AVX2 kernel family (placeholder until its kernels land).
#include "cpu/matmul_kernels.h"

namespace fish::mm {
const KernelFamily* family_avx2() { return nullptr; }
}  // namespace fish::mm
