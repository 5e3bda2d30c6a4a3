"""Every shipped Qwen3 recipe trains two optimizer steps against a 2-layer stand-in of its model, through
`gear_trl.train`, with only the overrides CPU forces (`tests/recipe_smoke.py`: `CPU_OVERRIDES`, `LOCAL_DATA`).

CI runs a representative subset: GEAR's math recipe at Qwen3-4B's geometry on one process (`CI_RECIPES`). The other
recipes (the tool-use ones, minutes each on CPU; Qwen3-8B's ~1.6 B-parameter stand-in; the baselines) and the ZeRO-3
run on two processes (two ranks of ~4.2 GB, the 16-bit consolidated save of 590 M parameters at the end) run with
`GEAR_ALL_RECIPES=1`. Times and peak memory: bench/results/overhead/NOTES.md ("Recipe smoke runs").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.recipe_smoke import CPU_OVERRIDES, build_stand_in, smoke_argv
from tests.utils import free_port, run_ranks

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(p.relative_to(REPO / "recipes").as_posix() for p in REPO.glob("recipes/Qwen3-*/*/config_*.yaml"))
CI_RECIPES = ("Qwen3-4B/gear/config_math.yaml",)
ZERO3_RECIPE = "Qwen3-4B/gear/config_math.yaml"
ALL = os.environ.get("GEAR_ALL_RECIPES") == "1"
TIMEOUT_S = 3600
"""Past this a run counts as hung. Generous on purpose: on 2 shared cores a Qwen3-8B tool-use stand-in took up to
31 minutes (its first step alone 13.4 minutes while two other trainings ran beside it)."""


@pytest.fixture(scope="session")
def smoke_dir(tmp_path_factory) -> Path:
    """Stand-ins and data shared by the session (GEAR_SMOKE_DIR keeps them between sessions)."""
    kept = os.environ.get("GEAR_SMOKE_DIR")
    return Path(kept) if kept else tmp_path_factory.mktemp("recipe_smoke")


def _env() -> dict:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DS_ACCELERATOR": "cpu",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


def smoke(recipe: str, smoke_dir: Path, tmp_path: Path, launcher: list[str] | None = None) -> list[dict]:
    """Run the recipe's smoke; the per-rank results of `tests/recipe_smoke.py`."""
    path = REPO / "recipes" / recipe
    model_id = yaml.safe_load(path.read_text())["model_name_or_path"]
    stand_in = build_stand_in(model_id, smoke_dir / model_id.split("/")[-1])
    out = tmp_path / "run"
    result = tmp_path / "result.json"
    argv = smoke_argv(path, stand_in, out)
    launch = launcher or [sys.executable]
    run_ranks([*launch, "-m", "tests.recipe_smoke", str(result), "--", *argv], _env(), TIMEOUT_S, recipe)
    ranks = sorted(tmp_path.glob("result.json.rank*"))
    results = [json.loads(p.read_text()) for p in ranks]
    recipe_fields = yaml.safe_load(path.read_text())
    for rank in results:
        assert rank["global_step"] == 2
        assert len(rank["losses"]) == 2
        # as shipped: what the CPU overrides leave alone
        assert rank["gradient_checkpointing"] is recipe_fields["gradient_checkpointing"] is True
        assert rank["loss_type"] == recipe_fields["loss_type"]
        assert rank["steps_per_generation"] == recipe_fields["gradient_accumulation_steps"]
        assert rank["credit"] == recipe_fields["credit"]
        if recipe_fields["credit"] in ("gear", "gear-gigpo"):
            assert all(kl is not None and kl >= 0 for kl in rank["gear_kl_mean"])
        # the smoke reward varies, so the LoRA adapters get gradients
        assert any(norm and norm > 0 for norm in rank["grad_norms"]), rank
    _assert_adapter_moved(out)
    return results


def _assert_adapter_moved(out: Path) -> None:
    """LoRA's up-projections start at zero: after two steps (the second at warmup's first nonzero rate) some are not."""
    from safetensors.torch import load_file

    adapter = load_file(out / "adapter_model.safetensors")
    ups = [tensor for name, tensor in adapter.items() if "lora_B" in name]
    assert ups and any(tensor.abs().max() > 0 for tensor in ups)


def test_overrides_are_the_ones_cpu_forces():
    """The one place: nothing that shapes what is trained (LoRA, checkpointing, loss, credit) is overridden."""
    shaping = {"use_peft", "lora_r", "lora_target_modules", "gradient_checkpointing", "loss_type", "credit"}
    shaping |= {"gradient_accumulation_steps", "steps_per_generation", "learning_rate", "teacher", "beta"}
    assert not shaping & set(CPU_OVERRIDES)


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_smoked_recipe_has_local_data(recipe, tmp_path):
    """A recipe whose Hub dataset has no local stand-in would reach the Hub offline, minutes into its slow smoke."""
    path = REPO / "recipes" / recipe
    argv = smoke_argv(path, tmp_path / "model", tmp_path / "out")
    data = (
        argv[argv.index("--dataset_name") + 1]
        if "--dataset_name" in argv
        else yaml.safe_load(path.read_text())["dataset_name"]
    )
    assert (REPO / data).is_dir() or Path(data).is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_trains_two_steps_on_a_stand_in(recipe, smoke_dir, tmp_path):
    if recipe not in CI_RECIPES and not ALL:
        pytest.skip("opt-in: GEAR_ALL_RECIPES=1 runs every recipe (CI runs CI_RECIPES)")
    (result,) = smoke(recipe, smoke_dir, tmp_path)
    print(f"{recipe}: {result['seconds']:.0f} s, peak RSS {result['peak_rss_gb']:.2f} GB")


@pytest.mark.slow
@pytest.mark.distributed
def test_recipe_under_zero3_on_two_processes(smoke_dir, tmp_path):
    if not ALL:
        pytest.skip("opt-in: GEAR_ALL_RECIPES=1 (two ranks of ~4.2 GB, minutes on two cores)")
    launcher = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / "tests" / "distributed" / "zero3_cpu.yaml"),
        "--main_process_port",
        str(free_port()),
    ]
    results = smoke(ZERO3_RECIPE, smoke_dir, tmp_path, launcher)
    assert len(results) == 2
    for rank, result in enumerate(results):
        print(f"{ZERO3_RECIPE} ZeRO-3 rank {rank}: {result['seconds']:.0f} s, peak RSS {result['peak_rss_gb']:.2f} GB")
