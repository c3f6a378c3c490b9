// tern-translate: translates raw text with an exported model (.tern). Reads lines on stdin and
// writes one translation per line on stdout, in order; the batch sorting happens inside chunks of
// input lines. Links no MPI (DESIGN.md rule 1).
//
//   tern-translate --model model.tern [--model more.tern ...] [--beam 4] [--n-best] [--scores]
//   [--alpha 1.0]
//                  [--max-batch-tokens 4096] [--max-batch-sentences N] [--workers N]
//                  [--max-length-factor 2] [--threads N] [--max-input-length N] [--crop]
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
#include <iostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "common/logging.h"
#include "common/timer.h"
#include "inference/translator.h"
#include "launch/translate_flags.h"
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
    "  --n-best                write all N hypotheses per line as\n"
    "                          'LINE ||| TEXT ||| SCORE ||| NORMALIZED_SCORE' (LINE from 0)\n"
    "  --scores                write 'TEXT ||| NORMALIZED_SCORE' instead of the text alone\n"
    "  --top-up                top-up batching: finished sentences replaced by waiting ones\n"
    "                          once the batch is half empty (prints the mean occupancy)\n"
    "  --help                  this text\n";

constexpr size_t kChunkLines = 20000;  // lines sorted and batched together

struct Args {
  std::vector<std::string> models;
  bool n_best = false;
  bool scores = false;
  bool top_up = false;
  TranslateFlags runtime;
  bool help = false;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  ForEachFlag(argc, argv, [&](const std::string& flag, const FlagValue& next) {
    if (flag == "--model") {
      args.models.push_back(next());
    } else if (flag == "--n-best") {
      args.n_best = true;
    } else if (flag == "--scores") {
      args.scores = true;
    } else if (flag == "--top-up") {
      args.top_up = true;
    } else if (flag == "--help" || flag == "-h") {
      args.help = true;
    } else {
      return ParseTranslateFlag(flag, next, &args.runtime);
    }
    return true;
  });
  return args;
}

int Run(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  if (args.help) {
    std::fputs(kUsage, stdout);
    std::fputs(kTranslateFlagsUsage, stdout);
    return 0;
  }
  if (args.models.empty()) Fail("--model PATH is required (see --help)");
  inference::TranslatorOptions options = MakeTranslatorOptions(args.runtime);
  if (args.runtime.workers > 1 && args.top_up) {
    Fail("--workers and --top-up cannot be combined; pick one");
  }
  if (args.runtime.threads > 0) SetComputeThreads(args.runtime.threads);
  options.workers = args.runtime.workers;
  options.search.n_best = args.n_best ? args.runtime.beam : 1;
  options.search.need_scores = args.n_best || args.scores;
  options.top_up = args.top_up;
  options.ensemble.assign(args.models.begin() + 1, args.models.end());
  std::unique_ptr<inference::Translator> translator =
      inference::Translator::FromModelFile(args.models[0], options);

  RefuseDirectoryOnStdin();
  const bool show_progress = ::isatty(STDERR_FILENO) != 0;
  int64_t refused = 0;
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
      if (hyps[0].pieces_over_limit > 0) {
        // Its place kept: an empty translation, and a line on stderr that names it.
        ++refused;
        std::fprintf(stderr,
                     "tern-translate: line %zu: %lld pieces, more than --max-input-length %d; not "
                     "translated (its output line is empty; --crop cuts such lines instead)\n",
                     line_number + 1, static_cast<long long>(hyps[0].pieces_over_limit),
                     translator->max_input_length());
      }
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
  return refused > 0 ? 1 : 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-translate", [&] { return tern::Run(argc, argv); });
}
