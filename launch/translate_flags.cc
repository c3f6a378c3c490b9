#include "launch/translate_flags.h"

#include <cmath>
#include <cstdlib>

#include "common/error.h"
#include "tensor/threads.h"

namespace tern {

const char kTranslateFlagsUsage[] =
    "  --beam N                beam size (default 4; 1 = greedy)\n"
    "  --alpha A               length normalization: score / length^A (default 1.0)\n"
    "  --max-batch-tokens N    source tokens per batch, padding included (default 4096)\n"
    "  --max-batch-sentences N at most N sentences per batch too (default 0: no cap)\n"
    "  --max-length-factor F   output length limit F * source length + 10 (default 2)\n"
    "  --threads N             kernel threads (default: the cores, up to 8; at most 1024)\n"
    "  --workers N             CPU: decode N batches at once, each on a thread of its own\n"
    "                          (instead of --threads, which splits each batch's products);\n"
    "                          fastest with small batches (--max-batch-tokens 256 to 512)\n"
    "  --max-input-length N    the longest input line in pieces (default: the model's\n"
    "                          max_length - 1); a longer line is not translated (see the\n"
    "                          program's own help for what it does with it)\n"
    "  --crop                  cut longer lines to --max-input-length instead\n"
    "  --quantize TYPE         run a float32 model's linear layers as int16 or int8\n"
    "                          (quantized at load; integer models need nothing)\n"
    "  --autotune              time float and integer products per layer and batch size\n"
    "                          over the first calls and keep the faster (results may then\n"
    "                          differ slightly from run to run)\n"
    "speed-ups (each alone or together; tern-export builds the model's tables):\n"
    "  --fused-output          bias, softmax and top-k in one pass over the logits\n"
    "                          (at beam 1 without --scores/--n-best: argmax, no softmax);\n"
    "                          the default with --device cuda\n"
    "  --unfused-output        bias, softmax and top-k as separate steps (the default on\n"
    "                          the CPU; on a GPU many times slower, for comparison)\n"
    "  --shortlist             output vocabulary = the model's lexical shortlist per batch\n"
    "  --shortlist-per-sentence  the shortlist of each sentence alone for its own rows, so\n"
    "                          its translation does not depend on the rest of its batch\n"
    "  --clusters              output vocabulary = the model's vocabulary clusters per step\n"
    "  --integer-output-layer  an integer model's output layer (E^T, the widest product)\n"
    "                          as integers too, shortlisted or not (default float32:\n"
    "                          int16 there changes a few more translations)\n"
    "  --skip-zero-activations  integer models: each feed-forward block's second product\n"
    "                          skips the inputs its ReLU left zero in all 4 rows of a tile\n"
    "                          (a beam's hypotheses); the same translations, less work\n"
    "GRU models (s2s, devlin), Devlin 2017's decoder speed-ups:\n"
    "  --precomputed-embeddings N  the first decoder GRU's input products of token ids\n"
    "                          below N from a table made at load (0 = off, the default)\n"
    "  --merge-states          the first decoder GRU's recurrent products once per\n"
    "                          distinct previous state in the beam\n"
    "  --approx-activations    vectorized rational tanh and sigmoid (error < 2e-6)\n"
    "  --no-precomputed-attention  recompute the source side of the attention every step\n"
    "                          (the unoptimized baseline)\n"
    "GPU (integer weights are run as float32 there):\n"
    "  --device cpu|cuda       where the model runs (default cpu); on cuda the\n"
    "                          encoder, decoder and fused output pass run on the GPU\n"
    "                          (an ensemble's every model, its mean made there)\n"
    "  --precision P           float32 (default), bf16 or fp16: the products' inputs\n"
    "                          (tensor cores on a GPU; AVX512-BF16 for bf16 on a CPU\n"
    "                          that has it; else emulated, slowly, on the CPU)\n";

int ParseIntFlag(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < 0 || v > 1 << 30) {
    Fail(flag, " needs a non-negative integer, got '", value, "'");
  }
  return static_cast<int>(v);
}

float ParseFloatFlag(const std::string& flag, const std::string& value, float lo, float hi) {
  char* end = nullptr;
  float v = std::strtof(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    Fail(flag, " needs a number from ", lo, " to ", hi, ", got '", value, "'");
  }
  return v;
}

void ForEachFlag(
    int argc, char** argv,
    const std::function<bool(const std::string& flag, const FlagValue& next)>& handle) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string flag = arg, value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) Fail(flag, " needs a value (see --help)");
      return argv[++i];
    };
    if (!handle(flag, next)) Fail("unknown option '", arg, "' (see --help)");
  }
}

namespace {

DType ParsePrecision(const std::string& p) {
  if (p == "float32") return DType::kFloat32;
  if (p == "bf16") return DType::kBFloat16;
  if (p == "fp16") return DType::kFloat16;
  Fail("--precision '", p, "' is not float32, bf16 or fp16");
}

// The switches without a value.
bool ParseSwitch(const std::string& flag, TranslateFlags* f) {
  if (flag == "--autotune") {
    f->autotune = true;
  } else if (flag == "--integer-output-layer") {
    f->integer_output_layer = true;
  } else if (flag == "--skip-zero-activations") {
    f->skip_zero_activations = true;
  } else if (flag == "--fused-output") {
    f->fused_output = 1;
  } else if (flag == "--unfused-output") {
    f->fused_output = 0;
  } else if (flag == "--shortlist") {
    f->shortlist = true;
  } else if (flag == "--shortlist-per-sentence") {
    f->shortlist = f->shortlist_per_sentence = true;
  } else if (flag == "--clusters") {
    f->clusters = true;
  } else if (flag == "--crop") {
    f->crop = true;
  } else if (flag == "--merge-states") {
    f->rnn.merge_states = true;
  } else if (flag == "--approx-activations") {
    f->rnn.approx_activations = true;
  } else if (flag == "--no-precomputed-attention") {
    f->rnn.precomputed_attention = false;
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool ParseTranslateFlag(const std::string& flag, const FlagValue& next, TranslateFlags* f) {
  if (ParseSwitch(flag, f)) return true;
  if (flag == "--beam") {
    f->beam = ParseIntFlag(flag, next());
  } else if (flag == "--alpha") {
    f->alpha = ParseFloatFlag(flag, next(), 0, inference::kMaxLengthAlpha);
  } else if (flag == "--max-batch-tokens") {
    f->max_batch_tokens = ParseIntFlag(flag, next());
  } else if (flag == "--max-batch-sentences") {
    f->max_batch_sentences = ParseIntFlag(flag, next());
  } else if (flag == "--max-length-factor") {
    f->max_length_factor = ParseFloatFlag(flag, next(), 0, inference::kMaxLengthFactor);
  } else if (flag == "--threads") {
    f->threads = ParseIntFlag(flag, next());
    CheckComputeThreads(flag, f->threads);
  } else if (flag == "--workers") {
    f->workers = ParseIntFlag(flag, next());
    CheckComputeThreads(flag, f->workers);
    if (f->workers < 1) Fail("--workers must be at least 1");
  } else if (flag == "--max-input-length") {
    f->max_input_length = ParseIntFlag(flag, next());
  } else if (flag == "--quantize") {
    f->quantize = next();
    if (f->quantize != "int16" && f->quantize != "int8") {
      Fail("--quantize '", f->quantize, "' is not int16 or int8");
    }
  } else if (flag == "--precomputed-embeddings") {
    f->rnn.precomputed_embeddings = ParseIntFlag(flag, next());
  } else if (flag == "--device") {
    const std::string d = next();
    if (d != "cpu" && d != "cuda") Fail("--device '", d, "' is not cpu or cuda");
    f->device = d == "cuda" ? Device::kCuda : Device::kCpu;
  } else if (flag == "--precision") {
    f->precision = ParsePrecision(next());
  } else {
    return false;
  }
  return true;
}

inference::TranslatorOptions MakeTranslatorOptions(const TranslateFlags& f) {
  if (f.beam < 1 || f.beam > inference::kMaxBeamSize) {
    Fail("--beam must be between 1 and ", inference::kMaxBeamSize);
  }
  if (f.workers > 1 && f.threads > 1) {
    Fail("--workers ", f.workers, " decodes that many batches at once, a thread each; --threads ",
         f.threads, " would split each batch's products too: give one or the other");
  }
  if (f.workers > 1 && f.device != Device::kCpu) {
    Fail("--workers is for the CPU; a GPU decodes one batch at a time: leave it at 1");
  }
  inference::TranslatorOptions options;
  options.search.beam_size = f.beam;
  options.search.n_best = 1;
  options.search.length_alpha = f.alpha;
  options.search.max_length_factor = f.max_length_factor;
  options.max_batch_tokens = f.max_batch_tokens;
  options.max_batch_sentences = f.max_batch_sentences;
  if (!f.quantize.empty()) {
    options.linear.quantize = f.quantize == "int16" ? cpu::IntType::kInt16 : cpu::IntType::kInt8;
  }
  options.linear.autotune = f.autotune;
  options.linear.integer_output_layer = f.integer_output_layer;
  options.linear.skip_zero_activations = f.skip_zero_activations;
  // On a GPU the unfused sequence brings every row's softmax to the host: the fused pass is the
  // GPU's way (12.8x the words/s at beam 4 on an H100), with the same hypotheses.
  options.search.fused_output =
      f.fused_output < 0 ? f.device == Device::kCuda : f.fused_output == 1;
  options.use_shortlist = f.shortlist;
  options.search.shortlist_per_sentence = f.shortlist_per_sentence;
  options.use_clusters = f.clusters;
  options.rnn = f.rnn;
  options.device = f.device;
  options.max_input_length = f.max_input_length;
  options.crop_input = f.crop;
  options.linear.inputs = f.precision;
  return options;
}

}  // namespace tern
