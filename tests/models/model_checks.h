// Checks every architecture's tests share: a tiny padded batch, the whole model's gradient against
// finite differences, independence of one sentence from another's padding, and a short training
// run that lowers the loss.
#pragma once

#include "models/model.h"

namespace tern::models::testing {

// Two sentences over a vocabulary of 12; the second is shorter (padded).
BatchTensors TinyBatch();

// The summed label-smoothed (0.1) loss of `batch`, not training.
double Loss(const Model& model, const graph::ParamStore& params, const BatchTensors& batch);

// Compares `trials` sampled parameters' gradients with central differences of `step`.
void ExpectGradientsMatchFiniteDifferences(const Model& model, uint64_t seed, int trials,
                                           const std::string& label, float step = 1e-2f);

// The second sentence's logits are the same alone as next to the first, padded.
void ExpectPaddingDoesNotChangeTheOtherSentence(const Model& model);

// Mixed precision, bf16 and fp16: the loss and every gradient are the same, bit for bit, when
// the graph rounds each product's operand once a step (graph.h, MatMulOperand) as when each
// product rounds its operands again; and rounding once rounds at most `most` of the elements.
void ExpectOperandsRoundedOnceChangeNothing(const Model& model, double most);

// 30 plain gradient steps on Loss (rate `lr`, training mode) take it below `ratio` of the first.
void ExpectGradientStepsLowerTheLoss(const Model& model, float lr, double ratio);

}  // namespace tern::models::testing
