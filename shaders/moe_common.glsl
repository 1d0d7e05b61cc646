// The routing words of an MoE layer in the span's arena, written by
// moe_route.comp and read by moe_matvec.comp / moe_combine.comp. For P =
// n_tok · k (token, slot) pairs, pair p = t·k + j (token t's j-th expert):
//   R + 2p, R + 2p + 1          expert id, weight (f32 bits) of pair p
//   G = R + 2P: G + 0           n_active: experts chosen by at least one pair
//   G + 1 + s                   the s-th active expert (ascending id), s < n_expert
//   G + 1 + n_expert + s        its first entry in the list (s <= n_active: the end)
//   G + 2 + 2·n_expert + i      the list: pairs grouped by expert, each group in pair order
// 3P + 2·n_expert + 2 words in all (moe_route_words() in plugins/vulkan/moe_kernels.h).
uint moe_group(uint route_off, uint n_pairs) { return route_off + 2u * n_pairs; }
uint moe_list(uint g, uint n_expert) { return g + 2u + 2u * n_expert; }
