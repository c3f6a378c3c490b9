// POST /v1/translate's body parser: every mistake is one line naming the field; UTF-8 is checked
// as RFC 3629 defines it; the OpenAPI document is JSON that lists every endpoint.
#include "launch/serve/json_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "launch/serve/openapi.h"

namespace tern::serve {
namespace {

const RequestLimits kLimits{.max_sentences = 4, .max_beam = 8, .default_beam = 4};

std::string ErrorOf(std::string_view body) {
  ParsedRequest p = ParseTranslateRequest(body, kLimits);
  EXPECT_FALSE(p.request.has_value()) << body;
  return p.error;
}

TEST(JsonRequestTest, ParsesAFullRequest) {
  ParsedRequest p = ParseTranslateRequest(
      R"({"model": "es-en", "text": ["hola", "", "adiós"], "beam": 5, "n_best": 2, "scores": true})",
      kLimits);
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_EQ(p.request->model, "es-en");
  EXPECT_EQ(p.request->text, (std::vector<std::string>{"hola", "", "adiós"}));
  EXPECT_EQ(p.request->beam, 5);
  EXPECT_EQ(p.request->n_best, 2);
  EXPECT_TRUE(p.request->scores);
}

// Found by fuzz_request: a key's decoded "\n" went into the message, making it two lines.
TEST(JsonRequestTest, KeysWithControlCharactersStayOnOneLine) {
  const std::string unknown = ErrorOf(R"({"text": ["x"], "a\nb\u0001": 1})");
  EXPECT_EQ(unknown.find('\n'), std::string::npos) << unknown;
  EXPECT_NE(unknown.find(R"(unknown field 'a\nb\u0001')"), std::string::npos) << unknown;
  const std::string broken = ErrorOf(R"({"text": ["x"], "af\n1 "af})");
  EXPECT_EQ(broken.find('\n'), std::string::npos) << broken;
}

// Found by fuzz_request: a number too large for a double threw out of the parser.
TEST(JsonRequestTest, ANumberTooLargeIsAnError) {
  const std::string e = ErrorOf(R"({"text": ["x"], "beam": 2e2222222})");
  EXPECT_NE(e.find("not valid JSON (in beam): number overflow"), std::string::npos) << e;
}

TEST(JsonRequestTest, DefaultsWhenFieldsAreLeftOut) {
  ParsedRequest p = ParseTranslateRequest(R"({"text": ["x"]})", kLimits);
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_EQ(p.request->model, "");
  EXPECT_EQ(p.request->beam, 0);
  EXPECT_EQ(p.request->n_best, 1);
  EXPECT_FALSE(p.request->scores);
}

TEST(JsonRequestTest, EachMistakeNamesItsField) {
  EXPECT_EQ(ErrorOf(R"({"text": "x"})"), "field 'text' must be an array of strings");
  EXPECT_EQ(ErrorOf(R"({"model": "a"})"), "field 'text' is missing: an array of strings");
  EXPECT_EQ(ErrorOf(R"({"text": []})"), "field 'text' is empty: give at least one string");
  EXPECT_EQ(ErrorOf(R"({"text": ["a", 3]})"), "text[1] is not a string");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "temperature": 1})"),
            "unknown field 'temperature' (the fields are model, text, beam, n_best, scores)");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "model": 7})"),
            "field 'model' must be a model's name (a non-empty string; GET /v1/models)");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "beam": 0})"), "field 'beam' is 0; it must be from 1 to 8");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "beam": 2.5})"),
            "field 'beam' must be an integer from 1 to 8");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "beam": 2, "n_best": 3})"),
            "field 'n_best' is 3; it must be from 1 to 2 (the beam)");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "n_best": 5})"),
            "field 'n_best' is 5; it must be from 1 to 4 (the beam)");
  EXPECT_EQ(ErrorOf(R"({"text": ["a"], "scores": "yes"})"), "field 'scores' must be true or false");
  EXPECT_EQ(ErrorOf(R"({"text": ["a", "b", "c", "d", "e"]})"),
            "field 'text' has 5 strings; at most 4 a request (split it)");
  EXPECT_EQ(ErrorOf(R"(["a"])"),
            "the body must be a JSON object with the fields model, text, beam, n_best, scores");
}

TEST(JsonRequestTest, MalformedJsonSaysWhereItStopped) {
  const std::string e = ErrorOf(R"({"text": ["a", )");
  EXPECT_EQ(e.rfind("the body is not valid JSON (in text[1]): parse error", 0), 0u) << e;
  EXPECT_EQ(ErrorOf("").rfind("the body is not valid JSON: ", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"text\": [\"a\"]} trailing").rfind("the body is not valid JSON", 0), 0u);
}

TEST(JsonRequestTest, InvalidUtf8NamesTheString) {
  EXPECT_EQ(ErrorOf("{\"text\": [\"ok\", \"b\xff\"]}"),
            "text[1] is not valid UTF-8 (byte 18 of the body)");
  EXPECT_EQ(ErrorOf("{\"model\": \"\xc3\"}"), "model is not valid UTF-8 (byte 11 of the body)");
  EXPECT_EQ(ErrorOf("\xef\xbb{}"), "the body is not valid UTF-8 (byte 0 of the body)");
  // A lone surrogate written as an escape is not UTF-8 either: the JSON parser refuses it.
  EXPECT_EQ(ErrorOf(R"({"text": ["\ud800"]})").rfind("the body is not valid JSON", 0), 0u);
}

TEST(JsonRequestTest, Utf8AsRfc3629DefinesIt) {
  EXPECT_EQ(FirstInvalidUtf8("plain ascii"), 11u);
  EXPECT_EQ(FirstInvalidUtf8("ñ € 𝄞"), std::string_view("ñ € 𝄞").size());
  EXPECT_EQ(FirstInvalidUtf8("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("ab\xed\xa0\x80"), 2u);    // a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("xy\xe2\x82"), 2u);        // cut short
  EXPECT_EQ(FirstInvalidUtf8("\x80"), 0u);              // a lone continuation byte
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("a\0b", 3)), 3u);
}

TEST(OpenApiTest, TheDocumentIsJsonWithEveryEndpoint) {
  const nlohmann::json doc = nlohmann::json::parse(OpenApiDocument("test", 8));
  EXPECT_EQ(doc["openapi"], "3.0.3");
  for (const char* path : {"/v1/translate", "/v1/models", "/health", "/ready", "/metrics",
                           "/openapi.json", "/admin/reload"}) {
    EXPECT_TRUE(doc["paths"].contains(path)) << path;
  }
  EXPECT_EQ(doc["components"]["schemas"]["TranslateRequest"]["properties"]["beam"]["maximum"], 8);
}

}  // namespace
}  // namespace tern::serve
