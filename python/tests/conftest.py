"""Where the tests find the golden models (TERN_GOLDEN, set by ctest; else the checkout's) and
the programs (BIN, set by ctest; else build/bin)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def golden():
    return pathlib.Path(os.environ.get("TERN_GOLDEN", ROOT / "tests" / "golden"))


@pytest.fixture(scope="session")
def bin_dir():
    return pathlib.Path(os.environ.get("BIN", ROOT / "build" / "bin"))


@pytest.fixture(scope="session")
def source_lines(golden):
    return (golden / "source.txt").read_text(encoding="utf-8").splitlines()


def expected(golden, model):
    """MODEL.expected's lines as (text, score, normalized score)."""
    rows = []
    for line in (golden / f"{model}.expected").read_text(encoding="utf-8").splitlines():
        text, score, normalized, _gap = line.split("\t")
        rows.append((text, float(score), float(normalized)))
    return rows
