// A Tern Transformer as the arrays of a Marian .npz model, and back (names and options in
// names.h, the archive format in npz.h). tern-npz is the program around these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/marian/npz.h"

namespace tern::inference {

// The Marian arrays of a Tern model: every parameter under its Marian name and shape (float32
// bytes copied unchanged), then "special:model.yml". tern::Error naming the parameter when
// `weights` lacks one or has it in another shape.
std::vector<NpyArray> ToMarianArrays(const config::ModelConfig& config, const Weights& weights);

struct ImportedModel {
  config::ModelConfig model;
  int64_t vocab_size = 0;
  std::vector<NamedTensor> tensors;  // Tern names and shapes, owning, in a fixed order
};

// The Tern model held by Marian arrays. `source` (the file) names the problem in every
// tern::Error: no model.yml, an option Tern cannot run, a missing parameter, one of another dtype
// than float32 or of another shape, or an array Tern's Transformer has no place for.
ImportedModel FromMarianArrays(const std::vector<NpyArray>& arrays, const std::string& source);

}  // namespace tern::inference
