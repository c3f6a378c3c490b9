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
  // CPU only: decode this many batches at once, each by a search of its own on a thread of its
  // own, the batches taken in turn from the length-sorted list (inter-batch parallelism, as
  // CTranslate2's inter_threads and Marian's CPU workers). Each worker's products run serially
  // on its thread (SerialRegion), whatever the compute threads. Small batches, whose keys and
  // values stay in a core's caches, decode fastest this way. 1: one search, its products split
  // over the compute threads. Not with top_up.
  int workers = 1;
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
  // The longest source line in pieces (eos not counted; 0: the model's model.max_length - 1, the
  // positions it was trained with). A longer line is cut to it with crop_input, else not
  // translated (Translation::pieces_over_limit): a single very long line would otherwise hold
  // up every line behind it, its time growing with the square of its length.
  int max_input_length = 0;
  bool crop_input = false;
};

struct Translation {
  std::string text;
  float score = 0;             // sum of log-probabilities
  float normalized_score = 0;  // score / length^alpha
  // > 0: the line was not translated (the text is empty): it has this many pieces, more than
  // Translator::max_input_length().
  int64_t pieces_over_limit = 0;
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

  // The longest source line translated, in pieces (TranslatorOptions::max_input_length).
  int max_input_length() const { return max_input_length_; }
  const DecoderModel& model() const { return *model_; }
  const BeamSearch& search() const { return search_; }
  // The text codec (SentencePiece's Encode and Decode may be called from several threads).
  const TextCodec& codec() const { return *codec_; }
  // A further search over this Translator's model, ensemble and tables, with beam size `beam` and
  // every hypothesis kept (n_best = beam), for a caller that steps it (inference/serve/). It reads
  // what the Translator owns, so it must not outlive it.
  std::unique_ptr<BeamSearch> NewSearch(int beam) const;

 private:
  // options_.search with the shortlist or clusters the options ask for, loaded from `weights`.
  BeamSearchOptions SearchOptions(const Weights& weights);
  // Opens options_.ensemble's files (vocabulary checked against `vocab` when not empty) and
  // returns their models.
  std::vector<const DecoderModel*> LoadEnsemble(std::string_view vocab);
  // The batches of one Translate call over `order`'s lines (longest first), with the budget and
  // cap of the options: [begin, end) ranges of order.
  std::vector<std::pair<size_t, size_t>> Batches(
      const std::vector<size_t>& order, const std::vector<std::vector<int32_t>>& sources) const;
  // tern::Error for a batch budget below 1 token, a negative sentence cap or input limit, or
  // workers that cannot run (below 1, off the CPU, with top-up); sets
  // max_input_length_ from the options and `model`.
  void CheckBatchOptions(const config::ModelConfig& model);

  std::unique_ptr<ModelFile> file_;  // may be null
  std::unique_ptr<TextCodec> codec_;
  TranslatorOptions options_;
  int max_input_length_ = 0;
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
  std::vector<const DecoderModel*> ensemble_;  // ensemble_models_, as BeamSearch takes them
  BeamSearch search_;
  // options_.workers - 1 further searches, made at the first Translate that needs them.
  std::vector<std::unique_ptr<BeamSearch>> worker_searches_;
};

}  // namespace tern::inference
