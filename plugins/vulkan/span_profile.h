// The span's profile (FISH_GPU_PROFILE, describe(PROFILE)): counters of its
// forwards, and the device time of its submissions from GPU timestamps.
// Level 1 brackets each recording with two stamps; level 2 stamps every stage
// of a forward and reports the stages' shares, decode and prefill apart. The
// stamped recordings are cached like unprofiled ones (the stage names kept per
// command buffer), so the host side per token is that of an unprofiled forward.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device.h"

namespace fish::vk {

class SpanProfile {
 public:
  // Creates the timestamp pool for a span of n_layers (none where the device has no timestamps).
  SpanProfile(const Device& dev, int level, int n_layers);
  ~SpanProfile();
  SpanProfile(const SpanProfile&) = delete;
  SpanProfile& operator=(const SpanProfile&) = delete;

  int level() const { return pool_ != VK_NULL_HANDLE ? level_ : 0; }

  // Recording: the first stamp, one per stage (level 2), and the last one (level 1).
  // begin() forgets cmd's earlier stage names (a command buffer re-recorded).
  void begin(VkCommandBuffer cmd);
  void stage(VkCommandBuffer cmd, const char* name, const char* category);
  void end(VkCommandBuffer cmd);

  // The stamped recording about to be submitted (its stage names for add_submission).
  void use(VkCommandBuffer cmd);
  // After a submission of n_tok tokens whose recording was stamped: its device time.
  void add_submission(int n_tok);
  // A finished forward; decode (n_tok = 1) also with its host side: preparing
  // x and the ctrl block, submit to fence, copying x and the logits out.
  void add_forward(int n_tok, double wall_s);
  void add_submit() { ++submits_; }
  void add_decode_host(double prep_s, double wait_s, double copy_s);

  // The text of describe(PROFILE) since the last call ("" when nothing ran); resets the counters.
  std::string report(int first_layer, int last_layer);

 private:
  struct Stage {
    std::string category;
    double seconds = 0;
  };
  const Device& dev_;
  int level_ = 0;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  uint32_t capacity_ = 0;
  uint32_t next_ = 0;                     // stamps recorded so far (while recording)
  struct Names {
    std::vector<const char*> names, cats;  // per stage (the plan's string literals)
  };
  std::map<VkCommandBuffer, Names> recorded_;  // per stamped recording
  Names* recording_ = nullptr;                 // the one being recorded
  const Names* used_ = nullptr;                // the one last submitted
  static std::string stage_table(const std::map<std::string, Stage>& stages, const char* what, double total_s,
                                 double per, const char* unit);

  std::map<std::string, Stage> stages_;          // decode forwards'
  std::map<std::string, Stage> prefill_stages_;  // forwards of more than 4 tokens'
  double prefill_gpu_s_ = 0;
  uint64_t prefill_tokens_ = 0;
  uint64_t forwards_ = 0, decode_ = 0, tokens_ = 0, submits_ = 0;
  double wall_s_ = 0, gpu_s_ = 0, decode_wall_s_ = 0, decode_gpu_s_ = 0;
  double decode_prep_s_ = 0, decode_wait_s_ = 0, decode_copy_s_ = 0;
};

}  // namespace fish::vk
