#include "models/s2s.h"

#include "graph/ops.h"

namespace tern::models {

using graph::Init;
using graph::Var;

namespace {

std::string Cell(const std::string& layer, int j) { return layer + "_cell" + std::to_string(j); }

// Runs `layers` stacked GRU layers (layer i's cells from cells_of(i)) over x (T, batch, in);
// with skip, each layer whose input is a state (all but the encoder's first) adds its input to
// its output.
template <typename CellsOf>
Var RunStack(const RnnCtx& c, int layers, CellsOf&& cells_of, Var x, int dim, const Tensor& mask,
             bool reverse, bool skip, bool first_reads_state, const Tensor& lengths = Tensor()) {
  for (int i = 1; i <= layers; ++i) {
    Var y = RunGruLayer(c, cells_of(i), x, dim, mask, reverse, lengths);
    x = skip && (i > 1 || first_reads_state) ? graph::Add(x, y) : y;
  }
  return x;
}

}  // namespace

S2S::S2S(const config::ModelConfig& config, int vocab_size)
    : config_(config), vocab_(vocab_size), emb_(config.emb_dim()), dim_(config.rnn_dim()) {}

std::vector<std::string> S2S::EncoderCells(bool reverse, int layer) const {
  std::string base = reverse ? "encoder_bi_r" : "encoder_bi";
  if (layer > 1) base += "_l" + std::to_string(layer);
  std::vector<std::string> cells;
  for (int j = 1; j <= config_.enc_cell_depth(); ++j)
    cells.push_back(layer > 1 || j > 1 ? Cell(base, j) : base);
  return cells;
}

void S2S::AddEncoderParams(graph::ParamStore* s) const {
  for (bool reverse : {false, true})
    for (int i = 1; i <= config_.enc_depth(); ++i) {
      std::vector<std::string> cells = EncoderCells(reverse, i);
      for (size_t j = 0; j < cells.size(); ++j)
        AddGruParams(s, cells[j], j > 0 ? 0 : (i == 1 ? emb_ : dim_), dim_,
                     config_.layer_normalization());
    }
}

void S2S::AddParams(graph::ParamStore* s) const {
  const bool ln = config_.layer_normalization();
  if (config_.tied_embeddings()) {
    s->Add("Wemb", {vocab_, emb_}, Init::kGlorotUniform);
  } else {
    s->Add("encoder_Wemb", {vocab_, emb_}, Init::kGlorotUniform);
    s->Add("decoder_Wemb", {vocab_, emb_}, Init::kGlorotUniform);
    s->Add("decoder_ff_logit_l2_W", {emb_, vocab_}, Init::kGlorotUniform);
  }
  AddEncoderParams(s);
  s->Add("decoder_ff_state_W", {2 * dim_, dim_}, Init::kGlorotUniform);
  s->Add("decoder_ff_state_b", {dim_}, Init::kZeros);
  AddGruParams(s, "decoder_cell1", emb_, dim_, ln);
  AddAttentionParams(s, "decoder_att", dim_, 2 * dim_, ln);
  AddGruParams(s, "decoder_cell2", 2 * dim_, dim_, ln);
  for (int j = 3; j <= config_.dec_cell_base_depth(); ++j)
    AddGruParams(s, Cell("decoder", j), 0, dim_, ln);
  for (int i = 2; i <= config_.dec_depth(); ++i)
    for (int j = 1; j <= config_.dec_cell_high_depth(); ++j)
      AddGruParams(s, Cell("decoder_l" + std::to_string(i), j), j == 1 ? dim_ : 0, dim_, ln);
  const int in_dims[] = {emb_, dim_, 2 * dim_};
  for (int k = 0; k < 3; ++k) {
    s->Add("decoder_ff_logit_l1_W" + std::to_string(k), {in_dims[k], emb_}, Init::kGlorotUniform);
    s->Add("decoder_ff_logit_l1_b" + std::to_string(k), {emb_}, Init::kZeros);
  }
  s->Add("decoder_ff_logit_l2_b", {vocab_}, Init::kZeros);
}

Var S2S::Encode(const RnnCtx& c, const std::string& table, const BatchTensors& batch) const {
  Var emb = graph::Embedding(c.P(table), batch.src);  // (b, Ts, e)
  Var x = graph::Transpose01(emb);                    // (Ts, b, e)
  Tensor mask = TimeMajorMask(c.g.arena(), batch.src_mask);
  const Tensor lengths = HostLengths(batch.src_lengths);
  // One layer: both directions read x, as one bidirectional layer (one op where it runs whole).
  if (config_.enc_depth() == 1)
    return RunBiGruLayer(c, EncoderCells(false, 1), EncoderCells(true, 1), x, dim_, mask, lengths);
  Var fw = RunStack(
      c, config_.enc_depth(), [&](int i) { return EncoderCells(false, i); }, x, dim_, mask,
      /*reverse=*/false, config_.skip(), /*first_reads_state=*/false, lengths);
  Var bw = RunStack(
      c, config_.enc_depth(), [&](int i) { return EncoderCells(true, i); }, x, dim_, mask,
      /*reverse=*/true, config_.skip(), /*first_reads_state=*/false, lengths);
  return ConcatEqualLastDim(fw, bw);
}

Var S2S::Logits(graph::Graph& g, const graph::ParamStore& params, const BatchTensors& batch) const {
  RnnCtx c{g, params, config_.layer_normalization(), config_.rnn_dropout()};
  const bool tied = config_.tied_embeddings();
  const int64_t b = batch.tgt_in.dim(0), len = batch.tgt_in.dim(1);
  Var context_tm = Encode(c, tied ? "Wemb" : "encoder_Wemb", batch);  // (Ts, b, 2d)
  Var context_bm = graph::Transpose01(context_tm);                    // (b, Ts, 2d)
  Var s = graph::Tanh(graph::Linear(MaskedMean(g, context_bm, batch.src_mask),
                                    c.P("decoder_ff_state_W"), c.P("decoder_ff_state_b")));

  // The cGRU, step by step: cell 1 on the embedding, attention, cell 2 on the context.
  Var y = graph::Transpose01(
      graph::Embedding(c.P(tied ? "Wemb" : "decoder_Wemb"), batch.tgt_in));  // (len, b, e)
  GruCell cell1(c, "decoder_cell1", true), cell2(c, "decoder_cell2", true);
  std::vector<GruCell> transition;
  for (int j = 3; j <= config_.dec_cell_base_depth(); ++j)
    transition.emplace_back(c, Cell("decoder", j), false);
  MlpAttention attention(c, "decoder_att", context_bm, batch.src_mask);
  GruCell::Projected in1 = cell1.Project(y);
  std::vector<Var> states(len), contexts(len);
  for (int64_t t = 0; t < len; ++t) {
    GruCell::Projected step{graph::Reshape(graph::Slice(in1.rz, t, t + 1), {b, 2 * dim_}),
                            graph::Reshape(graph::Slice(in1.h, t, t + 1), {b, dim_})};
    Var s1 = cell1.Step(step, s, Tensor());
    contexts[t] = attention.Step(s1);
    s = cell2.Step(cell2.Project(contexts[t]), s1, Tensor());
    for (const GruCell& cell : transition) s = cell.Step({}, s, Tensor());
    states[t] = s;
  }
  Var out = RunStack(
      c, config_.dec_depth() - 1,
      [&](int i) {
        std::vector<std::string> cells;
        for (int j = 1; j <= config_.dec_cell_high_depth(); ++j)
          cells.push_back(Cell("decoder_l" + std::to_string(i + 1), j));
        return cells;
      },
      graph::Stack(states), dim_, Tensor(), /*reverse=*/false, config_.skip(),
      /*first_reads_state=*/true);

  // Deep output: tanh(y W0 + s W1 + c W2 + biases) -> (len, b, e), then the vocabulary.
  Var sum;
  const Var inputs[] = {y, out, graph::Stack(contexts)};
  for (int k = 0; k < 3; ++k) {
    std::string n = std::to_string(k);
    Var part = graph::Linear(inputs[k], c.P("decoder_ff_logit_l1_W" + n),
                             c.P("decoder_ff_logit_l1_b" + n));
    sum = k == 0 ? part : graph::Add(sum, part);
  }
  Var hidden = graph::Dropout(graph::Transpose01(graph::Tanh(sum)), config_.dropout());
  return graph::Linear(hidden, c.P(tied ? "Wemb" : "decoder_ff_logit_l2_W"),
                       c.P("decoder_ff_logit_l2_b"), /*trans_w=*/tied);
}

}  // namespace tern::models
