// A draft can only propose for a target that reads its token ids the same way.
#pragma once
#include <string>

#include "spec/spec_model.h"

namespace fish::spec {

// "" when the draft shares the target's vocabulary: the same n_vocab, BOS and
// EOS, and the same text for the first 64 ids and 192 more spread over the
// vocabulary (a full comparison costs a pass over both vocabularies; these
// catch a different tokenizer at once). Else what differs, e.g.
// "n_vocab 2048 in the target, 512 in the draft" or
// "token 300 is 'the' in the target and 'ing' in the draft".
std::string vocab_mismatch(const SpecModel& target, const SpecModel& draft);

}  // namespace fish::spec
