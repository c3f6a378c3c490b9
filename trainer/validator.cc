#include "trainer/validator.h"

#include <fstream>
#include <limits>

#include "common/error.h"
#include "common/timer.h"
#include "data/data_options.h"
#include "data/metrics.h"
#include "graph/graph.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/text_codec.h"
#include "inference/translator.h"
#include "trainer/training_data.h"

namespace tern::trainer {
namespace {

std::vector<std::string> ReadLines(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  if (!in) Fail("cannot open validation file ", path, " (data.valid_src / data.valid_tgt)");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line) && (max_lines == 0 || lines.size() < max_lines))
    lines.push_back(line);
  return lines;
}

inference::Weights ViewOf(const graph::ParamStore& params) {
  inference::Weights w("trainer parameters");
  for (int i = 0; i < params.size(); ++i) w.Add(params.info(i).name, params.value(i));
  return w;
}

}  // namespace

Validator::Validator(const config::TrainConfig& config, const data::Vocab& vocab)
    : config_(config), vocab_(vocab) {
  const bool decodable = inference::RuntimeSupports(config.model().arch());
  if (!decodable)
    LOG(INFO) << "[valid] the runtime cannot decode model.arch '" << config.model().arch()
              << "' yet: validation reports dev cross-entropy only (no BLEU), and no model.tern "
                 "is exported";
  const config::DataConfig& d = config.data();
  if (d.valid_src().empty() || d.valid_tgt().empty() || config.training().valid_freq() <= 0) return;
  data::Batcher batcher(data::ValidationBatcherOptionsFromConfig(d), vocab);
  data::Batch b;
  while (batcher.Next(&b)) batches_.push_back(b);
  CheckDevLengths();
  const size_t max = static_cast<size_t>(std::max(0, config.training().valid_max_sentences()));
  sources_ = ReadLines(d.valid_src(), max);
  references_ = ReadLines(d.valid_tgt(), max);
  if (sources_.size() != references_.size())
    Fail(d.valid_src(), " has ", sources_.size(), " lines but ", d.valid_tgt(), " has ",
         references_.size());
  if (!decodable) {
    sources_.clear();
    references_.clear();
  }
  LOG(INFO) << "[valid] " << batches_.size() << " batches for cross-entropy, " << sources_.size()
            << " sentences for BLEU";
}

void Validator::CheckDevLengths() const {
  const config::ModelConfig& m = config_.model();
  if (m.arch() != "transformer" && m.arch() != "aan") return;  // the GRU models have no positions
  for (const data::Batch& b : batches_) {
    const bool source = b.src_len > m.max_length();
    if (!source && b.tgt_len <= m.max_length()) continue;
    const std::vector<int32_t>& ids = source ? b.src : b.tgt_out;
    const int len = source ? b.src_len : b.tgt_len;
    for (int i = 0; i < b.batch_size; ++i) {
      if (ids[static_cast<size_t>(i) * len + len - 1] == data::kPadId) continue;  // not the longest
      Fail(source ? config_.data().valid_src() : config_.data().valid_tgt(), ":",
           b.sentence_ids[i] + 1, ": a dev sentence of ", len - 1,
           " pieces, longer than the Transformer's positions (model.max_length ", m.max_length(),
           ", one of them for eos or bos); raise model.max_length or shorten the line");
    }
  }
}

ValidationResult Validator::Run(const models::Model& model, const graph::ParamStore& params,
                                Arena* arena, const graph::ParamStore& host_params) {
  Timer timer;
  ValidationResult r;
  double loss = 0;
  int64_t words = 0;
  for (const data::Batch& b : batches_) {
    graph::Graph g(arena, /*training=*/false);
    models::BatchTensors t = ToTensors(b, arena);
    loss += models::TokenLoss(g, model.Logits(g, params, t), t.tgt_out, 0.f).value().ToVector()[0];
    words += b.target_tokens;
    arena->Reset();
  }
  r.cross_entropy = words > 0 ? loss / words : 0;
  if (!sources_.empty()) {
    inference::Weights weights = ViewOf(host_params);
    inference::TranslatorOptions options;
    options.search.beam_size = std::max(1, config_.training().valid_beam());
    // Every dev line is translated, however long (a Transformer's fit its positions: checked at
    // start-up).
    options.max_input_length = std::numeric_limits<int>::max();
    if (params.size() > 0 && params.value(0).device() == Device::kCuda) {
      // A GPU run decodes there: on the host it would translate on the training threads.
      options.device = Device::kCuda;
      options.search.fused_output = true;
    }
    r.translated_on = options.device;
    inference::Translator translator(config_.model(), weights,
                                     inference::MakeVocabCodec(vocab_.serialized()), options);
    std::vector<std::vector<inference::Translation>> out = translator.Translate(sources_);
    for (const auto& n_best : out) r.hypotheses.push_back(n_best.empty() ? "" : n_best[0].text);
    r.bleu = data::CorpusBleu(r.hypotheses, references_).score;
    r.chrf = data::CorpusChrf(r.hypotheses, references_).score;
    r.has_bleu = true;
  }
  r.seconds = timer.Seconds();
  return r;
}

bool Validator::ExportModel(const graph::ParamStore& params, const Tensor& values,
                            const std::string& path) const {
  if (!inference::RuntimeSupports(config_.model().arch())) return false;  // said once, at start
  CHECK_EQ(values.numel(), params.total_size());
  std::vector<inference::NamedTensor> tensors;
  for (int i = 0; i < params.size(); ++i) {
    const graph::ParamInfo& p = params.info(i);
    tensors.push_back(
        {p.name, values.Slice(p.offset, p.offset + p.shape.numel()).Reshape(p.shape)});
  }
  inference::WriteModelFile(path, config_, vocab_.serialized(), tensors);
  return true;
}

}  // namespace tern::trainer
