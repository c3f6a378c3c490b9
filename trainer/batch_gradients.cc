// The trainer's gradient of one mini-batch (see batch_gradients.h).
#include "trainer/batch_gradients.h"

#include <algorithm>

namespace tern::trainer {

graph::Var BatchGradients(graph::Graph& g, const models::Model& model, graph::ParamStore& params,
                          const models::BatchTensors& batch, float label_smoothing, float words,
                          float scale, const Tensor& scale_on_device) {
  params.ZeroGrads();
  graph::Var loss =
      models::TokenLoss(g, model.Logits(g, params, batch), batch.tgt_out, label_smoothing);
  g.Backward(loss, scale / std::max(words, 1.f), scale_on_device);
  return loss;
}

}  // namespace tern::trainer
