"""bench/headroom.py: the label oracle on a hand-worked rollout, and the report's statistics and schema on synthetic
runs (no training)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def headroom():
    from bench import headroom as module

    return module


# "Compute 12 + 5 - 3." has the reference "12 + 5 = 17\n17 - 3 = 14\n...": this rollout writes 18, so its first
# wrong token is " 18" (index 4); the last position is padding.
TOKENS = ["12", " +", " 5", " =", " 18", "\n", "18", " -", "<pad>"]
MASK = [True] * 8 + [False]
PROMPT = "Compute 12 + 5 - 3."
RIGHT = ["12", " +", " 5", " =", " 17", "\n", "17", " -", " 3", " =", " 14", "\n"]


def test_oracle_signal_marks_the_first_wrong_token_on_by_hand(headroom):
    from bench.credit_sites import arith_error_site

    rows = [
        {"tokens": TOKENS, "mask": MASK, "prompt": PROMPT, "failed": True},
        {"tokens": TOKENS, "mask": MASK, "prompt": PROMPT, "failed": False},  # not failed: no oracle
        {"tokens": RIGHT[:9], "mask": MASK, "prompt": PROMPT, "failed": True},  # matches the reference: nothing found
    ]
    signal, located = headroom.oracle_signal(rows, 9, "from_error", arith_error_site)
    assert signal == [[0, 0, 0, 0, 1, 1, 1, 1, 0], [0] * 9, [0] * 9]
    assert located == 1
    signal, _ = headroom.oracle_signal(rows, 9, "error_token", arith_error_site)
    assert signal[0] == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="kind"):
        headroom.oracle_signal(rows, 9, "everything", arith_error_site)


def test_the_oracle_goes_through_gears_segments_and_weights(headroom):
    # Fed to GEAR's own functions, the oracle blames every token from the error on (one segment opening at the error)
    # in a failed rollout, and leaves the prefix at the lowest weight of the row.
    import torch

    from bench.credit_sites import arith_error_site
    from gear_trl.credit import gear_token_weights, segment_signal

    rows = [{"tokens": TOKENS, "mask": MASK, "prompt": PROMPT, "failed": True}]
    oracle = torch.tensor(headroom.oracle_signal(rows, 9, "from_error", arith_error_site)[0])
    mask = torch.tensor([MASK])
    entropy = torch.tensor([[0.9] + [0.1] * 7 + [0.0]])  # normalized: 1 at the first token, 0.11 after it
    _, segments = segment_signal(oracle, entropy, mask, mode="gear")
    assert segments[0].tolist() == [-1, -1, -1, -1, 0, 0, 0, 0, -1]
    weights = gear_token_weights(oracle, entropy, mask, torch.tensor([-1.0]), mode="gear", weight_norm="none")
    assert weights[0].tolist() == pytest.approx([1, 1, 1, 1, 1.5, 1.5, 1.5, 1.5, 0])


def run(label, seed, rewards, accuracy, kl_ratio=None):
    return {
        "label": label,
        "seed": seed,
        "reward": rewards,
        "eval": {"sampled_accuracy": accuracy},
        "kl_failed_over_passed": kl_ratio or [],
    }


def test_report_pairs_each_arm_with_none_by_seed(headroom):
    # window 2: final reward = mean of the last 2 steps. gear - none per seed: 0.1, 0.2, 0.3 (reward), 0.0, 0.1, 0.2
    # (accuracy); seed 3 has no `none` run, so it is left out of the pairs but counts in gear's own mean.
    runs = [
        run("none", 0, [0.0, 0.2, 0.4], 0.5),
        run("none", 1, [0.0, 0.2, 0.2], 0.4),
        run("none", 2, [0.0, 0.0, 0.2], 0.3),
        run("gear", 0, [0.0, 0.3, 0.5], 0.5, [1.2, float("nan")]),
        run("gear", 1, [0.0, 0.4, 0.4], 0.5, [1.4]),
        run("gear", 2, [0.0, 0.3, 0.5], 0.5),
        run("gear", 3, [0.0, 0.0, 0.0], 0.0),
    ]
    runs[3]["cpu_s"], runs[4]["cpu_s"] = 100.0, 120.0  # measured by the worker; runs cached before it have none
    probes = {"gear": {"localization": {"onset_rate": 0.5}, "label_free": {"kl_failed_over_passed": 2.0}}}
    report = headroom.build_report({"arith": {"arms": ["none", "gear"], "runs": runs, "probes": probes}}, window=2)
    arms = report["arith"]["arms"]
    diff = arms["gear"]["reward_last_minus_none"]
    assert diff["n_seeds"] == 3
    assert diff["mean"] == pytest.approx(0.2)
    # sd 0.1, se 0.1 / sqrt(3), t(0.975, 2) = 4.302653: half-width 0.248414
    assert diff["ci_low"] == pytest.approx(0.2 - 0.248414, abs=1e-5)
    assert diff["ci_high"] == pytest.approx(0.2 + 0.248414, abs=1e-5)
    assert arms["gear"]["sampled_accuracy_minus_none"]["mean"] == pytest.approx(0.1)
    assert arms["gear"]["reward_last"]["n_seeds"] == 4
    assert "reward_last_minus_none" not in arms["none"]
    for arm in arms.values():  # the schema: every metric cell has mean, ci_low, ci_high, n_seeds
        for metric in ("reward_last", "sampled_accuracy"):
            assert {"mean", "ci_low", "ci_high", "n_seeds"} <= set(arm[metric])
    assert arms["gear"]["localization"] == {"onset_rate": 0.5}
    # training diagnostics: each run's mean over its steps (NaN steps left out), then the mean over runs
    assert arms["gear"]["diagnostics"]["training_kl_failed_over_passed"] == pytest.approx(1.3)
    assert arms["gear"]["diagnostics"]["kl_failed_over_passed"] == 2.0
    assert arms["none"]["diagnostics"]["training_kl_failed_over_passed"] is None
    assert arms["gear"]["cpu_s_per_run"] == pytest.approx(110.0) and arms["none"]["cpu_s_per_run"] is None
    assert not math.isnan(arms["none"]["reward_last"]["ci_low"])


def test_markdown_and_plot_from_a_report(headroom, tmp_path):
    runs = [run(label, seed, [0.1 * seed, 0.2], 0.3) for label in ("none", "oracle-gear") for seed in (0, 1)]
    report = {
        "title": "t",
        "tasks": headroom.build_report(
            {"arith": {"arms": ["none", "oracle-gear"], "runs": runs, "probes": {}, "start": None}}, window=1
        ),
    }
    table = headroom.markdown(report)
    assert "| `oracle-gear` | 2 | +0.000 [+0.000, +0.000]" in table
    assert "(baseline)" in table
    headroom.plot(report, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000


def test_each_task_runs_the_budgets_arms_it_has_none_first(headroom):
    task = {"arms": ["none", "gear-answer", "gear-solution", "rlsd"]}
    assert headroom.task_arms(task, ["gear-answer", "gear", "rlsd"]) == ["none", "gear-answer", "rlsd"]
    # arms the user names run as asked; a task without its own list runs every requested arm
    assert headroom.task_arms(task, ["gear"], explicit=True) == ["none", "gear"]
    assert headroom.task_arms({}, ["none", "gear", "oracle-gear"]) == ["none", "gear", "oracle-gear"]
    assert set(headroom.TASKS["arith"]["arms"]) <= set(headroom.ARMS)


@pytest.mark.parametrize(
    ("arm", "reference"),
    [("gear-answer", "answer"), ("gear-solution", "solution"), ("gear-signed", "solution"), ("rlsd", "solution")],
)
def test_arith_arms_set_what_the_teacher_sees(headroom, arm, reference):
    # The arith task's teacher sees the worked solution; `gear-answer` overrides it back to the final answer.
    from gear_trl.train import parse_args
    from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE, DEFAULT_MATH_TEACHER_TEMPLATE

    task = headroom.TASKS["arith"]
    overrides = headroom.arm_overrides(task, arm, ["--per_device_train_batch_size", "16"])
    _, args, model_args = parse_args(
        ["--config", task["recipe"], "--credit", headroom.ARMS[arm]["credit"], *overrides]
    )
    assert args.teacher_reference == reference
    assert (
        args.teacher_template
        == {"answer": DEFAULT_MATH_TEACHER_TEMPLATE, "solution": DEFAULT_MATH_SOLUTION_TEMPLATE}[reference]
    )
    assert model_args.model_name_or_path == task["model"] and args.per_device_train_batch_size == 16


def test_arith_warm_start_is_shipped_small_and_shaped_like_the_others(headroom):
    # data/tiny-qwen3-arith-sol35 differs from the testbed's warm start only in its weights
    model_dir = REPO_ROOT / headroom.TASKS["arith"]["model"]
    reference = REPO_ROOT / "data" / "tiny-qwen3-arith"
    assert sum(f.stat().st_size for f in model_dir.iterdir() if f.is_file()) < 6 * 2**20
    for name in ("config.json", "tokenizer.json", "chat_template.jinja", "generation_config.json"):
        assert (model_dir / name).read_bytes() == (reference / name).read_bytes(), name
    assert (model_dir / "model.safetensors").read_bytes() != (reference / "model.safetensors").read_bytes()


# --- the long calculator task (calc_long) ----------------------------------------------------------------------------

CALC_PROMPT = (
    'user\n{"name": "add", "description": "Add two integers."}\nCompute 84 + 17 - 39 + 52 - 20 with the tools.'
)


def calc_rollout(calls, answer):
    """Tokens and mask of a calculator rollout: per call its JSON (one token per digit), the tool result (not the
    model's), then the boxed answer."""
    tokens, mask = [], []
    for call in calls:
        a, b = (str(call["arguments"][k]) for k in ("a", "b"))
        call_tokens = ["<tool_call>\n", f'{{"name": "{call["name"]}", "arguments": {{"a": ', *a, ', "b": ', *b,
                       "}}", "\n</tool_call>"]  # fmt: skip
        tokens += [*call_tokens, "<tool_response>", '{"result": 0}', "</tool_response>"]
        mask += [True] * len(call_tokens) + [False] * 3
    tokens += ["The answer is ", "\\boxed{", *str(answer), "}."]
    mask += [True] * (4 + len(str(answer)) - 1)
    return tokens, mask


def test_calc_reference_and_the_oracle_on_a_long_chain(headroom):
    # 84 + 17 - 39 + 52 - 20: four calls, each on the last result; the oracle reads the reference from the prompt
    # (the trainer's batch has no ground truth) and marks the last call's miscopied operand on.
    import json

    from bench.credit_sites import calc_error_site, calc_reference

    reference = json.loads(calc_reference(CALC_PROMPT))
    assert reference == [
        {"name": "add", "arguments": {"a": 84, "b": 17}},
        {"name": "subtract", "arguments": {"a": 101, "b": 39}},
        {"name": "add", "arguments": {"a": 62, "b": 52}},
        {"name": "subtract", "arguments": {"a": 114, "b": 20}},
    ]
    assert calc_reference("no expression here") is None
    right_tokens, right_mask = calc_rollout(reference, 94)
    wrong = json.loads(json.dumps(reference))
    wrong[3]["arguments"]["b"] = 21  # "21" for "20": the units digit is the first wrong token
    wrong_tokens, wrong_mask = calc_rollout(wrong, 93)
    first_three = len(calc_rollout(wrong[:3], 0)[0]) - 4  # without their 4 answer tokens
    site = first_three + 2 + 3 + 1 + 1  # the 4th call's tag and head, "1" "1" "4", ', "b": ', "2", then "1"
    assert wrong_tokens[site - 1 : site + 1] == ["2", "1"]
    length = len(wrong_tokens) + 1  # one padding position
    rows = [
        {"tokens": wrong_tokens, "mask": [*wrong_mask, False], "prompt": CALC_PROMPT, "failed": True},
        {"tokens": right_tokens, "mask": [*right_mask, False], "prompt": CALC_PROMPT, "failed": True},
    ]
    assert calc_error_site(wrong_tokens, rows[0]) == site
    assert calc_error_site(wrong_tokens, {**rows[0], "ground_truth": json.dumps(reference)}) == site
    signal, located = headroom.oracle_signal(rows, length, "from_error", headroom.error_site_for("tools"))
    assert located == 1  # the reference rollout has nothing to locate
    expected = [0.0] * site + [1.0 if m else 0.0 for m in wrong_mask[site:]] + [0.0]
    assert signal[0] == expected and signal[1] == [0.0] * length
    assert 0.0 in expected[site:] and expected[site] == 1.0  # the tool results after the error are not blamed


def test_task_budgets_give_each_task_its_arms(headroom):
    full = headroom.task_budget("calc_long", quick=False)
    assert full["arms"] == ["none", "gear", "gear-signed", "rlsd", "gigpo", "gear+gigpo", "oracle-gear"]
    assert full["seeds"] == headroom.BUDGETS["full"]["seeds"] and len(full["seeds"]) >= 8
    quick = headroom.task_budget("calc_long", quick=True)
    assert set(quick["arms"]) < set(full["arms"]) and quick["max_steps"] < full["max_steps"]
    assert headroom.task_budget("arith", quick=True)["arms"] == headroom.BUDGETS["quick"]["arms"]  # no own list
    assert "gigpo" not in headroom.task_budget("arith", quick=False)["arms"]  # no environment, no anchor states
    for task in headroom.TASKS:
        for arm in headroom.task_budget(task, quick=False)["arms"]:
            assert arm in headroom.ARMS
    recipe = yaml.safe_load((REPO_ROOT / headroom.TASKS["calc_long"]["recipe"]).read_text())
    spec = headroom.TASKS["calc_long"]["eval"]
    assert spec["dataset"] == recipe["dataset_name"] and spec["environment"] == recipe["environment"]
    assert spec["max_new_tokens"] == recipe["max_completion_length"]
    assert spec["max_tool_calling_iterations"] == recipe["max_tool_calling_iterations"]
    assert headroom.TASKS["calc_long"]["model"] == recipe["model_name_or_path"]


def test_main_plans_per_task_arms_and_skips_probes_without_a_teacher(headroom, monkeypatch, tmp_path):
    seen = {}

    def fake_run_jobs(jobs, workers, fresh, log, cached_only=False, dispatch=None, cached=None):
        seen["jobs"] = jobs
        return {}

    monkeypatch.setattr(headroom.jobs, "run_jobs", fake_run_jobs)
    monkeypatch.setattr(headroom.reports, "write_results", lambda *a, **k: None)
    monkeypatch.setattr(headroom.jobs, "sha_of", lambda model: "sha")
    report = headroom.main(["--tasks", "calc_long", "--work-dir", str(tmp_path)], log=lambda *a: None)
    jobs = seen["jobs"]
    trains = [j for j in jobs if j["kind"] == "train"]
    assert {j["label"] for j in trains} == set(headroom.TASKS["calc_long"]["arms"])
    assert len(trains) == 7 * 8 and {j["max_steps"] for j in trains} == {20}  # calc_long's own, not arith's 40
    probes = {j["key"] for j in jobs if j["kind"] == "probe"}
    assert "probe__gigpo__seed0" not in probes and "probe__gear_plus_gigpo__seed0" in probes
    assert all(j["train_eval"] is None for j in jobs)  # the recipe trains on the whole train split
    assert report["config"]["tasks"]["calc_long"]["budget"]["window"] == 5  # the last quarter of the steps


def test_an_unfinished_study_is_written_as_partial_never_as_the_full_one(headroom, monkeypatch, tmp_path):
    written = []

    def fake_run_jobs(jobs, workers, fresh, log, cached_only=False, dispatch=None, cached=None):
        return {(job["work_dir"], job["key"]): {} for job in jobs[: len(jobs) // 2]}  # half of them cached

    monkeypatch.setattr(headroom.jobs, "run_jobs", fake_run_jobs)
    monkeypatch.setattr(headroom, "build_report", lambda tasks, window: {})
    monkeypatch.setattr(headroom.reports, "write_results", lambda report, out, name, *a: written.append(name))
    monkeypatch.setattr(headroom.jobs, "sha_of", lambda model: "sha")
    argv = ["--tasks", "arith", "--cached-only", "--work-dir", str(tmp_path), "--out-dir", str(tmp_path)]
    report = headroom.main(argv, log=lambda *a: None)
    assert written == ["headroom_partial"]
    assert report["jobs"]["missing"] == report["jobs"]["planned"] - report["jobs"]["planned"] // 2 > 0
    assert "partial" in report["title"]

    monkeypatch.setattr(headroom.jobs, "run_jobs", lambda jobs, *a, **k: {(j["work_dir"], j["key"]): {} for j in jobs})
    headroom.main(argv, log=lambda *a: None)
    assert written[-1] == "headroom"


@pytest.mark.parametrize(("kind", "mode"), [("from_error", "gear"), ("error_token", "token")])
def test_the_label_oracle_is_a_registered_credit_mode_running_the_arms_own_mode_on_the_oracle_signal(kind, mode):
    # What the trainer runs for `oracle-gear` / `oracle-token`: the registered mode's compute on a decoded batch is the
    # arm's built-in mode on the oracle signal in place of the teacher's KL.
    import dataclasses
    import types

    import torch

    from bench.credit_sites import arith_error_site
    from bench.harness import oracles
    from gear_trl import GEARConfig
    from gear_trl.credit.modes import CreditInputs, credit_mode

    vocab = sorted({*TOKENS, *RIGHT, PROMPT})

    class Tokenizer:
        def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
            return "".join(vocab[i] for i in ids if not (skip_special_tokens and vocab[i] == "<pad>"))

        def batch_decode(self, rows, skip_special_tokens=False):
            return [self.decode(list(row), skip_special_tokens) for row in rows]

    completions = [TOKENS, RIGHT[:9]]
    fields = {f.name: f.default for f in dataclasses.fields(GEARConfig) if f.default is not dataclasses.MISSING}
    inputs = CreditInputs(
        kl=torch.rand(2, 9),
        entropy=torch.rand(2, 9),
        log_ratio=None,
        mask=torch.tensor([MASK, MASK]),
        base=torch.tensor([-1.0, -0.5]),  # both failed: the second matches the reference, so nothing is located
        options=types.SimpleNamespace(**fields),
        completion_ids=torch.tensor([[vocab.index(t) for t in row] for row in completions]),
        prompt_ids=torch.tensor([[vocab.index(PROMPT)]] * 2),
        tokenizer=Tokenizer(),
    )
    name = oracles.register(kind, mode, "arith")
    assert name == f"oracle-{kind.replace('_', '-')}-on-{mode}-arith"
    out = credit_mode(name).compute(inputs)
    rows = [{"tokens": row, "mask": MASK, "prompt": PROMPT, "failed": True} for row in completions]
    signal = torch.tensor(oracles.oracle_signal(rows, 9, kind, arith_error_site)[0])
    want = credit_mode(mode).compute(dataclasses.replace(inputs, kl=signal))
    assert signal[0, 4] == 1.0 and signal[1].sum() == 0
    for field in ("signal", "segment_ids", "weights"):
        assert torch.equal(getattr(out, field), getattr(want, field)), field
