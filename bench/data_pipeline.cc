// bench-data-pipeline: times the data pipeline on a generated corpus with a Zipf-distributed
// lexicon (so a realistic vocabulary can be learnt): joint SentencePiece training, then one epoch
// of in-memory and streaming batching, direct and through the prefetcher behind a simulated
// training step (prefetch_waits: how often that step found no batch ready; 1 = only the first).
// Prints one JSON line.
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "common/timer.h"
#include "data/batcher.h"
#include "data/prefetcher.h"
#include "data/vocab.h"

DEFINE_int32(pairs, 30000, "sentence pairs to generate");
DEFINE_int32(vocab_size, 8000, "SentencePiece vocabulary size");
DEFINE_int32(batch_tokens, 2048, "target-token budget");
DEFINE_int32(step_ms, 5, "simulated training step behind the prefetcher (ms per batch)");
DEFINE_string(dir, "", "scratch directory (default: a fresh one under /tmp)");

namespace {

// Words built from syllables, drawn with Zipf frequencies, like a real language's.
std::vector<std::string> Lexicon(int n, const char* const* syllables, int num_syllables,
                                 std::mt19937* rng) {
  std::vector<std::string> words;
  for (int i = 0; i < n; ++i) {
    int len = 1 + static_cast<int>((*rng)() % 4);
    std::string w;
    for (int s = 0; s < len; ++s) w += syllables[(*rng)() % num_syllables];
    words.push_back(w);
  }
  return words;
}

std::string Sentence(const std::vector<std::string>& words, const std::vector<double>& cdf,
                     std::mt19937* rng) {
  std::uniform_real_distribution<double> u(0, cdf.back());
  int len = 3 + static_cast<int>((*rng)() % 30);
  std::string s;
  for (int i = 0; i < len; ++i) {
    size_t k = std::lower_bound(cdf.begin(), cdf.end(), u(*rng)) - cdf.begin();
    s += (i ? " " : "") + words[std::min(k, words.size() - 1)];
  }
  return s + ".";
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  tern::InitLogging(argv[0]);
  return tern::RunMain("bench-data-pipeline", [] {
    namespace fs = std::filesystem;
    std::string dir =
        FLAGS_dir.empty()
            ? (fs::temp_directory_path() / ("tern-bench-data-" + std::to_string(::getpid())))
                  .string()
            : FLAGS_dir;
    fs::create_directories(dir);
    static const char* const kDe[] = {"ge", "ber", "sch", "ein", "ung", "ä",   "ö",  "lich", "keit",
                                      "st", "ra",  "ße",  "ter", "en",  "ver", "au", "ck",   "zu"};
    static const char* const kEn[] = {"th", "e",  "ing", "tion", "a",   "re", "st", "ou", "ly",
                                      "ed", "in", "er",  "pro",  "con", "o",  "ea", "ch", "al"};
    std::mt19937 rng(1);
    std::vector<std::string> de = Lexicon(20000, kDe, 18, &rng);
    std::vector<std::string> en = Lexicon(20000, kEn, 18, &rng);
    std::vector<double> cdf(20000);
    double sum = 0;
    for (int i = 0; i < 20000; ++i) cdf[i] = (sum += 1.0 / (i + 1));
    {
      std::ofstream src(dir + "/train.de"), tgt(dir + "/train.en");
      for (int i = 0; i < FLAGS_pairs; ++i) {
        src << Sentence(de, cdf, &rng) << "\n";
        tgt << Sentence(en, cdf, &rng) << "\n";
      }
    }
    tern::Timer timer;
    tern::data::Vocab vocab = tern::data::Vocab::Train({dir + "/train.de", dir + "/train.en"},
                                                       FLAGS_vocab_size, dir + "/vocab.spm");
    const double train_s = timer.Seconds();

    double epoch_s[3];
    int64_t batches = 0, waits = 0;
    for (int mode = 0; mode < 3; ++mode) {
      tern::data::BatcherOptions options;
      options.corpus.src_path = dir + "/train.de";
      options.corpus.tgt_path = dir + "/train.en";
      options.batch_tokens = FLAGS_batch_tokens;
      options.max_epochs = 1;
      options.streaming = mode > 0;
      options.shuffle_window = 10000;
      timer.Reset();
      auto batcher = std::make_unique<tern::data::Batcher>(options, vocab);
      tern::data::Batch batch;
      batches = 0;
      if (mode < 2) {
        while (batcher->Next(&batch)) ++batches;
      } else {
        tern::data::Prefetcher prefetcher(std::move(batcher), 4);
        while (prefetcher.Next(&batch)) {
          ++batches;
          std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_step_ms));
        }
        waits = prefetcher.waits();
      }
      epoch_s[mode] = timer.Seconds();
    }
    std::printf(
        "{\"bench\":\"data_pipeline\",\"pairs\":%d,\"vocab_size\":%d,\"vocab_pieces\":%d,"
        "\"vocab_train_s\":%.2f,\"batches\":%lld,\"epoch_in_memory_s\":%.2f,"
        "\"epoch_streaming_s\":%.2f,\"epoch_prefetched_s\":%.2f,\"step_ms\":%d,\"prefetch_waits\":%"
        "lld}\n",
        FLAGS_pairs, FLAGS_vocab_size, vocab.size(), train_s, static_cast<long long>(batches),
        epoch_s[0], epoch_s[1], epoch_s[2], FLAGS_step_ms, static_cast<long long>(waits));
    if (FLAGS_dir.empty()) fs::remove_all(dir);
    return 0;
  });
}
