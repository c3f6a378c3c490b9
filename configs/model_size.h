// A model's size from its config alone, before anything is allocated: the parameter count of
// each architecture as models/ lays it out (tests/configs/model_size_test.cc holds the two equal)
// and a lower bound of the memory one rank needs to train it. Validation refuses sizes past what
// Tern trains; the trainer compares the bound with the machine's memory once the vocabulary is
// known.
#pragma once

#include <cstdint>
#include <string>

#include "configs/tern.pb.h"

namespace tern::config {

// More parameters than this is a mistake in a config (16 GiB of float32 values alone, 64 GiB to
// train with Adam), not a model Tern is meant for.
inline constexpr int64_t kMaxParameters = int64_t{1} << 32;

// The number of trainable values of `model` (the sum of its tensors' sizes) with a vocabulary of
// `vocab_size` pieces. REQUIRES: the model's fields within Validate's ranges (no overflow then).
int64_t ParameterCount(const ModelConfig& model, int64_t vocab_size);

// Bytes one rank holds at least while training: the parameters and their gradients, the output
// layer's logits and their gradients for a full batch (data.batch_tokens x vocabulary), and the
// Transformer's table of positions. Optimizer state and activations come on top.
int64_t TrainingBytesLowerBound(const TrainConfig& config, int64_t vocab_size);

// "model.emb_dim 512, model.ffn_dim 2048, model.enc_depth/dec_depth 6/6, vocabulary 8000": the
// fields that size the model, for messages.
std::string SizeFields(const ModelConfig& model, int64_t vocab_size);

// False, with a message naming the size fields and the estimate, when the model has more than
// kMaxParameters parameters or, with memory_bytes > 0, needs more than that much memory.
bool CheckModelSize(const TrainConfig& config, int64_t vocab_size, int64_t memory_bytes,
                    std::string* error);

}  // namespace tern::config
