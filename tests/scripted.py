"""A GEARTrainer whose completions follow a script, for tests that need tool calls from a random tiny model.

With `real_generate = True` the real `generate` still runs on every call (so ZeRO-3's collective parameter gathers
happen as in training) and only the tokens it returns are replaced by the script's; single-process tests skip it for
speed. Everything after generation (tool execution in the environment, rewards, teacher pass, credit assignment,
loss) is the real code.
"""

from __future__ import annotations

import json

import torch.distributed as dist

from gear_trl import GEARTrainer


def call_text(name: str, arguments: dict | None = None) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments or {}}) + "\n</tool_call>"


class ScriptedTrainer(GEARTrainer):
    """`script(row, round_index, rollout_index, rank) -> str`: the assistant text of that round (a tool call in
    Qwen3 format to continue the loop, plain text to stop)."""

    script = None
    real_generate = False

    def _generate_and_score_completions(self, inputs):
        self._script_rows = inputs
        self._script_prompts = None
        return super()._generate_and_score_completions(inputs)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if type(self).real_generate:
            super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        else:  # what the mixin's `_generate_single_turn`, replaced here, does first: each tool round's states
            self._record_states_after_round()
        if self._script_prompts is None:  # the first call of a batch generates from the prompts themselves
            self._script_prompts = [list(ids) for ids in prompt_ids]
            self._script_active = list(range(len(prompt_ids)))
        # TRL's tool loop regenerates only the rollouts that called a tool, in batch order.
        if len(self._script_active) != len(prompt_ids):
            raise AssertionError("scripted rollouts and the tool loop's prompts are out of step")
        rank = dist.get_rank() if dist.is_initialized() else 0
        response_id = self._tokenizer.convert_tokens_to_ids("<tool_response>")
        completions, still_calling = [], []
        for ids, index in zip(prompt_ids, self._script_active, strict=True):
            prompt = self._script_prompts[index]
            assert list(ids[: len(prompt)]) == prompt
            round_index = list(ids).count(response_id) - prompt.count(response_id)
            text = type(self).script(self._script_rows[index], round_index, index, rank)
            if "<tool_call>" in text:
                still_calling.append(index)
            ids_out = self._tokenizer(text + self._tokenizer.eos_token, add_special_tokens=False)["input_ids"]
            completions.append(ids_out)
        self._script_active = still_calling
        return completions, None


def scripted_trainer(script, argv: list[str], **attributes) -> ScriptedTrainer:
    """A `ScriptedTrainer` following `script`, built from recipe arguments (`--config RECIPE.yaml` and overrides)
    with the recipe's reward functions and environment, as `gear_trl.train` builds its trainer. `attributes` set
    further class attributes (`real_generate`, or a method to swap in)."""
    from gear_trl.envs import get_environment_factories
    from gear_trl.rewards import get_reward_funcs
    from gear_trl.train import load_splits, parse_args, reward_names

    script_args, args, model_args = parse_args(argv)
    train, _ = load_splits(script_args, args)
    trainer_cls = type("Scripted", (ScriptedTrainer,), {"script": staticmethod(script), **attributes})
    environment = get_environment_factories(script_args.environment) if script_args.environment else None
    return trainer_cls(
        model=model_args.model_name_or_path,
        reward_funcs=get_reward_funcs(reward_names(script_args)),
        args=args,
        train_dataset=train,
        environment_factory=environment,
    )
