// The gradient the trainer takes of one mini-batch. Its loss is the label-smoothed cross-entropy
// summed over the batch's target words and divided by `words`: this batch's own words for one
// rank or async SGD, the words of every rank's batch for sync SGD. Sync SGD sums the ranks'
// gradients, so there N ranks step exactly as one rank with their N batches together (the model
// treats each sentence apart from its batch-mates and their padding).
#pragma once

#include "graph/graph.h"
#include "graph/params.h"
#include "models/model.h"

namespace tern::trainer {

// Zeroes params' gradients and fills them with d(summed loss · scale / words)/d(params), the
// scale being fp16's loss scale (1 otherwise), times scale_on_device[0] when that is defined (the
// loss scale kept on the device: optim::LossScaler::SeedScale; a power of two, so the seed has the
// bits of the host's scale / words). Returns the summed loss (one element), for the log.
// REQUIRES: g is fresh (Clear'ed) and records on params' device.
graph::Var BatchGradients(graph::Graph& g, const models::Model& model, graph::ParamStore& params,
                          const models::BatchTensors& batch, float label_smoothing, float words,
                          float scale = 1.f, const Tensor& scale_on_device = Tensor());

}  // namespace tern::trainer
