"""One chat mode, recorded and checked (issue 52, item 1): a Hub model without run settings is refused until
`--enable_thinking` says which mode; the report records the mode, the sampling and where each value came from; a
preset samples as the mode asks; a model folder's generation_config.json settings are read, reported, used where no
preset or flag sets the value and overridden only explicitly; and the report carries its provenance (backend,
package versions, git commit, model revision)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from gear_trl.evaluation.benchmarks import PRESETS, QWEN3_NON_THINKING, get_preset
from gear_trl.evaluation.cli import main
from gear_trl.evaluation.generation import Sampling, model_revision, read_generation_config, shipped_sampling, stop_ids
from gear_trl.evaluation.run_settings import RUN_SETTINGS, chat_mode
from gear_trl.inputs.errors import UserInputError
from tests.evaluation.test_benchmarks import EQUIVALENT, FIXTURES, Oracle, _questions

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "data" / "tiny-qwen3"


def model_folder(tmp_path: Path, name: str = "model", generation: dict | None = None, settings: dict | None = None):
    """A copy of the tiny model's config and tokenizer (weights are not needed: the model is a stand-in), with the
    given generation_config.json and run settings."""
    folder = tmp_path / name
    folder.mkdir()
    for file in ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(TINY / file, folder / file)
    config = json.loads((TINY / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, **(generation or {})}))
    if settings is not None:
        (folder / RUN_SETTINGS).write_text(json.dumps(settings))
    return folder


def run(tmp_path, monkeypatch, model, *argv, benchmark="math500"):
    """`gear_trl.evaluate` on a preset's fixture rows with an oracle for a model: (report, the generation configs the
    oracle was called with)."""
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    oracle = Oracle(tokenizer, _questions(benchmark), EQUIVALENT[benchmark])
    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", lambda *a, **k: (oracle, tokenizer))
    output = tmp_path / "report.json"
    base = ["--model", str(model), "--benchmark", benchmark, "--dataset", f"{FIXTURES}/{benchmark}"]
    main([*base, "--batch_size", "3", "--num_samples", "1", "--output", str(output), "--no_progress", *argv])
    return json.loads(output.read_text()), oracle.seen


# --- the mode ---------------------------------------------------------------------------------------------------------


def test_a_hub_model_without_run_settings_is_refused_until_the_mode_is_given(monkeypatch):
    loaded = []
    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", lambda *a, **k: loaded.append(a))
    monkeypatch.setattr("gear_trl.evaluation.cli.load_tokenizer", lambda *a, **k: loaded.append(a))
    monkeypatch.setattr("gear_trl.inputs.preflight.check_model_source", lambda *a, **k: None)  # as if cached
    with pytest.raises(UserInputError) as raised:
        main(["--model", "Qwen/Qwen3-4B", "--benchmark", "math500"])
    message = str(raised.value)
    assert "\n" not in message and "--model Qwen/Qwen3-4B is a Hub model" in message
    assert "pass --enable_thinking true or --enable_thinking false" in message
    assert not loaded  # refused before anything loads


def test_the_mode_is_told_from_the_template_as_rendered():
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    assert chat_mode(tokenizer, {}) == "thinking"  # Qwen3's default
    assert chat_mode(tokenizer, {"enable_thinking": False}) == "non-thinking"
    assert chat_mode(tokenizer, {"enable_thinking": True, "other": 1}) == "thinking"
    tokenizer.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"  # no thinking switch
    assert chat_mode(tokenizer, {"enable_thinking": False}) is None


def test_a_run_trained_without_thinking_is_scored_without_it_and_its_preset_samples_so(tmp_path, monkeypatch):
    model = model_folder(tmp_path, settings={"chat_template_kwargs": {"enable_thinking": False}})
    report, seen = run(tmp_path, monkeypatch, model)
    assert (report["chat_mode"], report["chat_mode_source"], report["preset"]) == (
        "non-thinking",
        "run settings",
        "math500",
    )
    assert report["sampling"] == {**QWEN3_NON_THINKING, "num_samples": 1}
    assert set(report["sampling_sources"].values()) == {"preset"}
    assert (seen[0].temperature, seen[0].top_p, seen[0].top_k, seen[0].max_new_tokens) == (0.7, 0.8, 20, 8192)
    prompt = report["per_sample"][0]["prompt"]
    assert report["config"]["chat_template_kwargs"] == {"enable_thinking": False} and prompt

    report, seen = run(tmp_path, monkeypatch, model, "--enable_thinking", "true")
    assert (report["chat_mode"], report["chat_mode_source"]) == ("thinking", "--enable_thinking")
    assert report["sampling"] == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 0,
        "max_new_tokens": 32768,
        "num_samples": 1,
    }
    assert (seen[0].temperature, seen[0].top_p, seen[0].max_new_tokens) == (0.6, 0.95, 32768)


def test_a_local_folder_without_run_settings_gets_the_template_default_with_a_warning(tmp_path, monkeypatch, capsys):
    model = model_folder(tmp_path)
    report, _ = run(tmp_path, monkeypatch, model)
    assert (report["chat_mode"], report["chat_mode_source"]) == ("thinking", "template default")
    assert "pass --enable_thinking true|false to choose" in capsys.readouterr().err
    report, _ = run(tmp_path, monkeypatch, model, "--enable_thinking", "false")
    assert report["chat_mode"] == "non-thinking" and report["sampling"]["temperature"] == 0.7
    assert "--enable_thinking" not in capsys.readouterr().err


def test_every_preset_names_its_sampling_in_both_modes():
    for preset in PRESETS.values():
        thinking, non_thinking = preset.sampling("thinking"), preset.sampling("non-thinking")
        assert set(thinking) == set(non_thinking) == {"temperature", "top_p", "top_k", "max_new_tokens"}
        assert preset.sampling(None) == thinking  # a template without the switch: the protocol's
        if preset.dataset_format in ("aime", "math", "gsm8k"):
            assert non_thinking == QWEN3_NON_THINKING and thinking["temperature"] == 0.6
        else:  # the tool benchmarks decode greedily either way
            assert thinking == non_thinking and thinking["temperature"] == 0.0


# --- the model's own generation settings --------------------------------------------------------------------------------

SHIPPED = {"do_sample": True, "temperature": 0.9, "top_p": 0.7, "top_k": 5, "max_new_tokens": 17, "max_length": 99}


def test_the_model_folders_generation_config_is_read_reported_and_used_where_nothing_explicit_says_otherwise(
    tmp_path, monkeypatch, capsys
):
    model = model_folder(tmp_path, generation=SHIPPED, settings={"chat_template_kwargs": {"enable_thinking": False}})
    settings, path = read_generation_config(str(model))
    assert settings == SHIPPED and path == str(model / "generation_config.json")
    assert shipped_sampling(settings) == {"temperature": 0.9, "top_p": 0.7, "top_k": 5, "max_new_tokens": 17}

    tokenizer = AutoTokenizer.from_pretrained(TINY)
    oracle = Oracle(tokenizer, _questions("gsm8k"), EQUIVALENT["gsm8k"])
    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", lambda *a, **k: (oracle, tokenizer))
    output = tmp_path / "plain.json"
    argv = ["--model", str(model), "--dataset", f"{FIXTURES}/gsm8k", "--dataset_format", "gsm8k", "--no_progress"]
    main([*argv, "--output", str(output)])
    report = json.loads(output.read_text())
    assert report["model_generation_config"] == {"path": str(model / "generation_config.json"), **SHIPPED}
    assert report["sampling"] == {"temperature": 0.9, "top_p": 0.7, "top_k": 5, "max_new_tokens": 17, "num_samples": 1}
    assert set(report["sampling_sources"].values()) == {"model"} and report["preset"] is None
    generation = oracle.seen[-1]
    assert (generation.do_sample, generation.temperature, generation.top_k, generation.max_new_tokens) == (
        True,
        0.9,
        5,
        17,
    )
    assert "note:" not in capsys.readouterr().err

    main([*argv, "--output", str(output), "--temperature", "0"])  # a flag overrides, and says so
    report = json.loads(output.read_text())
    assert report["sampling"]["temperature"] == 0.0 and report["sampling_sources"]["temperature"] == "flag"
    assert report["sampling_sources"]["top_p"] == "model" and not oracle.seen[-1].do_sample
    assert "sets temperature 0.9; this evaluation uses temperature 0.0 (flag)" in capsys.readouterr().err

    report, _ = run(tmp_path, monkeypatch, model)  # a preset is an explicit choice too
    assert report["sampling"] == {**QWEN3_NON_THINKING, "num_samples": 1}
    assert "this evaluation uses temperature 0.7 (preset), top_p 0.8 (preset)" in capsys.readouterr().err


def test_the_vllm_backend_stops_where_the_models_generation_config_says(tmp_path):
    from gear_trl.evaluation.cli import _vllm_generator, make_parser

    model = model_folder(tmp_path, generation={"eos_token_id": [2257, 7]})
    args = make_parser().parse_args(["--model", str(model), "--dataset", "x", "--backend", "vllm"])
    generator = _vllm_generator(args, Sampling())  # the engine starts on the first generate, not here
    assert generator.stop == [2257, 7]
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    assert stop_ids(str(model_folder(tmp_path, "plain", generation={"eos_token_id": None})), tokenizer) == [
        tokenizer.eos_token_id
    ]


def test_do_sample_false_is_greedy_and_an_unreadable_file_is_named(tmp_path):
    assert shipped_sampling({"do_sample": False, "temperature": 0.6}) == {"temperature": 0.0}
    assert shipped_sampling({"do_sample": True}) == {"temperature": 1.0}
    assert shipped_sampling({"max_length": 4096}) == {}
    model = model_folder(tmp_path)
    (model / "generation_config.json").write_text("{not json")
    with pytest.raises(UserInputError, match="generation_config.json cannot be read as JSON"):
        read_generation_config(str(model))


# --- provenance ---------------------------------------------------------------------------------------------------


def test_the_report_records_backend_packages_commit_and_model_revision(tmp_path, monkeypatch):
    model = model_folder(tmp_path, settings={"chat_template_kwargs": {"enable_thinking": False}})
    report, _ = run(tmp_path, monkeypatch, model)
    provenance = report["provenance"]
    assert provenance["backend"] == "transformers"
    for name in ("torch", "transformers", "trl", "peft", "datasets"):
        assert provenance["packages"][name] == metadata.version(name)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert provenance["git_commit"] == head.stdout.strip() and isinstance(provenance["git_dirty"], bool)
    assert provenance["model_revision"] is None and provenance["base_model"] is None  # a local folder

    sha = "0123456789abcdef0123456789abcdef01234567"  # a model read from the Hub cache: its snapshot's commit
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-4B" / "snapshots" / sha
    snapshot.mkdir(parents=True)
    shutil.copy(TINY / "config.json", snapshot / "config.json")
    assert model_revision(str(snapshot)) == sha
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(snapshot)}))
    assert model_revision(str(adapter)) == sha


def test_the_commit_is_recorded_only_from_the_top_of_a_checkout(tmp_path):
    from gear_trl.evaluation.provenance import _git_commit

    assert _git_commit(str(REPO))[0] is not None
    assert _git_commit(str(REPO / "gear_trl")) == (None, None)  # e.g. a wheel in a venv inside some repository
    assert _git_commit(str(tmp_path)) == (None, None)


def test_the_report_keys_the_table_builder_reads_are_top_level(tmp_path, monkeypatch):
    model = model_folder(tmp_path, settings={"chat_template_kwargs": {"enable_thinking": False}})
    report, _ = run(tmp_path, monkeypatch, model, benchmark="gsm8k")
    assert {"chat_mode", "preset", "sampling", "provenance"} <= set(report)
    assert set(report["sampling"]) == {"temperature", "top_p", "top_k", "max_new_tokens", "num_samples"}
    assert {"backend", "packages", "git_commit", "model_revision"} <= set(report["provenance"])
    assert report["preset"] == get_preset("GSM8K").name


# --- the docs' commands ---------------------------------------------------------------------------------------------


def _commands(text: str) -> list[str]:
    """Each evaluation command of a page, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if re.search(r"gear_trl\.evaluate |gear-trl-evaluate |\$EVAL ", line)]


def test_every_documented_evaluation_of_a_hub_model_names_its_chat_mode():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = page.read_text()
        chooses = re.search(
            r'^EVAL="(python -m gear_trl\.evaluate|gear-trl-evaluate) --enable_thinking (true|false)"',
            text,
            re.MULTILINE,
        )
        for command in _commands(text):
            model = re.search(r"--model (\S+)", command)
            if model is None or model.group(1).startswith(("outputs/", "data/", "./", "/", "MODEL")):
                continue
            checked += 1
            # a loop over the base model and the trained runs, or reproducing.md's `score NAME MODEL BENCHMARK`
            # function that every loop calls: one mode, set once in EVAL, for all
            if model.group(1) in ("$run", "$2"):
                assert re.match(r"(score\(\) \{ )?\$EVAL ", command.lstrip()) and chooses, (
                    f"{page.name}: {command.strip()}"
                )
            else:
                assert "--enable_thinking" in command, f"{page.name}: {command.strip()}"
    assert checked >= 2  # the evaluation page's Hub example and the reproducing page's `score` function
