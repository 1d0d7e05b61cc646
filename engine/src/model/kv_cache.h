// KvCache: the CPU key/value cache, f16 (as llama.cpp's default), in pages of
// kPage positions shared by every CPU layer, for any number of sequences.
//
// A sequence is a page table (page ids in position order) and a length; pages
// are allocated as sequences grow, so nothing is reserved up front (a 128K
// context costs what its sequences hold). copy_prefix() lets a sequence start
// with another's first n positions by sharing their pages (reference counts);
// the first write into a shared page copies it first (copy on write), so a
// truncate inside a shared prefix followed by new tokens never touches the
// other sequence. Layers that run in a device span keep no CPU pages.
//
// Storage per layer: one K and one V block per page, [kPage][kv_dim] f16,
// allocated separately so pointers stay valid while the cache grows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fish {

class KvCache {
 public:
  static constexpr int32_t kPageShift = 6;
  static constexpr int32_t kPage = 1 << kPageShift;  // positions per page

  KvCache() = default;
  // layer_on_cpu[l]: whether layer l keeps a CPU cache; sequences 0..n_seq-1.
  void init(int32_t n_layer, int32_t kv_dim, int32_t n_ctx, int32_t n_seq, const std::vector<bool>& layer_on_cpu);
  void set_layer_on_cpu(int32_t layer, bool on);  // on: its pages start zeroed
  bool has_layer(int32_t layer) const { return on_cpu_[size_t(layer)]; }

  int32_t n_seq() const { return int32_t(seqs_.size()); }
  int32_t len(int32_t seq) const { return seqs_[size_t(seq)].len; }
  // Positions [from, to) of seq become writable (pages allocated, shared pages
  // copied); from <= len(seq). Pointers from k_at()/pages are valid until the
  // next prepare/truncate/copy of any sequence.
  void prepare(int32_t seq, int32_t from, int32_t to);
  void set_len(int32_t seq, int32_t n) { seqs_[size_t(seq)].len = n; }
  // Keeps positions < n of seq (0 drops it); its pages past n go back to the pool.
  void truncate(int32_t seq, int32_t n);
  // dst (its old contents dropped) = the first n positions of src, sharing pages.
  void copy_prefix(int32_t src, int32_t dst, int32_t n);
  // Retained entries (the prefix cache): retain() moves seq's pages into a new
  // entry (seq becomes empty) and returns its id; copy_retained() is
  // copy_prefix from an entry; drop_retained() gives its pages back.
  int32_t retain(int32_t seq);
  void copy_retained(int32_t entry, int32_t dst, int32_t n);
  void drop_retained(int32_t entry);
  int32_t retained_pages(int32_t entry) const;
  uint64_t page_bytes() const;  // one page over the CPU layers, K and V

  uint16_t* k_at(int32_t layer, int32_t seq, int32_t pos) { return at(k_, layer, seq, pos); }
  uint16_t* v_at(int32_t layer, int32_t seq, int32_t pos) { return at(v_, layer, seq, pos); }
  // The page tables of seq in layer (for attention): k_pages[i] holds positions i*kPage...
  const uint16_t* const* k_pages(int32_t layer, int32_t seq);
  const uint16_t* const* v_pages(int32_t layer, int32_t seq);

  int32_t n_ctx() const { return n_ctx_; }
  int32_t kv_dim() const { return kv_dim_; }
  int32_t pages_in_use() const { return int32_t(refs_.size() - free_.size()); }
  int32_t page_refs(int32_t seq, int32_t pos) const;  // how many sequences share the page of (seq, pos)
  uint64_t bytes() const;  // allocated page storage, all layers

 private:
  struct Seq {
    std::vector<int32_t> pages;
    int32_t len = 0;
  };
  using Blocks = std::vector<std::vector<std::unique_ptr<uint16_t[]>>>;  // [layer][page]
  int32_t new_page();
  void release(int32_t page);
  uint16_t* at(Blocks& b, int32_t layer, int32_t seq, int32_t pos) {
    const Seq& s = seqs_[size_t(seq)];
    return b[size_t(layer)][size_t(s.pages[size_t(pos >> kPageShift)])].get() +
           int64_t(pos & (kPage - 1)) * kv_dim_;
  }
  const uint16_t* const* tables(Blocks& b, std::vector<std::vector<const uint16_t*>>& t, int32_t layer, int32_t seq);

  int32_t kv_dim_ = 0, n_ctx_ = 0;
  std::vector<bool> on_cpu_;
  Blocks k_, v_;
  std::vector<int32_t> refs_;  // per page: sequences holding it (0: free)
  std::vector<int32_t> free_;
  std::vector<Seq> seqs_;
  std::vector<std::pair<int32_t, Seq>> retained_;  // (id, pages)
  int32_t next_retained_ = 0;
  void share_into(const Seq& from, int32_t dst, int32_t n);
  std::vector<std::vector<const uint16_t*>> kt_, vt_;  // scratch page tables for attention, per sequence
};

}  // namespace fish
