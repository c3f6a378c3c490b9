// tern._tern's functions for the model converters (python/tern/convert.py): a Transformer's
// parameters from Python buffers into a .tern file, SentencePiece piece tables, and a Marian
// .npz's parameters read through the runtime's importer.
#pragma once

#include <pybind11/pybind11.h>

namespace tern::python {

// Adds _write_model, _check_config, _spm_pieces, _spm_with_pieces and _read_marian_npz to `m`.
void DefModelWriter(pybind11::module_& m);

}  // namespace tern::python
