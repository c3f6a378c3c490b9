// .npz archives and the Marian form of Tern's Transformer: round trips that keep every bit and
// every translation, archives written by NumPy itself, and one clear error per kind of bad file.
#include "inference/marian/npz.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "configs/config_io.h"
#include "inference/marian/model.h"
#include "inference/marian/names.h"
#include "inference/translator.h"
#include "letter_codec.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

class NpzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tern_npz_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static bool HaveNumpy() {
    static const bool have = std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0;
    return have;
  }
  static int Shell(const std::string& command) {
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The error of parsing `bytes` as an archive ("" when it parses).
  static std::string ParseError(const std::string& bytes) {
    try {
      ParseNpz("bad.npz", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

std::vector<NpyArray> SampleArrays() {
  const float matrix[6] = {1.5f, -2.f, 0.f, 3.25f, 1e-30f, -0.f};
  const float scalar = 7.f;
  std::vector<NpyArray> arrays = {
      NpyArray::Float32("W", {2, 3}, matrix), NpyArray::Float32("b", {1, 3}, matrix + 3),
      NpyArray::Float32("vector", {6}, matrix), NpyArray::Float32("scalar", {}, &scalar),
      NpyArray::Float32("empty", {0, 4}, nullptr)};
  arrays.push_back({"special:model.yml", "|i1", {4}, std::string("a: 1", 4)});
  return arrays;
}

TEST_F(NpzTest, ArraysRoundTripThroughTheArchive) {
  const std::vector<NpyArray> arrays = SampleArrays();
  WriteNpz(Path("a.npz"), arrays);
  const std::vector<NpyArray> read = ReadNpz(Path("a.npz"));
  ASSERT_EQ(read.size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ(read[i].name, arrays[i].name);
    EXPECT_EQ(read[i].descr, arrays[i].descr) << arrays[i].name;
    EXPECT_EQ(read[i].shape, arrays[i].shape) << arrays[i].name;
    EXPECT_EQ(read[i].data, arrays[i].data) << arrays[i].name;
  }
  // Deterministic bytes: the same arrays give the same file.
  EXPECT_EQ(SerializeNpz(arrays), ReadFile(Path("a.npz")));
}

TEST_F(NpzTest, NumpyLoadsWhatTernWrites) {
  if (!HaveNumpy()) GTEST_SKIP() << "python3 with numpy is not installed";
  WriteNpz(Path("a.npz"), SampleArrays());
  const std::string script =
      "import numpy as np; d = np.load('" + Path("a.npz") +
      "'); assert d['W'].dtype == np.float32 and d['W'].shape == (2, 3); "
      "assert d['W'][1, 0] == 3.25 and d['b'].shape == (1, 3) and d['vector'].shape == (6,); "
      "assert d['scalar'].shape == () and float(d['scalar']) == 7.0; "
      "assert d['empty'].shape == (0, 4); "
      "assert bytes(d['special:model.yml'].astype(np.uint8)) == b'a: 1'";
  EXPECT_EQ(Shell("python3 -c \"" + script + "\""), 0);
}

TEST_F(NpzTest, ReadsArchivesWrittenByNumpySavezAndSavezCompressed) {
  if (!HaveNumpy()) GTEST_SKIP() << "python3 with numpy is not installed";
  // One python3 run writes both (numpy's start-up is most of this test's time).
  std::string script = "import numpy as np\n";
  for (const char* save : {"savez", "savez_compressed"}) {
    script += std::string("np.") + save + "('" + Path(std::string(save) + ".npz") +
              "', W=(np.arange(12, dtype=np.float32).reshape(3, 4) / 8 - 0.5), "
              "b=np.array([[1.5, -2.0]], dtype=np.float32), "
              "s=np.float32(3.5), y=np.frombuffer(b'type: x', dtype=np.int8))\n";
  }
  WriteFileAtomic(Path("save.py"), script);
  ASSERT_EQ(Shell("python3 " + Path("save.py")), 0);
  for (const std::string save : {"savez", "savez_compressed"}) {
    const std::string path = Path(save + ".npz");
    std::vector<NpyArray> read = ReadNpz(path);
    ASSERT_EQ(read.size(), 4u) << save;
    EXPECT_EQ(read[0].name, "W");
    EXPECT_EQ(read[0].descr, "<f4");
    EXPECT_EQ(read[0].shape, (std::vector<int64_t>{3, 4}));
    ASSERT_EQ(read[0].data.size(), 12 * sizeof(float));
    for (int i = 0; i < 12; ++i) {
      float v;
      std::memcpy(&v, read[0].data.data() + 4 * i, 4);
      EXPECT_EQ(v, static_cast<float>(i) / 8 - 0.5f) << save << " element " << i;
    }
    EXPECT_EQ(read[1].shape, (std::vector<int64_t>{1, 2}));
    float b[2];
    std::memcpy(b, read[1].data.data(), 8);
    EXPECT_EQ(b[0], 1.5f);
    EXPECT_EQ(b[1], -2.f);
    EXPECT_TRUE(read[2].shape.empty());
    EXPECT_EQ(read[3].descr, "|i1");
    EXPECT_EQ(read[3].data, "type: x");
  }
}

TEST_F(NpzTest, TruncatedOrDamagedArchivesSaySo) {
  const std::string bytes = SerializeNpz(SampleArrays());
  for (size_t keep : {bytes.size() - 1, bytes.size() - 30, bytes.size() / 2, size_t{10}}) {
    const std::string error = ParseError(bytes.substr(0, keep));
    EXPECT_NE(error.find("bad.npz: "), std::string::npos) << error;
    EXPECT_NE(error.find("truncated"), std::string::npos) << keep << ": " << error;
  }
  std::string flipped = bytes;
  const size_t first_member_end = bytes.find("PK\x03\x04", 4);  // the second local header
  flipped[first_member_end - 1] ^= 0x01;                        // the first member's last byte
  EXPECT_NE(ParseError(flipped).find("checksum mismatch"), std::string::npos)
      << ParseError(flipped);
  EXPECT_NE(ParseError("hello, not a zip file at all").find("not a complete .npz"),
            std::string::npos);
  EXPECT_EQ(ParseError(bytes), "");
}

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// An archive of one member with every size and offset in ZIP64 fields, as zip tools write
// archives past 4 GiB or 65535 members.
std::string Zip64Archive(const std::string& name, const std::string& npy) {
  const uint32_t crc = Crc32(npy.data(), npy.size());
  const uint64_t size = npy.size();
  std::string out;
  Put<uint32_t>(&out, 0x04034b50);
  for (uint16_t v : {45, 0, 0, 0, 0x21}) Put<uint16_t>(&out, v);
  for (uint32_t v : {crc, 0xffffffffu, 0xffffffffu}) Put<uint32_t>(&out, v);
  Put<uint16_t>(&out, static_cast<uint16_t>(name.size()));
  Put<uint16_t>(&out, 20);
  out += name;
  for (uint16_t v : {1, 16}) Put<uint16_t>(&out, v);
  for (uint64_t v : {size, size}) Put<uint64_t>(&out, v);
  out += npy;
  const uint64_t central = out.size();
  Put<uint32_t>(&out, 0x02014b50);
  for (uint16_t v : {45, 45, 0, 0, 0, 0x21}) Put<uint16_t>(&out, v);
  for (uint32_t v : {crc, 0xffffffffu, 0xffffffffu}) Put<uint32_t>(&out, v);
  for (uint16_t v :
       {static_cast<uint16_t>(name.size()), uint16_t{28}, uint16_t{0}, uint16_t{0}, uint16_t{0}}) {
    Put<uint16_t>(&out, v);
  }
  for (uint32_t v : {0u, 0xffffffffu}) Put<uint32_t>(&out, v);  // attributes, offset
  out += name;
  for (uint16_t v : {1, 24}) Put<uint16_t>(&out, v);
  for (uint64_t v : {size, size, uint64_t{0}}) Put<uint64_t>(&out, v);
  const uint64_t central_size = out.size() - central, end64 = out.size();
  Put<uint32_t>(&out, 0x06064b50);
  Put<uint64_t>(&out, 44);
  for (uint16_t v : {45, 45}) Put<uint16_t>(&out, v);
  for (uint32_t v : {0, 0}) Put<uint32_t>(&out, v);
  for (uint64_t v : {uint64_t{1}, uint64_t{1}, central_size, central}) Put<uint64_t>(&out, v);
  Put<uint32_t>(&out, 0x07064b50);
  Put<uint32_t>(&out, 0);
  Put<uint64_t>(&out, end64);
  Put<uint32_t>(&out, 1);
  Put<uint32_t>(&out, 0x06054b50);
  for (uint16_t v : {0, 0, 0xffff, 0xffff}) Put<uint16_t>(&out, v);
  for (uint32_t v : {0xffffffffu, 0xffffffffu}) Put<uint32_t>(&out, v);
  Put<uint16_t>(&out, 0);
  return out;
}

TEST_F(NpzTest, ReadsZip64SizesAndOffsets) {
  const float values[3] = {0.5f, -1.f, 2.f};
  // The member's .npy bytes, cut out of an ordinary archive: after the 30-byte local header and
  // the name, up to the central directory (whose offset ends the file).
  const std::string plain = SerializeNpz({NpyArray::Float32("x", {3}, values)});
  uint32_t central;
  std::memcpy(&central, plain.data() + plain.size() - 6, 4);
  const std::string npy = plain.substr(30 + 5, central - 30 - 5);
  const std::string zip64 = Zip64Archive("x.npy", npy);
  const std::vector<NpyArray> read =
      ParseNpz("z.npz", reinterpret_cast<const uint8_t*>(zip64.data()), zip64.size());
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].name, "x");
  EXPECT_EQ(read[0].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(read[0].data, std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  if (HaveNumpy()) {  // the hand-made archive is a valid one
    WriteFileAtomic(Path("z.npz"), zip64);
    EXPECT_EQ(Shell("python3 -c \"import numpy as np; assert list(np.load('" + Path("z.npz") +
                    "')['x']) == [0.5, -1, 2]\""),
              0);
  }
}

// --- the Marian form of the Transformer ---

std::vector<NpyArray> ThroughArchive(const std::vector<NpyArray>& arrays) {
  const std::string bytes = SerializeNpz(arrays);
  return ParseNpz("m.npz", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

using testing::LetterCodec;

class MarianRoundTripTest : public ::testing::TestWithParam<testing::TinyModelSpec> {};

TEST_P(MarianRoundTripTest, KeepsEveryBitAndEveryTranslation) {
  testing::TinyModel m = testing::MakeTinyModel(GetParam());
  const std::vector<NpyArray> arrays = ToMarianArrays(m.config.model(), m.weights);
  ImportedModel imported = FromMarianArrays(ThroughArchive(arrays), "m.npz");

  config::TrainConfig a, b;
  *a.mutable_model() = m.config.model();
  *b.mutable_model() = imported.model;
  EXPECT_EQ(config::ToText(b), config::ToText(a));
  EXPECT_EQ(imported.vocab_size, GetParam().vocab);
  ASSERT_EQ(imported.tensors.size(), m.tensors.size());
  Weights weights("imported");
  for (const NamedTensor& t : imported.tensors) {
    const Tensor& original = m.weights.Get(t.name, t.tensor.shape());
    EXPECT_EQ(std::memcmp(original.raw(), t.tensor.raw(), t.tensor.bytes()), 0) << t.name;
    weights.Add(t.name, t.tensor);
  }

  TranslatorOptions options;
  options.search = {.beam_size = 3, .n_best = 2};
  Translator before(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
  Translator after(imported.model, weights, std::make_unique<LetterCodec>(), options);
  const std::vector<std::string> lines = {"hello", "a much longer line", "xyz", "q", "marian"};
  auto x = before.Translate(lines), y = after.Translate(lines);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(x[i].size(), y[i].size());
    for (size_t j = 0; j < x[i].size(); ++j) {
      EXPECT_EQ(x[i][j].text, y[i][j].text) << lines[i];
      EXPECT_EQ(x[i][j].score, y[i][j].score) << lines[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, MarianRoundTripTest,
    ::testing::Values(testing::TinyModelSpec{.eos_bias = 2.f, .emb_scale = 1.f},
                      testing::TinyModelSpec{.tied = false, .eos_bias = 2.f},
                      testing::TinyModelSpec{.pre_norm = true, .activation = "gelu"},
                      testing::TinyModelSpec{.tied = false, .pre_norm = true, .enc_depth = 1}));

const NpyArray* Find(const std::vector<NpyArray>& arrays, const std::string& name) {
  for (const NpyArray& a : arrays)
    if (a.name == name) return &a;
  return nullptr;
}

TEST(MarianNamesTest, UsesMarianNamesShapesAndOptions) {
  testing::TinyModel m = testing::MakeTinyModel({.tied = false, .pre_norm = true});
  const std::vector<NpyArray> arrays = ToMarianArrays(m.config.model(), m.weights);
  ASSERT_EQ(arrays.size(), m.tensors.size() + 1);
  for (const char* name :
       {"encoder_Wemb", "decoder_Wemb", "encoder_l1_self_Wq", "encoder_l1_self_Wo_ln_scale_pre",
        "encoder_l2_ffn_ffn_ln_bias_pre", "decoder_l1_context_bk", "decoder_l2_ffn_W2",
        "encoder_top_ln_scale", "decoder_top_ln_bias", "decoder_ff_logit_out_b"}) {
    EXPECT_NE(Find(arrays, name), nullptr) << name;
  }
  EXPECT_EQ(Find(arrays, "encoder_final_ln_scale"), nullptr);
  EXPECT_EQ(Find(arrays, "decoder_l1_context_bk")->shape, (std::vector<int64_t>{1, 16}));
  EXPECT_EQ(Find(arrays, "decoder_ff_logit_out_b")->shape, (std::vector<int64_t>{1, 29}));
  EXPECT_EQ(Find(arrays, "decoder_l2_ffn_W2")->shape, (std::vector<int64_t>{24, 16}));
  EXPECT_EQ(Find(arrays, "encoder_Wemb")->shape, (std::vector<int64_t>{29, 16}));
  const std::string yaml = Find(arrays, kMarianConfigEntry)->data;
  EXPECT_EQ(yaml.back(), '\0');
  for (const char* line :
       {"type: transformer\n", "dim-emb: 16\n", "transformer-heads: 4\n",
        "transformer-dim-ffn: 24\n", "transformer-preprocess: n\n", "transformer-postprocess: da\n",
        "transformer-postprocess-top: n\n", "tied-embeddings: true\n",
        "tied-embeddings-all: false\n", "dim-vocabs:\n  - 29\n  - 29\n"}) {
    EXPECT_NE(yaml.find(line), std::string::npos) << line << "in\n" << yaml;
  }
}

class MarianImportErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = testing::MakeTinyModel({});
    arrays_ = ToMarianArrays(m_.config.model(), m_.weights);
  }
  std::string ImportError(const std::vector<NpyArray>& arrays) const {
    try {
      FromMarianArrays(ThroughArchive(arrays), "bad.npz");
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
      EXPECT_EQ(what.rfind("bad.npz: ", 0), 0u) << what;
      return what;
    }
    return "";
  }
  NpyArray& Get(const std::string& name) { return *const_cast<NpyArray*>(Find(arrays_, name)); }
  void SetYaml(const std::string& from, const std::string& to) {
    std::string& yaml = Get(kMarianConfigEntry).data;
    const size_t at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
    Get(kMarianConfigEntry).shape = {static_cast<int64_t>(yaml.size())};
  }

  testing::TinyModel m_;
  std::vector<NpyArray> arrays_;
};

TEST_F(MarianImportErrorTest, WrongDtypeNamesTheParameter) {
  NpyArray& w = Get("decoder_l1_self_Wv");
  std::string doubles;
  for (size_t i = 0; i < w.data.size() / 4; ++i) {
    float f;
    std::memcpy(&f, w.data.data() + 4 * i, 4);
    double d = f;
    doubles.append(reinterpret_cast<const char*>(&d), 8);
  }
  w.descr = "<f8";
  w.data = doubles;
  const std::string error = ImportError(arrays_);
  EXPECT_NE(error.find("'decoder_l1_self_Wv' is float64 ('<f8')"), std::string::npos) << error;
  EXPECT_NE(error.find("float32 parameters only"), std::string::npos) << error;
}

TEST_F(MarianImportErrorTest, MissingParameterIsNamed) {
  std::erase_if(arrays_, [](const NpyArray& a) { return a.name == "decoder_l2_ffn_W2"; });
  EXPECT_NE(ImportError(arrays_).find("parameter 'decoder_l2_ffn_W2' is missing"),
            std::string::npos)
      << ImportError(arrays_);
}

TEST_F(MarianImportErrorTest, WrongShapeAndStrayArraysAreNamed) {
  std::vector<NpyArray> arrays = arrays_;
  const float one = 1.f;
  arrays.push_back(NpyArray::Float32("decoder_ff_logit_out_W", {1, 1}, &one));
  EXPECT_NE(ImportError(arrays).find("'decoder_ff_logit_out_W' (1 in all) has no place"),
            std::string::npos)
      << ImportError(arrays);
  Get("encoder_l1_ffn_W1").shape = {24, 16};
  EXPECT_NE(ImportError(arrays_).find("'encoder_l1_ffn_W1' has shape (24, 16), expected (16, 24)"),
            std::string::npos)
      << ImportError(arrays_);
}

TEST_F(MarianImportErrorTest, OptionsTernCannotRunAreRefusedByName) {
  SetYaml("transformer-ffn-activation: relu", "transformer-ffn-activation: sigmoid");
  EXPECT_NE(ImportError(arrays_).find("'transformer-ffn-activation: sigmoid' cannot be imported"),
            std::string::npos)
      << ImportError(arrays_);
  SetYaml("transformer-ffn-activation: sigmoid", "transformer-ffn-activation: relu");
  SetYaml("tied-embeddings: true", "tied-embeddings: false");
  SetYaml("tied-embeddings-all: true", "tied-embeddings-all: false");
  EXPECT_NE(ImportError(arrays_).find("decoder_ff_logit_out_W is not supported"), std::string::npos)
      << ImportError(arrays_);
  std::erase_if(arrays_, [](const NpyArray& a) { return a.name == kMarianConfigEntry; });
  EXPECT_NE(ImportError(arrays_).find("no 'special:model.yml'"), std::string::npos)
      << ImportError(arrays_);
}

// Issue 38, 8: a 3.9 MB .npz inflated to 4 GB before its declared size was compared with the
// shape model.yml implies. The member's header is read first: a shape other than the model's is
// refused with the member's data never read (its CRC is wrong here, and no checksum error comes).
TEST_F(MarianImportErrorTest, ShapesAreCheckedBeforeAnyDataIsRead) {
  NpyArray& w = Get("encoder_l1_ffn_W1");
  w.shape = {static_cast<int64_t>(w.data.size() / 4)};
  std::string bytes = SerializeNpz(arrays_);
  // The member's CRC in the central directory, which the reader uses, made wrong.
  const size_t entry = bytes.find("encoder_l1_ffn_W1.npy", bytes.find("PK\x01\x02")) - 46;
  bytes[entry + 16] ^= 0x5a;
  try {
    FromMarianNpz(
        NpzArchive("big.npz", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'encoder_l1_ffn_W1' has shape"), std::string::npos)
        << e.what();
  }
}

// A deflated member claiming more bytes than deflate can produce from its packed size is damage,
// found from the directory alone.
TEST_F(NpzTest, ImpossibleInflationIsRefusedFromTheDirectory) {
  std::string bytes = SerializeNpz(SampleArrays());
  const size_t central = bytes.find("PK\x01\x02");
  const uint16_t deflate = 8;
  const uint32_t claimed = 0xf0000000u;
  std::memcpy(bytes.data() + central + 10, &deflate, 2);
  std::memcpy(bytes.data() + central + 24, &claimed, 4);
  EXPECT_NE(ParseError(bytes).find("has inconsistent sizes"), std::string::npos)
      << ParseError(bytes);
}

// Issue 38, 3: an imported NaN weight made every translation empty, with exit 0.
TEST_F(MarianImportErrorTest, NonFiniteWeightsAreNamed) {
  NpyArray& w = Get("decoder_l1_ffn_W2");
  const float nan = std::nanf("");
  std::memcpy(w.data.data() + 8, &nan, 4);
  EXPECT_NE(ImportError(arrays_).find("parameter 'decoder_l1_ffn_W2' holds nan at element 2"),
            std::string::npos)
      << ImportError(arrays_);
}

// Issue 38, 13: exporting an int8 model said "only linear layers' weight matrices may be
// quantized" of a linear layer's weight matrix.
TEST(MarianExportTest, AQuantizedModelIsRefusedNamingTheType) {
  testing::TinyModel m = testing::MakeTinyModel({});
  Weights quantized("int8.tern");
  for (const std::string& name : m.weights.Names()) {
    const Tensor& t = m.weights.Get(name);
    quantized.Add(name, name == "encoder_l1_self_Wq" ? Tensor::Zeros(t.shape(), DType::kInt8) : t);
  }
  try {
    ToMarianArrays(m.config.model(), quantized);
    ADD_FAILURE() << "exported";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("'encoder_l1_self_Wq' is int8; a Marian .npz holds float32"),
        std::string::npos)
        << e.what();
  }
}

// Marian computes positions and layer norms one way: a model computing them otherwise has no
// .npz form, rather than one Marian would run differently.
TEST(MarianExportTest, VaswaniPositionsAndAnotherEpsilonAreRefused) {
  for (const testing::TinyModelSpec& spec : {testing::TinyModelSpec{.positions = "vaswani"},
                                             testing::TinyModelSpec{.layer_norm_eps = 1e-5f}}) {
    testing::TinyModel m = testing::MakeTinyModel(spec);
    try {
      ToMarianArrays(m.config.model(), m.weights);
      ADD_FAILURE() << "exported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("has no Marian form"), std::string::npos) << e.what();
    }
  }
  ToMarianArrays(testing::MakeTinyModel({}).config.model(), testing::MakeTinyModel({}).weights);
}

TEST_F(MarianImportErrorTest, AbsurdSizesInModelYmlAreRefused) {
  SetYaml("dim-emb: 16", "dim-emb: 1000000000");
  EXPECT_NE(ImportError(arrays_).find("model.yml: model.emb_dim must be between"),
            std::string::npos)
      << ImportError(arrays_);
}

}  // namespace
}  // namespace tern::inference
