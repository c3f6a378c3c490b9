// configs/config_io.h: protobuf text parsing, --set overrides, defaults, validation, and the
// presets in configs/*.pbtxt, in the order tern-train applies them (file, overrides, defaults,
// validation).
#include "configs/config_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tern::config {
namespace {

TrainConfig Parse(const std::string& text) {
  TrainConfig c;
  std::string error;
  EXPECT_TRUE(ParseTrainConfig(text, "test.pbtxt", &c, &error)) << error;
  return c;
}

// The error of a config that must not parse.
std::string ParseError(const std::string& text) {
  TrainConfig c;
  std::string error;
  EXPECT_FALSE(ParseTrainConfig(text, "test.pbtxt", &c, &error)) << text;
  return error;
}

// The error of an override that must be refused.
std::string OverrideError(const std::string& assignment) {
  TrainConfig c;
  std::string error;
  EXPECT_FALSE(ApplyOverride(assignment, &c, &error)) << assignment;
  return error;
}

// An empty config with Tern's defaults, which validates, then `assignment` applied.
TrainConfig DefaultsWith(const std::string& assignment) {
  TrainConfig c;
  FillDefaults(&c);
  std::string error;
  EXPECT_TRUE(ApplyOverride(assignment, &c, &error)) << assignment << ": " << error;
  return c;
}

TEST(ParseTrainConfigTest, ReadsEveryKindOfField) {
  const TrainConfig c = Parse(R"(
    # a comment
    model { arch: "s2s" emb_dim: 64 tied_embeddings: true dropout: 0.25 }
    data { train_src: "a.es" vocab_size: 300 }
    training { seed: 18446744073709551615 after: "30m" }
  )");
  EXPECT_EQ(c.model().arch(), "s2s");
  EXPECT_EQ(c.model().emb_dim(), 64);
  EXPECT_TRUE(c.model().tied_embeddings());
  EXPECT_FLOAT_EQ(c.model().dropout(), 0.25f);
  EXPECT_EQ(c.data().train_src(), "a.es");
  EXPECT_EQ(c.data().vocab_size(), 300);
  EXPECT_EQ(c.training().seed(), 18446744073709551615ull);
  EXPECT_EQ(c.training().after(), "30m");
  EXPECT_EQ(c.optim().learning_rate(), 0.f);  // absent: zero until FillDefaults
}

TEST(ParseTrainConfigTest, UnknownFieldNamesTheFileTheLineAndTheField) {
  const std::string error = ParseError("model {\n  emb_dim: 8\n  emb_dimm: 8\n}\n");
  EXPECT_NE(error.find("test.pbtxt:3:"), std::string::npos) << error;
  EXPECT_NE(error.find("emb_dimm"), std::string::npos) << error;
}

TEST(ParseTrainConfigTest, SyntaxAndTypeErrorsNameTheLine) {
  EXPECT_NE(ParseError("model {\n  emb_dim 8\n").find("test.pbtxt:2:"), std::string::npos);
  EXPECT_NE(ParseError("data {\n\n  vocab_size: \"many\"\n}").find("test.pbtxt:3:"),
            std::string::npos);
  // Out of the field's range: an int32 cannot hold 2^31.
  EXPECT_NE(ParseError("model { heads: 2147483648 }").find("test.pbtxt:1:"), std::string::npos);
}

TEST(ParseTrainConfigTest, LoadNamesAMissingFile) {
  TrainConfig c;
  std::string error;
  EXPECT_FALSE(LoadTrainConfig("/nonexistent/x.pbtxt", &c, &error));
  EXPECT_EQ(error, "cannot open config /nonexistent/x.pbtxt");
}

TEST(ParseTrainConfigTest, LoadNamesTheFileInItsErrors) {
  const std::string path =
      ::testing::TempDir() + "config_io_test_" + std::to_string(::getpid()) + ".pbtxt";
  std::ofstream(path) << "optim {\n  no_such_field: 1\n}\n";
  TrainConfig c;
  std::string error;
  EXPECT_FALSE(LoadTrainConfig(path, &c, &error));
  EXPECT_EQ(error.rfind(path + ":2:", 0), 0u) << error;
  std::filesystem::remove(path);
}

TEST(ApplyOverrideTest, SetsNestedFieldsOfEveryType) {
  TrainConfig c;
  std::string error;
  for (const char* assignment :
       {"model.emb_dim=256", "optim.learning_rate=0.0005", "model.pre_norm=true",
        "distributed.strategy=sync", "training.seed=42", "data.train_src=/data/train.es"}) {
    EXPECT_TRUE(ApplyOverride(assignment, &c, &error)) << assignment << ": " << error;
  }
  EXPECT_EQ(c.model().emb_dim(), 256);
  EXPECT_FLOAT_EQ(c.optim().learning_rate(), 0.0005f);
  EXPECT_TRUE(c.model().pre_norm());
  EXPECT_EQ(c.distributed().strategy(), "sync");
  EXPECT_EQ(c.training().seed(), 42u);
  EXPECT_EQ(c.data().train_src(), "/data/train.es");
}

TEST(ApplyOverrideTest, StringValuesAreTakenAsTheyAre) {
  // Quoted for the text parser by ApplyOverride: quotes, backslashes, '=' and spaces survive.
  TrainConfig c;
  std::string error;
  ASSERT_TRUE(ApplyOverride(R"(data.vocab=a "b" \c=d e)", &c, &error)) << error;
  EXPECT_EQ(c.data().vocab(), R"(a "b" \c=d e)");
  ASSERT_TRUE(ApplyOverride("data.vocab=", &c, &error)) << error;
  EXPECT_EQ(c.data().vocab(), "");
}

TEST(ApplyOverrideTest, ZeroAndFalseReplaceWhatTheFileSaid) {
  // proto3's MergeFrom skips zero values; an override must not.
  TrainConfig c = Parse("model { dropout: 0.1 pre_norm: true emb_dim: 64 }");
  std::string error;
  ASSERT_TRUE(ApplyOverride("model.dropout=0", &c, &error)) << error;
  ASSERT_TRUE(ApplyOverride("model.pre_norm=false", &c, &error)) << error;
  ASSERT_TRUE(ApplyOverride("model.emb_dim=0", &c, &error)) << error;
  EXPECT_EQ(c.model().dropout(), 0.f);
  EXPECT_FALSE(c.model().pre_norm());
  EXPECT_EQ(c.model().emb_dim(), 0);
}

TEST(ApplyOverrideTest, RefusesWhatIsNotAScalarField) {
  EXPECT_EQ(OverrideError("model.emb_dim"),
            "override 'model.emb_dim' is not of the form field.path=value");
  for (const std::string assignment : {"model.emb_dimm=8", "modle.emb_dim=8", "emb_dim=8",
                                       "model=8", "model.emb_dim.x=8", "model..emb_dim=8", "=8"}) {
    const std::string path = assignment.substr(0, assignment.find('='));
    EXPECT_EQ(OverrideError(assignment),
              "unknown config field '" + path + "' in override '" + assignment + "'");
  }
}

TEST(ApplyOverrideTest, RefusesValuesTheFieldCannotHold) {
  for (const char* assignment :
       {"model.emb_dim=abc", "model.emb_dim=2.5", "model.heads=2147483648", "training.seed=-1",
        "model.pre_norm=maybe", "optim.learning_rate=fast"}) {
    const std::string error = OverrideError(assignment);
    EXPECT_EQ(error.rfind("override '" + std::string(assignment) + "'", 0), 0u) << error;
  }
}

TEST(ApplyOverrideTest, ARefusedOverrideLeavesTheFieldAlone) {
  TrainConfig c = Parse("model { emb_dim: 64 }");
  std::string error;
  EXPECT_FALSE(ApplyOverride("model.emb_dim=abc", &c, &error));
  EXPECT_EQ(c.model().emb_dim(), 64);
}

TEST(ApplyOverridesTest, AppliesASemicolonSeparatedListInOrder) {
  TrainConfig c;
  std::string error;
  ASSERT_TRUE(ApplyOverrides(";model.emb_dim=128;;model.heads=2;model.emb_dim=64;", &c, &error))
      << error;
  EXPECT_EQ(c.model().emb_dim(), 64);  // the later one wins
  EXPECT_EQ(c.model().heads(), 2);
  EXPECT_TRUE(ApplyOverrides("", &c, &error));
}

TEST(ApplyOverridesTest, StopsAtTheFirstBadOneNamingIt) {
  TrainConfig c;
  std::string error;
  EXPECT_FALSE(ApplyOverrides("model.heads=2;model.nope=1;model.emb_dim=64", &c, &error));
  EXPECT_EQ(error, "unknown config field 'model.nope' in override 'model.nope=1'");
  EXPECT_EQ(c.model().heads(), 2);
  EXPECT_EQ(c.model().emb_dim(), 0);
}

TEST(FillDefaultsTest, AnEmptyConfigGetsTernsDefaults) {
  TrainConfig c;
  FillDefaults(&c);
  EXPECT_EQ(c.model().arch(), "transformer");
  EXPECT_EQ(c.model().emb_dim(), 512);
  EXPECT_EQ(c.model().ffn_dim(), 2048);
  EXPECT_EQ(c.model().heads(), 8);
  EXPECT_EQ(c.model().enc_depth(), 6);
  EXPECT_EQ(c.model().dec_depth(), 6);
  EXPECT_EQ(c.data().vocab_size(), 8000);
  EXPECT_EQ(c.data().on_bad_line(), "skip");
  EXPECT_EQ(c.optim().optimizer(), "adam");
  EXPECT_FLOAT_EQ(c.optim().learning_rate(), 3e-4f);
  EXPECT_FLOAT_EQ(c.optim().beta2(), 0.98f);
  EXPECT_EQ(c.optim().schedule(), "inv_sqrt");
  EXPECT_EQ(c.training().seed(), 1234u);
  EXPECT_EQ(c.training().valid_beam(), 4);
  EXPECT_EQ(c.training().precision(), "auto");
  EXPECT_EQ(c.distributed().strategy(), "sync");  // async only when asked for
  EXPECT_EQ(c.distributed().overlap(), "auto");
  // Left at zero: off by default.
  EXPECT_EQ(c.optim().clip_norm(), 0.f);
  EXPECT_EQ(c.distributed().drop_rate(), 0.f);
  EXPECT_EQ(c.training().early_stopping(), 0);
}

TEST(FillDefaultsTest, KeepsWhatIsSetAndDerivesFromIt) {
  TrainConfig c = Parse(R"(model { arch: "s2s" emb_dim: 256 heads: 4 } optim { beta1: 0.8 })");
  FillDefaults(&c);
  EXPECT_EQ(c.model().emb_dim(), 256);
  EXPECT_EQ(c.model().heads(), 4);
  EXPECT_EQ(c.model().ffn_dim(), 1024);  // 4 x emb_dim
  EXPECT_EQ(c.model().enc_depth(), 1);   // RNNs stack one layer by default
  EXPECT_EQ(c.model().dec_depth(), 1);
  EXPECT_FLOAT_EQ(c.optim().beta1(), 0.8f);
  // A field set to 0 keeps it (for Validate to refuse), where it took the default.
  std::string error;
  ASSERT_TRUE(ApplyOverride("model.heads=0", &c, &error)) << error;
  FillDefaults(&c);
  EXPECT_EQ(c.model().heads(), 0);
}

TEST(FillDefaultsTest, AnExplicitZeroBetaIsKept) {
  // beta1 0 is Adam without momentum (SGD without momentum); it was read as unset, 0.9.
  TrainConfig c = Parse("optim { beta2: 0 }");
  std::string error;
  ASSERT_TRUE(ApplyOverride("optim.beta1=0", &c, &error)) << error;
  FillDefaults(&c);
  EXPECT_EQ(c.optim().beta1(), 0.f);
  EXPECT_EQ(c.optim().beta2(), 0.f);
  EXPECT_TRUE(Validate(c, &error)) << error;
  // And through the config's text, as a checkpoint keeps it.
  TrainConfig back = Parse(ToText(c));
  FillDefaults(&back);
  EXPECT_EQ(back.optim().beta1(), 0.f);
  EXPECT_EQ(back.optim().beta2(), 0.f);
}

// Every field with a default: an explicit 0, from the config's text or an override, is a value
// and never silently the default (learning_rate 0 was 3e-4, seed 0 was 1234, valid_freq 0 was
// 500). The ones 0 is no value for are then refused naming the field, as tern-train does it:
// overrides, FillDefaults, Validate.
TEST(FillDefaultsTest, AnExplicitZeroIsAValueOrRefused) {
  std::string error;
  TrainConfig seed = Parse("training { seed: 0 }");
  FillDefaults(&seed);
  EXPECT_EQ(seed.training().seed(), 0u);  // SplitMix64 and mt19937_64 take 0 as any other seed
  EXPECT_TRUE(Validate(seed, &error)) << error;
  EXPECT_EQ(Parse(ToText(seed)).training().seed(), 0u);  // as a checkpoint's config.pbtxt keeps it

  const std::pair<const char*, const char*> refused[] = {
      {"optim.learning_rate=0", "optim.learning_rate must be a finite number > 0, not 0"},
      {"optim.epsilon=0", "optim.epsilon must be a finite number > 0, not 0"},
      {"optim.reference_words=0", "optim.reference_words must be between 1 and"},
      {"training.valid_freq=0", "training.valid_freq must be between 1 and"},
      {"training.save_freq=0", "training.save_freq must be between 1 and"},
      {"training.disp_freq=0", "training.disp_freq must be between 1 and"},
      {"training.valid_beam=0", "training.valid_beam must be between 1 and"},
      {"training.keep_checkpoints=0", "training.keep_checkpoints must be between 1 and"},
      {"training.loss_scale=0", "training.loss_scale must be a finite number >= 1"},
      {"training.loss_scale_window=0", "training.loss_scale_window must be between 1 and"},
      {"training.max_nonfinite_updates=0", "training.max_nonfinite_updates must be between 1"},
      {"model.emb_dim=0", "model.emb_dim must be between 4 and"},
      {"model.ffn_dim=0", "model.ffn_dim must be between 1 and"},
      {"model.heads=0", "model.heads must be between 1 and"},
      {"model.enc_depth=0", "model.enc_depth must be between 1 and"},
      {"model.max_length=0", "model.max_length must be between 2 and"},
      {"data.vocab_size=0", "data.vocab_size must be between 16 and"},
      {"data.batch_tokens=0", "data.batch_tokens must be between 2 and"},
      {"data.maxi_batch=0", "data.maxi_batch must be between 1 and"},
      {"data.prefetch=0", "data.prefetch must be between 1 and"},
  };
  for (const auto& [assignment, message] : refused) {
    TrainConfig c;
    ASSERT_TRUE(ApplyOverride(assignment, &c, &error)) << assignment << ": " << error;
    FillDefaults(&c);
    EXPECT_FALSE(Validate(c, &error)) << assignment;
    EXPECT_EQ(error.rfind(message, 0), 0u) << assignment << ": " << error;
  }
  // distributed.* are ps/plan.h's to refuse (tests/ps/plan_test.cc); here only kept.
  TrainConfig tau;
  ASSERT_TRUE(ApplyOverride("distributed.tau=0", &tau, &error)) << error;
  ASSERT_TRUE(ApplyOverride("distributed.stall_seconds=0", &tau, &error)) << error;
  FillDefaults(&tau);
  EXPECT_EQ(tau.distributed().tau(), 0);
  EXPECT_EQ(tau.distributed().stall_seconds(), 0.f);
}

TEST(ValidateTest, DefaultsValidate) {
  TrainConfig c;
  FillDefaults(&c);
  std::string error = "left over";
  EXPECT_TRUE(Validate(c, &error)) << error;
  EXPECT_EQ(error, "");
}

// Each out-of-range or unknown value is refused with a message that names its field. (The
// distributed.* fields are checked where they are read, ps/plan.h: tests/ps/plan_test.cc.)
struct Refused {
  const char* assignment;
  const char* message;  // the start of the error
};

// For the test's name in CTest (the default prints the pointers' bytes).
void PrintTo(const Refused& r, std::ostream* os) { *os << r.assignment; }

class ValidateRefusesTest : public ::testing::TestWithParam<Refused> {};

TEST_P(ValidateRefusesTest, NamingTheField) {
  const Refused& r = GetParam();
  std::string error;
  EXPECT_FALSE(Validate(DefaultsWith(r.assignment), &error));
  EXPECT_EQ(error.rfind(r.message, 0), 0u) << r.assignment << ": " << error;
}

// Positions and epsilon are the Transformer's options: the GRU models refuse other values.
TEST(ValidateTest, PositionsAndLayerNormEpsAreForTheTransformerOnly) {
  for (const char* arch : {"transformer", "s2s"}) {
    for (const char* assignment : {"model.positions=vaswani", "model.layer_norm_eps=1e-5"}) {
      TrainConfig c = DefaultsWith(assignment);
      c.mutable_model()->set_arch(arch);
      std::string error;
      EXPECT_EQ(Validate(c, &error), std::string(arch) == "transformer")
          << arch << ", " << assignment << ": " << error;
    }
  }
}

// Swish is the Transformer's feed-forward activation; the GRU models' layers would silently take
// ReLU instead, so they refuse it.
TEST(ValidateTest, SwishIsForTheTransformerOnly) {
  for (const char* arch : {"transformer", "aan", "s2s", "devlin"}) {
    TrainConfig c = DefaultsWith("model.ffn_activation=swish");
    c.mutable_model()->set_arch(arch);
    std::string error;
    const bool transformer = std::string(arch) == "transformer" || std::string(arch) == "aan";
    EXPECT_EQ(Validate(c, &error), transformer) << arch << ": " << error;
    if (!transformer) {
      EXPECT_EQ(error.rfind("model.ffn_activation swish is the Transformer's (transformer, aan); " +
                                std::string(arch) + " takes relu or gelu",
                            0),
                0u)
          << error;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ValidateRefusesTest,
    ::testing::Values(
        Refused{"model.arch=lstm", "model.arch: unknown value 'lstm'"},
        Refused{"model.rnn_dim=-1", "model.rnn_dim must be between 1 and 65536, not -1"},
        Refused{"model.enc_cell_depth=-1", "model.enc_cell_depth must be between 1 and"},
        Refused{"model.dec_cell_base_depth=1", "model.dec_cell_base_depth must be >= 2"},
        Refused{"model.fc_depth=-2", "model.fc_depth must be between 1 and"},
        Refused{"model.clip_relu=-0.5", "model.clip_relu must be a finite number in [0, "},
        Refused{"model.rnn_dropout=1", "model.rnn_dropout must be a finite number in [0, 1)"},
        Refused{"model.heads=3", "model.emb_dim (512) must be a multiple of model.heads (3)"},
        Refused{"model.emb_dim=-512", "model.emb_dim must be between 4 and 65536"},
        Refused{"model.dec_depth=-1", "model.dec_depth must be between 1 and"},
        Refused{"model.dropout=1", "model.dropout must be a finite number in [0, 1)"},
        Refused{"model.attention_dropout=-0.1", "model.attention_dropout must be a finite number"},
        Refused{"model.ffn_dropout=1.5", "model.ffn_dropout must be a finite number in [0, 1)"},
        Refused{"model.ffn_activation=silu", "model.ffn_activation: unknown value 'silu'"},
        Refused{"model.positions=xlm", "model.positions: unknown value 'xlm'"},
        Refused{"model.layer_norm_eps=0", "model.layer_norm_eps must be a finite number in ["},
        Refused{"model.embedding_init=xavier", "model.embedding_init: unknown value 'xavier'"},
        Refused{"model.attention_init=fairseq", "model.attention_init: unknown value 'fairseq'"},
        Refused{"data.on_bad_line=warn", "data.on_bad_line: unknown value 'warn'"},
        Refused{"data.batch_tokens=-1", "data.batch_tokens must be between 2 and"},
        Refused{"data.vocab_size=15", "data.vocab_size must be between 16 and"},
        Refused{"optim.optimizer=adagrad", "optim.optimizer: unknown value 'adagrad'"},
        Refused{"optim.learning_rate=-0.001", "optim.learning_rate must be a finite number > 0"},
        Refused{"optim.beta2=1", "optim.beta2 must be a finite number in [0, 1)"},
        Refused{"optim.label_smoothing=1", "optim.label_smoothing must be a finite number in"},
        Refused{"optim.exponential_smoothing=1",
                "optim.exponential_smoothing must be a finite number in [0, 1)"},
        Refused{"optim.schedule=linear", "optim.schedule: unknown value 'linear'"},
        Refused{"training.device=tpu", "training.device: unknown value 'tpu'"},
        Refused{"training.precision=fp8", "training.precision: unknown value 'fp8'"},
        Refused{"training.loss_scale=0.5", "training.loss_scale must be a finite number >= 1"},
        Refused{"training.loss_scale=inf", "training.loss_scale must be a finite number >= 1"},
        Refused{"training.loss_scale_window=16777217", "training.loss_scale_window must be"}),
    [](const ::testing::TestParamInfo<Refused>& info) {
      std::string name;
      for (const char* p = info.param.assignment; *p != '='; ++p)
        name += std::isalnum(*p) ? *p : '_';
      return name + "_" + std::to_string(info.index);
    });

TEST(ValidateTest, ReportsTheFirstProblemAndAcceptsTheBoundaries) {
  TrainConfig c = DefaultsWith("model.dropout=1");
  std::string error;
  ASSERT_TRUE(ApplyOverride("training.precision=fp8", &c, &error));
  EXPECT_FALSE(Validate(c, &error));
  EXPECT_EQ(error, "model.dropout must be a finite number in [0, 1), not 1");
  // The edges of the ranges are allowed.
  for (const char* edge : {"model.dropout=0", "data.vocab_size=16", "model.dec_cell_base_depth=2",
                           "training.loss_scale=1", "training.loss_scale_window=16777216",
                           "optim.beta1=0", "model.clip_relu=0"}) {
    EXPECT_TRUE(Validate(DefaultsWith(edge), &error)) << edge << ": " << error;
  }
}

TEST(ConfigHashTest, FollowsTheContentAndSurvivesText) {
  TrainConfig a;
  FillDefaults(&a);
  TrainConfig b = a;
  EXPECT_EQ(ConfigHash(a), ConfigHash(b));
  b.mutable_optim()->set_learning_rate(a.optim().learning_rate() * 2);
  EXPECT_NE(ConfigHash(a), ConfigHash(b));
  // What checkpoints and model files embed reads back to the same config.
  const TrainConfig c = Parse(ToText(a));
  EXPECT_EQ(ConfigHash(c), ConfigHash(a));
  EXPECT_EQ(ToText(c), ToText(a));
}

// Every preset loads and validates as tern-train reads it, and reads back from its ToText.
TEST(PresetsTest, EveryPresetParsesAndValidates) {
  std::set<std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(TERN_CONFIGS_DIR)) {
    if (entry.path().extension() != ".pbtxt") continue;
    const std::string path = entry.path().string();
    seen.insert(entry.path().filename().string());
    TrainConfig c;
    std::string error;
    ASSERT_TRUE(LoadTrainConfig(path, &c, &error)) << error;
    FillDefaults(&c);
    EXPECT_TRUE(Validate(c, &error)) << path << ": " << error;
    EXPECT_EQ(ConfigHash(Parse(ToText(c))), ConfigHash(c)) << path;
  }
  // The directory is the right one: the presets the docs and scripts use are among them.
  for (const char* preset :
       {"bible-small.pbtxt", "bible-s2s.pbtxt", "bible-devlin.pbtxt", "transformer-base.pbtxt"}) {
    EXPECT_EQ(seen.count(preset), 1u) << preset;
  }
}

}  // namespace
}  // namespace tern::config
