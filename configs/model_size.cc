#include "configs/model_size.h"

#include <cstdio>

namespace tern::config {
namespace {

int64_t LayerNorm(int64_t dim) { return 2 * dim; }  // scale and bias

// models/rnn_layers.cc AddGruParams: input products (when the cell has an input), biases,
// recurrent products, and with layer normalization a scale and bias after each product.
int64_t Gru(int64_t input, int64_t h, bool ln) {
  int64_t n = 3 * h + 3 * h * h;  // b (2h), bx (h), U (h, 2h), Ux (h, h)
  if (input > 0) n += 3 * input * h;
  if (ln) n += LayerNorm(2 * h) + LayerNorm(h) + (input > 0 ? LayerNorm(2 * h) + LayerNorm(h) : 0);
  return n;
}

// models/rnn_layers.cc AddAttentionParams.
int64_t RnnAttention(int64_t state, int64_t context, bool ln) {
  return state * context + context * context + 2 * context + (ln ? 2 * LayerNorm(context) : 0);
}

// models/s2s.cc AddEncoderParams: both directions, enc_depth layers of enc_cell_depth cells.
int64_t RnnEncoder(const ModelConfig& m) {
  const int64_t e = m.emb_dim(), h = m.rnn_dim();
  int64_t n = 0;
  for (int layer = 1; layer <= m.enc_depth(); ++layer)
    for (int cell = 1; cell <= m.enc_cell_depth(); ++cell)
      n += 2 * Gru(cell > 1 ? 0 : (layer == 1 ? e : h), h, m.layer_normalization());
  return n;
}

// Source and target embeddings, and for the untied GRU models the output matrix.
int64_t Embeddings(const ModelConfig& m, int64_t vocab, bool untied_output_matrix) {
  const int64_t table = vocab * m.emb_dim();
  if (m.tied_embeddings()) return table;
  return 2 * table + (untied_output_matrix ? table : 0);
}

int64_t Transformer(const ModelConfig& m, int64_t vocab) {
  const int64_t d = m.emb_dim(), f = m.ffn_dim();
  const int64_t attention = 4 * (d * d + d) + LayerNorm(d);
  const int64_t ffn = 2 * d * f + f + d;
  int64_t n = Embeddings(m, vocab, false) + vocab;  // + decoder_ff_logit_out_b
  n += m.enc_depth() * (attention + ffn + LayerNorm(d));
  int64_t decoder_layer = attention + ffn + LayerNorm(d);  // context attention, FFN
  if (m.arch() == "aan") {
    decoder_layer +=
        (m.aan_no_ffn() ? 0 : ffn) + (m.aan_no_gate() ? 0 : 2 * (d * d + d)) + LayerNorm(d);
  } else {
    decoder_layer += attention;  // self-attention
  }
  n += m.dec_depth() * decoder_layer;
  if (m.pre_norm()) n += 2 * LayerNorm(d);  // the stacks' final norms
  return n;
}

int64_t S2S(const ModelConfig& m, int64_t vocab) {
  const int64_t e = m.emb_dim(), h = m.rnn_dim();
  const bool ln = m.layer_normalization();
  int64_t n = Embeddings(m, vocab, true) + RnnEncoder(m);
  n += 2 * h * h + h;  // decoder_ff_state
  n += Gru(e, h, ln) + RnnAttention(h, 2 * h, ln) + Gru(2 * h, h, ln);
  n += (m.dec_cell_base_depth() - 2) * Gru(0, h, ln);
  n += static_cast<int64_t>(m.dec_depth() - 1) *
       (Gru(h, h, ln) + (m.dec_cell_high_depth() - 1) * Gru(0, h, ln));
  n += (e + h + 2 * h) * e + 3 * e;  // decoder_ff_logit_l1_{W,b}{0,1,2}
  return n + vocab;                  // decoder_ff_logit_l2_b
}

int64_t Devlin(const ModelConfig& m, int64_t vocab) {
  const int64_t e = m.emb_dim(), h = m.rnn_dim(), f = m.ffn_dim();
  const bool ln = m.layer_normalization();
  int64_t n = Embeddings(m, vocab, true) + RnnEncoder(m);
  n += Gru(e, h, ln) + RnnAttention(h, 2 * h, ln);
  n += 3 * h * f + f;                     // decoder_fc1
  n += (m.fc_depth() - 1) * (f * f + f);  // decoder_fc2..
  n += f * e + e;                         // decoder_ff_logit_l1
  return n + vocab;                       // decoder_ff_logit_l2_b
}

std::string Gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

int64_t ParameterCount(const ModelConfig& model, int64_t vocab_size) {
  if (model.arch() == "s2s") return S2S(model, vocab_size);
  if (model.arch() == "devlin") return Devlin(model, vocab_size);
  return Transformer(model, vocab_size);
}

int64_t TrainingBytesLowerBound(const TrainConfig& config, int64_t vocab_size) {
  const ModelConfig& m = config.model();
  int64_t bytes = 2 * 4 * ParameterCount(m, vocab_size);
  bytes += 2 * 4 * static_cast<int64_t>(config.data().batch_tokens()) * vocab_size;
  if (m.arch() == "transformer" || m.arch() == "aan")
    bytes += 4 * static_cast<int64_t>(m.max_length()) * m.emb_dim();
  return bytes;
}

std::string SizeFields(const ModelConfig& m, int64_t vocab_size) {
  const bool rnn = m.arch() == "s2s" || m.arch() == "devlin";
  std::string s = "model.emb_dim " + std::to_string(m.emb_dim());
  if (rnn) s += ", model.rnn_dim " + std::to_string(m.rnn_dim());
  if (m.arch() != "s2s") s += ", model.ffn_dim " + std::to_string(m.ffn_dim());
  s += ", model.enc_depth/dec_depth " + std::to_string(m.enc_depth()) + "/" +
       std::to_string(m.dec_depth());
  return s + ", vocabulary " + std::to_string(vocab_size);
}

bool CheckModelSize(const TrainConfig& config, int64_t vocab_size, int64_t memory_bytes,
                    std::string* error) {
  const int64_t parameters = ParameterCount(config.model(), vocab_size);
  const std::string what = "the model (" + SizeFields(config.model(), vocab_size) + ") has " +
                           std::to_string(parameters) + " parameters";
  if (parameters > kMaxParameters) {
    *error = what + ", more than the " + std::to_string(kMaxParameters) +
             " Tern trains; make it smaller";
    return false;
  }
  const int64_t bytes = TrainingBytesLowerBound(config, vocab_size);
  if (memory_bytes > 0 && bytes > memory_bytes) {
    *error = what + "; training it needs at least " + Gib(bytes) +
             " (parameters, gradients and the logits of a batch of data.batch_tokens " +
             std::to_string(config.data().batch_tokens()) + "), more than the " +
             Gib(memory_bytes) + " of memory here; make it smaller";
    return false;
  }
  return true;
}

}  // namespace tern::config
