// Gradient checking against a double-precision reference: each op's analytic float32 gradient
// (from Graph::Backward) is compared with central finite differences of a double-precision
// re-implementation of the op's forward pass, and the forward values are compared too.
// Where a GPU is visible the same graph is then built on it from the same inputs, and its
// values and gradients must match the CPU's (the device-parameterized check of every graph op).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/ops.h"

namespace tern::graph::testing {

using Vec = std::vector<double>;
// Builds the op on float inputs (given as parameters, so they receive gradients).
using Builder = std::function<Var(Graph& g, const std::vector<Var>& inputs)>;
// The same function in double precision.
using Reference = std::function<Vec(const std::vector<Vec>& inputs)>;

struct GradCheckOptions {
  double tolerance = 2e-3;  // on |analytic - numeric| / max(1, |numeric|)
  double fd_step = 1e-6;
  float init_std = 1.f;
};

void CheckGradients(const std::vector<Shape>& shapes, const Builder& build, const Reference& ref,
                    const GradCheckOptions& options = {});

// A constant a builder uses (ids, targets, a mask) on g's device: t itself when it is there
// already, else a copy in g's arena.
Tensor OnDevice(Graph& g, const Tensor& t);

// Graphs CheckGradients has compared on a GPU since the process started.
int GpuComparisons();

}  // namespace tern::graph::testing
