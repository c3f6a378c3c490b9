#include "inference/marian/names.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/error.h"
#include "inference/transformer/transformer.h"

namespace tern::inference {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Marian's name of Tern's parameter `name`.
std::string MarianName(const std::string& name, bool pre_norm) {
  for (const char* stack : {"encoder", "decoder"}) {
    const std::string tern_prefix = std::string(stack) + "_final_ln_";
    if (name.rfind(tern_prefix, 0) == 0) {
      return std::string(stack) + "_top_ln_" + name.substr(tern_prefix.size());
    }
  }
  if (pre_norm && (EndsWith(name, "_ln_scale") || EndsWith(name, "_ln_bias"))) return name + "_pre";
  return name;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string Unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

// The subset of YAML Marian writes for model.yml: top-level "key: scalar" lines, and lists as
// "key:" followed by "  - item" lines or as "key: [a, b]".
std::map<std::string, std::vector<std::string>> ParseFlatYaml(const std::string& text,
                                                              const std::string& source) {
  std::map<std::string, std::vector<std::string>> out;
  std::string last;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const std::string line = Trim(raw);
    if (line.empty() || line[0] == '#' || line == "---" || line == "...") continue;
    if (line[0] == '-') {
      if (last.empty()) Fail(source, ": model.yml line ", line_no, ": list item without a key");
      out[last].push_back(Unquote(Trim(line.substr(1))));
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos || raw[0] == ' ') {
      Fail(source, ": model.yml line ", line_no, " is not 'key: value': ", line);
    }
    last = Trim(line.substr(0, colon));
    std::vector<std::string>& values = out[last];
    values.clear();
    std::string value = Trim(line.substr(colon + 1));
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
      value = value.substr(1, value.size() - 2);
      for (size_t b = 0; b <= value.size();) {
        size_t comma = value.find(',', b);
        if (comma == std::string::npos) comma = value.size();
        std::string item = Unquote(Trim(value.substr(b, comma - b)));
        if (!item.empty()) values.push_back(item);
        b = comma + 1;
      }
    } else if (!value.empty()) {
      values.push_back(Unquote(value));
    }
  }
  return out;
}

// Typed access to the options, with Marian's defaults for absent ones.
class Options {
 public:
  Options(std::map<std::string, std::vector<std::string>> values, std::string source)
      : values_(std::move(values)), source_(std::move(source)) {}

  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  std::string String(const std::string& key, const std::string& fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    return it->second.empty() ? "" : it->second[0];
  }
  const std::vector<std::string>& List(const std::string& key) const {
    static const std::vector<std::string> kEmpty;
    auto it = values_.find(key);
    return it == values_.end() ? kEmpty : it->second;
  }
  int64_t Int(const std::string& key) const {
    if (!Has(key)) Fail(source_, ": model.yml has no '", key, "'");
    return ToInt(key, String(key, ""));
  }
  int64_t Int(const std::string& key, int64_t fallback) const {
    return Has(key) ? ToInt(key, String(key, "")) : fallback;
  }
  int64_t ToInt(const std::string& key, const std::string& v) const {
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 0 || n > (1 << 30)) {
      Fail(source_, ": model.yml '", key, "' must be a non-negative integer, not '", v, "'");
    }
    return n;
  }
  float Float(const std::string& key) const {
    const std::string v = String(key, "0");
    char* end = nullptr;
    float f = std::strtof(v.c_str(), &end);
    if (v.empty() || *end != '\0') Fail(source_, ": model.yml '", key, "' is not a number: ", v);
    return f;
  }
  bool Bool(const std::string& key) const {
    const std::string v = String(key, "false");
    if (v == "true" || v == "True") return true;
    if (v == "false" || v == "False") return false;
    Fail(source_, ": model.yml '", key, "' must be true or false, not '", v, "'");
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::string source_;
};

std::string WithoutDropout(std::string ops) {
  std::erase(ops, 'd');  // dropout does nothing at inference
  return ops;
}

std::string FloatText(float f) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", f);
  return buffer;
}

}  // namespace

std::vector<MarianParameter> MarianParameters(const config::ModelConfig& config,
                                              int64_t vocab_size) {
  std::vector<MarianParameter> out;
  for (const auto& [name, shape] : TransformerParameterShapes(config, vocab_size)) {
    std::vector<int64_t> marian_shape = shape.dims();
    if (shape.rank() == 1) marian_shape.insert(marian_shape.begin(), 1);
    out.push_back({name, MarianName(name, config.pre_norm()), shape, marian_shape});
  }
  return out;
}

std::string MarianModelYaml(const config::ModelConfig& c, int64_t vocab_size) {
  const std::string v = std::to_string(vocab_size);
  std::string y;
  auto line = [&y](const std::string& key, const std::string& value) {
    y += key + ": " + value + "\n";
  };
  line("type", "transformer");
  line("dim-emb", std::to_string(c.emb_dim()));
  y += "dim-vocabs:\n  - " + v + "\n  - " + v + "\n";
  line("enc-depth", std::to_string(c.enc_depth()));
  line("dec-depth", std::to_string(c.dec_depth()));
  line("transformer-heads", std::to_string(c.heads()));
  line("transformer-dim-ffn", std::to_string(c.ffn_dim()));
  line("transformer-ffn-depth", "2");
  line("transformer-ffn-activation", c.ffn_activation().empty() ? "relu" : c.ffn_activation());
  line("transformer-decoder-autoreg", "self-attention");
  line("transformer-preprocess", c.pre_norm() ? "n" : "\"\"");
  line("transformer-postprocess", c.pre_norm() ? "da" : "dan");
  line("transformer-postprocess-top", c.pre_norm() ? "n" : "\"\"");
  line("transformer-postprocess-emb", "d");
  line("transformer-dropout", FloatText(c.dropout()));
  line("transformer-dropout-attention", FloatText(c.attention_dropout()));
  line("transformer-dropout-ffn", FloatText(c.ffn_dropout()));
  line("transformer-train-position-embeddings", "false");
  // Tern's untied model shares the decoder embedding with the output layer: Marian's
  // tied-embeddings. Its tied model shares one matrix everywhere: tied-embeddings-all.
  line("tied-embeddings", "true");
  line("tied-embeddings-src", "false");
  line("tied-embeddings-all", c.tied_embeddings() ? "true" : "false");
  line("max-length", std::to_string(c.max_length()));
  line("right-left", "false");
  return y;
}

config::ModelConfig ModelConfigFromMarianYaml(const std::string& yaml, const std::string& source,
                                              int64_t* vocab_size) {
  const Options o(ParseFlatYaml(yaml, source), source);
  auto refuse = [&](const std::string& key, const std::string& value, const std::string& why) {
    Fail(source, ": model.yml '", key, ": ", value, "' cannot be imported: ", why);
  };
  const std::string type = o.String("type", "");
  if (type != "transformer") refuse("type", type, "Tern imports Marian Transformers only");
  config::ModelConfig c;
  c.set_arch("transformer");
  c.set_emb_dim(static_cast<int32_t>(o.Int("dim-emb")));
  c.set_enc_depth(static_cast<int32_t>(o.Int("enc-depth")));
  c.set_dec_depth(static_cast<int32_t>(o.Int("dec-depth")));
  c.set_heads(static_cast<int32_t>(o.Int("transformer-heads")));
  c.set_ffn_dim(static_cast<int32_t>(o.Int("transformer-dim-ffn")));
  c.set_max_length(static_cast<int32_t>(o.Int("max-length", 256)));
  c.set_dropout(o.Float("transformer-dropout"));
  c.set_attention_dropout(o.Float("transformer-dropout-attention"));
  c.set_ffn_dropout(o.Float("transformer-dropout-ffn"));
  if (c.emb_dim() == 0 || c.heads() == 0 || c.emb_dim() % c.heads() != 0 || c.emb_dim() % 2) {
    refuse(
        "dim-emb", std::to_string(c.emb_dim()),
        "it must be even and a multiple of transformer-heads (" + std::to_string(c.heads()) + ")");
  }

  if (o.Int("transformer-ffn-depth", 2) != 2) {
    refuse("transformer-ffn-depth", o.String("transformer-ffn-depth", ""),
           "Tern's feed-forward block has 2 layers");
  }
  const int64_t dec_depth_ffn = o.Int("transformer-decoder-ffn-depth", 0);
  if (dec_depth_ffn != 0 && dec_depth_ffn != 2) {
    refuse("transformer-decoder-ffn-depth", std::to_string(dec_depth_ffn),
           "Tern's feed-forward block has 2 layers");
  }
  const int64_t dec_dim_ffn = o.Int("transformer-decoder-dim-ffn", 0);
  if (dec_dim_ffn != 0 && dec_dim_ffn != c.ffn_dim()) {
    refuse("transformer-decoder-dim-ffn", std::to_string(dec_dim_ffn),
           "Tern's decoder uses the encoder's transformer-dim-ffn");
  }
  const std::string act = o.String("transformer-ffn-activation", "swish");
  if (act != "relu" && act != "gelu" && act != "swish") {
    refuse("transformer-ffn-activation", act, "relu, gelu or swish");
  }
  if (act == "gelu") {
    LOG(WARNING) << source << ": Marian's gelu may be a different approximation from Tern's "
                 << "(tanh); translations can differ slightly";
  }
  c.set_ffn_activation(act);

  const std::string pre = WithoutDropout(o.String("transformer-preprocess", ""));
  const std::string post = WithoutDropout(o.String("transformer-postprocess", "dan"));
  const std::string top = WithoutDropout(o.String("transformer-postprocess-top", ""));
  if (pre.empty() && post == "an" && top.empty()) {
    c.set_pre_norm(false);
  } else if (pre == "n" && post == "a" && top == "n") {
    c.set_pre_norm(true);
  } else {
    refuse("transformer-preprocess/postprocess/postprocess-top", pre + "/" + post + "/" + top,
           "Tern runs post-norm (\"\"/dan/\"\") or pre-norm (n/da/n), dropout aside");
  }
  const std::string emb = WithoutDropout(o.String("transformer-postprocess-emb", "d"));
  if (!emb.empty())
    refuse("transformer-postprocess-emb", emb, "Tern does not normalize embeddings");

  const std::string autoreg = o.String("transformer-decoder-autoreg", "self-attention");
  if (autoreg != "self-attention") {
    refuse("transformer-decoder-autoreg", autoreg, "Tern's decoder uses self-attention");
  }
  for (const char* key : {"transformer-train-position-embeddings", "transformer-train-positions",
                          "transformer-no-projection", "right-left", "output-omit-bias"}) {
    if (o.Bool(key)) refuse(key, "true", "Tern's Transformer has no such variant");
  }
  if (!o.List("transformer-tied-layers").empty()) {
    refuse("transformer-tied-layers", o.List("transformer-tied-layers")[0],
           "Tern has no tied layers");
  }
  const bool all = o.Bool("tied-embeddings-all"), src = o.Bool("tied-embeddings-src"),
             out = o.Bool("tied-embeddings");
  if (!all && !out) {
    refuse("tied-embeddings", "false",
           "Tern's output layer is the transposed target embedding (decoder_ff_logit_out_W is "
           "not supported)");
  }
  c.set_tied_embeddings(all || src);

  *vocab_size = 0;
  const std::vector<std::string>& vocabs = o.List("dim-vocabs");
  for (const std::string& v : vocabs) {
    const int64_t n = o.ToInt("dim-vocabs", v);
    if (*vocab_size != 0 && n != *vocab_size) {
      refuse("dim-vocabs", v, "Tern uses one joint vocabulary for source and target");
    }
    *vocab_size = n;
  }
  return c;
}

}  // namespace tern::inference
