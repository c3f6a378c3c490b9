#!/usr/bin/env python3
"""CTest (label "unit"): every module includes only the modules its row of docs/design.md's module
table lets it use (the table under "Modules and the direction of dependencies"; its "may use"
column). The table is the one statement of the rule: this test reads it and names no module itself.

  layering_test.py REPO_ROOT     checks the tree: one line per include against the table, exit 1
  layering_test.py --self-test   checks the checker on a made-up table and tree

A module may include its own files and those of the modules in its "may use" cell ("—": none,
"everything": any). An include is resolved as the compiler resolves it: beside the including file
when such a file exists ("tiny_model.h", "../letter_codec.h"), else from the repository root
("tensor/tensor.h", generated headers such as "configs/tern.pb.h" included). One whose path starts
with no module (a system or third-party header) is not checked. The table must also be whole: a row
for every folder the root CMakeLists.txt builds, a folder for every row, and only the table's
modules in its "may use" cells.
"""
import os
import re
import subprocess
import sys
import tempfile

DESIGN = os.path.join("docs", "design.md")
HEADING = "## Modules and the direction of dependencies"
SOURCE = re.compile(r"\.(h|cc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
EVERYTHING = "everything"


def cells(row):
    """A markdown table row's cells (a `\\|` inside a cell is not a separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def module_name(cell):
    return cell.strip("`").rstrip("/")


def parse_table(text):
    """The module table of design.md's text: ({module: set of modules it may use, or EVERYTHING},
    [errors in the table])."""
    lines = text.splitlines()
    if HEADING not in lines:
        return {}, [f"{DESIGN}: no heading '{HEADING}'"]
    i = lines.index(HEADING) + 1
    while i < len(lines) and not lines[i].startswith("|"):
        if lines[i].startswith("#"):
            return {}, [f"{DESIGN}: no table under '{HEADING}'"]
        i += 1
    if i == len(lines):
        return {}, [f"{DESIGN}: no table under '{HEADING}'"]
    header = [c.lower() for c in cells(lines[i])]
    if "module" not in header or "may use" not in header:
        return {}, [f"{DESIGN}:{i + 1}: the module table has no 'module' and 'may use' columns"]
    name_col, use_col = header.index("module"), header.index("may use")
    rules, rows, errors = {}, [], []
    for number in range(i + 2, len(lines)):  # past the header and its --- row
        if not lines[number].startswith("|"):
            break
        row = cells(lines[number])
        if len(row) != len(header):
            errors.append(f"{DESIGN}:{number + 1}: {len(row)} cells, the header has {len(header)}")
            continue
        name, uses = module_name(row[name_col]), row[use_col].strip()
        if uses == EVERYTHING:
            rules[name] = EVERYTHING
        elif uses in ("—", "-", ""):
            rules[name] = set()
        else:
            rules[name] = {u.strip().strip("`").rstrip("/") for u in uses.split(",")}
        rows.append((number + 1, name))
    for number, name in rows:
        if rules[name] != EVERYTHING:
            for unknown in sorted(rules[name] - set(rules)):
                errors.append(f"{DESIGN}:{number}: {name}/ may use '{unknown}', which has no row")
    if not rules:
        errors.append(f"{DESIGN}: the module table under '{HEADING}' has no rows")
    return rules, errors


def module_of(root, path, include):
    """The module an #include in `path` (relative to root) reaches, or None if it reaches none."""
    beside = os.path.normpath(os.path.join(os.path.dirname(path), include))
    target = beside if os.path.isfile(os.path.join(root, beside)) else os.path.normpath(include)
    if target.startswith(".."):
        return None
    return target.split(os.sep)[0]


def check_includes(root, rules):
    """One line per include against the rules, over every module folder's sources, and how many
    source files were read."""
    bad, read = [], 0
    for module in sorted(rules):
        if rules[module] == EVERYTHING:
            continue
        for folder, dirs, files in os.walk(os.path.join(root, module)):
            dirs.sort()
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                read += 1
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = module_of(root, path, m.group(1))
                        if target in rules and target != module and target not in rules[module]:
                            allowed = ", ".join(sorted(rules[module])) or "nothing"
                            bad.append(f'{path}:{number}: #include "{m.group(1)}": {module}/ may '
                                       f"use {allowed} ({DESIGN}'s module table), not {target}/")
    return bad, read


def check_rows_match_build(root, rules):
    """The folders the root CMakeLists.txt builds have rows, and every row has its folder."""
    errors = []
    try:
        with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
            built = re.findall(r"^\s*add_subdirectory\(\s*([\w-]+)", f.read(), re.M)
    except OSError:
        built = []
    for folder in built:
        if folder not in rules:
            errors.append(f"CMakeLists.txt builds {folder}/, which has no row in {DESIGN}'s "
                          "module table")
    for module in sorted(rules):
        if not os.path.isdir(os.path.join(root, module)):
            errors.append(f"{DESIGN}: the module table's {module}/ is not a folder")
    return errors


def check(root):
    """Every complaint about the tree at root, one line each, and how many sources were read."""
    try:
        with open(os.path.join(root, DESIGN), encoding="utf-8") as f:
            rules, errors = parse_table(f.read())
    except OSError as e:
        return [f"{DESIGN}: cannot read it ({e.strerror})"], 0
    if not rules:
        return errors, 0
    bad, read = check_includes(root, rules)
    if read == 0:
        bad.append("no .h, .cc, .cu or .cuh file in the module folders: nothing was checked")
    return errors + check_rows_match_build(root, rules) + bad, read


def self_test():
    """The checker on a made-up tree: it must report what breaks the table, and only that."""
    design = "\n".join([
        "# Design", "", HEADING, "", "| module | owns | may use |", "| --- | --- | --- |",
        "| `base/` | errors, `a \\| b` | — |", "| `mid/` | the middle | base |",
        "| `top/` | the programs | mid, base |", "| `tests/` | tests | everything |", "",
        "## Next", "| not | the | table |", ""])
    files = {
        "CMakeLists.txt": "add_subdirectory(base)\nadd_subdirectory(mid)\n"
                          "add_subdirectory(top)\nadd_subdirectory(tests)\n",
        "base/a.h": '#include <vector>\n#include "base/b.h"\n',
        "base/b.h": '#include "third_party/x.h"\n',
        "mid/m.cc": '#include "base/a.h"\n#include "mid/m.h"\n#include "top/t.h"\n',  # line 3
        "mid/m.h": "",
        "mid/deep/k.cu": '  #  include "../../top/t.h"\n',  # reaches top/ by a relative path
        "mid/notes.txt": '#include "top/t.h"\n',  # not a source file
        "top/t.h": '#include "mid/m.h"\n#include "tests/helper.h"\n',  # line 2
        "tests/helper.h": '#include "top/t.h"\n#include "mid/m.h"\n',
    }
    failures = []
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, DESIGN), "w", encoding="utf-8") as f:
            f.write(design)
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        rules, errors = parse_table(design)
        if rules != {"base": set(), "mid": {"base"}, "top": {"mid", "base"},
                     "tests": EVERYTHING} or errors:
            failures.append(f"the table parsed as {rules}, errors {errors}")
        want = [
            f'mid/m.cc:3: #include "top/t.h": mid/ may use base ({DESIGN}\'s module table), '
            "not top/",
            'mid/deep/k.cu:1: #include "../../top/t.h": mid/ may use base '
            f"({DESIGN}'s module table), not top/",
            'top/t.h:2: #include "tests/helper.h": top/ may use base, mid '
            f"({DESIGN}'s module table), not tests/",
        ]
        got, read = check(root)
        if got != want or read != 6:
            failures.append(f"the made-up tree's report ({read} files read):\n  " +
                            "\n  ".join(got) + "\nwanted:\n  " + "\n  ".join(want))
        # The program's exit status and output, as ctest sees them.
        p = subprocess.run([sys.executable, os.path.abspath(__file__), root],
                           capture_output=True, text=True)
        if p.returncode != 1 or p.stdout.splitlines()[:3] != want:
            failures.append(f"run on the made-up tree: exit {p.returncode}, output {p.stdout!r}")
        # A table that names a module without a row, and a built folder without a row.
        with open(os.path.join(root, DESIGN), "w", encoding="utf-8") as f:
            f.write(design.replace("| mid, base |", "| mid, bsae |"))
        with open(os.path.join(root, "CMakeLists.txt"), "a", encoding="utf-8") as f:
            f.write("add_subdirectory(extra)\n")
        got = check(root)[0]
        for expected in (f"{DESIGN}:9: top/ may use 'bsae', which has no row",
                         f"CMakeLists.txt builds extra/, which has no row in {DESIGN}'s module "
                         "table"):
            if expected not in got:
                failures.append(f"not reported: {expected} (got {got})")
    # Module folders without sources: nothing checked is a failure, not a pass.
    with tempfile.TemporaryDirectory() as root:
        for module in ("docs", "base", "mid", "top", "tests"):
            os.makedirs(os.path.join(root, module))
        with open(os.path.join(root, DESIGN), "w", encoding="utf-8") as f:
            f.write(design)
        if not any("nothing was checked" in line for line in check(root)[0]):
            failures.append("a tree without sources passed")
    # No table at all is a failure, not a pass.
    if parse_table("# Design\n\nno table here\n")[1] == []:
        failures.append("a design.md without the module table passed")
    for line in failures:
        print(f"layering_test --self-test: {line}")
    print(f"layering_test --self-test: {'failed' if failures else 'passed'}")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print("usage: layering_test.py REPO_ROOT | --self-test", file=sys.stderr)
        return 2
    complaints, read = check(sys.argv[1])
    for line in complaints:
        print(line)
    if complaints:
        print(f"layering_test: {len(complaints)} problem(s) against {DESIGN}'s module table")
        return 1
    print(f"layering_test: the includes of {read} files keep to {DESIGN}'s module table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
