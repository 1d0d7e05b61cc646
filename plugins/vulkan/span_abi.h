// The plugin ABI's span structs (plugin_abi.h) into fish_vulkan's: a span's
// description by role and architecture block into SpanIn, a forward's batch
// into Span::Forward. What fish_vulkan does not run is refused here with
// FISH_E_UNSUPPORTED and a message naming it, so the host runs those layers
// (or that batch) itself: an unknown role, MoE (router and expert roles,
// n_expert > 0), stacked matrices in a span role, a norm, activation, RoPE or
// gating value other than those of plugin ABI 2.0's dense decoder.
#pragma once
#include "fish/plugin_abi.h"
#include "span.h"

namespace fish::vk {

// with_weights: span_create (every matrix role has its weight); else
// span_bytes, asked before the weights are uploaded. Throws Failure
// (InvalidArgument: malformed; Unsupported: see above).
SpanIn span_in_from_abi(const fish_span_desc* d, bool with_weights);

// The batch as one forward: its rows' sequences and positions, the rows
// whose logits are wanted. Checks the batch itself (its size, flags, buffers);
// Span::forward checks the rows against the span (sequence ids, consecutive
// positions per sequence, gaps, capacity). Throws Failure as above.
Span::Forward forward_from_abi(const fish_span_batch* b);

}  // namespace fish::vk
