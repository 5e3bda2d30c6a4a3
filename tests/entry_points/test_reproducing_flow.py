"""docs/reproducing.md is one flow from training to the table (issue 76, item 4): its training, evaluation and table
loops run as written, with stand-ins for `accelerate launch` (makes the output folder) and `gear-trl-evaluate` (writes
a report the way it names them), and the real `gear-trl-table` builds every table from what they wrote, with every
seed of both arms on every benchmark and the base model's score beside them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from gear_trl.table import main as table_main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reproducing.md"

STAND_INS = r"""
accelerate() {  # accelerate launch ... --config C --seed S --output_dir D ...: the recipe must exist; D is made
  local config="" seed="" out=""
  while [ $# -gt 0 ]; do
    case $1 in --config) config=$2;; --seed) seed=$2;; --output_dir) out=$2;; esac; shift
  done
  test -f "$config" || { echo "no recipe $config" >&2; exit 3; }
  case $out in *-seed-$seed) ;; *) echo "output_dir $out is not seed $seed's" >&2; exit 3;; esac
  mkdir -p "$out" && echo "$config $seed" >> trained.txt
}
gear-trl-evaluate() {  # --enable_thinking false --model M --benchmark B --output F: a report as evaluate writes it
  local model="" benchmark="" out="" thinking=""
  while [ $# -gt 0 ]; do
    case $1 in --model) model=$2;; --benchmark) benchmark=$2;; --output) out=$2;; --enable_thinking) thinking=$2;; esac
    shift
  done
  case $model in Qwen/*) ;; *) test -d "$model" || { echo "no model $model" >&2; exit 3; };; esac
  test "$thinking" = false || exit 3
  score=$(( RANDOM % 1000 ))
  printf '{"model": "%s", "preset": "%s", "dataset": "%s", "split": "test", "accuracy": 0.%03d, "chat_mode": "non-thinking", "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 1024, "num_samples": 1}}' \
    "$model" "$benchmark" "$benchmark" "$score" > "$out"
}
gear-trl-table() { calls=$((${calls:-0} + 1)); printf '%s\n' "$@" > "table-call-$calls.args"; }  # run below
"""


def flow_blocks() -> list[str]:
    return re.findall(r"<!-- flow -->\n```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def test_training_evaluation_and_the_table_fit_together(tmp_path, monkeypatch):
    from gear_trl.evaluation.benchmarks import PRESETS

    blocks = flow_blocks()
    assert len(blocks) == 3  # training, evaluation, the table
    (tmp_path / "recipes").symlink_to(ROOT / "recipes")
    script = STAND_INS + "\nset -e\n" + "\n".join(blocks)
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # the table commands as the shell expanded them (its globs), run here in one process
    calls = sorted(tmp_path.glob("table-call-*.args"))
    assert len(calls) == 4
    monkeypatch.chdir(tmp_path)
    for call in calls:
        table_main(call.read_text().splitlines())

    trained = (tmp_path / "trained.txt").read_text().splitlines()
    assert len(trained) == 2 * 2 * 2 * 5  # sizes x tasks x methods x seeds
    for size in ("4B", "8B"):
        for task in ("math", "tool_use"):
            table = json.loads((tmp_path / "results" / f"table-Qwen3-{size}-{task}.json").read_text())
            text = json.dumps(table)
            benchmarks = {name for name in PRESETS if f'"{name}"' in text}
            math_task = {"math500", "math", "gsm8k", "aime24", "aime25"}
            assert benchmarks == (math_task if task == "math" else set(PRESETS) - math_task), (size, task)
            markdown = (tmp_path / "results" / f"table-Qwen3-{size}-{task}.md").read_text()
            rows = [line for line in markdown.splitlines() if line.startswith("| ") and "(5)" in line]
            assert len(rows) == len(benchmarks), markdown
            for row in rows:  # the start column, both arms over 5 seeds, and the paired difference over 5 pairs
                cells = [c.strip() for c in row.strip("|").split("|")]
                assert re.fullmatch(r"0\.\d{3}", cells[1]), row
                assert cells[2].endswith("(5)") and cells[3].endswith("(5)") and cells[4].endswith("(5)"), row


def test_the_gpu_installs_give_the_recipes_what_they_need():
    """Every tracker a recipe reports to is in the GPU install lines' extras, with its login beside them, and so is
    the Hub login the recipes that push need (README, getting-started, reproducing)."""
    import yaml

    from gear_trl.inputs.preflight import TRACKERS

    recipes = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "recipes").glob("Qwen3-*/*/config_*.yaml"))]
    trackers = {t for r in recipes for t in ([r["report_to"]] if isinstance(r["report_to"], str) else r["report_to"])}
    trackers -= {"none"}
    assert trackers == {"wandb"}  # when another is added, its login line belongs in the docs too
    pushes = any(r.get("push_to_hub") for r in recipes)
    for page in ("README.md", "docs/getting-started.md", "docs/reproducing.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        extras = {e for group in re.findall(r"pip install -e '\.\[([^\]]*)\]'", text) for e in group.split(",")}
        assert {TRACKERS[t][2] for t in trackers} <= extras, page
        assert re.search(r"^wandb login\b", text, re.MULTILINE), page
        assert not pushes or re.search(r"^hf auth login\b", text, re.MULTILINE), page
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/reproducing.md)" in readme and "](docs/rewards.md)" in readme
