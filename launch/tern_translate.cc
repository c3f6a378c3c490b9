// tern-translate: translates raw text with an exported model (.tern). Reads lines on stdin and
// writes one translation per line on stdout, in order; the batch sorting happens inside chunks of
// input lines. Links no MPI (DESIGN.md rule 1).
//
//   tern-translate --model model.tern [--model more.tern ...] [--beam 4] [--n-best] [--scores]
//   [--alpha 1.0]
//                  [--max-batch-tokens 4096] [--max-batch-sentences N]
//                  [--max-length-factor 2] [--threads N]
//                  [--quantize int16|int8] [--autotune] [--integer-output-layer]
//                  [--fused-output | --unfused-output] [--shortlist |
//                  --shortlist-per-sentence | --clusters] [--top-up]
//                  [--precomputed-embeddings N] [--merge-states] [--approx-activations]
//                  [--no-precomputed-attention] [--device cpu|cuda]
//                  [--precision float32|bf16|fp16] < in > out
// A model exported with int16/int8 weights runs its linear layers through the integer GEMM
// (tensor/cpu/int_gemm.h; TERN_ISA=sse2|avx2|avx512 picks the kernel).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "common/timer.h"
#include "inference/translator.h"
#include "tensor/threads.h"

namespace tern {
namespace {

constexpr char kUsage[] =
    "usage: tern-translate --model PATH [options] < input > output\n"
    "Translates raw text, one sentence per line, with an exported Tern model.\n"
    "  --model PATH            the .tern model file (required); repeated, an ensemble:\n"
    "                          every step averages the models' log-probabilities (one\n"
    "                          vocabulary; --shortlist and --clusters take the first\n"
    "                          model's tables, and restrict every model)\n"
    "  --beam N                beam size (default 4; 1 = greedy)\n"
    "  --n-best                write all N hypotheses per line as\n"
    "                          'LINE ||| TEXT ||| SCORE ||| NORMALIZED_SCORE' (LINE from 0)\n"
    "  --scores                write 'TEXT ||| NORMALIZED_SCORE' instead of the text alone\n"
    "  --alpha A               length normalization: score / length^A (default 1.0)\n"
    "  --max-batch-tokens N    source tokens per batch, padding included (default 4096)\n"
    "  --max-batch-sentences N at most N sentences per batch too (default 0: no cap)\n"
    "  --max-length-factor F   output length limit F * source length + 10 (default 2)\n"
    "  --threads N             kernel threads (default: the cores, up to 8)\n"
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
    "  --top-up                top-up batching: finished sentences replaced by waiting ones\n"
    "                          once the batch is half empty (prints the mean occupancy)\n"
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
    "                          (tensor cores on a GPU; emulated, slowly, on the CPU)\n"
    "  --help                  this text\n";

constexpr size_t kChunkLines = 20000;  // lines sorted and batched together

struct Args {
  std::vector<std::string> models;
  int beam = 4;
  bool n_best = false;
  bool scores = false;
  float alpha = 1.f;
  int max_batch_tokens = 4096;
  int max_batch_sentences = 0;
  float max_length_factor = 2.f;
  int threads = 0;
  std::string quantize;
  bool autotune = false;
  bool integer_output_layer = false;
  bool skip_zero_activations = false;
  int fused_output = -1;  // -1: the device's default (fused on cuda)
  bool shortlist = false;
  bool shortlist_per_sentence = false;
  bool clusters = false;
  bool top_up = false;
  inference::RnnOptions rnn;
  Device device = Device::kCpu;
  DType precision = DType::kFloat32;
  bool help = false;
};

int ParseInt(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < 0 || v > 1 << 30) {
    Fail(flag, " needs a non-negative integer, got '", value, "'");
  }
  return static_cast<int>(v);
}

float ParseFloat(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  float v = std::strtof(value.c_str(), &end);
  if (value.empty() || *end != '\0') Fail(flag, " needs a number, got '", value, "'");
  return v;
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) Fail(flag, " needs a value (see --help)");
      return argv[++i];
    };
    if (flag == "--model") {
      args.models.push_back(next());
    } else if (flag == "--beam") {
      args.beam = ParseInt(flag, next());
    } else if (flag == "--n-best") {
      args.n_best = true;
    } else if (flag == "--scores") {
      args.scores = true;
    } else if (flag == "--alpha") {
      args.alpha = ParseFloat(flag, next());
    } else if (flag == "--max-batch-tokens") {
      args.max_batch_tokens = ParseInt(flag, next());
    } else if (flag == "--max-batch-sentences") {
      args.max_batch_sentences = ParseInt(flag, next());
    } else if (flag == "--max-length-factor") {
      args.max_length_factor = ParseFloat(flag, next());
    } else if (flag == "--threads") {
      args.threads = ParseInt(flag, next());
    } else if (flag == "--quantize") {
      args.quantize = next();
      if (args.quantize != "int16" && args.quantize != "int8") {
        Fail("--quantize '", args.quantize, "' is not int16 or int8");
      }
    } else if (flag == "--autotune") {
      args.autotune = true;
    } else if (flag == "--integer-output-layer") {
      args.integer_output_layer = true;
    } else if (flag == "--skip-zero-activations") {
      args.skip_zero_activations = true;
    } else if (flag == "--fused-output") {
      args.fused_output = 1;
    } else if (flag == "--unfused-output") {
      args.fused_output = 0;
    } else if (flag == "--shortlist") {
      args.shortlist = true;
    } else if (flag == "--shortlist-per-sentence") {
      args.shortlist = args.shortlist_per_sentence = true;
    } else if (flag == "--clusters") {
      args.clusters = true;
    } else if (flag == "--top-up") {
      args.top_up = true;
    } else if (flag == "--precomputed-embeddings") {
      args.rnn.precomputed_embeddings = ParseInt(flag, next());
    } else if (flag == "--merge-states") {
      args.rnn.merge_states = true;
    } else if (flag == "--approx-activations") {
      args.rnn.approx_activations = true;
    } else if (flag == "--no-precomputed-attention") {
      args.rnn.precomputed_attention = false;
    } else if (flag == "--device") {
      const std::string d = next();
      if (d != "cpu" && d != "cuda") Fail("--device '", d, "' is not cpu or cuda");
      args.device = d == "cuda" ? Device::kCuda : Device::kCpu;
    } else if (flag == "--precision") {
      const std::string p = next();
      if (p == "float32") {
        args.precision = DType::kFloat32;
      } else if (p == "bf16") {
        args.precision = DType::kBFloat16;
      } else if (p == "fp16") {
        args.precision = DType::kFloat16;
      } else {
        Fail("--precision '", p, "' is not float32, bf16 or fp16");
      }
    } else if (flag == "--help" || flag == "-h") {
      args.help = true;
    } else {
      Fail("unknown option '", argv[i], "' (see --help)");
    }
  }
  return args;
}

int Run(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  if (args.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.models.empty()) Fail("--model PATH is required (see --help)");
  if (args.beam < 1) Fail("--beam must be >= 1");
  if (args.threads > 0) SetComputeThreads(args.threads);

  inference::TranslatorOptions options;
  options.search.beam_size = args.beam;
  options.search.n_best = args.n_best ? args.beam : 1;
  options.search.length_alpha = args.alpha;
  options.search.max_length_factor = args.max_length_factor;
  options.max_batch_tokens = args.max_batch_tokens;
  options.max_batch_sentences = args.max_batch_sentences;
  if (!args.quantize.empty()) {
    options.linear.quantize = args.quantize == "int16" ? cpu::IntType::kInt16 : cpu::IntType::kInt8;
  }
  options.linear.autotune = args.autotune;
  options.linear.integer_output_layer = args.integer_output_layer;
  options.linear.skip_zero_activations = args.skip_zero_activations;
  // On a GPU the unfused sequence brings every row's softmax to the host: the fused pass is the
  // GPU's way (12.8x the words/s at beam 4 on an H100), with the same hypotheses.
  options.search.fused_output =
      args.fused_output < 0 ? args.device == Device::kCuda : args.fused_output == 1;
  options.search.need_scores = args.n_best || args.scores;
  options.use_shortlist = args.shortlist;
  options.search.shortlist_per_sentence = args.shortlist_per_sentence;
  options.use_clusters = args.clusters;
  options.top_up = args.top_up;
  options.rnn = args.rnn;
  options.device = args.device;
  options.linear.inputs = args.precision;
  options.ensemble.assign(args.models.begin() + 1, args.models.end());
  std::unique_ptr<inference::Translator> translator =
      inference::Translator::FromModelFile(args.models[0], options);

  const bool show_progress = ::isatty(STDERR_FILENO) != 0;
  Timer timer;
  size_t line_number = 0;
  std::vector<std::string> lines;
  std::string line;
  std::ios::sync_with_stdio(false);
  bool more = true;
  while (more) {
    lines.clear();
    while (lines.size() < kChunkLines && (more = static_cast<bool>(std::getline(std::cin, line)))) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
    }
    if (lines.empty()) break;
    const size_t base = line_number;
    auto progress = [&](size_t done, size_t) {
      if (!show_progress) return;
      std::fprintf(stderr, "\rtern-translate: %zu lines, %.1f lines/s", base + done,
                   static_cast<double>(base + done) / std::max(timer.Seconds(), 1e-3));
    };
    std::vector<std::vector<inference::Translation>> results =
        translator->Translate(lines, progress);
    std::string out;
    for (const auto& hyps : results) {
      if (args.n_best) {
        for (const inference::Translation& t : hyps) {
          out += StrCat(line_number, " ||| ", t.text, " ||| ", t.score, " ||| ", t.normalized_score,
                        "\n");
        }
      } else if (args.scores) {
        out += StrCat(hyps[0].text, " ||| ", hyps[0].normalized_score, "\n");
      } else {
        out += hyps[0].text + "\n";
      }
      ++line_number;
    }
    std::cout << out << std::flush;
    if (!std::cout) Fail("cannot write the translations to stdout");
  }
  if (show_progress) std::fprintf(stderr, "\n");
  if (args.top_up) {
    std::fprintf(stderr, "tern-translate: mean batch occupancy %.3f\n",
                 translator->search().mean_occupancy());
  }
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-translate", [&] { return tern::Run(argc, argv); });
}
