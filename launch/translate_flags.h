// The runtime's switches that tern-translate and tern-serve share: beam, batching, integer
// products, the output-layer speed-ups, the GRU decoder's speed-ups, device and precision. Each
// program parses its own flags and hands the rest here.
#pragma once

#include <functional>
#include <string>

#include "inference/translator.h"

namespace tern {

struct TranslateFlags {
  int beam = 4;
  float alpha = 1.f;
  int max_batch_tokens = 4096;
  int max_batch_sentences = 0;
  float max_length_factor = 2.f;
  int threads = 0;
  int workers = 1;           // CPU: batches decoded at once, a thread each
  int max_input_length = 0;  // 0: the model's
  bool crop = false;
  std::string quantize;
  bool autotune = false;
  bool integer_output_layer = false;
  bool skip_zero_activations = false;
  int fused_output = -1;  // -1: the device's default (fused on cuda)
  bool shortlist = false;
  bool shortlist_per_sentence = false;
  bool clusters = false;
  inference::RnnOptions rnn;
  Device device = Device::kCpu;
  DType precision = DType::kFloat32;
};

// The help lines of these switches, two-space indented, the flag in a column of 24.
extern const char kTranslateFlagsUsage[];

// A non-negative integer (at most 2^30), or a finite number in [lo, hi], else tern::Error
// naming the flag.
int ParseIntFlag(const std::string& flag, const std::string& value);
float ParseFloatFlag(const std::string& flag, const std::string& value, float lo, float hi);

// Walks argv's options (--flag VALUE or --flag=VALUE): handle(flag, next) says whether it knows
// the flag, taking its value with next() (tern::Error when there is none); an unknown flag is a
// tern::Error naming it.
using FlagValue = std::function<std::string()>;
void ForEachFlag(int argc, char** argv,
                 const std::function<bool(const std::string& flag, const FlagValue& next)>& handle);

// True when `flag` is one of these switches, parsed into *flags (next() yields its value; it
// fails itself when there is none). tern::Error naming the flag for a bad value.
bool ParseTranslateFlag(const std::string& flag, const FlagValue& next, TranslateFlags* flags);

// The Translator's options for these switches (beam in [1, kMaxBeamSize] checked, and --workers
// against --threads and --device); n_best, need_scores and workers are the program's.
inference::TranslatorOptions MakeTranslatorOptions(const TranslateFlags& flags);

}  // namespace tern
