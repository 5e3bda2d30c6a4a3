"""The vLLM backend of `gear_trl.evaluate`, run on CPU against a stand-in `vllm` module (tests/fake_vllm): the
sampling it is given, the order of its answers, data parallelism over engine processes, and the CLI's choice of
backend."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from gear_trl.evaluation.cli import main
from gear_trl.evaluation.generation import Sampling, VLLMGenerator
from gear_trl.inputs.errors import UserInputError

TINY = "data/tiny-qwen3"


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.syspath_prepend("tests/fake_vllm")
    import sys

    sys.modules.pop("vllm", None)
    import vllm

    vllm.CREATED.clear()
    yield vllm
    sys.modules.pop("vllm", None)


@pytest.fixture
def sums(tmp_path):
    rows = [{"prompt": f"What is {a} plus {b}?", "ground_truth": str(a + b)} for a, b in [(2, 3), (10, 7), (40, 2)]]
    folder = tmp_path / "sums"
    folder.mkdir()
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def _prompts(tokenizer, texts):
    return [tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True) for t in texts]


def test_one_engine_gets_the_sampling_and_answers_in_order(fake_vllm):
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    generator = VLLMGenerator(TINY, tokenizer, Sampling(64, 0.6, 0.95, 20, 3), data_parallel=1)
    out = generator.generate(_prompts(tokenizer, ["1 plus 2", "30 plus 4"]), num_samples=2)
    assert [[text for _, text, _ in samples] for samples in out] == [
        ["\\boxed{3} on gpu "] * 2,
        ["\\boxed{34} on gpu "] * 2,
    ]
    assert all(finished and ids[-1] == tokenizer.eos_token_id for samples in out for ids, _, finished in samples)
    (engine,) = fake_vllm.CREATED
    assert engine["model"] == TINY and engine["seed"] == 3
    params = generator._llm.requests[0][1].kwargs
    assert params == {"n": 2, "max_tokens": 64, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "seed": 3,
                      "skip_special_tokens": True}  # fmt: skip
    greedy = VLLMGenerator(TINY, tokenizer, Sampling(8, 0.0, 0.9, 5, 0), data_parallel=1)
    greedy.generate(_prompts(tokenizer, ["1 plus 1"]))
    assert greedy._llm.requests[0][1].kwargs | {} == {"n": 1, "max_tokens": 8, "temperature": 0.0, "top_p": 1.0,
                                                      "top_k": -1, "seed": 0, "skip_special_tokens": True}  # fmt: skip


def test_data_parallel_engines_each_take_a_share_and_the_answers_come_back_in_order(fake_vllm):
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    # forked, not spawned as on GPUs: a spawned child re-imports gear_trl and TRL, which would take the stand-in for a
    # real vLLM (and take a minute)
    generator = VLLMGenerator(TINY, tokenizer, Sampling(16), data_parallel=2, start_method="fork")
    try:
        texts = [f"{i} plus 100" for i in range(5)]
        out = generator.generate(_prompts(tokenizer, texts))
        assert [samples[0][1] for samples in out] == [f"\\boxed{{{i + 100}}} on gpu {i % 2}" for i in range(5)]
        again = generator.generate(_prompts(tokenizer, ["1 plus 1"]))  # the engines stay up; one has nothing to do
        assert again[0][0][1] == "\\boxed{2} on gpu 0"
    finally:
        generator.close()
    assert generator._workers == []


def test_the_cli_scores_vllm_completions_and_refuses_what_vllm_cannot_run(fake_vllm, sums, tmp_path, monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("the transformers model was loaded")

    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", no_load)
    output = tmp_path / "report.json"
    argv = ["--model", TINY, "--dataset", str(sums), "--backend", "vllm", "--data_parallel", "1", "--no_progress"]
    main([*argv, "--temperature", "0.7", "--num_samples", "3", "--output", str(output)])
    report = json.loads(output.read_text())
    assert report["n"] == 3 and report["accuracy"] == 1.0 and report["pass_at_k"] == 1.0
    assert len(report["per_sample"]) == 9 and report["config"]["backend"] == "vllm"
    with pytest.raises(UserInputError, match="TRL's own tool loop"):
        main([*argv, "--environment", "calculator", "--output", str(output)])


def test_auto_picks_transformers_without_a_gpu_and_vllm_must_be_installed_when_named(monkeypatch, tmp_path):
    from gear_trl.evaluation import cli as ev

    args = ev.make_parser().parse_args(["--model", TINY, "--dataset", "x", "--backend", "auto"])
    args.environment = None
    assert ev._backend(args) == "transformers"  # no GPU here, with or without vLLM
    monkeypatch.setattr("gear_trl.evaluation.generation.vllm_available", lambda: True)
    monkeypatch.setattr("gear_trl.evaluation.generation.visible_gpus", lambda: 2)
    assert ev._backend(args) == "vllm"
    monkeypatch.setattr("gear_trl.evaluation.generation.vllm_available", lambda: False)
    args.backend = "vllm"
    with pytest.raises(UserInputError, match="not installed"):
        ev._backend(args)
