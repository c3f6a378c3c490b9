// Reading, overriding, defaulting and checking configs. This module uses no other (DESIGN.md),
// so functions report a user-facing problem as a one-line message in *error and return false;
// callers turn it into a tern::Error.
#pragma once

#include <string>
#include <vector>

#include "configs/tern.pb.h"

namespace tern::config {

// Compute threads a program may be asked for (training.threads, --threads): more is a typo, and
// starting them would take the machine's memory before any work began.
inline constexpr int kMaxComputeThreads = 1024;
// The trainer keeps each update's cost until the next log line (training.disp_freq updates).
inline constexpr int kMaxDispFreq = 1 << 20;
// model.layer_norm_eps when unset: Marian's, which the Transformer used before the field existed.
inline constexpr float kDefaultLayerNormEps = 1e-6f;

// Parses protobuf text format. Unknown fields and syntax errors name the file, line and field.
bool ParseTrainConfig(const std::string& text, const std::string& source, TrainConfig* out,
                      std::string* error);
bool LoadTrainConfig(const std::string& path, TrainConfig* out, std::string* error);

// Applies "field.path=value" overrides (e.g. "optim.learning_rate=0.001").
bool ApplyOverride(const std::string& assignment, TrainConfig* config, std::string* error);
// Applies a ';'-separated list of them in order (tern-train --set "a.b=v;c.d=w"), skipping empty
// items, so no value can hold a ';'. Stops at the first bad one, the ones before it applied.
bool ApplyOverrides(const std::string& list, TrainConfig* config, std::string* error);

// Fills unset fields with Tern's defaults (Marian's where it has one): an optional field that
// is not present, a string that is empty. A value set, 0 included, is kept for Validate.
void FillDefaults(TrainConfig* config);

// Checks every field's range or enumeration and the rules between fields (a Transformer's width
// a multiple of its heads, sentences shorter than its positions, ...), then the model's size
// (configs/model_size.h); the message names the field. REQUIRES: FillDefaults first.
bool Validate(const TrainConfig& config, std::string* error);

// Validate's checks of the model section alone, for a model that comes from elsewhere (a Marian
// .npz): every field in range, the rules between them.
bool ValidateModel(const ModelConfig& model, std::string* error);

std::string ToText(const TrainConfig& config);

// A field whose value differs between two configs, its values as protobuf text.
struct FieldChange {
  std::string field;  // "optim.learning_rate"
  std::string before, after;
};
// Every scalar field of `after` that differs from `before`, in schema order.
std::vector<FieldChange> ChangedFields(const TrainConfig& before, const TrainConfig& after);
// A stable hash of the effective config (for checkpoints and rank agreement).
uint64_t ConfigHash(const TrainConfig& config);

}  // namespace tern::config
