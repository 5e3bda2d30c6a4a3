"""bench/results/pretrained/explore_items.py end to end on the tiny local model: every field of its report, rates in
[0, 1], intervals around their means."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "results" / "pretrained" / "explore_items.py"
RATES = ("sampled_decision_accuracy", "mixed_group_frac", "greedy_accuracy", "teacher_sampled_accuracy")
LOCALIZATION = ("first_onset_on_wrong_line", "first_onset_chance", "largest_segment_on_wrong_line",
                "largest_segment_chance")  # fmt: skip


def test_probe_writes_every_field_on_the_tiny_model(tmp_path):
    out = tmp_path / "explore_items.json"
    argv = ["--model", str(REPO / "data" / "tiny-qwen3"), "--ks", "2", "3", "--problems", "3", "--samples", "3",
            "--max-new-tokens", "6", "--batch", "2", "--out", str(out)]  # fmt: skip
    # -B: no __pycache__ beside the script (the results folder lists exactly its files in manifest.json)
    subprocess.run([sys.executable, "-B", str(SCRIPT), *argv], check=True, capture_output=True, cwd=REPO)
    report = json.loads(out.read_text())
    assert len(report["shots"]) == 4 and report["shots"][1]["role"] == "assistant"
    assert report["temperature"] == 1.0 and report["max_new_tokens"] == 6 and report["prompt_template"] == "{question}"
    assert "{reference_solution}" in report["teacher_template"]
    assert [cell["k"] for cell in report["cells"]] == [2, 3] and set(report["examples"]) == {"copy/k2", "copy/k3"}
    for cell in report["cells"]:
        assert (cell["problems"], cell["samples"]) == (3, 3)
        assert all(0.0 <= cell[key] <= 1.0 for key in RATES)
        assert 0.0 <= cell["sampled_accuracy"]["mean"] <= 1.0 and cell["sampled_accuracy"]["n"] == 3
        assert -1.0 <= cell["teacher_minus_student_accuracy"]["mean"] <= 1.0
        gap = cell["teacher_gap_nats"]
        assert gap["n"] == 3 and gap["ci_low"] <= gap["mean"] <= gap["ci_high"]
        where = cell["localization"]
        assert 0 <= where["unlocated"] <= where["rollouts_with_wrong_decision"] <= 9
        located = where["rollouts_with_wrong_decision"] - where["unlocated"]
        for key in LOCALIZATION:
            assert where[key]["n"] == located
            assert located == 0 or 0.0 <= where[key]["mean"] <= 1.0
        assert located == 0 or 0.0 < where["expected_chance"] <= 1.0
    example = report["examples"]["copy/k3"]
    assert example["teacher_prompt"].startswith(example["student_prompt"])
    assert example["truth"].replace(",", "\n") in example["teacher_prompt"]
    assert len(example["sampled"]) == len(example["teacher_sampled"]) == 3


def test_the_numbered_variant_at_a_recipes_temperature_splits_the_gap_by_outcome(tmp_path):
    out = tmp_path / "explore_items.json"
    argv = ["--model", str(REPO / "data" / "tiny-qwen3"), "--variant", "numbered", "--ks", "2", "--problems", "3",
            "--samples", "3", "--max-new-tokens", "6", "--shots", "0", "--temperature", "0.7",
            "--teacher-template", "\n\nReference answer:\n{reference_solution}", "--out", str(out)]  # fmt: skip
    subprocess.run([sys.executable, "-B", str(SCRIPT), *argv], check=True, capture_output=True, cwd=REPO)
    report = json.loads(out.read_text())
    assert (report["variant"], report["temperature"], report["shots"]) == ("numbered", 0.7, [])
    (cell,) = report["cells"]
    assert cell["variant"] == "numbered" and set(report["examples"]) == {"numbered/k2"}
    # every rollout is right or wrong, so the two splits count all 3 x 3 of them
    assert cell["teacher_gap_nats_right"]["n"] + cell["teacher_gap_nats_wrong"]["n"] == 9
    assert cell["teacher_gap_right_minus_wrong"]["n"] <= 3  # one value per mixed group at most
    example = report["examples"]["numbered/k2"]
    assert example["student_prompt"].startswith("Repeat this numbered list exactly:\n1. ")
    assert example["teacher_prompt"] == example["student_prompt"] + "\n\nReference answer:\n" + "\n".join(
        f"{k}. {w}" for k, w in enumerate(example["truth"].split(","), start=1))  # fmt: skip
