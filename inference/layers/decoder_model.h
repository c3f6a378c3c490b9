// What beam search needs of a model, whatever its architecture: an encoder, a decoder that
// advances one position per step over rows of hypotheses (reordered by back-pointers), and an
// output layer of the form softmax(OutputInput(h) E^T + b). The Transformer and its AAN variant
// (inference/transformer/) and the GRU encoder-decoders (inference/rnn/) implement it, so
// beam search, top-up batching, shortlists, vocabulary clusters and ensembles serve them all.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/special_ids.h"
#include "inference/format/weights.h"
#include "inference/layers/linear.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference {

// The decoding state of one batch; one per search (not thread-safe). Rows are sentence-major:
// sentence i owns rows [i * beam, (i + 1) * beam).
class DecoderState {
 public:
  virtual ~DecoderState() = default;

  // Starts a batch: encoded (B, S, ...) and src_mask (B, S) from DecoderModel::Encode; each
  // sentence gets `beam` rows. Copies what it needs, so the caller may reset the encoder's arena.
  virtual void Start(const Tensor& encoded, const Tensor& src_mask, int beam) = 0;

  struct StepOutput {
    Tensor logits;     // (rows, V)
    Tensor log_probs;  // (rows, V), log-softmax of logits
  };
  // Feeds one token per row. prev_tokens (rows): the tokens of this position (bos at a sentence's
  // first step). parents (rows): for each row, the row of the previous step it continues (ignored
  // at a sentence's first step). The outputs are valid until the next-but-one Step.
  virtual StepOutput Step(const std::vector<int32_t>& prev_tokens,
                          const std::vector<int32_t>& parents) = 0;
  // As Step, but stops before the output layer: returns the decoder's top output (rows, h), for
  // DecoderModel::OutputInput and an OutputLayer. Same lifetime as Step's outputs.
  virtual Tensor StepHidden(const std::vector<int32_t>& prev_tokens,
                            const std::vector<int32_t>& parents) = 0;

  // Keeps only the sentences `keep` (increasing indices among the current sentences). The next
  // Step's parents still index the rows of the last Step, but only rows of kept sentences.
  virtual void KeepSentences(const std::vector<int32_t>& keep) = 0;
  // Top-up batching: appends sentences (from Encode) after the current ones, each with `beam`
  // rows that start at their first position with the next Step (their parents are ignored).
  virtual void AddSentences(const Tensor& encoded, const Tensor& src_mask) = 0;

  // Times this state's arenas asked the device allocator for memory (tests of the hot path).
  virtual int64_t system_allocations() const = 0;
};

class StepUploader;  // layers.h

// For DecoderState::KeepSentences: checks `keep` (increasing indices below `sentences`) and
// gathers the kept sentences' rows of per-sentence tensors (first dimension = sentences) into
// `arena`; an undefined tensor stays undefined. `keep` goes to the arena's device through
// `upload` (the caller's, so the host does not wait for it on a GPU).
class SentenceGather {
 public:
  SentenceGather(const std::vector<int32_t>& keep, int64_t sentences, Arena& arena,
                 StepUploader& upload);
  Tensor operator()(const Tensor& t) const;

 private:
  Arena& arena_;
  Tensor ids_;  // (kept) int32
};

class DecoderModel {
 public:
  virtual ~DecoderModel() = default;

  virtual const config::ModelConfig& config() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Where the weights, the encoder's output and the decoder's tensors are (tensor/ devices);
  // beam search keeps only the host-side bookkeeping on the CPU.
  virtual Device device() const { return Device::kCpu; }
  // The output layer's float product inputs (LinearOptions::inputs).
  virtual DType product_inputs() const { return DType::kFloat32; }
  // src int32 (B, S) padded with 0; src_mask float (B, S). Returns the encoder's output, batch
  // first (B, S, ...), from `arena`: what DecoderState::Start and AddSentences take.
  virtual Tensor Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const = 0;
  virtual std::unique_ptr<DecoderState> NewDecoder() const = 0;
  // The output layer: logits = OutputInput(h) E^T + b, with h from DecoderState::StepHidden.
  virtual Tensor OutputInput(const Tensor& h, Arena& arena) const = 0;
  virtual const Tensor& output_embeddings() const = 0;  // E (V, e)
  // E as the output layer's float product takes it: E, or on a GPU with bf16 or fp16 products
  // (product_inputs()) E rounded to that type once at load.
  virtual const Tensor& output_table() const { return output_embeddings(); }
  virtual const Tensor& output_bias() const = 0;  // b (V)
  // The integer form of E^T when the model runs its output layer as integers (an int16/int8
  // model, or --quantize), else null: OutputLayer then multiplies with it, restricted or not.
  virtual const LinearWeights* integer_output() const { return nullptr; }
};

// Devlin et al. 2017's decoder speed-ups for the GRU models (inference/rnn/), each a switch; all
// off gives the plain computation. Ignored by the Transformer.
struct RnnOptions {
  // The first decoder GRU's input products (embedding x W + b) looked up from a table for the ids
  // below this (SentencePiece ids run roughly by frequency); 0: off. Exact.
  int precomputed_embeddings = 0;
  // The source side of the attention's MLP (context x Wc_att + b_att) computed once per sentence
  // rather than at every step. Exact.
  bool precomputed_attention = true;
  // The first decoder GRU's recurrent products (state x U) done once per distinct previous state,
  // not once per row of the beam. Exact.
  bool merge_states = false;
  // Vectorized rational approximations of tanh and sigmoid (absolute error < 2e-6,
  // tests/tensor/kernels_test.cc) instead of the library's.
  bool approx_activations = false;
  // Device-neutral tensor ops instead of the CPU's loops over rows (always on a GPU, where the
  // three speed-ups above do not apply: the plain products and exact activations run there).
  // For the CPU's tests of the GPU's code path.
  bool tensor_ops = false;
};

}  // namespace tern::inference
