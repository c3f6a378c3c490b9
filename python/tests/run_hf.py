"""ctest's python_hf_tests: test_convert_hf.py in the venv that holds transformers
(TERN_HF_VENV, default work/hf-venv, made by scripts/install-deps.sh --tests), or exit 77 (ctest's
skip) saying why when there is none or its Python is not the one the extension was built for."""

import os
import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).resolve().parent
venv = pathlib.Path(os.environ.get("TERN_HF_VENV", here.parents[1] / "work" / "hf-venv"))
python = venv / "bin" / "python"
if not python.exists():
    print(f"no {python}; scripts/install-deps.sh --tests makes it (transformers with Flax's "
          "CPU wheels)")
    sys.exit(77)
version = subprocess.run([str(python), "-c", "import sys; print(sys.version_info[:2])"],
                         capture_output=True, text=True).stdout.strip()
if version != str(sys.version_info[:2]):
    print(f"{python} is Python {version}, the extension's is {sys.version_info[:2]}")
    sys.exit(77)
sys.exit(subprocess.call([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(here / "test_convert_hf.py")]))
