// Reading, overriding, defaulting and checking configs. This module uses no other (DESIGN.md),
// so functions report a user-facing problem as a one-line message in *error and return false;
// callers turn it into a tern::Error.
#pragma once

#include <string>
#include <vector>

#include "configs/tern.pb.h"

namespace tern::config {

// Parses protobuf text format. Unknown fields and syntax errors name the file, line and field.
bool ParseTrainConfig(const std::string& text, const std::string& source, TrainConfig* out,
                      std::string* error);
bool LoadTrainConfig(const std::string& path, TrainConfig* out, std::string* error);

// Applies "field.path=value" overrides (e.g. "optim.learning_rate=0.001").
bool ApplyOverride(const std::string& assignment, TrainConfig* config, std::string* error);
// Applies a ';'-separated list of them in order (tern-train --set "a.b=v;c.d=w"), skipping empty
// items, so no value can hold a ';'. Stops at the first bad one, the ones before it applied.
bool ApplyOverrides(const std::string& list, TrainConfig* config, std::string* error);

// Fills fields left at zero/empty with Tern's defaults (Marian's where it has one).
void FillDefaults(TrainConfig* config);

// Checks ranges and enumerations; the message names the field.
bool Validate(const TrainConfig& config, std::string* error);

std::string ToText(const TrainConfig& config);
// A stable hash of the effective config (for checkpoints and rank agreement).
uint64_t ConfigHash(const TrainConfig& config);

}  // namespace tern::config
