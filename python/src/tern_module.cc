// tern._tern: the runtime's Translator and tern-score's metrics for Python (pybind11). The
// package's tern/__init__.py re-exports these; docs/python.md says how to use them.
//
// Threads: translate_batch converts its arguments with the GIL held, then releases it and takes
// the Translator's mutex, so other Python threads run while it decodes and calls from several
// threads are served one at a time (each call's own batches use the compute threads or workers).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "data/metrics.h"
#include "inference/format/model_file.h"
#include "inference/search/beam_search.h"
#include "inference/text_codec.h"
#include "inference/translator.h"
#include "launch/translate_flags.h"
#include "python/src/model_writer.h"
#include "tensor/threads.h"

namespace py = pybind11;

namespace tern::python {
namespace {

// One call's search settings: a Translator is built for each distinct set and kept.
struct SearchKey {
  int beam_size;
  int n_best;
  float length_penalty;
  float max_length_factor;
  int max_input_length;
  bool crop_input;
  int max_batch_size;
  bool pieces;
  auto Tie() const {
    return std::tie(beam_size, n_best, length_penalty, max_length_factor, max_input_length,
                    crop_input, max_batch_size, pieces);
  }
  bool operator<(const SearchKey& o) const { return Tie() < o.Tie(); }
};

struct TranslationResult {
  // Text, or pieces for a call given pieces (py::object keeps either).
  std::vector<py::object> hypotheses;
  std::vector<float> scores;     // normalized (log-probability / length^length_penalty)
  std::vector<float> log_probs;  // sums of log-probabilities
  int64_t pieces_over_limit = 0;
};

std::vector<std::string> SplitPieces(const std::string& line) {
  std::vector<std::string> pieces;
  for (size_t b = 0; b < line.size();) {
    size_t e = line.find(' ', b);
    if (e == std::string::npos) e = line.size();
    if (e > b) pieces.push_back(line.substr(b, e - b));
    b = e + 1;
  }
  return pieces;
}

std::string WeightType(const inference::ModelFile& file) {
  std::string type;
  for (const inference::TensorEntry& e : file.table()) {
    if (e.shape.rank() != 2 || e.dtype == inference::FileDType::kInt32) continue;
    const char* t = e.dtype == inference::FileDType::kInt16  ? "int16"
                    : e.dtype == inference::FileDType::kInt8 ? "int8"
                                                             : "float32";
    if (type.empty() || type == "float32") type = t;  // a quantized file keeps float tables
  }
  return type.empty() ? "float32" : type;
}

// "train.es" -> "es": a training file's suffix when it looks like a language code, else "".
std::string LanguageOf(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string suffix = path.substr(dot + 1);
  if (suffix.size() < 2 || suffix.size() > 3) return "";
  for (char c : suffix) {
    if (c < 'a' || c > 'z') return "";
  }
  return suffix;
}

class Translator {
 public:
  // switches: tern-translate's speed switches (docs/runtime.md) as the constructor's keywords set
  // them; the arguments before it fill the rest of the flags.
  Translator(const std::string& path, const std::string& device, int threads, int workers,
             const std::string& compute_type, int max_batch_tokens, const TranslateFlags& switches)
      : file_(inference::ModelFile::Open(path)),
        flags_(switches),
        text_codec_(inference::MakeVocabCodec(file_->vocab())),
        piece_codec_(inference::MakePieceCodec(file_->vocab())) {
    if (device == "cuda") {
      flags_.device = Device::kCuda;
    } else if (device != "cpu") {
      throw py::value_error("device must be \"cpu\" or \"cuda\", not \"" + device + "\"");
    }
    if (threads < 0) throw py::value_error("threads must be >= 0 (0: the machine's cores)");
    if (workers < 1) throw py::value_error("workers must be >= 1");
    if (workers > 1 && threads > 1) {
      throw py::value_error(
          "workers decodes that many batches at once, a thread each; threads would split each "
          "batch's products too: give one or the other");
    }
    if (workers > 1 && flags_.device != Device::kCpu) {
      throw py::value_error("workers is for the CPU; a GPU decodes one batch at a time");
    }
    if (compute_type == "int16" || compute_type == "int8") {
      flags_.quantize = compute_type;
    } else if (compute_type != "default") {
      throw py::value_error(
          "compute_type must be \"default\" (the file's weights), \"int16\" or "
          "\"int8\", not \"" +
          compute_type + "\"");
    }
    if (max_batch_tokens < 1) throw py::value_error("max_batch_tokens must be >= 1");
    flags_.max_batch_tokens = max_batch_tokens;
    flags_.threads = threads;
    flags_.workers = workers;
    if (threads > 0) SetComputeThreads(threads);
    // The default search, built now: a model the runtime cannot run fails here, not at the
    // first call.
    Get(SearchKey{4, 1, 1.f, 2.f, 0, false, 0, false});
  }

  std::vector<TranslationResult> TranslateBatch(const py::sequence& source, int beam_size,
                                                int n_best, bool return_scores,
                                                int max_input_length, bool crop_input,
                                                float length_penalty,
                                                float max_decoding_length_factor,
                                                int max_batch_size) {
    if (beam_size < 1 || beam_size > inference::kMaxBeamSize) {
      throw py::value_error("beam_size must be between 1 and " +
                            std::to_string(inference::kMaxBeamSize) + ", not " +
                            std::to_string(beam_size));
    }
    if (n_best < 1 || n_best > beam_size) {
      throw py::value_error("n_best must be between 1 and beam_size (" + std::to_string(beam_size) +
                            "), not " + std::to_string(n_best));
    }
    if (max_input_length < 0) {
      throw py::value_error("max_input_length must be >= 0 (0: the model's trained length)");
    }
    if (!std::isfinite(length_penalty) || length_penalty < 0) {
      throw py::value_error("length_penalty must be a finite number >= 0");
    }
    if (!std::isfinite(max_decoding_length_factor) || max_decoding_length_factor <= 0) {
      throw py::value_error("max_decoding_length_factor must be a finite number > 0");
    }
    if (max_batch_size < 0) {
      throw py::value_error("max_batch_size must be >= 0 (0: batches bounded by tokens only)");
    }
    if (py::isinstance<py::str>(source) || py::isinstance<py::bytes>(source)) {
      throw py::type_error("source is one string; give a list of lines (or of lists of pieces)");
    }
    // Every line text, or every line a list of pieces (joined by spaces for the piece codec).
    std::vector<std::string> lines;
    const size_t count = py::len(source);
    lines.reserve(count);
    bool pieces = false;
    for (size_t i = 0; i < count; ++i) {
      py::handle item = source[i];
      const bool is_text = py::isinstance<py::str>(item);
      if (i == 0) pieces = !is_text;
      if (is_text == pieces) {
        throw py::type_error("source[" + std::to_string(i) +
                             "]: give every line as a string, or every line as a list of pieces; "
                             "not both in one call");
      }
      if (is_text) {
        lines.push_back(item.cast<std::string>());
        continue;
      }
      if (!py::isinstance<py::sequence>(item) || py::isinstance<py::bytes>(item)) {
        throw py::type_error("source[" + std::to_string(i) +
                             "] is neither a string nor a list of pieces");
      }
      std::string line;
      size_t j = 0;
      for (py::handle piece : item) {
        if (!py::isinstance<py::str>(piece)) {
          throw py::type_error("source[" + std::to_string(i) + "][" + std::to_string(j) +
                               "] is not a string");
        }
        const std::string p = piece.cast<std::string>();
        if (p.empty() || p.find(' ') != std::string::npos) {
          throw py::value_error("source[" + std::to_string(i) + "][" + std::to_string(j) +
                                "] is not a piece: pieces are non-empty and hold no space (the "
                                "model's pieces mark a word's start with \"\u2581\")");
        }
        if (!line.empty()) line += ' ';
        line += p;
        ++j;
      }
      lines.push_back(std::move(line));
    }
    const SearchKey key{beam_size,        n_best,     length_penalty, max_decoding_length_factor,
                        max_input_length, crop_input, max_batch_size, pieces};
    std::vector<std::vector<inference::Translation>> translations;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      translations = Get(key).Translate(lines);
    }
    std::vector<TranslationResult> results(translations.size());
    for (size_t i = 0; i < translations.size(); ++i) {
      TranslationResult& r = results[i];
      r.pieces_over_limit = translations[i][0].pieces_over_limit;
      if (r.pieces_over_limit > 0) continue;
      for (const inference::Translation& t : translations[i]) {
        if (pieces) {
          r.hypotheses.push_back(py::cast(SplitPieces(t.text)));
        } else {
          r.hypotheses.push_back(py::str(t.text));
        }
        if (return_scores) {
          r.scores.push_back(t.normalized_score);
          r.log_probs.push_back(t.score);
        }
      }
    }
    return results;
  }

  // The model's segmentation of each line, and the text of a list of pieces.
  std::vector<std::vector<std::string>> Encode(const std::vector<std::string>& lines) const {
    std::vector<std::vector<std::string>> out;
    out.reserve(lines.size());
    for (const std::string& line : lines) {
      out.push_back(SplitPieces(piece_codec_->Decode(text_codec_->Encode(line))));
    }
    return out;
  }
  std::string Decode(const std::vector<std::string>& pieces) const {
    std::string line;
    for (const std::string& p : pieces) {
      if (!line.empty()) line += ' ';
      line += p;
    }
    return text_codec_->Decode(piece_codec_->Encode(line));
  }

  py::dict Metadata() const {
    const config::TrainConfig& c = file_->config();
    const config::ModelConfig& m = c.model();
    py::dict d;
    d["path"] = file_->path();
    d["arch"] = file_->arch();
    d["arch_revision"] = file_->arch_revision();
    d["weight_type"] = WeightType(*file_);
    d["vocab_size"] = c.data().vocab_size();
    d["emb_dim"] = m.emb_dim();
    d["enc_depth"] = m.enc_depth();
    d["dec_depth"] = m.dec_depth();
    d["heads"] = m.heads();
    d["ffn_dim"] = m.ffn_dim();
    d["max_length"] = m.max_length();
    d["tied_embeddings"] = m.tied_embeddings();
    d["pre_norm"] = m.pre_norm();
    const std::string src = LanguageOf(c.data().train_src());
    const std::string tgt = LanguageOf(c.data().train_tgt());
    d["source_language"] = src.empty() ? py::object(py::none()) : py::object(py::str(src));
    d["target_language"] = tgt.empty() ? py::object(py::none()) : py::object(py::str(tgt));
    return d;
  }

  int max_input_length() {
    std::lock_guard<std::mutex> lock(mu_);
    return Get(SearchKey{4, 1, 1.f, 2.f, 0, false, 0, false}).max_input_length();
  }

 private:
  // The Translator for `key`, built on the file's weights at its first use; the least recently
  // built one goes when there are more than kMaxKept. REQUIRES: mu_ held, or the constructor.
  inference::Translator& Get(const SearchKey& key) {
    auto it = translators_.find(key);
    if (it != translators_.end()) return *it->second;
    static constexpr size_t kMaxKept = 4;
    if (translators_.size() >= kMaxKept) {
      translators_.erase(built_.front());
      built_.erase(built_.begin());
    }
    TranslateFlags flags = flags_;
    flags.beam = key.beam_size;
    flags.alpha = key.length_penalty;
    flags.max_length_factor = key.max_length_factor;
    flags.max_input_length = key.max_input_length;
    flags.crop = key.crop_input;
    flags.max_batch_sentences = key.max_batch_size;
    inference::TranslatorOptions options = MakeTranslatorOptions(flags);
    options.workers = flags_.workers;
    options.search.n_best = key.n_best;
    std::unique_ptr<inference::TextCodec> codec = key.pieces
                                                      ? inference::MakePieceCodec(file_->vocab())
                                                      : inference::MakeVocabCodec(file_->vocab());
    auto translator = std::make_unique<inference::Translator>(
        file_->config().model(), file_->weights(), std::move(codec), options);
    built_.push_back(key);
    return *(translators_[key] = std::move(translator));
  }

  std::unique_ptr<inference::ModelFile> file_;
  TranslateFlags flags_;
  std::unique_ptr<inference::TextCodec> text_codec_;   // thread-safe: SentencePiece's
  std::unique_ptr<inference::TextCodec> piece_codec_;  // read-only tables
  std::mutex mu_;
  std::map<SearchKey, std::unique_ptr<inference::Translator>> translators_;
  std::vector<SearchKey> built_;  // translators_'s keys, oldest first
};

// tern.NAME(hypotheses, references): `score` (a corpus metric of data/metrics.h) on one
// hypothesis per reference, the GIL released while it counts.
template <typename Score>
void DefScore(py::module_& m, const char* name,
              Score (*score)(const std::vector<std::string>&, const std::vector<std::string>&)) {
  m.def(
      name,
      [score](const std::vector<std::string>& hypotheses,
              const std::vector<std::string>& references) {
        if (hypotheses.size() != references.size()) {
          throw py::value_error("hypotheses has " + std::to_string(hypotheses.size()) +
                                " lines but references has " + std::to_string(references.size()) +
                                "; give one hypothesis per reference");
        }
        if (references.empty()) {
          throw py::value_error("references is empty; there is nothing to score");
        }
        py::gil_scoped_release release;
        return score(hypotheses, references);
      },
      py::arg("hypotheses"), py::arg("references"));
}

}  // namespace
}  // namespace tern::python

PYBIND11_MODULE(_tern, m) {
  using namespace tern::python;
  namespace data = tern::data;
  m.doc() = "Tern's inference runtime and metrics (see the tern package)";
  py::register_exception<tern::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<TranslationResult>(m, "TranslationResult")
      .def_readonly("hypotheses", &TranslationResult::hypotheses)
      .def_readonly("scores", &TranslationResult::scores)
      .def_readonly("log_probs", &TranslationResult::log_probs)
      .def_readonly("pieces_over_limit", &TranslationResult::pieces_over_limit)
      .def("__repr__", [](const TranslationResult& r) {
        return "TranslationResult(hypotheses=" +
               py::repr(py::cast(r.hypotheses)).cast<std::string>() +
               ", scores=" + py::repr(py::cast(r.scores)).cast<std::string>() + ")";
      });

  py::class_<Translator>(m, "Translator")
      .def(py::init([](const std::string& path, const std::string& device, int threads, int workers,
                       const std::string& compute_type, int max_batch_tokens,
                       std::optional<bool> fused_output, bool integer_output_layer,
                       bool skip_zero_activations, bool shortlist, bool shortlist_per_sentence,
                       bool clusters) {
             tern::TranslateFlags s;
             s.fused_output = fused_output ? static_cast<int>(*fused_output) : -1;
             s.integer_output_layer = integer_output_layer;
             s.skip_zero_activations = skip_zero_activations;
             s.shortlist = shortlist || shortlist_per_sentence;  // as --shortlist-per-sentence
             s.shortlist_per_sentence = shortlist_per_sentence;
             s.clusters = clusters;
             return std::make_unique<Translator>(path, device, threads, workers, compute_type,
                                                 max_batch_tokens, s);
           }),
           py::arg("model_path"), py::arg("device") = "cpu", py::arg("threads") = 0,
           py::arg("workers") = 1, py::arg("compute_type") = "default",
           py::arg("max_batch_tokens") = 4096, py::kw_only(), py::arg("fused_output") = py::none(),
           py::arg("integer_output_layer") = false, py::arg("skip_zero_activations") = false,
           py::arg("shortlist") = false, py::arg("shortlist_per_sentence") = false,
           py::arg("clusters") = false)
      .def("translate_batch", &Translator::TranslateBatch, py::arg("source"), py::kw_only(),
           py::arg("beam_size") = 4, py::arg("n_best") = 1, py::arg("return_scores") = false,
           py::arg("max_input_length") = 0, py::arg("crop_input") = false,
           py::arg("length_penalty") = 1.f, py::arg("max_decoding_length_factor") = 2.f,
           py::arg("max_batch_size") = 0)
      .def("encode", &Translator::Encode, py::arg("lines"),
           py::call_guard<py::gil_scoped_release>())
      .def("decode", &Translator::Decode, py::arg("pieces"))
      .def_property_readonly("metadata", &Translator::Metadata)
      .def_property_readonly("max_input_length", &Translator::max_input_length);

  py::class_<data::BleuScore>(m, "BleuScore")
      .def_readonly("score", &data::BleuScore::score)
      .def_property_readonly("precisions",
                             [](const data::BleuScore& b) {
                               return std::vector<double>(b.precisions.begin(), b.precisions.end());
                             })
      .def_readonly("bp", &data::BleuScore::brevity_penalty)
      .def_readonly("ratio", &data::BleuScore::ratio)
      .def_readonly("hyp_len", &data::BleuScore::hyp_len)
      .def_readonly("ref_len", &data::BleuScore::ref_len)
      .def("__str__", &data::BleuScore::Format)
      .def("__repr__", &data::BleuScore::Format);
  py::class_<data::ChrfScore>(m, "ChrfScore")
      .def_readonly("score", &data::ChrfScore::score)
      .def("__str__", &data::ChrfScore::Format)
      .def("__repr__", &data::ChrfScore::Format);

  DefScore(m, "score_bleu", &data::CorpusBleu);
  DefScore(m, "score_chrf", &data::CorpusChrf);
  m.def(
      "set_threads",
      [](int threads) {
        if (threads < 1 || threads > tern::kMaxComputeThreads) {
          throw py::value_error("threads must be between 1 and " +
                                std::to_string(tern::kMaxComputeThreads));
        }
        tern::SetComputeThreads(threads);
      },
      py::arg("threads"));
  m.def("blas_core", &tern::BlasCoreName);
  DefModelWriter(m);
}
