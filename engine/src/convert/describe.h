// fish info: a plain-text description of any valid GGUF file, read from its header
// alone (no model is built, so unsupported architectures work too): architecture,
// hyper-parameters, tokenizer, tensor count per type, sizes, version, alignment.
#pragma once
#include <string>

namespace fish::convert {

// One "label  value" line per item. Throws fish::Error (naming the file and the
// field) for a file that is not valid GGUF.
std::string describe_file(const std::string& path);

}  // namespace fish::convert
