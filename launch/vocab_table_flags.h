// The command-line flags of the output-vocabulary tables (--shortlist-*, --clusters,
// --cluster-*), shared by tern-export and tern-vocab-tables so both read them the same way.
#pragma once

#include "inference/vocab_tables.h"

namespace tern {

// The options the flags give (unchecked: BuildVocabTables checks them).
inference::VocabTableOptions VocabTableOptionsFromFlags();

// The flags' lines for a program's usage text.
extern const char kVocabTableFlagsHelp[];

}  // namespace tern
