"""The package's layers: every import of a gear_trl module points down (or across, within a layer), never up, and no
chain of imports comes back to where it started. Imports inside functions count: a lazy import is still an import.

Layers, bottom to top (docs/design.md; each is a folder of the package, the entry points its top-level modules):

    inputs        what a user hands in, and how it is refused: the user-input error type, plug-in loading by import
                  path, the flag parser, paths, a run's checks before its model loads (preflight.py); shared by the entry
                  points, evaluation, the trainer and the task plug-ins (gear_trl/inputs/: imports nothing of gear_trl
                  above it; gear_trl/cli/ is its deprecated old name, shims only)
    credit        the mathematics: pure tensor functions
    tasks         data adapters, rewards, environments, teacher prompts, tool rollouts
    reporting     credit rendered as HTML, PNG and tables (pure; the trainer's callback and the CLI both use it)
    teacher       the teacher (gear_trl/teacher/): what it is shown, its kinds and weights, its pass, its probe
    trainer       GEARConfig, GEARTrainer and its callbacks, the Hub check, the package's public names
    entry points  `python -m gear_trl.train / evaluate / inspect_credit`, `gear-trl-table`, the evaluation package
                  (gear_trl/evaluation/: its command line, loops, pass@k, backends), gear_trl.testing (support for tests and
                  data scripts) and gear_trl.models (`python -m gear_trl.models.smollm2`, a pretrained model made from
                  PyPI): nothing in the library imports them

A module or package missing from `PLACES` fails the test: a new one must be given its layer here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAYERS = ("inputs", "credit", "tasks", "reporting", "teacher", "trainer", "entry points")

PLACES = {
    # Subpackages are placed whole (the tree shows the layers); a top-level module on its own.
    "gear_trl.credit": "credit",
    "gear_trl.data": "tasks",  # dataset adapters
    "gear_trl.teacher": "teacher",  # what the teacher is shown, its kinds and weights, its pass and host, its probe
    "gear_trl.rewards": "tasks",
    "gear_trl.envs": "tasks",  # environments, and their rollouts on TRL's tool loop (envs/rollout.py)
    "gear_trl.inputs": "inputs",  # UserInputError, plug-ins by path, flags, paths, pre-load checks (preflight.py)
    "gear_trl.cli": "inputs",  # deprecated old name of gear_trl.inputs: one-line shims re-exporting it
    "gear_trl.reporting": "reporting",
    "gear_trl.trainer": "trainer",  # GEARTrainer, GEARConfig, callbacks, fused head, hub, rows, checkpoints, ...
    "gear_trl": "trainer",  # __init__: `from gear_trl import GEARConfig, GEARTrainer`
    "gear_trl.train": "entry points",
    "gear_trl.evaluate": "entry points",  # `python -m gear_trl.evaluate`: gear_trl.evaluation.cli
    "gear_trl.inspect_credit": "entry points",
    "gear_trl.table": "entry points",  # `gear-trl-table`: the paper's table from evaluation reports
    "gear_trl.testing": "entry points",
    "gear_trl.models": "entry points",  # `python -m gear_trl.models.smollm2`: a pretrained model fetched and converted
    "gear_trl.evaluation": "entry points",  # command line, loops (which run GEARTrainer.evaluate), pass@k, backends
    "gear_trl.evaluation.benchmarks": "tasks",  # evaluation presets: dataset, prompt, sampling and scoring of each
}

PACKAGE = Path(__file__).resolve().parents[2] / "gear_trl"


def module_files(package_dir: Path) -> dict[str, Path]:
    """{dotted module name: file} for every .py file under `package_dir` (a package's own name for its __init__)."""
    root = package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that module `name` imports anywhere in its file (top level, functions, classes)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # `from .x import y` in a.b.c (or in package a.b's __init__) is relative to package a.b.
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            # `from a import b` imports module a.b when there is one, else names defined in a.
            targets = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules]
            targets.append(source)
        else:
            continue
        for target in targets:
            # `import a.b.c` where a.b.c is not a module (an attribute path) counts as its longest module prefix.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def layer_of(module: str) -> str | None:
    """The layer of `module`: its own entry in `PLACES` or its closest package's (the root package only for itself)."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        place = PLACES.get(".".join(parts[:end]))
        if place is not None:
            return place
    return PLACES.get(module)


def find_problems(package_dir: Path) -> list[str]:
    """Every unplaced module, upward import and import cycle in the package, as readable lines."""
    modules = module_files(package_dir)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    problems = [f"{name} has no layer: add it (or its package) to PLACES" for name in graph if layer_of(name) is None]
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer_of(name), layer_of(target)
            if low is not None and high is not None and rank[high] > rank[low]:
                problems.append(f"upward import: {name} ({low}) imports {target} ({high})")
    problems += [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (first module repeated at the end) per strongly connected group of mutually importing modules."""
    state, stack, found = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def private_imports(package_dir: Path) -> list[str]:
    """Every `from <module of another room> import _name`: a room's private names are its own (issue 74)."""
    modules = module_files(package_dir)
    found = []
    for name, path in sorted(modules.items()):
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                source = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            if not source.startswith("gear_trl") or room_of(source, modules) == room_of(name, modules):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{name} ({room_of(name, modules)}) imports the private {source}.{alias.name}")
    return found


def test_no_module_imports_a_private_name_from_another_room():
    problems = private_imports(PACKAGE)
    assert not problems, "\n".join(problems)


def test_a_private_import_across_rooms_is_found_and_one_within_a_room_is_not(tmp_path):
    package = write(
        tmp_path,
        {
            "gear_trl/__init__.py": "",
            "gear_trl/train.py": "from .trainer.preflight import _hidden, shown\n",
            "gear_trl/trainer/__init__.py": "",
            "gear_trl/trainer/preflight.py": "def _hidden(): ...\ndef shown(): ...\n",
            "gear_trl/trainer/gear_trainer.py": "from .preflight import _hidden\n",
        },
    )
    assert private_imports(package) == [
        "gear_trl.train (gear_trl.train) imports the private gear_trl.trainer.preflight._hidden"
    ]


def test_every_module_is_placed_and_imports_only_downwards_without_cycles():
    problems = find_problems(PACKAGE)
    assert not problems, "\n".join(problems)


def test_every_place_names_a_module_that_exists():
    modules = module_files(PACKAGE)
    assert sorted(name for name in PLACES if name not in modules) == []


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "gear_trl"


@pytest.mark.parametrize(
    "files, expected",
    [
        (  # the cycle this test was written for, hidden in a function
            {
                "trainer/__init__.py": "",
                "trainer/gear_trainer.py": "from .callbacks import CreditReportCallback\n",
                "trainer/callbacks.py": "def report():\n    from ..inspect_credit import write_report\n",
                "inspect_credit.py": "from . import train\n",
                "train.py": "def build():\n    from gear_trl.trainer.gear_trainer import GEARTrainer\n",
            },
            [
                "upward import: gear_trl.trainer.callbacks (trainer) imports gear_trl.inspect_credit (entry points)",
                "import cycle: "
                + " -> ".join(
                    f"gear_trl.{m}"
                    for m in ("inspect_credit", "train", "trainer.gear_trainer", "trainer.callbacks", "inspect_credit")
                ),
            ],
        ),
        (  # a task plug-in reaching up into the trainer, through an attribute path
            {
                "rewards/__init__.py": "",
                "rewards/math_rewards.py": "import gear_trl.trainer.GEARTrainer\n",
                "trainer/__init__.py": "",
            },
            ["upward import: gear_trl.rewards.math_rewards (tasks) imports gear_trl.trainer (trainer)"],
        ),
        (  # a new top-level module nobody placed
            {"helpers.py": "from .credit import divergence\n", "credit/__init__.py": "", "credit/divergence.py": ""},
            ["gear_trl.helpers has no layer: add it (or its package) to PLACES"],
        ),
        (  # a package whose submodule imports the package's own __init__, which imports the submodule
            {"envs/__init__.py": "from .base import Env\n", "envs/base.py": "from . import registry\n"},
            ["import cycle: gear_trl.envs -> gear_trl.envs.base -> gear_trl.envs"],
        ),
    ],
)
def test_the_check_finds_upward_imports_cycles_and_unplaced_modules(tmp_path, files, expected):
    package = write(tmp_path, {"gear_trl/__init__.py": "", **{f"gear_trl/{k}": v for k, v in files.items()}})
    assert find_problems(package) == expected


def room_of(module: str, modules: dict[str, Path]) -> str:
    """The room a module lives in: its subpackage of gear_trl (`gear_trl.envs` for `gear_trl.envs.bfcl_official`), or
    the module itself at the package root."""
    parts = module.split(".")
    room = ".".join(parts[:2])
    return room if room in modules else module


def room_cycles(package_dir: Path) -> list[list[str]]:
    """Import cycles between rooms: one room's module importing another room's while a module of that room imports
    back (`envs.bfcl_official` -> `rewards.tool_call` with `rewards` -> `envs`), which no module-level check sees."""
    modules = module_files(package_dir)
    rooms: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = room_of(name, modules)
        targets = {room_of(target, modules) for target in imports_of(name, path, modules)}
        rooms.setdefault(source, set()).update(t for t in targets if t not in (source, "gear_trl"))
    return cycles(rooms)


def test_no_import_cycle_between_rooms():
    found = room_cycles(PACKAGE)
    assert not found, "\n".join("import cycle between rooms: " + " -> ".join(cycle) for cycle in found)


def test_the_room_check_finds_a_cycle_through_a_package_init(tmp_path):
    package = write(
        tmp_path,
        {
            "gear_trl/__init__.py": "",
            "gear_trl/envs/__init__.py": "from .bfcl import run\n",
            "gear_trl/envs/bfcl.py": "def run():\n    from ..rewards.tool_call import parse\n",
            "gear_trl/rewards/__init__.py": "from ..envs.bfcl import run\n",
            "gear_trl/rewards/tool_call.py": "def parse():\n    pass\n",
        },
    )
    assert room_cycles(package) == [["gear_trl.envs", "gear_trl.rewards", "gear_trl.envs"]]


def test_no_module_shadows_a_standard_library_name():
    """`gear_trl/inspect.py` made `import inspect` inside the package's folder (a script run from it, a test's
    rootdir on sys.path) load gear_trl's module instead of Python's."""
    import sys

    shadowing = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in [*PACKAGE.rglob("*.py"), *(p for p in PACKAGE.rglob("*") if p.is_dir())]
        if (path.stem if path.suffix == ".py" else path.name) in sys.stdlib_module_names
    )
    assert shadowing == [], f"these modules shadow the standard library's: {shadowing}; rename them"


MOVED = {  # old module path: new module path (issue 74: rooms named for what they hold)
    "gear_trl.cli.errors": "gear_trl.inputs.errors",
    "gear_trl.cli.flags": "gear_trl.inputs.flags",
    "gear_trl.cli.paths": "gear_trl.inputs.paths",
    "gear_trl.cli.plugins": "gear_trl.inputs.plugins",
    "gear_trl.trainer.preflight": "gear_trl.inputs.preflight",
    "gear_trl.trainer.teacher": "gear_trl.teacher.teacher",  # the teacher in one room
    "gear_trl.trainer.teacher_kinds": "gear_trl.teacher.kinds",
    "gear_trl.trainer.teacher_weights": "gear_trl.teacher.weights",
    "gear_trl.trainer.teacher_probe": "gear_trl.teacher.probe",
    "gear_trl.data.teacher": "gear_trl.teacher.prompts",
}


def test_moved_modules_old_paths_are_the_new_modules_with_a_deprecation_warning():
    """Each moved module's old path imports the new module itself (so a monkeypatch through either path patches the
    one module) with a DeprecationWarning naming the new place, and the package's own imports use the new places."""
    import subprocess
    import sys

    script = f"""
import importlib, warnings
moved = {MOVED!r}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import gear_trl.train, gear_trl.evaluation.cli, gear_trl.inspect_credit, gear_trl.table  # internal imports
assert not [w for w in caught if " moved to gear_trl." in str(w.message)], [str(w.message) for w in caught]
for old, new in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new), old
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught), old
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
