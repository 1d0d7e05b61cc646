#include "gguf/tensor_stack.h"

namespace fish::gguf {

std::string expert_tensor_name(const std::string& p, const std::string& kind, int64_t e) {
  return p + kind + "." + std::to_string(e) + ".weight";
}

std::optional<TensorInfo> stack_view(const std::vector<const TensorInfo*>& parts, const std::string& name) {
  if (parts.empty()) return std::nullopt;
  const TensorInfo& a = *parts[0];
  for (size_t e = 1; e < parts.size(); ++e) {
    const TensorInfo& prev = *parts[e - 1];
    const TensorInfo& t = *parts[e];
    if (t.type != a.type || t.ne[0] != a.ne[0] || t.ne[1] != a.ne[1] || t.nbytes != a.nbytes ||
        t.offset != prev.offset + prev.nbytes || t.data != prev.data + prev.nbytes)
      return std::nullopt;
  }
  TensorInfo s;
  s.name = name;
  s.type = a.type;
  s.n_dims = 3;
  s.ne[0] = a.ne[0];
  s.ne[1] = a.ne[1];
  s.ne[2] = int64_t(parts.size());
  s.offset = a.offset;
  s.nbytes = a.nbytes * uint64_t(parts.size());
  s.data = a.data;
  return s;
}

}  // namespace fish::gguf
