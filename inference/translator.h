// Translator: raw text lines in, translations out. Encodes the lines, sorts them by length into
// batches under a token budget (similar lengths batch with little padding), runs beam search on
// each batch and returns the results in input order. With top_up, the sorted lines go through one
// top-up batched search instead (finished sentences replaced by waiting ones as they finish).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/layers/decoder_model.h"
#include "inference/search/beam_search.h"
#include "inference/tables/clustering.h"
#include "inference/tables/shortlist.h"
#include "inference/text_codec.h"

namespace tern::inference {

struct TranslatorOptions {
  BeamSearchOptions search;
  // Budget of one batch in padded source tokens (sentences x longest source), as Marian's
  // mini-batch-words; a longer sentence still gets a batch of its own.
  int max_batch_tokens = 4096;
  // At most this many sentences a batch as well (0: no cap), as Marian's --mini-batch: with a
  // budget of tokens large enough, a batch of exactly N sentences.
  int max_batch_sentences = 0;
  // Integer products: quantize float weights at load, auto-tune (inference/layers/linear.h).
  LinearOptions linear;
  // Devlin's decoder speed-ups for the GRU models (s2s, devlin); ignored by the Transformer.
  RnnOptions rnn;
  // Restrict the output vocabulary with the model's lexical shortlist, or with its vocabulary
  // clusters (at most one; tern::Error when the model has none).
  bool use_shortlist = false;
  bool use_clusters = false;
  // Top-up batching (BeamSearch::SearchTopUp) over each Translate call's length-sorted lines,
  // with a batch of max_batch_tokens / (mean source length) sentences (at most
  // max_batch_sentences), instead of one search per token-budget batch.
  bool top_up = false;
  // Ensemble decoding: further model files (same vocabulary, any weight type) whose
  // log-probabilities are averaged with this model's at every step (BeamSearch's ensemble), each
  // on `device` as this model is.
  std::vector<std::string> ensemble;
  // Where the model runs: kCuda copies its weights to the GPU (quantized ones as float) and
  // decodes there (see BeamSearch for what stays on the host).
  Device device = Device::kCpu;
};

struct Translation {
  std::string text;
  float score = 0;             // sum of log-probabilities
  float normalized_score = 0;  // score / length^alpha
};

// Not thread-safe: one Translator per thread (they may share a ModelFile's weights).
class Translator {
 public:
  // From a model file, with the vocabulary embedded in it.
  static std::unique_ptr<Translator> FromModelFile(const std::string& path,
                                                   const TranslatorOptions& options);

  // From weights owned elsewhere (the trainer, tests). `weights` must outlive the Translator.
  Translator(const config::ModelConfig& config, const Weights& weights,
             std::unique_ptr<TextCodec> codec, const TranslatorOptions& options);
  // Takes ownership of an opened model file; the codec comes from the caller.
  Translator(std::unique_ptr<ModelFile> file, std::unique_ptr<TextCodec> codec,
             const TranslatorOptions& options);

  // Returns, per line in input order, 1 to options.search.n_best translations, best first.
  // An empty (or all-space) line translates to one empty translation. progress(done, total) is
  // called after each batch when given.
  std::vector<std::vector<Translation>> Translate(
      const std::vector<std::string>& lines,
      const std::function<void(size_t, size_t)>& progress = {});

  const DecoderModel& model() const { return *model_; }
  const BeamSearch& search() const { return search_; }

 private:
  // options_.search with the shortlist or clusters the options ask for, loaded from `weights`.
  BeamSearchOptions SearchOptions(const Weights& weights);
  // Opens options_.ensemble's files (vocabulary checked against `vocab` when not empty) and
  // returns their models.
  std::vector<const DecoderModel*> LoadEnsemble(std::string_view vocab);
  // tern::Error for a batch budget below 1 token or a negative sentence cap.
  void CheckBatchOptions() const;

  std::unique_ptr<ModelFile> file_;  // may be null
  std::unique_ptr<TextCodec> codec_;
  TranslatorOptions options_;
  // The weights a model reads: `host` itself, or their copy on options_.device (one for the model
  // and each ensemble member).
  const Weights& ModelWeights(const Weights& host);
  std::vector<Tensor> device_storage_;
  std::vector<std::unique_ptr<Weights>> device_weights_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<Shortlist> shortlist_;     // when options.use_shortlist
  std::unique_ptr<VocabClusters> clusters_;  // when options.use_clusters
  std::vector<std::unique_ptr<ModelFile>> ensemble_files_;
  std::vector<std::unique_ptr<DecoderModel>> ensemble_models_;
  BeamSearch search_;
};

}  // namespace tern::inference
