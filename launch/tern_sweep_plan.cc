// tern-sweep-plan: reads a sweep file (configs/sweep.proto), checks it and every run's config as
// tern-train would, and prints the plan as JSON lines for scripts/tern-sweep: first the sweep's
// settings, then one line per run (cell x seed) with the tern-train arguments and placement.
// Every mistake is one line naming the sweep file and the field (an unknown field with its line,
// an empty axis, a value the config refuses, with its cell), before anything runs.
//
//   tern-sweep-plan --sweep sweeps/thesis-ch5.pbtxt [--cells "sync,async"] [--root DIR]
#include <gflags/gflags.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "common/logging.h"
#include "configs/config_io.h"
#include "configs/sweep.pb.h"
#include "trainer/trainer.h"

DEFINE_string(sweep, "", "the sweep file (protobuf text, configs/sweep.proto)");
DEFINE_string(cells, "",
              "only these cells (replaces the file's `cells`): ';'-separated, or ','-separated "
              "labels taken one per axis (\"async,8w,combo,8w\" is two cells of two axes)");
DEFINE_string(root, ".", "the directory base_config is relative to (the repository root)");

namespace tern {
namespace {

using config::SweepConfig;
using config::SweepPlacement;

class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ParseErrors(std::string source) : source_(std::move(source)) {}
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = StrCat(source_, ":", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string source_, first_;
};

std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", v);
  return buffer;
}

// The placement fields an axis may name instead of a config field.
const std::set<std::string>& PlacementFields() {
  static const std::set<std::string> fields = {"ranks", "hosts", "link_mbps", "link_delay_ms",
                                               "slowdown"};
  return fields;
}

// Sets placement field `field` from text (an axis value), or fails naming it.
void SetPlacement(const std::string& where, const std::string& field, const std::string& value,
                  SweepPlacement* p) {
  std::string text = field + ": " + (field == "hosts" ? "\"" + value + "\"" : value);
  ParseErrors errors(where);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  SweepPlacement one;
  if (!parser.ParseFromString(text, &one))
    Fail(where, ": ", field, " '", value, "' ", errors.first());
  p->MergeFrom(one);
}

// `over`'s set fields over `base`'s (proto3 merge: zero and empty fields are unset).
SweepPlacement Merge(SweepPlacement base, const SweepPlacement& over) {
  base.MergeFrom(over);
  return base;
}

// One value of one axis, resolved.
struct Value {
  std::string label;
  std::string set;  // config overrides
  SweepPlacement placement;
};

struct Cell {
  std::string name;
  std::vector<std::string> labels;  // per axis
  std::string set;
  SweepPlacement placement;
};

std::vector<Value> AxisValues(const std::string& where, const config::SweepAxis& axis) {
  std::vector<Value> values;
  if (!axis.field().empty() && axis.variant_size() > 0)
    Fail(where, ": has both `field` and `variant`; give one");
  if (axis.field().empty() && axis.variant_size() == 0)
    Fail(where, ": has neither `field` (with `values`) nor `variant`");
  if (!axis.field().empty()) {
    if (axis.values_size() == 0) Fail(where, ": field ", axis.field(), " has no values");
    const bool placement = PlacementFields().count(axis.field()) > 0;
    for (const std::string& v : axis.values()) {
      Value value;
      value.label = axis.field() + "=" + v;
      if (placement) {
        SetPlacement(where, axis.field(), v, &value.placement);
      } else {
        value.set = axis.field() + "=" + v;
        config::TrainConfig scratch;
        std::string error;
        if (!config::ApplyOverride(value.set, &scratch, &error)) Fail(where, ": ", error);
      }
      values.push_back(value);
    }
  }
  std::set<std::string> names;
  for (const config::SweepVariant& variant : axis.variant()) {
    if (variant.name().empty()) Fail(where, ": a variant has no name");
    if (!names.insert(variant.name()).second)
      Fail(where, ": two variants are named '", variant.name(), "'");
    if (variant.name().find(',') != std::string::npos)
      Fail(where, ": variant name '", variant.name(), "' has a ',' (cell names join labels by it)");
    values.push_back({variant.name(), variant.set(), variant.placement()});
  }
  return values;
}

// Every run's config as tern-train would build and check it; the override list it takes.
std::string CheckRun(const SweepConfig& sweep, const std::string& base, const Cell& cell,
                     uint64_t seed) {
  const SweepPlacement& p = cell.placement;
  std::string set = sweep.set();
  if (!cell.set.empty()) set += (set.empty() ? "" : ";") + cell.set;
  set += StrCat(set.empty() ? "" : ";", "training.seed=", seed);
  if (p.slowdown() > 0) set += ";distributed.debug_slowdown=" + Number(p.slowdown());
  if (sweep.convergence_patience() > 0)
    set += StrCat(";training.early_stopping=", sweep.convergence_patience());
  if (p.hosts() == "virtual") {
    set += StrCat(";distributed.virtual_workers=", p.ranks(),
                  ";distributed.virtual_link_mbps=", Number(p.link_mbps()),
                  ";distributed.virtual_link_delay_ms=", Number(p.link_delay_ms()));
  } else {
    set += ";training.threads=1";  // ranks of one thread: several share a core
  }
  const std::string where = StrCat("sweep ", FLAGS_sweep, ": cell '", cell.name, "'");
  config::TrainConfig c;
  std::string error;
  if (!config::LoadTrainConfig(base, &c, &error)) Fail(where, ": ", error);
  if (!config::ApplyOverrides(set, &c, &error)) Fail(where, ": ", error);
  c.mutable_training()->set_after(sweep.budget());
  config::FillDefaults(&c);
  if (!config::Validate(c, &error)) Fail(where, ": ", error);
  try {
    trainer::CheckConfig(c);
  } catch (const Error& e) {
    Fail(where, ": ", e.what());
  }
  return set;
}

void CheckPlacement(const std::string& where, const SweepPlacement& p) {
  if (p.ranks() < 1) Fail(where, ": placement.ranks must be >= 1, got ", p.ranks());
  if (p.hosts() != "local" && p.hosts() != "netns" && p.hosts() != "virtual")
    Fail(where, ": placement.hosts must be local, netns or virtual, got '", p.hosts(), "'");
  if (!(p.link_mbps() >= 0) || !(p.link_delay_ms() >= 0) || !(p.slowdown() >= 0))
    Fail(where, ": placement.link_mbps, link_delay_ms and slowdown must be >= 0");
  if (p.hosts() == "local" && (p.link_mbps() > 0 || p.link_delay_ms() > 0))
    Fail(where,
         ": placement.link_mbps/link_delay_ms need hosts netns or virtual (local ranks "
         "share this host's memory)");
}

// --cells: "a,8w;b,8w", or "a,8w,b,8w" with one label per axis (a cell's name is its axes'
// labels joined by ',').
std::vector<std::string> ParseCellsFlag(const std::string& flag, int axes) {
  auto split = [](const std::string& text, char by) {
    std::vector<std::string> parts;
    for (size_t s = 0, e; s <= text.size(); s = e + 1) {
      e = std::min(text.find(by, s), text.size());
      if (e > s) parts.push_back(text.substr(s, e - s));
    }
    return parts;
  };
  if (flag.find(';') != std::string::npos) return split(flag, ';');
  const std::vector<std::string> labels = split(flag, ',');
  if (labels.size() % static_cast<size_t>(axes) != 0) {
    Fail("--cells: ", labels.size(), " labels for ", axes,
         " axes: give one label per axis for each cell, or separate the cells with ';'");
  }
  std::vector<std::string> cells;
  for (size_t i = 0; i < labels.size(); i += axes) {
    std::string name = labels[i];
    for (int a = 1; a < axes; ++a) name += "," + labels[i + a];
    cells.push_back(name);
  }
  return cells;
}

int PlanMain() {
  if (FLAGS_sweep.empty()) Fail("--sweep is required (e.g. --sweep sweeps/thesis-ch5.pbtxt)");
  SweepConfig sweep;
  {
    ParseErrors errors(FLAGS_sweep);
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(ReadFile(FLAGS_sweep), &sweep))
      Fail(errors.first().empty() ? FLAGS_sweep + ": cannot parse" : errors.first());
  }
  const std::string file = "sweep " + FLAGS_sweep;
  if (sweep.base_config().empty()) Fail(file, ": base_config is required");
  const std::string base = FLAGS_root + "/" + sweep.base_config();
  if (!FileExists(base)) Fail(file, ": base_config ", base, " does not exist");
  if (sweep.seeds_size() == 0) Fail(file, ": seeds: give at least one");
  if (sweep.budget().empty()) Fail(file, ": budget is required (e.g. \"20m\" or \"2000u\")");
  if (!sweep.metric().empty() && sweep.metric() != "dev_ce" && sweep.metric() != "bleu")
    Fail(file, ": metric must be dev_ce or bleu, got '", sweep.metric(), "'");
  if (!(sweep.target_dev_ce() >= 0)) Fail(file, ": target_dev_ce must be >= 0");
  if (sweep.stop_at_target() && sweep.target_dev_ce() <= 0)
    Fail(file, ": stop_at_target needs target_dev_ce");
  if (sweep.convergence_patience() < 0)
    Fail(file, ": convergence_patience must be >= 0 (0: off), got ", sweep.convergence_patience());
  if (sweep.test_src().empty() != sweep.test_tgt().empty())
    Fail(file, ": test_src and test_tgt go together");
  if (!sweep.test_src().empty() && sweep.convergence_patience() == 0)
    Fail(file, ": test_src needs convergence_patience (the test set scores the best model)");
  for (const std::string& test : {sweep.test_src(), sweep.test_tgt()}) {
    if (test.empty()) continue;
    const std::string path = test.front() == '/' ? test : FLAGS_root + "/" + test;
    if (!FileExists(path))
      Fail(file, ": ", test == sweep.test_src() ? "test_src " : "test_tgt ", path,
           " does not exist (the bundled corpus: scripts/prepare-corpus.sh)");
  }
  if (!(sweep.target_bleu() >= 0 && sweep.target_bleu() <= 100))
    Fail(file, ": target_bleu must be in [0, 100], got ", sweep.target_bleu());
  std::set<uint64_t> seeds;
  for (uint64_t s : sweep.seeds())
    if (s == 0 || !seeds.insert(s).second) Fail(file, ": seeds must be distinct and > 0");

  // The grid: every combination of one value per axis, the first axis slowest.
  SweepPlacement defaults;
  defaults.set_ranks(1);
  defaults.set_hosts("local");
  const SweepPlacement top = Merge(defaults, sweep.placement());
  std::vector<Cell> cells(1);
  cells[0].placement = top;
  std::vector<std::string> axis_names;
  for (int a = 0; a < sweep.axis_size(); ++a) {
    const config::SweepAxis& axis = sweep.axis(a);
    axis_names.push_back(!axis.name().empty()    ? axis.name()
                         : !axis.field().empty() ? axis.field()
                                                 : StrCat("axis ", a + 1));
    const std::vector<Value> values = AxisValues(StrCat(file, ": axis ", axis_names.back()), axis);
    std::vector<Cell> grown;
    for (const Cell& cell : cells) {
      for (const Value& v : values) {
        Cell c = cell;
        c.name += (c.name.empty() ? "" : ",") + v.label;
        c.labels.push_back(v.label);
        if (!v.set.empty()) c.set += (c.set.empty() ? "" : ";") + v.set;
        c.placement = Merge(c.placement, v.placement);
        grown.push_back(c);
      }
    }
    cells.swap(grown);
  }
  if (sweep.axis_size() == 0) cells[0].name = "base";
  std::map<std::string, const Cell*> by_name;
  for (const Cell& c : cells)
    if (!by_name.emplace(c.name, &c).second) Fail(file, ": two cells are named '", c.name, "'");

  std::vector<std::string> wanted(sweep.cells().begin(), sweep.cells().end());
  if (!FLAGS_cells.empty()) {
    wanted = ParseCellsFlag(FLAGS_cells, std::max(sweep.axis_size(), 1));
  }
  std::vector<const Cell*> chosen;
  if (wanted.empty()) {
    for (const Cell& c : cells) chosen.push_back(&c);
  } else {
    for (const std::string& name : wanted) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        std::string known;
        for (const Cell& c : cells) known += (known.empty() ? "" : ", ") + c.name;
        Fail(file, ": cells: no cell '", name, "' in the grid (its cells: ", known, ")");
      }
      chosen.push_back(it->second);
    }
  }
  // Check every run before printing any: a sweep fails at once, not hours in.
  std::vector<std::string> lines;
  for (const Cell* cell : chosen) {
    CheckPlacement(StrCat(file, ": cell '", cell->name, "'"), cell->placement);
    for (uint64_t seed : sweep.seeds()) {
      const std::string set = CheckRun(sweep, base, *cell, seed);
      const SweepPlacement& p = cell->placement;
      std::string labels;
      for (size_t a = 0; a < axis_names.size(); ++a)
        labels += (a ? "," : "") + Json(axis_names[a]) + ":" + Json(cell->labels[a]);
      lines.push_back(StrCat("{\"run\":", Json(cell->name + "/seed-" + std::to_string(seed)),
                             ",\"cell\":", Json(cell->name), ",\"seed\":", seed, ",\"axes\":{",
                             labels, "}", ",\"ranks\":", p.ranks(), ",\"hosts\":", Json(p.hosts()),
                             ",\"link_mbps\":", Number(p.link_mbps()),
                             ",\"link_delay_ms\":", Number(p.link_delay_ms()),
                             ",\"slowdown\":", Number(p.slowdown()), ",\"config\":", Json(base),
                             ",\"set\":", Json(set), ",\"after\":", Json(sweep.budget()), "}"));
    }
  }
  const std::string reference =
      sweep.reference().empty() ? chosen.front()->name : sweep.reference();
  if (by_name.count(reference) == 0) Fail(file, ": reference: no cell '", reference, "'");
  std::printf(
      "{\"sweep\":%s,\"file\":%s,\"metric\":%s,\"target_dev_ce\":%s,"
      "\"stop_at_target\":%s,\"reference\":%s,\"runs\":%zu,\"convergence_patience\":%d,"
      "\"test_src\":%s,\"test_tgt\":%s,\"target_bleu\":%s}\n",
      Json(sweep.name()).c_str(), Json(FLAGS_sweep).c_str(),
      Json(sweep.metric().empty() ? "dev_ce" : sweep.metric()).c_str(),
      Number(sweep.target_dev_ce()).c_str(), sweep.stop_at_target() ? "true" : "false",
      Json(reference).c_str(), lines.size(), sweep.convergence_patience(),
      Json(sweep.test_src()).c_str(), Json(sweep.test_tgt()).c_str(),
      Number(sweep.target_bleu()).c_str());
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "checks a sweep file and prints its runs as JSON lines: tern-sweep-plan --sweep FILE");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-sweep-plan", [] { return tern::PlanMain(); });
}
