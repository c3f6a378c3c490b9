// bench-decode: translation speed of a model file on a text file, single thread by default, with
// each decoder speed-up on and off (a table like Devlin 2017's Table 1). One JSON line per
// (beam, configuration): sentences, output words, CPU and wall seconds (the best of --repeats
// runs, the configurations taking turns; each keeps its translator, so from the second run on the
// arenas and caches are warm, as in a translation service), words/s per CPU second (output words,
// the figure Marian's and Devlin's tables use; CPU time, as with one thread it is the work done
// however loaded the machine is, and --threads 1 is the default), the speed-up over the first
// configuration (the reference; usually plain) at the same beam measured in the same run, the mean
// output-layer columns per step, the mean batch occupancy (sentences decoded per step over the
// batch's room), the host's waits for the GPU per decoder step in the last run (DeviceDrains; 0
// on the CPU, 1 the aim on a GPU), the GPU ops per decoder step (DeviceOps: kernel launches, what
// a small batch pays for), and with --ref the BLEU and its difference to the reference's.
// On a GPU: the part gpu runs a configuration there (tern-translate --device cuda), bf16 and fp16
// set the products' inputs (--precision); with any gpu configuration the figures are wall-clock
// (--clock auto), so a CPU configuration in the same run (with --threads all the host's cores) is
// the reference for the GPU's speed-up:
//   bench-decode --model m.tern --threads 16 --configs plain,gpu,gpu+fused,gpu+fused+topup,
//                gpu+bf16+fused --max_batch_tokens 2048
// Configurations needing the model's shortlist or clusters are left out when it has none (see
// tern-export's table options). Weight types come from the model file, so any .tern works; the
// parts int16/int8 quantize a float32 model's linear layers at load (tern-translate --quantize),
// intout runs an integer model's output layer as integers too (--integer-output-layer), zeroskip
// skips the ReLU's zero groups in the integer FFN products (--skip-zero-activations),
// so one float model with tables gives the whole table, integer rows included, against the
// float baseline in the same run. For the GRU models (s2s, devlin) the parts noatt (the source side
// of the attention recomputed every step: the unoptimized baseline), emb (precomputed input
// products of the first --precomputed_embeddings ids), merge (recurrent products once per distinct
// state) and approx (rational tanh/sigmoid) switch Devlin's speed-ups; "identical" is the share of
// output sentences equal to the reference's. Devlin's Table 1 for an RNN model, each speed-up
// added to the ones before against the unoptimized baseline:
//   --configs noatt,plain,emb,emb+approx,emb+approx+merge,int16+emb+approx+merge,
//             int16+emb+approx+merge+fused
//
//   bench-decode --model work/bible-small/model.tern --input corpus/bible/test.es
//                --ref corpus/bible/test.en --beams 1,4
#include <gflags/gflags.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/timer.h"
#include "data/metrics.h"
#include "inference/translator.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/threads.h"

DEFINE_string(model, "", "model file (.tern)");
DEFINE_string(ensemble, "",
              "further model files (comma-separated, the model's vocabulary) that the 'ens' part "
              "decodes together with --model");
DEFINE_string(input, "corpus/bible/test.es", "source text, one sentence per line");
DEFINE_string(ref, "", "reference translations (optional): adds BLEU per configuration");
DEFINE_string(beams, "1,4", "beam sizes to time");
DEFINE_string(
    configs,
    "plain,fused,shortlist,clusters,topup,int16,int8,fused+shortlist,fused+clusters,"
    "int16+fused+shortlist,int16+fused+clusters,int8+fused+shortlist,"
    "int16+intout+fused+shortlist,int16+fused+sentshort,int16+intout+fused+sentshort",
    "configurations: plain or '+'-joined speed-ups (fused, shortlist, clusters, "
    "sentshort (a shortlist per sentence), topup, workers (--threads batches at once, a thread "
    "each, instead of splitting each batch's products), int16 or int8 for a float32 model, intout: "
    "the output layer as integers "
    "too, zeroskip: integer FFN products skip the ReLU's zeros, ens: an ensemble with the "
    "--ensemble models, gpu, bf16, fp16; RNN models: noatt, emb, merge, approx)");
DEFINE_int32(precomputed_embeddings, 2000, "the 'emb' part's table size (ids below it)");
DEFINE_int32(repeats, 2,
             "runs per configuration, the configurations taking turns; the fastest counts (each "
             "configuration keeps its translator, so runs after the first are warm)");
DEFINE_int32(threads, 1, "compute threads");
DEFINE_int32(max_batch_tokens, 2048, "batch budget in padded source tokens");
DEFINE_int32(max_batch_sentences, 0, "at most this many sentences a batch (0: no cap)");
DEFINE_int32(max_sentences, 0, "use only the first N lines (0 = all)");
DEFINE_string(hyps_out, "",
              "when set, each configuration's translations (first run) go to "
              "PREFIX.b<beam>.<config>.txt, one line per input line");
DEFINE_string(clock, "auto",
              "what words/s divides by: cpu (process CPU seconds), wall, or auto (wall when a "
              "configuration runs on the GPU, else cpu)");

namespace tern {
namespace {

int64_t Words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int64_t n = 0;
  while (in >> w) ++n;
  return n;
}

// CPU seconds of this process: with one compute thread, the work done, whatever else the machine
// runs (wall-clock time on a shared machine mostly measures the neighbours).
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<std::string> ReadLines(const std::string& path, int max_lines) {
  std::ifstream in(path);
  if (!in) Fail("cannot open ", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (max_lines > 0 && static_cast<int>(lines.size()) >= max_lines) break;
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

struct Config {
  std::string name;
  std::string weights;  // the products' weight type: the file's, or the quantize part's
  inference::TranslatorOptions options;
  double seconds = std::numeric_limits<double>::infinity();  // CPU
  double wall_seconds = std::numeric_limits<double>::infinity();
  int64_t out_words = 0;
  double columns = 0;
  double occupancy = 0;
  double waits_per_step = 0;  // DeviceDrains per decoder step in the last run (0 on the CPU)
  double ops_per_step = 0;    // DeviceOps per decoder step in the last run (0 on the CPU)
  double bleu = -1;
  std::vector<std::string> hyps;  // the first run's output
  // Made once and kept over the repeats, as a translation service keeps it: the first run also
  // warms its arenas, caches and tuner, so with --repeats >= 2 the best run is a warm one.
  std::unique_ptr<inference::Translator> translator;
};

// What the model file holds that decides which configurations can run.
struct ModelFacts {
  std::string weight_type = "float32";  // of its linear layers
  bool has_shortlist = false;
  bool has_clusters = false;
};

ModelFacts ReadModelFacts(const inference::ModelFile& file) {
  ModelFacts facts;
  facts.has_shortlist = file.weights().Has(inference::kShortlistIds);
  facts.has_clusters = file.weights().Has(inference::kClusterIds);
  for (const auto& e : file.table()) {
    if (e.dtype == inference::FileDType::kInt16) facts.weight_type = "int16";
    if (e.dtype == inference::FileDType::kInt8) facts.weight_type = "int8";
  }
  return facts;
}

// The configuration `name` ('+'-joined parts, see --configs) at `beam`.
Config ParseConfig(const std::string& name, const std::string& beam,
                   const std::string& weight_type) {
  Config c;
  c.name = name;
  c.weights = weight_type;
  c.options.search.beam_size = std::stoi(beam);
  c.options.max_batch_tokens = FLAGS_max_batch_tokens;
  c.options.max_batch_sentences = FLAGS_max_batch_sentences;
  c.options.search.need_scores = false;  // as tern-translate without --scores
  for (const std::string& part : Split(name, '+')) {
    if (part == "fused") {
      c.options.search.fused_output = true;
    } else if (part == "shortlist") {
      c.options.use_shortlist = true;
    } else if (part == "sentshort") {
      c.options.use_shortlist = c.options.search.shortlist_per_sentence = true;
    } else if (part == "clusters") {
      c.options.use_clusters = true;
    } else if (part == "topup") {
      c.options.top_up = true;
    } else if (part == "workers") {
      c.options.workers = FLAGS_threads;  // --threads batches at once, a thread each
    } else if (part == "intout") {
      c.options.linear.integer_output_layer = true;
    } else if (part == "zeroskip") {
      c.options.linear.skip_zero_activations = true;
    } else if (part == "int16" || part == "int8") {
      c.options.linear.quantize = part == "int16" ? cpu::IntType::kInt16 : cpu::IntType::kInt8;
      c.weights = part;
    } else if (part == "ens") {
      if (FLAGS_ensemble.empty()) Fail("the 'ens' part needs --ensemble");
      c.options.ensemble = Split(FLAGS_ensemble, ',');
    } else if (part == "gpu") {
      c.options.device = Device::kCuda;
    } else if (part == "bf16" || part == "fp16") {
      c.options.linear.inputs = part == "bf16" ? DType::kBFloat16 : DType::kFloat16;
    } else if (part == "noatt") {
      c.options.rnn.precomputed_attention = false;
    } else if (part == "emb") {
      c.options.rnn.precomputed_embeddings = FLAGS_precomputed_embeddings;
    } else if (part == "merge") {
      c.options.rnn.merge_states = true;
    } else if (part == "approx") {
      c.options.rnn.approx_activations = true;
    } else if (part != "plain") {
      Fail("unknown configuration part '", part, "' in --configs");
    }
  }
  return c;
}

// --configs at `beam`, less those the model cannot run (each named on stderr).
std::vector<Config> MakeConfigs(const std::string& beam, const ModelFacts& model) {
  std::vector<Config> configs;
  for (const std::string& name : Split(FLAGS_configs, ',')) {
    Config c = ParseConfig(name, beam, model.weight_type);
    if (c.options.linear.quantize && model.weight_type != "float32") {
      std::fprintf(stderr, "bench-decode: %s is already %s; '%s' skipped\n", FLAGS_model.c_str(),
                   model.weight_type.c_str(), name.c_str());
      continue;
    }
    if ((c.options.use_shortlist && !model.has_shortlist) ||
        (c.options.use_clusters && !model.has_clusters)) {
      std::fprintf(stderr, "bench-decode: %s has no tables for '%s'; skipped\n",
                   FLAGS_model.c_str(), name.c_str());
      continue;
    }
    configs.push_back(std::move(c));
  }
  if (configs.empty()) Fail("--configs: no configuration can run on ", FLAGS_model);
  return configs;
}

// Whether words/s divide by wall-clock seconds (--clock; auto: when a configuration runs on a GPU).
bool UseWallClock(const std::vector<Config>& configs) {
  bool wall = FLAGS_clock == "wall";
  if (FLAGS_clock == "auto") {
    for (const Config& c : configs) wall = wall || c.options.device != Device::kCpu;
  } else if (FLAGS_clock != "cpu" && FLAGS_clock != "wall") {
    Fail("--clock '", FLAGS_clock, "' is not cpu, wall or auto");
  }
  return wall;
}

// One run of `c` over `lines`: keeps the fastest times, the last run's per-step figures, and
// from the first run the hypotheses, their word count and BLEU against `refs` (when given).
void RunOnce(Config& c, const std::vector<std::string>& lines, const std::vector<std::string>& refs,
             bool first_run) {
  if (!c.translator) c.translator = inference::Translator::FromModelFile(FLAGS_model, c.options);
  inference::Translator* translator = c.translator.get();
  const int64_t drains = DeviceDrains(), ops = DeviceOps();
  const int64_t steps = translator->search().decoder_steps();
  Timer t;
  const double cpu = CpuSeconds();
  auto out = translator->Translate(lines);
  c.seconds = std::min(c.seconds, CpuSeconds() - cpu);
  c.wall_seconds = std::min(c.wall_seconds, t.Seconds());
  const double run_steps =
      static_cast<double>(std::max<int64_t>(1, translator->search().decoder_steps() - steps));
  c.waits_per_step = static_cast<double>(DeviceDrains() - drains) / run_steps;
  c.ops_per_step = static_cast<double>(DeviceOps() - ops) / run_steps;
  c.columns = translator->search().mean_output_columns();
  c.occupancy = translator->search().mean_occupancy();
  if (!first_run) return;
  for (const auto& n_best : out) {
    c.hyps.push_back(n_best.empty() ? "" : n_best[0].text);
    c.out_words += Words(c.hyps.back());
  }
  if (!refs.empty()) c.bleu = data::CorpusBleu(c.hyps, refs).score;
}

// With --hyps_out, each configuration's first-run translations to PREFIX.bBEAM.CONFIG.txt.
void WriteHypotheses(const std::vector<Config>& configs, const std::string& beam) {
  if (FLAGS_hyps_out.empty()) return;
  for (const Config& c : configs) {
    const std::string path = FLAGS_hyps_out + ".b" + beam + "." + c.name + ".txt";
    std::ofstream out(path);
    for (const std::string& h : c.hyps) out << h << '\n';
    if (!out.flush()) Fail("cannot write ", path);
  }
}

// One JSON line per configuration; the first is the reference of the speed-up, identical share
// and BLEU difference.
void PrintResults(const std::vector<Config>& configs, const std::string& beam, bool wall,
                  size_t sentences) {
  const Config& plain = configs[0];
  auto seconds = [&](const Config& c) { return wall ? c.wall_seconds : c.seconds; };
  for (const Config& c : configs) {
    size_t identical = 0;
    for (size_t i = 0; i < c.hyps.size(); ++i) identical += c.hyps[i] == plain.hyps[i];
    std::printf(
        "{\"bench\": \"decode\", \"model\": \"%s\", \"weights\": \"%s\", \"beam\": %s, "
        "\"config\": \"%s\", \"device\": \"%s\", \"blas\": \"%s\", \"clock\": \"%s\", "
        "\"threads\": %d, \"max_batch_tokens\": %d, \"max_batch_sentences\": %d, "
        "\"sentences\": %zu, \"output_words\": %lld, "
        "\"cpu_seconds\": %.3f, \"wall_seconds\": %.3f, \"words_per_s\": %.1f, \"speedup\": "
        "%.3f, "
        "\"mean_output_columns\": %.1f, \"mean_batch_occupancy\": %.3f, \"identical\": %.3f, "
        "\"host_waits_per_step\": %.2f, \"device_ops_per_step\": %.1f, \"models\": %zu",
        FLAGS_model.c_str(), c.weights.c_str(), beam.c_str(), c.name.c_str(),
        DeviceName(c.options.device), BlasCoreName().c_str(), wall ? "wall" : "cpu", FLAGS_threads,
        FLAGS_max_batch_tokens, FLAGS_max_batch_sentences, sentences,
        static_cast<long long>(c.out_words), c.seconds, c.wall_seconds, c.out_words / seconds(c),
        seconds(plain) / seconds(c), c.columns, c.occupancy,
        static_cast<double>(identical) / static_cast<double>(std::max<size_t>(1, sentences)),
        c.waits_per_step, c.ops_per_step, 1 + c.options.ensemble.size());
    if (c.bleu >= 0) {
      std::printf(", \"bleu\": %.2f, \"bleu_delta\": %.2f", c.bleu, c.bleu - plain.bleu);
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
}

int BenchMain() {
  if (FLAGS_model.empty()) Fail("--model is required (a .tern file, e.g. from scripts/demo.sh)");
  SetComputeThreads(FLAGS_threads);
  const std::vector<std::string> lines = ReadLines(FLAGS_input, FLAGS_max_sentences);
  std::vector<std::string> refs;
  if (!FLAGS_ref.empty()) {
    refs = ReadLines(FLAGS_ref, FLAGS_max_sentences);
    if (refs.size() != lines.size()) Fail(FLAGS_ref, " and ", FLAGS_input, " differ in lines");
  }
  const ModelFacts model = ReadModelFacts(*inference::ModelFile::Open(FLAGS_model));
  for (const std::string& beam : Split(FLAGS_beams, ',')) {
    std::vector<Config> configs = MakeConfigs(beam, model);
    const bool wall = UseWallClock(configs);
    // The configurations take turns, so a slow spell of the machine hits them all alike.
    for (int r = 0; r < FLAGS_repeats; ++r) {
      for (Config& c : configs) RunOnce(c, lines, refs, /*first_run=*/r == 0);
    }
    WriteHypotheses(configs, beam);
    PrintResults(configs, beam, wall, lines.size());
  }
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tern::RunMain("bench-decode", tern::BenchMain);
}
