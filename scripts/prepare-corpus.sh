#!/usr/bin/env bash
# Builds the bundled Spanish->English Bible corpus (RV1909 -> WEB, split by whole books) into
# OUTDIR (default corpus/bible, which git ignores). Does nothing when OUTDIR is already complete;
# pass --force to rebuild. Needs diatheke, sword-text-sparv and sword-text-web
# (scripts/install-deps.sh) and python3. See data/scripts/prepare_bible.py for what it cleans.
#
#   scripts/prepare-corpus.sh [--force] [OUTDIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v diatheke >/dev/null 2>&1; then
  echo "prepare-corpus: error: diatheke not found; run scripts/install-deps.sh" >&2
  exit 1
fi
exec python3 "$root/data/scripts/prepare_bible.py" "$@"
