"""GEAR on TRL's colocated vLLM path (generation by `gear_trl.testing.vllm_standin`), with each batch's credit checked
against the loss path's credit of the same batch.

With `use_vllm` and TRL's importance-sampling correction on (the recipes' GPU setting), TRL runs a no-grad pass of the
policy over every generated batch; GEAR reads the student's states from it and runs its divergence in a pass of its
own, during generation. Without vLLM (every other CPU test) GEAR computes it inside the loss's forward, fused into
TRL's LM head. `LossPathCheck` runs, right after the first, the loss's forward over the same batch with GEAR's inputs
kept, and records both credits, the KLs and TRL's importance-sampling ratios.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from gear_trl import GEARTrainer
from gear_trl.testing.vllm_standin import DEFAULT_LOGPROB_OFFSET


class LossPathCheck(GEARTrainer):
    checks: list  # per generation batch: the figures of `_compare`

    _in_check = False
    _loss_path = None
    _loss_fused = None

    def _gear_advantages(self, batch, divergence, mode):
        advantages = super()._gear_advantages(batch, divergence, mode)
        if self._in_check:
            self._loss_path = (advantages, divergence[0])
            # the loss path computes the KL in TRL's fused LM head unless it logged that it fell back
            self._loss_fused = not self._reported_separate_divergence
        elif self._student_hidden is not None:  # the generation path: states from TRL's no-grad pass
            self._compare(batch, advantages, divergence[0])
        return advantages

    @torch.no_grad()
    def _compare(self, batch, advantages, kl):
        loss_batch = dict(batch)
        loss_batch["advantages"] = batch["gear_base_advantages"]
        self._in_check = True
        try:
            self.compute_loss(self.model, loss_batch)
        finally:
            self._in_check = False
        assert self._loss_path is not None, "the loss's forward computed no GEAR credit"
        loss_advantages, loss_kl = self._loss_path
        self._loss_path = None
        mask = batch["completion_mask"].bool()
        if "tool_mask" in batch:
            mask &= batch["tool_mask"].bool()
        tokens = mask.sum(dim=1)
        base = batch["gear_base_advantages"]
        base = base if base.dim() == 2 else base[:, None]  # [B, T] under GiGPO
        ratio = batch["importance_sampling_ratio"].view(-1)
        expected_ratio = torch.exp(DEFAULT_LOGPROB_OFFSET * tokens.double())
        self.checks.append(
            {
                "fused": self._loss_fused,
                "rank": dist.get_rank() if dist.is_initialized() else 0,
                "rows": int(mask.size(0)),
                "tokens": int(mask.sum()),
                "tool_rows": int((batch["tool_mask"] == 0).any(dim=1).sum()) if "tool_mask" in batch else 0,
                "max_abs_advantage": float(advantages[mask].abs().max()),
                # how far GEAR moved the credit from GRPO's: the comparison is not of unweighted advantages
                "max_reweighting": float((advantages - base * mask)[mask].abs().max()),
                "credit_diff": float((advantages - loss_advantages)[mask].abs().max()),
                "kl_diff": float((kl - loss_kl)[mask].abs().max()),
                "max_kl": float(kl[mask].max()),
                "ratio_min": float(ratio.min()),
                "ratio_max": float(ratio.max()),
                "ratio_error": float((ratio.double() - expected_ratio).abs().max()),
            }
        )


def call_text(name: str) -> str:
    import json

    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {}}) + "\n</tool_call>"


def tool_script(tokenizer, rounds: int):
    """The stand-in's script: every other rollout answers at once ("The answer is 12."), the others call a tool
    (`ls`) in each of their first `rounds` rounds, then answer "Done.": rewards that vary within a group."""
    response_id = tokenizer.convert_tokens_to_ids("<tool_response>")
    first_rounds = [0]

    def script(prompt_ids):
        done = prompt_ids.count(response_id)
        if done == 0:
            first_rounds[0] += 1
            if first_rounds[0] % 2:
                return "The answer is 12."
        return call_text("ls") if done < rounds else "Done."

    return script


def standin_trainer(argv: list[str]) -> LossPathCheck:
    """A `LossPathCheck` built from recipe arguments as `gear_trl.train` builds its trainer (call it inside
    `colocated_vllm_standin`)."""
    from gear_trl.envs import get_environment_factory
    from gear_trl.rewards import get_reward_funcs
    from gear_trl.train import load_splits, parse_args

    script_args, args, model_args = parse_args(argv)
    train, _ = load_splits(script_args, args)
    environment = get_environment_factory(script_args.environment) if script_args.environment else None
    trainer_cls = type("Checked", (LossPathCheck,), {"checks": []})
    return trainer_cls(
        model=model_args.model_name_or_path,
        reward_funcs=get_reward_funcs(script_args.reward_funcs),
        args=args,
        train_dataset=train,
        environment_factory=environment,
    )


VLLM_ARGS = ["--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_importance_sampling_correction", "true"]
