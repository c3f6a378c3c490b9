// bench-decode: translation speed of a model file on a text file, single thread by default,
// at each beam size given. One JSON line per beam: sentences, source and output words, seconds,
// words/s (output words, the figure Marian's and Devlin's tables use) and source words/s.
//
//   bench-decode --model work/bible-small/model.tern --input corpus/bible/test.es --beams 1,4
#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/timer.h"
#include "inference/translator.h"
#include "tensor/threads.h"

DEFINE_string(model, "", "model file (.tern)");
DEFINE_string(input, "corpus/bible/test.es", "source text, one sentence per line");
DEFINE_string(beams, "1,4", "beam sizes to time");
DEFINE_int32(threads, 1, "compute threads");
DEFINE_int32(max_batch_tokens, 2048, "batch budget in padded source tokens");
DEFINE_int32(max_sentences, 0, "use only the first N lines (0 = all)");

namespace tern {
namespace {

int64_t Words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int64_t n = 0;
  while (in >> w) ++n;
  return n;
}

int BenchMain() {
  if (FLAGS_model.empty()) Fail("--model is required (a .tern file, e.g. from scripts/demo.sh)");
  SetComputeThreads(FLAGS_threads);
  std::ifstream in(FLAGS_input);
  if (!in) Fail("cannot open --input ", FLAGS_input);
  std::vector<std::string> lines;
  int64_t src_words = 0;
  for (std::string line; std::getline(in, line);) {
    if (FLAGS_max_sentences > 0 && static_cast<int>(lines.size()) >= FLAGS_max_sentences) break;
    src_words += Words(line);
    lines.push_back(line);
  }
  std::stringstream beams(FLAGS_beams);
  for (std::string b; std::getline(beams, b, ',');) {
    inference::TranslatorOptions options;
    options.search.beam_size = std::stoi(b);
    options.max_batch_tokens = FLAGS_max_batch_tokens;
    auto translator = inference::Translator::FromModelFile(FLAGS_model, options);
    Timer t;
    auto out = translator->Translate(lines);
    const double seconds = t.Seconds();
    int64_t out_words = 0;
    for (const auto& n_best : out) out_words += n_best.empty() ? 0 : Words(n_best[0].text);
    std::printf(
        "{\"bench\": \"decode\", \"model\": \"%s\", \"beam\": %d, \"threads\": %d, "
        "\"sentences\": %zu, \"source_words\": %lld, \"output_words\": %lld, \"seconds\": %.3f, "
        "\"words_per_s\": %.1f, \"source_words_per_s\": %.1f}\n",
        FLAGS_model.c_str(), options.search.beam_size, FLAGS_threads, lines.size(),
        static_cast<long long>(src_words), static_cast<long long>(out_words), seconds,
        out_words / seconds, src_words / seconds);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tern::RunMain("bench-decode", tern::BenchMain);
}
