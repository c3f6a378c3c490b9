// Vocab: loads the SentencePiece shim module into its own link namespace and wraps its C API.
#include "data/vocab.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <utility>

#include "common/error.h"
#include "common/file_io.h"
#include "data/corpus.h"
#include "data/spm_shim.h"

namespace tern::data {
namespace {

struct ShimApi {
  TernSpmTrainFn train = nullptr;
  TernSpmLoadFn load = nullptr;
  TernSpmUnloadFn unload = nullptr;
  TernSpmPieceSizeFn piece_size = nullptr;
  TernSpmEncodeFn encode = nullptr;
  TernSpmDecodeFn decode = nullptr;
  TernSpmIdToPieceFn id_to_piece = nullptr;
  TernSpmFreeFn free = nullptr;
};

constexpr const char* kShimName = "libtern_spm_shim.so";

// Where the shim may be: $TERN_SPM_SHIM, next to the program or in ../lib, then the build tree.
std::vector<std::string> ShimCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("TERN_SPM_SHIM"); env != nullptr && *env != '\0') {
    out.push_back(env);
  }
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / kShimName).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / kShimName).string());
  }
#ifdef TERN_SPM_SHIM_BUILD_PATH
  out.push_back(TERN_SPM_SHIM_BUILD_PATH);
#endif
  return out;
}

template <typename Fn>
void Resolve(void* lib, const char* name, Fn* fn, const std::string& path) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) Fail("SentencePiece shim ", path, " lacks ", name, "; rebuild Tern");
}

// Loaded once per process (a failed load throws and is retried by the next caller).
const ShimApi& Shim() {
  static ShimApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : ShimCandidates()) {
      if (!std::filesystem::exists(path)) {
        tried += " " + path;
        continue;
      }
      // A new link namespace: the shim's libsentencepiece (with its private protobuf) is not seen
      // by, and does not see, the libprotobuf this process already uses.
      void* lib = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) Fail("cannot load SentencePiece shim ", path, ": ", dlerror());
      Resolve(lib, "tern_spm_train", &api.train, path);
      Resolve(lib, "tern_spm_load", &api.load, path);
      Resolve(lib, "tern_spm_unload", &api.unload, path);
      Resolve(lib, "tern_spm_piece_size", &api.piece_size, path);
      Resolve(lib, "tern_spm_encode", &api.encode, path);
      Resolve(lib, "tern_spm_decode", &api.decode, path);
      Resolve(lib, "tern_spm_id_to_piece", &api.id_to_piece, path);
      Resolve(lib, "tern_spm_free", &api.free, path);
      return;
    }
    Fail("SentencePiece shim ", kShimName, " not found (tried", tried,
         "); set TERN_SPM_SHIM to its path or install it next to the program");
  });
  return api;
}

// Takes ownership of a shim-allocated string.
std::string TakeString(char* p, size_t len) {
  if (p == nullptr) return {};
  std::string out(p, len);
  Shim().free(p);
  return out;
}

std::string TakeError(char* p) {
  if (p == nullptr) return "unknown error";
  std::string out(p);
  Shim().free(p);
  return out;
}

// Keeps at most `limit` items, each with equal probability (reservoir sampling, seeded).
class Reservoir {
 public:
  Reservoir(int64_t limit, uint32_t seed) : limit_(limit), rng_(seed) {}
  void Add(std::string_view s) {
    ++seen_;
    if (static_cast<int64_t>(items_.size()) < limit_) {
      items_.emplace_back(s);
      return;
    }
    uint64_t j = rng_() % static_cast<uint64_t>(seen_);
    if (j < static_cast<uint64_t>(limit_)) items_[j].assign(s);
  }
  std::vector<std::string>& items() { return items_; }

 private:
  int64_t limit_;
  int64_t seen_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::string> items_;
};

}  // namespace

Vocab Vocab::Train(const std::vector<std::string>& files, int vocab_size,
                   const std::string& model_path) {
  VocabTrainOptions options;
  options.vocab_size = vocab_size;
  return Train(files, options, model_path);
}

Vocab Vocab::Train(const std::vector<std::string>& files, const VocabTrainOptions& options,
                   const std::string& model_path) {
  if (files.empty()) Fail("vocabulary training needs at least one text file");
  Reservoir sample(options.max_sentences, options.seed);
  for (const std::string& file : files) {
    LineReader reader(file, options.max_sentence_bytes);
    std::string_view line;
    while (reader.Next(&line)) {
      if (reader.truncated() || !IsValidUtf8(line) || IsBlank(line)) continue;
      sample.Add(line);
    }
  }
  if (sample.items().empty()) {
    Fail("no usable lines in the vocabulary training files (", files.front(), " ...)");
  }
  Vocab vocab = TrainFromSentences(sample.items(), options);
  const std::string dir = std::filesystem::path(model_path).parent_path().string();
  if (!dir.empty()) MakeDirs(dir);
  WriteFileAtomic(model_path, vocab.serialized());
  return vocab;
}

Vocab Vocab::TrainFromSentences(const std::vector<std::string>& sentences,
                                const VocabTrainOptions& options) {
  std::string text;
  for (const std::string& s : sentences) {
    CHECK(s.find('\n') == std::string::npos);
    text += s;
    text += '\n';
  }
  std::string args = StrCat(
      "model_type=", options.model_type, "\nvocab_size=", options.vocab_size,
      "\ncharacter_coverage=", options.character_coverage,
      "\nnormalization_rule_name=", options.normalization_rule,
      "\nbyte_fallback=", options.byte_fallback ? "true" : "false", "\npad_id=", kPadId,
      "\nunk_id=", kUnkId, "\nbos_id=", kBosId, "\neos_id=", kEosId, "\nrandom_seed=", options.seed,
      "\nnum_threads=", options.num_threads, "\ninput_sentence_size=", sentences.size(),
      "\nshuffle_input_sentence=false", "\nmax_sentence_length=", options.max_sentence_bytes,
      // Small corpora cannot always fill vocab_size; take what there is instead of failing.
      "\nhard_vocab_limit=false\nminloglevel=1\n");
  char* model = nullptr;
  size_t model_len = 0;
  char* error = nullptr;
  if (Shim().train(args.data(), args.size(), text.data(), text.size(), &model, &model_len,
                   &error) != 0) {
    Fail("SentencePiece training failed: ", TakeError(error));
  }
  return FromSerialized(TakeString(model, model_len), "trained vocabulary");
}

Vocab Vocab::Load(const std::string& path) {
  if (!FileExists(path)) {
    Fail("vocabulary ", path,
         " does not exist; train one (tern-train does when data.vocab is "
         "missing) or fix data.vocab");
  }
  return FromSerialized(ReadFile(path), path);
}

Vocab Vocab::FromSerialized(std::string_view bytes, const std::string& what) {
  char* error = nullptr;
  void* handle = Shim().load(bytes.data(), bytes.size(), &error);
  if (handle == nullptr) {
    Fail(what, " is not a SentencePiece model (", TakeError(error), ")");
  }
  Vocab vocab;
  vocab.handle_ = handle;
  vocab.size_ = Shim().piece_size(handle);
  vocab.serialized_ = std::string(bytes);
  const std::pair<int32_t, const char*> specials[] = {
      {kPadId, "<pad>"}, {kUnkId, "<unk>"}, {kBosId, "<s>"}, {kEosId, "</s>"}};
  for (const auto& [id, piece] : specials) {
    if (vocab.size_ <= id || vocab.IdToPiece(id) != piece) {
      Fail(what, ": id ", id, " must be ", piece,
           " (Tern needs pad=0 unk=1 bos=2 eos=3); retrain the vocabulary with Tern");
    }
  }
  return vocab;
}

Vocab::Vocab(Vocab&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      size_(other.size_),
      serialized_(std::move(other.serialized_)) {}

Vocab& Vocab::operator=(Vocab&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) Shim().unload(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    size_ = other.size_;
    serialized_ = std::move(other.serialized_);
  }
  return *this;
}

Vocab::~Vocab() {
  if (handle_ != nullptr) Shim().unload(handle_);
}

std::vector<int32_t> Vocab::Encode(std::string_view text) const {
  CHECK(handle_ != nullptr) << "use of a moved-from Vocab";
  int32_t* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  if (Shim().encode(handle_, text.data(), text.size(), &ids, &n, &error) != 0) {
    Fail("SentencePiece could not encode a line: ", TakeError(error));
  }
  std::vector<int32_t> out(ids, ids + n);
  Shim().free(ids);
  return out;
}

std::string Vocab::Decode(std::span<const int32_t> ids) const {
  CHECK(handle_ != nullptr) << "use of a moved-from Vocab";
  for (int32_t id : ids) CHECK(id >= 0 && id < size_) << "id " << id << " out of vocabulary";
  char* text = nullptr;
  size_t len = 0;
  char* error = nullptr;
  if (Shim().decode(handle_, ids.data(), ids.size(), &text, &len, &error) != 0) {
    Fail("SentencePiece could not decode ids: ", TakeError(error));
  }
  return TakeString(text, len);
}

std::string Vocab::IdToPiece(int32_t id) const {
  CHECK(handle_ != nullptr) << "use of a moved-from Vocab";
  char* piece = nullptr;
  size_t len = 0;
  CHECK_EQ(Shim().id_to_piece(handle_, id, &piece, &len), 0) << "id " << id << " out of range";
  return TakeString(piece, len);
}

}  // namespace tern::data
