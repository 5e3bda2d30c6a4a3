"""The test tree mirrors the package (issue 74): tests of `gear_trl/<room>/` live in `tests/<room>/`, tests of the entry
points (`gear_trl/train.py`, `evaluate.py`, `inspect_credit.py`, `table.py`) in `tests/entry_points/`, whole-repository
checks (layers, docs, recipes) in `tests/project/`, multi-process runs in `tests/distributed/`, and the studies' tests
beside the studies, in `bench/tests/`. Like verl's tests-structure check, a test file in a folder that names no room
fails here, and so does a room without tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Test folders that mirror no single room, each with what it holds.
OTHER_FOLDERS = {
    "entry_points": "the console scripts' modules at the package's top (train, evaluate, inspect_credit, table)",
    "project": "checks of the repository as a whole: layers, this structure, docs, README, recipes",
    "distributed": "runs of several processes (torchrun, DeepSpeed over gloo), with their launch scripts",
}


def rooms(package: Path) -> set[str]:
    """The package's rooms: its subpackages, less deprecated shims (whose `__init__` warns that they moved)."""
    found = set()
    for init in package.glob("*/__init__.py"):
        text = init.read_text()
        if "DeprecationWarning" in text and "moved to" in text:
            continue
        found.add(init.parent.name)
    return found


def structure_problems(repo: Path) -> list[str]:
    """Every way `repo`'s tests/ fails to mirror `repo`'s gear_trl/ (empty when it does)."""
    tests, package = repo / "tests", repo / "gear_trl"
    known = rooms(package)
    problems = [
        f"{p.relative_to(repo)}: a test at the top of tests/ (put it under the room it tests)"
        for p in sorted(tests.glob("test_*.py"))
    ]
    with_tests: set[str] = set()
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.relative_to(tests).parts[0]
        if len(path.relative_to(tests).parts) == 1:
            continue
        with_tests.add(folder)
        if folder not in known and folder not in OTHER_FOLDERS:
            problems.append(
                f"{path.relative_to(repo)}: tests/{folder}/ names no room of gear_trl/ "
                f"(rooms: {', '.join(sorted(known))}) and is none of {', '.join(sorted(OTHER_FOLDERS))}"
            )
        if "bench" in _imported_roots(path):
            problems.append(f"{path.relative_to(repo)}: imports bench (a study's test belongs in bench/tests/)")
    problems += [
        f"gear_trl/{room}/ has no tests (expected tests/{room}/test_*.py)" for room in sorted(known - with_tests)
    ]
    seen: dict[str, Path] = {}
    for path in sorted([*tests.rglob("test_*.py"), *(repo / "bench" / "tests").glob("test_*.py")]):
        if path.name in seen:  # pytest's default import mode imports test files by their base name
            problems.append(f"{path.relative_to(repo)} and {seen[path.name].relative_to(repo)} share a file name")
        seen[path.name] = path
    return problems


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_tests_mirror_the_package():
    assert structure_problems(REPO) == []


def _tree(root: Path, files: list[str]) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("import bench.harness\n" if "imports_bench" in name else "")
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (["gear_trl/credit/__init__.py", "tests/credit/test_a.py"], []),
        (["gear_trl/credit/__init__.py", "tests/credit/test_a.py", "tests/test_b.py"], ["tests/test_b.py: a test at"]),
        (["gear_trl/credit/__init__.py", "tests/credit/test_a.py", "tests/misc/test_b.py"], ["tests/misc/ names no"]),
        (
            ["gear_trl/credit/__init__.py", "gear_trl/teacher/__init__.py", "tests/credit/test_a.py"],
            ["gear_trl/teacher/ has no tests"],
        ),
        (["gear_trl/credit/__init__.py", "tests/credit/test_imports_bench.py"], ["imports bench"]),
        (["gear_trl/credit/__init__.py", "tests/credit/test_a.py", "bench/tests/test_a.py"], ["share a file name"]),
    ],
)
def test_the_check_finds_a_test_outside_its_room_a_room_without_tests_and_a_shared_name(tmp_path, files, expected):
    problems = structure_problems(_tree(tmp_path, files))
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert start in problem


def test_a_deprecated_shim_is_not_a_room(tmp_path):
    _tree(tmp_path, ["gear_trl/inputs/__init__.py", "tests/inputs/test_a.py"])
    (tmp_path / "gear_trl" / "cli").mkdir()
    (tmp_path / "gear_trl" / "cli" / "__init__.py").write_text(
        'import warnings\nwarnings.warn("gear_trl.cli moved to gear_trl.inputs.", DeprecationWarning)\n'
    )
    assert structure_problems(tmp_path) == []
