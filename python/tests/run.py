"""ctest's python_tests: pytest on this folder, or exit 77 (ctest's skip) when pytest is missing."""

import pathlib
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed for", sys.executable, "(scripts/install-deps.sh installs it)")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", str(pathlib.Path(__file__).parent)]))
