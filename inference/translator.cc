#include "inference/translator.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/thread_pool.h"
#include "inference/load_model.h"
#include "tensor/allocator.h"

namespace tern::inference {

Translator::Translator(const config::ModelConfig& config, const Weights& weights,
                       std::unique_ptr<TextCodec> codec, const TranslatorOptions& options)
    : codec_(std::move(codec)),
      options_(options),
      model_(LoadDecoderModel(config, ModelWeights(weights), options.linear, options.rnn)),
      search_(*model_, SearchOptions(weights), LoadEnsemble({})) {
  CheckBatchOptions(config);
}

Translator::Translator(std::unique_ptr<ModelFile> file, std::unique_ptr<TextCodec> codec,
                       const TranslatorOptions& options)
    : file_(std::move(file)),
      codec_(std::move(codec)),
      options_(options),
      model_(LoadDecoderModel(file_->config().model(), ModelWeights(file_->weights()),
                              options.linear, options.rnn)),
      search_(*model_, SearchOptions(file_->weights()), LoadEnsemble(file_->vocab())) {
  CheckBatchOptions(file_->config().model());
}

void Translator::CheckBatchOptions(const config::ModelConfig& model) {
  if (options_.max_batch_tokens < 1) Fail("max batch tokens must be >= 1");
  if (options_.max_batch_sentences < 0) Fail("max batch sentences must be >= 0 (0: no cap)");
  if (options_.max_input_length < 0) Fail("the maximum input length must be >= 0 (0: the model's)");
  if (options_.workers < 1) Fail("workers must be >= 1");
  if (options_.workers > 1 && options_.device != Device::kCpu)
    Fail(
        "workers (batches decoded at once, a thread each) are for the CPU; a GPU decodes one "
        "batch at a time");
  if (options_.workers > 1 && options_.top_up)
    Fail("workers and top-up batching cannot be combined; pick one");
  const int trained = model.max_length() > 1 ? model.max_length() - 1 : 255;  // 255: the default's
  max_input_length_ = options_.max_input_length > 0 ? options_.max_input_length : trained;
}

const Weights& Translator::ModelWeights(const Weights& host) {
  if (options_.device == Device::kCpu) return host;
  if (options_.device == Device::kCuda && !CudaAvailable()) {
    Fail("--device cuda: no CUDA GPU is visible (or this build has no CUDA backend)");
  }
  device_weights_.push_back(
      std::make_unique<Weights>(CopyWeightsTo(host, options_.device, &device_storage_)));
  return *device_weights_.back();
}

std::vector<const DecoderModel*> Translator::LoadEnsemble(std::string_view vocab) {
  std::vector<const DecoderModel*> models;
  for (const std::string& path : options_.ensemble) {
    ensemble_files_.push_back(ModelFile::Open(path));
    const ModelFile& file = *ensemble_files_.back();
    if (!vocab.empty() && file.vocab() != vocab) {
      Fail(path, ": its vocabulary differs from the first model's; an ensemble needs models ",
           "trained with one vocabulary");
    }
    ensemble_models_.push_back(LoadDecoderModel(file.config().model(), ModelWeights(file.weights()),
                                                options_.linear, options_.rnn));
    models.push_back(ensemble_models_.back().get());
  }
  ensemble_ = models;
  return models;
}

std::unique_ptr<BeamSearch> Translator::NewSearch(int beam) const {
  BeamSearchOptions options = search_.options();
  options.beam_size = beam;
  options.n_best = beam;
  return std::make_unique<BeamSearch>(*model_, options, ensemble_);
}

BeamSearchOptions Translator::SearchOptions(const Weights& weights) {
  BeamSearchOptions search = options_.search;
  if (options_.use_shortlist && options_.use_clusters) {
    Fail("the lexical shortlist and vocabulary clustering cannot be combined; pick one");
  }
  if (search.shortlist_per_sentence && !options_.use_shortlist) {
    Fail("a shortlist per sentence needs the shortlist switched on (use_shortlist)");
  }
  if (options_.use_shortlist) {
    shortlist_ = Shortlist::FromWeights(weights, model_->vocab_size());
    if (!shortlist_) {
      Fail(weights.source(),
           " has no lexical shortlist; build one with tern-export --shortlist-src/--shortlist-tgt");
    }
    search.shortlist = shortlist_.get();
  }
  if (options_.use_clusters) {
    clusters_ = VocabClusters::FromWeights(weights, model_->vocab_size(),
                                           model_->output_embeddings().dim(1));
    if (!clusters_) {
      Fail(weights.source(),
           " has no vocabulary clusters; build them with tern-export --clusters/--cluster-src");
    }
    search.clusters = clusters_.get();
  }
  return search;
}

std::vector<std::vector<Translation>> Translator::Translate(
    const std::vector<std::string>& lines, const std::function<void(size_t, size_t)>& progress) {
  const size_t n = lines.size();
  std::vector<std::vector<Translation>> results(n);
  std::vector<std::vector<int32_t>> sources(n);
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    sources[i] = codec_->Encode(lines[i]);
    if (sources[i].empty()) {
      results[i].push_back(Translation{});
      continue;
    }
    if (static_cast<int64_t>(sources[i].size()) > max_input_length_) {
      if (!options_.crop_input) {
        Translation refused;
        refused.pieces_over_limit = static_cast<int64_t>(sources[i].size());
        results[i].push_back(refused);
        continue;
      }
      sources[i].resize(max_input_length_);
    }
    sources[i].push_back(kEosId);
    order.push_back(i);
  }
  // Longest first, so the first batch shows the memory high-water mark early.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  size_t done = n - order.size();
  auto collect = [&](size_t j, const std::vector<Hypothesis>& hyps) {
    for (const Hypothesis& h : hyps) {
      results[order[j]].push_back({.text = codec_->Decode(h.tokens),
                                   .score = h.score,
                                   .normalized_score = h.normalized_score});
    }
    // Only a degenerate model (every candidate eos) finishes nothing; callers expect one.
    if (results[order[j]].empty()) results[order[j]].push_back(Translation{});
  };
  if (options_.top_up && !order.empty()) {
    std::vector<std::vector<int32_t>> sorted;
    size_t tokens = 0;
    for (size_t i : order) {
      tokens += sources[i].size();
      sorted.push_back(std::move(sources[i]));
    }
    const size_t mean_length = std::max<size_t>(1, tokens / sorted.size());
    int capacity = static_cast<int>(std::max<size_t>(1, options_.max_batch_tokens / mean_length));
    if (options_.max_batch_sentences > 0)
      capacity = std::min(capacity, options_.max_batch_sentences);
    std::vector<std::vector<Hypothesis>> hyps = search_.SearchTopUp(sorted, capacity);
    for (size_t j = 0; j < order.size(); ++j) collect(j, hyps[j]);
    if (progress) progress(n, n);
    return results;
  }
  const std::vector<std::pair<size_t, size_t>> batches = Batches(order, sources);
  // Each worker takes the next batch in the sorted order; results go to their lines' own slots.
  std::atomic<size_t> next{0};
  std::mutex progress_mu;
  auto work = [&](BeamSearch& search) {
    // With several workers each decodes its batches alone on its thread.
    std::optional<SerialRegion> serial;
    if (options_.workers > 1) serial.emplace();
    std::vector<std::vector<int32_t>> batch;
    for (size_t b = next++; b < batches.size(); b = next++) {
      const auto [begin, end] = batches[b];
      batch.clear();
      for (size_t j = begin; j < end; ++j) batch.push_back(sources[order[j]]);
      std::vector<std::vector<Hypothesis>> hyps = search.Search(batch);
      for (size_t j = begin; j < end; ++j) collect(j, hyps[j - begin]);
      std::lock_guard<std::mutex> lock(progress_mu);
      done += end - begin;
      if (progress) progress(done, n);
    }
  };
  const size_t workers = std::min<size_t>(options_.workers, batches.size());
  if (workers <= 1) {
    work(search_);
    return results;
  }
  while (worker_searches_.size() + 1 < workers) {
    worker_searches_.push_back(std::make_unique<BeamSearch>(*model_, search_.options(), ensemble_));
  }
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        work(*worker_searches_[w - 1]);
      } catch (...) {
        errors[w] = std::current_exception();
        next = batches.size();  // the others stop after their batch
      }
    });
  }
  try {
    work(search_);
  } catch (...) {
    errors[0] = std::current_exception();
    next = batches.size();
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

std::vector<std::pair<size_t, size_t>> Translator::Batches(
    const std::vector<size_t>& order, const std::vector<std::vector<int32_t>>& sources) const {
  std::vector<std::pair<size_t, size_t>> batches;
  const size_t cap = options_.max_batch_sentences > 0
                         ? static_cast<size_t>(options_.max_batch_sentences)
                         : order.size();
  for (size_t begin = 0; begin < order.size();) {
    const size_t longest = sources[order[begin]].size();
    size_t end = begin + 1;
    while (end < order.size() && end - begin < cap &&
           (end - begin + 1) * longest <= static_cast<size_t>(options_.max_batch_tokens)) {
      ++end;
    }
    batches.emplace_back(begin, end);
    begin = end;
  }
  return batches;
}

std::unique_ptr<Translator> Translator::FromModelFile(const std::string& path,
                                                      const TranslatorOptions& options) {
  std::unique_ptr<ModelFile> file = ModelFile::Open(path);
  std::unique_ptr<TextCodec> codec = MakeVocabCodec(file->vocab());
  return std::make_unique<Translator>(std::move(file), std::move(codec), options);
}

}  // namespace tern::inference
