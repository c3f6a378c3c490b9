// The vocabulary's special ids (data/vocab.h), which training, the model file's embedded
// vocabulary and the runtime share.
#pragma once

#include "data/vocab.h"

namespace tern::inference {

using data::kBosId;
using data::kEosId;
using data::kPadId;
using data::kUnkId;

}  // namespace tern::inference
