// Validation during training: the dev set's cross-entropy per target word (teacher-forced graph
// forward pass, no dropout, no label smoothing) and the BLEU/chrF of its translation by the
// runtime's beam search over a view of the trainer's parameters (DESIGN.md rule 1).
#pragma once

#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "data/batcher.h"
#include "data/vocab.h"
#include "graph/params.h"
#include "models/model.h"
#include "tensor/arena.h"

namespace tern::trainer {

struct ValidationResult {
  double cross_entropy = 0;
  bool has_bleu = false;
  double bleu = 0, chrf = 0;
  std::vector<std::string> hypotheses;  // the best translation of each validation sentence
  Device translated_on = Device::kCpu;  // where the runtime decoded them
  double seconds = 0;
};

class Validator {
 public:
  Validator(const config::TrainConfig& config, const data::Vocab& vocab);

  // The cross-entropy runs the graph on params with arena (the same device); the translation
  // runs the runtime over host_params (the same values on the host; params itself on a CPU
  // run), on the GPU when params live there (with the fused output pass, the GPU's way; its
  // hypotheses are the CPU's), else on the host.
  ValidationResult Run(const models::Model& model, const graph::ParamStore& params, Arena* arena,
                       const graph::ParamStore& host_params);
  // Writes the runtime's model file (float32) for `values` (host, params' flat layout; the
  // exponential average, say) and returns true; false, writing nothing, for an architecture the
  // runtime cannot run (inference::RuntimeSupports).
  bool ExportModel(const graph::ParamStore& params, const Tensor& values,
                   const std::string& path) const;

 private:
  // A Transformer's dev sentences fit its positions (at start-up: else the first validation
  // fails, after training has run).
  void CheckDevLengths() const;

  config::TrainConfig config_;
  const data::Vocab& vocab_;
  std::vector<std::string> sources_, references_;
  std::vector<data::Batch> batches_;  // the dev set, batched once
};

}  // namespace tern::trainer
