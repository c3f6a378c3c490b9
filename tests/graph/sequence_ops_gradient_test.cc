// The sequence ops of graph/ops_sequence.cc against finite differences of double references.
#include <cmath>

#include "gradient_check.h"

namespace tern::graph::testing {
namespace {

TEST(SequenceOpsGradientTest, SliceOfTheMiddleRows) {
  // x (4, 2, 3) -> rows 1..3; a Tanh after it so the slice's gradient passes through an op.
  CheckGradients(
      {{4, 2, 3}}, [](Graph&, const std::vector<Var>& in) { return Tanh(Slice(in[0], 1, 3)); },
      [](const std::vector<Vec>& x) {
        Vec y;
        for (int i = 6; i < 18; ++i) y.push_back(std::tanh(x[0][i]));
        return y;
      });
}

TEST(SequenceOpsGradientTest, StackUsesEachInputOnceAndOneInputTwice) {
  // Stack(a, b, a): a's gradient gets two contributions.
  CheckGradients(
      {{2, 3}, {2, 3}},
      [](Graph&, const std::vector<Var>& in) {
        return Stack({in[0], in[1], in[0]});
      },
      [](const std::vector<Vec>& x) {
        Vec y = x[0];
        y.insert(y.end(), x[1].begin(), x[1].end());
        y.insert(y.end(), x[0].begin(), x[0].end());
        return y;
      });
}

TEST(SequenceOpsGradientTest, Transpose01OfRank3AndRank2) {
  const int a = 3, b = 2, d = 4;
  CheckGradients(
      {{a, b, d}}, [](Graph&, const std::vector<Var>& in) { return Transpose01(in[0]); },
      [&](const std::vector<Vec>& x) {
        Vec y(a * b * d);
        for (int i = 0; i < a; ++i)
          for (int j = 0; j < b; ++j)
            for (int k = 0; k < d; ++k) y[(j * a + i) * d + k] = x[0][(i * b + j) * d + k];
        return y;
      });
  CheckGradients(
      {{a, b}}, [](Graph&, const std::vector<Var>& in) { return Transpose01(in[0]); },
      [&](const std::vector<Vec>& x) {
        Vec y(a * b);
        for (int i = 0; i < a; ++i)
          for (int j = 0; j < b; ++j) y[j * a + i] = x[0][i * b + j];
        return y;
      });
}

TEST(SequenceOpsGradientTest, AddBroadcastOverTheLeadingDim) {
  const int t = 3, b = 2, d = 4;
  CheckGradients(
      {{t, b, d}, {b, d}},
      [](Graph&, const std::vector<Var>& in) { return AddBroadcast(in[0], in[1]); },
      [&](const std::vector<Vec>& x) {
        Vec y = x[0];
        for (int i = 0; i < t; ++i)
          for (int j = 0; j < b * d; ++j) y[i * b * d + j] += x[1][j];
        return y;
      });
  // A bias (d) over (t, b, d).
  CheckGradients(
      {{t, b, d}, {d}},
      [](Graph&, const std::vector<Var>& in) { return AddBroadcast(in[0], in[1]); },
      [&](const std::vector<Vec>& x) {
        Vec y = x[0];
        for (int i = 0; i < t * b; ++i)
          for (int j = 0; j < d; ++j) y[i * d + j] += x[1][j];
        return y;
      });
}

TEST(SequenceOpsGradientTest, AttentionScoresOfEachSentencesPositions) {
  // q (B, c), mapped (B, S, c), u (c, 1) -> (B, S): every input gets its gradient.
  const int b = 2, len = 3, c = 4;
  CheckGradients(
      {{b, c}, {b, len, c}, {c, 1}},
      [](Graph&, const std::vector<Var>& in) { return AttentionScores(in[0], in[1], in[2]); },
      [&](const std::vector<Vec>& x) {
        Vec y(b * len, 0.0);
        for (int i = 0; i < b; ++i)
          for (int t = 0; t < len; ++t)
            for (int j = 0; j < c; ++j)
              y[i * len + t] += std::tanh(x[1][(i * len + t) * c + j] + x[0][i * c + j]) * x[2][j];
        return y;
      });
}

// One GRU update: every input's gradient, with per-row inputs and a padded row (mask 0), and
// with the bias row a transition cell shares across the batch (inputs of one row).
TEST(SequenceOpsGradientTest, GruStepWithPerRowAndSharedInputsAndAMask) {
  const int rows = 3, d = 4;
  for (int in_rows : {rows, 1}) {
    for (bool masked : {false, true}) {
      const Tensor mask = masked ? Tensor::FromVector({rows}, {1.f, 0.f, 1.f}) : Tensor();
      CheckGradients(
          {{in_rows, 2 * d}, {in_rows, d}, {rows, 2 * d}, {rows, d}, {rows, d}},
          [&](Graph& g, const std::vector<Var>& in) {
            return GruStep(in[0], in[1], in[2], in[3], in[4], OnDevice(g, mask));
          },
          [&](const std::vector<Vec>& x) {
            Vec y(rows * d);
            auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
            for (int r = 0; r < rows; ++r) {
              const int i = in_rows == 1 ? 0 : r;
              for (int j = 0; j < d; ++j) {
                const double gr = sigmoid(x[0][i * 2 * d + j] + x[2][r * 2 * d + j]);
                const double z = sigmoid(x[0][i * 2 * d + d + j] + x[2][r * 2 * d + d + j]);
                const double h = std::tanh(x[1][i * d + j] + gr * x[3][r * d + j]);
                const double st = x[4][r * d + j], next = h + z * (st - h);
                y[r * d + j] = masked && r == 1 ? st : next;
              }
            }
            return y;
          });
    }
  }
}

}  // namespace
}  // namespace tern::graph::testing
