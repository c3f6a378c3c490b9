#include "launch/serve/json_request.h"

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tern::serve {
namespace {

using nlohmann::json;

// Follows a parse (nlohmann's SAX events) and knows, when it stops, which value it was in:
// "text[2]", "model", or "" at the top.
class PathTracker : public nlohmann::json_sax<json> {
 public:
  std::string Path() const {
    std::string path;
    for (const Frame& f : frames_) {
      if (f.array) {
        path += "[" + std::to_string(f.index) + "]";
      } else if (!f.key.empty()) {
        path += (path.empty() ? "" : ".") + f.key;
      }
    }
    return path;
  }

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(false); }
  bool key(string_t& k) override {
    frames_.back().key = k;
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(true); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool array;
    int64_t index = 0;
    std::string key;
  };
  bool Value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool Open(bool array) {
    frames_.push_back({array, 0, ""});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return Value();
  }
  std::vector<Frame> frames_;
};

// The message as one printable line: a key or path from the body may hold control characters
// (a decoded "\n"), which are written as JSON escapes.
ParsedRequest Error(const std::string& message) {
  std::string line;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      line += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", u);
      line += escape;
    } else {
      line += c;
    }
  }
  return {std::nullopt, std::move(line)};
}

const char kFields[] = "model, text, beam, n_best, scores";

// An integer field in [low, high].
std::optional<std::string> IntField(const json& body, const char* name, int low, int high,
                                    int* out) {
  const json& v = body.at(name);
  if (!v.is_number_integer()) {
    return std::string("field '") + name + "' must be an integer from " + std::to_string(low) +
           " to " + std::to_string(high);
  }
  const int64_t n = v.get<int64_t>();
  if (n < low || n > high) {
    return std::string("field '") + name + "' is " + std::to_string(n) + "; it must be from " +
           std::to_string(low) + " to " + std::to_string(high);
  }
  *out = static_cast<int>(n);
  return std::nullopt;
}

}  // namespace

size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    int extra;
    uint32_t low;  // the smallest code point of this length (no overlongs)
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, low = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, low = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, low = 0x10000, cp = c & 0x07;
    } else {
      return i;
    }
    for (int k = 1; k <= extra; ++k) {
      if (i + k >= n || (s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < low || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += extra + 1;
  }
  return n;
}

ParsedRequest ParseTranslateRequest(std::string_view body, const RequestLimits& limits) {
  // Bytes that are not UTF-8 anywhere: name the value they are in.
  if (const size_t bad = FirstInvalidUtf8(body); bad < body.size()) {
    PathTracker tracker;
    json::sax_parse(body.substr(0, bad), &tracker, json::input_format_t::json, false);
    const std::string path = tracker.Path();
    return Error((path.empty() ? std::string("the body") : path) + " is not valid UTF-8 (byte " +
                 std::to_string(bad) + " of the body)");
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    PathTracker tracker;
    json::sax_parse(body, &tracker, json::input_format_t::json, false);
    const std::string path = tracker.Path();
    std::string why;
    try {
      const json unused = json::parse(body);
    } catch (const json::exception& e) {  // parse_error, or out_of_range: a number too large
      why = e.what();
      if (const size_t end = why.find("] ");
          why.rfind("[json.exception", 0) == 0 && end != why.npos) {
        why = why.substr(end + 2);  // nlohmann's "[json.exception.parse_error.101] "
      }
    }
    return Error("the body is not valid JSON" + (path.empty() ? "" : " (in " + path + ")") +
                 (why.empty() ? "" : ": " + why));
  }
  if (!doc.is_object()) {
    return Error(std::string("the body must be a JSON object with the fields ") + kFields);
  }
  TranslateRequest r;
  for (const auto& [key, value] : doc.items()) {
    if (key != "model" && key != "text" && key != "beam" && key != "n_best" && key != "scores") {
      return Error("unknown field '" + key + "' (the fields are " + kFields + ")");
    }
  }
  if (doc.contains("model")) {
    if (!doc["model"].is_string() || doc["model"].get_ref<const std::string&>().empty()) {
      return Error("field 'model' must be a model's name (a non-empty string; GET /v1/models)");
    }
    r.model = doc["model"].get<std::string>();
  }
  if (!doc.contains("text")) return Error("field 'text' is missing: an array of strings");
  const json& text = doc["text"];
  if (!text.is_array()) return Error("field 'text' must be an array of strings");
  if (text.empty()) return Error("field 'text' is empty: give at least one string");
  if (static_cast<int64_t>(text.size()) > limits.max_sentences) {
    return Error("field 'text' has " + std::to_string(text.size()) + " strings; at most " +
                 std::to_string(limits.max_sentences) + " a request (split it)");
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (!text[i].is_string()) return Error("text[" + std::to_string(i) + "] is not a string");
    r.text.push_back(text[i].get<std::string>());
  }
  if (doc.contains("beam")) {
    if (auto e = IntField(doc, "beam", 1, limits.max_beam, &r.beam)) return Error(*e);
  }
  const int beam = r.beam > 0 ? r.beam : limits.default_beam;
  if (doc.contains("n_best")) {
    if (auto e = IntField(doc, "n_best", 1, beam, &r.n_best)) return Error(*e + " (the beam)");
  }
  if (doc.contains("scores")) {
    if (!doc["scores"].is_boolean()) return Error("field 'scores' must be true or false");
    r.scores = doc["scores"].get<bool>();
  }
  return {std::move(r), ""};
}

}  // namespace tern::serve
