"""GEAR's teacher: which weights it reads, which reference its prompt shows, and the pass that runs it.

`GEARTrainer` holds one `Teacher` (`trainer.teacher`, None when the credit mode runs no teacher) and calls it twice a
generation batch: `prompts(...)` builds the teacher prompts, `hidden(...)` runs them with the batch's completion
tokens up to the final hidden states. The divergence and the weights are the trainer's (`gear_trl.credit`).

- Weights (`teacher`): `live` reads the policy itself; `base`, `ema` and `periodic` read weights of their own
  (`gear_trl.teacher.weights` holds the averaging and the checkpoint file): under PEFT an adapter (or none),
  under full fine-tuning a frozen model, `model`.
- Reference (`teacher_reference`, `teacher_template`): rendered into the prompt by `gear_trl.teacher.prompts`.
- Pass: one backbone forward per rollout, or with `teacher_prefix_sharing` each distinct prompt once; every rank makes
  the same number of forwards (ZeRO-3 gathers parameters collectively in each).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from accelerate.utils import gather_object, is_peft_model
from transformers.cache_utils import DynamicCache, DynamicLayer, get_layer_types_and_kwargs
from trl.trainer.utils import use_adapter

from ..data.math_tasks import last_boxed
from ..envs.tool_calls import parse_tool_calls
from .kinds import teacher_kind
from .prompts import (
    DEFAULT_MATH_SOLUTION_TEMPLATE,
    DEFAULT_MATH_TEACHER_TEMPLATE,
    DEFAULT_TOOL_SOLUTION_TEMPLATE,
    DEFAULT_TOOL_TEACHER_TEMPLATE,
    TeacherPromptBuilder,
    has_ground_truth,
    prefix_sharing_forwards,
    prefix_sharing_plan,
    prefix_sharing_tokens,
    shows_sibling,
    sibling_choice,
    tool_calls_text,
)
from .weights import (
    TEACHER_STATE_FILE,
    TeacherWeightsCallback,
    ema_masters,
    ema_update_,
    load_teacher_state,
    sync_,
    teacher_state,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostParts:
    """What a `Teacher` reads of its trainer's state, as it is at the call (`TeacherHost.teacher_parts`)."""

    policy: torch.nn.Module
    """The trained model as the trainer holds it (wrapped by Accelerate or DeepSpeed)."""
    causal_lm: torch.nn.Module
    """The policy's causal LM, unwrapped (under PEFT the base model)."""
    ref_model: torch.nn.Module | None = None
    """TRL's reference model (beta > 0), which `teacher: base` shares under full fine-tuning."""
    tokenizer: Any = None
    processing_class: Any = None
    chat_template: str | None = None
    quantization_config: Any = None
    """The student's quantization, for the teacher's reload under ZeRO-3."""
    is_deepspeed_enabled: bool = False
    reward_weights: torch.Tensor | None = None
    """[F] float, the reward functions' weights."""
    resume_checkpoint: str | None = None
    """The checkpoint training resumes from, or None."""


@runtime_checkable
class TeacherHost(Protocol):
    """What a `Teacher` needs from its trainer: two attributes and a few named methods. `GEARTrainer` implements it
    (its methods look up the trainer's own at each call, so a subclass's or a test's replacement is what runs)."""

    args: Any
    """The run's `GEARConfig`."""
    accelerator: Any

    def teacher_parts(self) -> HostParts:
        """The trainer's models, tokenizer, reward weights and resume checkpoint, as they are now."""

    def tokenize_prompt(self, prompt, tools=None) -> list[int]:
        """The student's prompt token ids, as the trainer renders them."""

    def backbone_states(self, input_ids, attention_mask, position_ids=None, cache=None, after_cache=False):
        """The backbone's final hidden states [B, L, H] (no gradient checkpointing)."""

    def final_hidden(self, input_ids, attention_mask, keep: int) -> torch.Tensor:
        """The last `keep` positions' final hidden states [B, keep, H]."""

    def divergence(self, batch, student_hidden) -> tuple:
        """(kl, entropy, log_ratio, agreement), the trainer's divergence pass."""

    def use_teacher_backbone(self, on: bool) -> None:
        """Route the trainer's backbone forwards to the teacher's own model (True) or back to the policy (False)."""

    def group_size(self, mode: str) -> int:
        """Rollouts per prompt in mode "train" or "eval"."""

    def log_teacher_metric(self, mode: str, name: str, value: float) -> None:
        """Append `value` to the trainer's metric `name` of mode "train" or "eval"."""

    def add_callback(self, callback) -> None:
        """Add a `TrainerCallback` (the teacher's weights updater)."""


class Teacher:
    """The teacher of a `GEARTrainer`, given what it needs as a `TeacherHost`: its weights, its prompts and its
    pass.

    `model` is the teacher's own model (`base`, `ema` or `periodic` under full fine-tuning), else None: the teacher
    then reads the policy, with its adapter switched during the pass (`base`: the "ref" copy or none; `ema`,
    `periodic`: the adapter of that name).
    """

    def __init__(self, host: TeacherHost):
        self.host = host
        args = host.args
        self.model = None
        self.pass_shared = False
        """Whether the last `hidden` call shared the prompts' prefixes (gear/teacher_prefix_shared_frac)."""
        if self.kind.weights != "policy":
            self._set_up_weights()
        tool_template = tool_template_for(args.teacher_template)
        self.prompts = TeacherPromptBuilder(
            host.tokenize_prompt,
            host.teacher_parts().tokenizer,
            args.teacher_template,
            args.max_teacher_prompt_length,
            tool_template=tool_template,
        )

    @property
    def kind(self):
        """The record of `args.teacher` (`gear_trl.teacher.kinds`)."""
        return teacher_kind(self.host.args.teacher)

    # ----------------------------------------------------------------------------------------------------------------
    # Weights

    def _set_up_weights(self) -> None:
        """`base`: nothing under PEFT (adapters off, or the "ref" copy); under full fine-tuning a frozen copy of the
        initial model, TRL's reference model when it has one (beta > 0). `ema`, `periodic`: a frozen copy of the
        initial adapter (PEFT) or model, averaged or re-synced after optimizer steps by `TeacherWeightsCallback`."""
        host = self.host
        if is_peft_model(host.teacher_parts().policy):
            if self.saves_weights:
                copy_initial_adapter(host.teacher_parts().policy, self.kind.adapter)
        elif self.kind.weights == "initial" and host.teacher_parts().ref_model is not None:
            self.model = host.teacher_parts().ref_model
        else:
            self.model = self.frozen_copy()
        if self.saves_weights:
            host.add_callback(TeacherWeightsCallback(self))

    def frozen_copy(self):
        """A copy of the initial model that takes no gradient, prepared like TRL's reference model."""
        from transformers.integrations import is_deepspeed_zero3_enabled
        from trl.models import prepare_deepspeed
        from trl.trainer.utils import create_model_from_path, get_config_model_id

        host = self.host
        if is_deepspeed_zero3_enabled():
            # The student is already partitioned: a deep copy would copy empty shards. Load it again, as TRL loads
            # its reference model.
            kwargs = frozen_copy_kwargs(
                host.teacher_parts().policy, host.args, host.teacher_parts().quantization_config
            )
            teacher = create_model_from_path(get_config_model_id(host.teacher_parts().policy.config), **kwargs)
        else:
            teacher = copy.deepcopy(host.teacher_parts().policy)
            teacher.__dict__.pop("forward", None)  # TRL's fused-head forward is bound to the student
        teacher.requires_grad_(False)
        teacher.eval()
        if host.teacher_parts().is_deepspeed_enabled:
            return prepare_deepspeed(teacher, host.accelerator)
        return host.accelerator.prepare_model(teacher, evaluation_mode=True)

    def causal_lm(self):
        """The teacher's own causal LM (unwrapped), or None when it reads the policy."""
        return None if self.model is None else self.host.accelerator.unwrap_model(self.model)

    @contextmanager
    def weights(self):
        """Backbone forwards inside run with the teacher's weights."""
        host = self.host
        if self.model is not None:  # base / ema under full fine-tuning: a model of its own
            host.use_teacher_backbone(True)
            try:
                yield
            finally:
                host.use_teacher_backbone(False)
            return
        if self.kind.weights == "initial":  # its adapter's copy if there is one, else no adapter
            context = use_adapter(
                host.teacher_parts().policy, "ref" if "ref" in host.teacher_parts().policy.peft_config else None
            )
        elif self.saves_weights:
            context = use_adapter(host.teacher_parts().policy, self.kind.adapter)
        else:
            context = nullcontext()
        with context:
            yield

    _ema_masters: dict | None = None  # {name: float32 master or None}, made at the first average (`ema_masters`)

    def own_named(self) -> dict:
        """{name: parameter} of the weights an `ema` or `periodic` teacher changes: its adapter's under PEFT, else its
        copy's."""
        if self.model is not None:
            return dict(self.causal_lm().named_parameters())
        marker = f".{self.kind.adapter}."
        student = self.host.accelerator.unwrap_model(self.host.teacher_parts().policy)
        return {n: p for n, p in student.named_parameters() if marker in n}

    def own_pairs(self) -> list:
        """(name, teacher, student) of the parameters the teacher follows: every trained parameter, its teacher copy."""
        student = self.host.accelerator.unwrap_model(self.host.teacher_parts().policy)
        teacher = self.own_named()
        if self.model is not None:
            return [(name, teacher[name], param) for name, param in student.named_parameters() if name in teacher]
        active = f".{student.active_adapter}."
        pairs = []
        for name, param in student.named_parameters():
            if active in name and param.requires_grad:
                twin = name.replace(active, f".{self.kind.adapter}.")
                pairs.append((twin, teacher[twin], param))
        return pairs

    def after_optimizer_step(self, step: int) -> None:
        """A following teacher's update after optimizer step `step` (its kind's `follow`)."""
        self.kind.follow(self, step)

    def sync_every(self, step: int) -> None:
        """Copy the policy's weights after every `teacher_sync_steps`-th step, so that steps 1..N read the initial
        policy, steps N+1..2N the policy after step N, and so on; logs `gear/teacher_resync` and
        `gear/teacher_synced_at`."""
        resync = step % self.host.args.teacher_sync_steps == 0
        if resync:
            sync_([(t, s) for _, t, s in self.own_pairs()])
            self.synced_at = step
            logger.info("teacher: periodic re-synced to the policy after optimizer step %d.", step)
        # every step, so that a logging window reads the share of its steps that re-synced and the policy it holds
        self.host.log_teacher_metric("train", "gear/teacher_resync", float(resync))
        # the step is the trainer's global one, so this holds after a resume too (the checkpoint's weights are it)
        synced_at = float(step - step % self.host.args.teacher_sync_steps)
        self.host.log_teacher_metric("train", "gear/teacher_synced_at", synced_at)

    synced_at = 0
    """The optimizer step whose policy the `periodic` teacher holds (0: the initial one)."""

    def update_ema(self) -> None:
        pairs = self.own_pairs()
        if self._ema_masters is None:
            named = self.own_named()
            self._ema_masters = dict(zip(named, ema_masters(list(named.values())), strict=True))
        masters = [self._ema_masters[name] for name, _, _ in pairs]
        ema_update_([(t, s) for _, t, s in pairs], self.host.args.teacher_ema_decay, masters)

    def save(self, folder: str) -> None:
        """Write the teacher's weights into checkpoint `folder`; under ZeRO-3 every rank must call.

        Written by every process the Trainer writes checkpoints with (`args.should_save`): the global main process,
        or with `save_on_each_node` each node's local main process, so that every node finds it on resume. The EMA's
        float32 average is written where a process holds it whole (not under ZeRO-3, whose file holds the teacher's
        own dtype: a resume restarts the average from those values, one rounding, not a drift)."""
        named = self.own_named()
        state = teacher_state(named)  # collective under ZeRO-3
        for name, master in (self._ema_masters or {}).items():
            if master is not None and not hasattr(named[name], "ds_id"):
                state[name] = master.detach().to("cpu", copy=True).contiguous()
        if self.host.args.should_save:
            from safetensors.torch import save_file

            os.makedirs(folder, exist_ok=True)
            save_file(state, os.path.join(folder, TEACHER_STATE_FILE))

    def restore(self, checkpoint: str) -> None:
        path = os.path.join(checkpoint, TEACHER_STATE_FILE)
        if not os.path.isfile(path):
            teacher = self.host.args.teacher
            raise FileNotFoundError(
                f"`teacher: {teacher}` resumes its weights from {path}, which is missing: the checkpoint was not "
                f"written by a `teacher: {teacher}` run."
            )
        from safetensors.torch import load_file

        named, state = self.own_named(), load_file(path)
        load_teacher_state(named, state, self.host.accelerator.process_index)
        # The float32 average starts again from the restored weights, or from the file's float32 values where a
        # process holds the parameter whole.
        masters = dict(zip(named, ema_masters(list(named.values())), strict=True))
        for name, master in masters.items():
            if master is not None and state[name].dtype == torch.float32 and not hasattr(named[name], "ds_id"):
                master.copy_(state[name])
        self._ema_masters = masters

    @property
    def saves_weights(self) -> bool:
        """Whether checkpoints carry the teacher's weights (those that change during training)."""
        return self.kind.saves_weights

    # ----------------------------------------------------------------------------------------------------------------
    # Reference

    def render_reference(self, ground_truth):
        """A reference as its teacher prompt shows it (`render_reference`, with the trainer's chat template)."""
        return render_reference(
            ground_truth, self.host.teacher_parts().processing_class, self.host.teacher_parts().chat_template
        )

    def references(self, mode: str, ground_truths: list, completions: list, rewards_per_func) -> list[tuple]:
        """What each local row's teacher is shown, (kind, reference): its ground truth, or with siblings in play
        (`teacher_reads_siblings`) a successful sibling's answer where :func:`shows_sibling` says so ("successful
        sibling", or "none (no sibling)" with reference None). The credit reports show these."""
        kinds = ["ground truth"] * len(ground_truths)
        if not self.host.args.teacher_reads_siblings:
            return list(zip(kinds, ground_truths, strict=True))
        looks = [shows_sibling(self.host.args.teacher_reference, truth) for truth in ground_truths]
        shown = self.sibling_references(mode, ground_truths, completions, rewards_per_func)
        kinds = [
            kind if not look else "successful sibling" if reference is not None else "none (no sibling)"
            for kind, look, reference in zip(kinds, looks, shown, strict=True)
        ]
        return list(zip(kinds, shown, strict=True))

    def sibling_references(self, mode: str, ground_truths: list, completions: list, rewards_per_func) -> list:
        """Each local row's reference with successful siblings in play: `teacher_reference: sibling` replaces every
        row's, `teacher_sibling_fallback` only those of rows without a ground truth (`sibling_choice`). A row left
        without one gets None (plain GRPO weights, counted). Groups span ranks: every rank gathers the batch's
        sibling answers (one collective, made by every rank whatever its rows) and chooses alike.

        `rewards_per_func` [N_global, F]: GRPO's rewards of the whole generation batch; `completions`: this rank's.
        Logs `gear/no_sibling_frac` (rows looking for a sibling whose group has no success) and
        `gear/lone_success_frac` (rows that are their group's only success) over the rows looking for one.
        """
        host, args = self.host, self.host.args
        group_size = host.group_size(mode)
        weights = host.teacher_parts().reward_weights.to(rewards_per_func.device)
        rewards = torch.nan_to_num((rewards_per_func * weights[None]).nansum(dim=1), nan=0.0).tolist()
        looks = [shows_sibling(args.teacher_reference, truth) for truth in ground_truths]
        gathered = gather_object([[sibling_reference(c), look] for c, look in zip(completions, looks, strict=True)])
        answers, looking = [a for a, _ in gathered], [look for _, look in gathered]
        choice, _, lone = sibling_choice(rewards, group_size, args.teacher_sibling_min_reward)
        start = host.accelerator.process_index * len(completions)
        references = list(ground_truths)
        for k, look in enumerate(looks):
            if look:
                j = choice[start + k]
                references[k] = None if j is None else answers[j]
        rows = sum(looking)
        lone_rows = sum(1 for i, look in enumerate(looking) if look and lone[i])
        missing = sum(
            1 for i, look in enumerate(looking) if look and (choice[i] is None or answers[choice[i]] is None)
        )
        host.log_teacher_metric(mode, "gear/no_sibling_frac", (missing - lone_rows) / max(rows, 1))
        host.log_teacher_metric(mode, "gear/lone_success_frac", lone_rows / max(rows, 1))
        return references

    # ----------------------------------------------------------------------------------------------------------------
    # Controls: is the teacher's KL knowledge of the answer, or the hint's style?

    _control_batches = 0

    @property
    def _recent_references(self) -> list:
        """(reference, solution) of the last generation batches, distinct, at most 32: wrong references."""
        if "_recent" not in self.__dict__:
            self._recent = []
        return self._recent

    @torch.no_grad()
    def control_kl(self, mode: str, output, prompts: list, references: list, tools: list, solutions) -> torch.Tensor:
        """Per-row KL sums [B, 3] (NaN outside the control rows) of the teacher without a reference (the student's
        prompt: the noise floor) and with a wrong reference (the first later row's, cyclically, that differs, else
        the first different one of the last batches' references, as a rank's batch may hold one prompt; NaN in that
        column when there is none), at the last of every `teacher_control_steps` generation batches in training;
        the third column is the row's largest KL without a reference (its share of `gear/kl_floor_max`).

        The rows are the first `teacher_control_rows` (rows with a reference first); every rank runs that many rows
        whatever they hold: one student forward and the teacher passes over twice as many rows, so ZeRO-3's gathers
        stay paired. The sums are over the rows' model tokens, in the unit of the batch's KL, which the trainer
        compares with the row's own-reference KL (`gear/kl_wrong_over_right`) and adds to `gear/kl_floor`.
        """
        host, args = self.host, self.host.args
        completion_ids = output["completion_ids"]
        num_rows = completion_ids.size(0)
        result = torch.full((num_rows, 3), float("nan"), device=completion_ids.device)
        if (
            mode != "train"
            or args.credit_mode.signal == "log_ratio"
            or not args.teacher_control_steps
            or not args.teacher_control_rows
        ):
            return result
        due = self._control_batches % args.teacher_control_steps == args.teacher_control_steps - 1
        self._control_batches += 1
        usable = [has_ground_truth(r) for r in references]
        recent = self._recent_references
        if not due or num_rows == 0:
            for i in range(num_rows):  # remembered for a later control's wrong reference
                if usable[i] and str(references[i]) not in [str(r) for r, _ in recent]:
                    recent.append((references[i], None if solutions is None else solutions[i]))
            del recent[: max(len(recent) - 32, 0)]
            return result
        rows = sorted(range(num_rows), key=lambda i: not usable[i])[: args.teacher_control_rows]
        rows = (rows * args.teacher_control_rows)[: args.teacher_control_rows]  # a rank with fewer rows repeats them
        candidates = [(references[j], None if solutions is None else solutions[j]) for j in range(num_rows)]
        wrong, has_wrong = [], []
        for i in rows:
            order = [candidates[(i + step) % num_rows] for step in range(1, num_rows) if usable[(i + step) % num_rows]]
            choice = next((c for c in order + recent if str(c[0]) != str(references[i])), (None, None))
            has_wrong.append(choice[0] is not None and usable[i])
            wrong.append(choice)
        plain = [host.tokenize_prompt(prompts[i], tools[i]) for i in rows]
        hinted = self.prompts(
            [prompts[i] for i in rows],
            [reference for reference, _ in wrong],
            [tools[i] for i in rows],
            render=self.render_reference,
            solutions=None if solutions is None else [solution for _, solution in wrong],
        ).input_ids
        index = torch.tensor(rows, device=completion_ids.device)
        part = {key: output[key][index] for key in ("completion_ids", "completion_mask", "prompt_ids", "prompt_mask")}
        if "tool_mask" in output:
            part["tool_mask"] = output["tool_mask"][index]
        input_ids = torch.cat([part["prompt_ids"], part["completion_ids"]], dim=1)
        attention_mask = torch.cat([part["prompt_mask"], part["completion_mask"]], dim=1)
        student = host.final_hidden(input_ids, attention_mask, completion_ids.size(1))
        twice = {key: torch.cat([value, value]) for key, value in part.items()}
        batch_size = args.per_device_train_batch_size
        with self.weights():
            twice["gear_teacher_hidden"] = self._hidden_full(twice, plain + hinted, batch_size)
        kl = host.divergence(twice, torch.cat([student, student]))[0]
        mask = twice["completion_mask"].bool() & (twice["tool_mask"].bool() if "tool_mask" in twice else True)
        sums = (kl * mask).sum(dim=1).view(2, len(rows))
        largest = kl.masked_fill(~mask, float("-inf")).max(dim=1).values.view(2, len(rows))
        for k, i in enumerate(rows):
            result[i, 0] = sums[0, k]
            result[i, 2] = largest[0, k]
            if has_wrong[k]:
                result[i, 1] = sums[1, k]
        return result

    # ----------------------------------------------------------------------------------------------------------------
    # Pass

    @torch.no_grad()
    def hidden(self, output, teacher_prompt_ids: list[list[int]]) -> torch.Tensor:
        """The teacher's final hidden states [B, T, H] over the completion tokens, after its own prompts."""
        host = self.host
        args = host.args
        batch_size = (
            args.per_device_train_batch_size
            if host.teacher_parts().policy.training
            else args.per_device_eval_batch_size
        )
        self.pass_shared = False
        with self.weights():
            # Whether sharing may run is decided from the configuration only: every rank then agrees on whether the
            # forward counts below are matched.
            if not args.teacher_prefix_sharing or not prefix_sharing_supported(host.teacher_parts().causal_lm.config):
                return self._hidden_full(output, teacher_prompt_ids, batch_size)
            # Whether this batch shares depends on its prompts, so ranks may differ, and so may their numbers of
            # forwards: every rank takes the largest count over ranks (one gather, called by all) and makes up the
            # difference with one-token forwards, since ZeRO-3 gathers the parameters collectively in every forward.
            units = prefix_sharing_plan(teacher_prompt_ids, batch_size)
            full_tokens, shared_tokens = prefix_sharing_tokens(units, output["completion_ids"].size(1))
            share = shared_tokens <= args.teacher_prefix_sharing_max_ratio * full_tokens
            forwards = (
                prefix_sharing_forwards(units, batch_size) if share else -(-len(teacher_prompt_ids) // batch_size)
            )
            forwards_everywhere = forwards
            if host.accelerator.num_processes > 1:
                device = output["completion_ids"].device
                forwards_everywhere = int(host.accelerator.gather(torch.tensor([forwards], device=device)).max())
            if share:
                hidden = self._hidden_shared_prefix(output, teacher_prompt_ids, units, batch_size)
            else:
                hidden = self._hidden_full(output, teacher_prompt_ids, batch_size)
            for _ in range(forwards_everywhere - forwards):
                dummy = torch.full(
                    (1, 1), host.teacher_parts().tokenizer.pad_token_id, dtype=torch.long, device=hidden.device
                )
                host.backbone_states(dummy, torch.ones_like(dummy))
            self.pass_shared = share
            return hidden

    def _hidden_full(self, output, teacher_prompt_ids: list[list[int]], batch_size: int) -> torch.Tensor:
        """One forward over prompt + completion per rollout (`teacher_prefix_sharing: false`)."""
        host = self.host
        device = host.accelerator.device
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        pad_id = host.teacher_parts().tokenizer.pad_token_id
        teacher_ids, teacher_mask = left_padded(teacher_prompt_ids, pad_id, device)
        input_ids = torch.cat([teacher_ids, completion_ids], dim=1)
        attention_mask = torch.cat([teacher_mask, completion_mask], dim=1)
        if input_ids.size(0) <= batch_size:  # one forward: no slices, and no second copy of its states
            return host.final_hidden(input_ids, attention_mask, completion_ids.size(1))
        hidden = []
        for start in range(0, input_ids.size(0), batch_size):
            rows = slice(start, start + batch_size)
            hidden.append(host.final_hidden(input_ids[rows], attention_mask[rows], completion_ids.size(1)))
        return torch.cat(hidden)

    def _hidden_shared_prefix(self, output, teacher_prompt_ids: list[list[int]], units, batch_size: int):
        """The same states as `_hidden_full`, [B, T, H], with each distinct teacher prompt computed once.

        GRPO repeats every prompt `num_generations` times, and agent prompts (tool schemas, history) are often ten
        times longer than the completions, so the full path spends most of its time recomputing the same prompt.
        Here a prefix forward fills a key/value cache with every token of a prompt but the last; each rollout then
        runs only `[last prompt token, completion[:-1]]` on a copy of its prompt's cache, whose outputs are the
        states predicting the completion tokens. Positions count from each row's first real token, so left padding
        in the prefix batch changes nothing (rotary attention depends on relative positions only).

        Memory: the prefix caches of one unit of `prefix_sharing_plan` (at most `batch_size` prompts, every layer),
        plus, in a rollout pass, one layer's keys and values of `batch_size` x (prompt + completion) tokens at a
        time (`_SharedPrefixLayer` does not keep them). `units`: `prefix_sharing_plan(teacher_prompt_ids,
        batch_size)`; the caller matches the number of forwards across ranks.
        """
        host = self.host
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        device = completion_ids.device
        num_rows, length = completion_ids.shape
        pad_id = host.teacher_parts().tokenizer.pad_token_id
        last_token = torch.tensor([ids[-1] for ids in teacher_prompt_ids], device=device)
        prompt_length = torch.tensor([len(ids) for ids in teacher_prompt_ids], device=device)
        # Row r's input after the cache: its prompt's last token, then its completion but the last token.
        suffix_ids = torch.cat([last_token[:, None], completion_ids[:, :-1]], dim=1)[:, :length]
        ones = torch.ones(num_rows, 1, dtype=completion_mask.dtype, device=device)
        suffix_mask = torch.cat([ones, completion_mask[:, :-1]], dim=1)[:, :length]
        hidden = None
        for unit in units:
            prefix_ids, prefix_mask = left_padded([ids[:-1] for ids, _ in unit], pad_id, device)
            if prefix_ids.size(1) == 0:  # one-token prompts: an empty prefix is one masked pad token
                prefix_ids = torch.full((len(unit), 1), pad_id, dtype=torch.long, device=device)
                prefix_mask = torch.zeros_like(prefix_ids)
            cache = DynamicCache()
            host.backbone_states(prefix_ids, prefix_mask, (prefix_mask.cumsum(1) - 1).clamp(min=0), cache)
            rows = torch.tensor([row for _, unit_rows in unit for row in unit_rows], device=device)
            owner = torch.tensor([k for k, (_, unit_rows) in enumerate(unit) for _ in unit_rows], device=device)
            for start in range(0, rows.numel(), batch_size):
                part, which = rows[start : start + batch_size], owner[start : start + batch_size]
                row_cache = DynamicCache()
                row_cache.layers = [_SharedPrefixLayer(keys, values, which) for keys, values, _ in cache]
                positions = (prompt_length[part] - 1)[:, None] + torch.arange(suffix_ids.size(1), device=device)
                mask = torch.cat([prefix_mask[which], suffix_mask[part]], dim=1)
                states = host.backbone_states(suffix_ids[part], mask, positions, row_cache, after_cache=True)
                del row_cache
                if hidden is None:
                    hidden = states.new_empty(num_rows, length, states.size(-1))
                hidden[part] = states[:, :length]
            del cache
        return hidden


def left_padded(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows left-padded to the longest and their attention mask, two [R, P] long tensors on `device`: what TRL's
    `pad(..., padding_side="left")` of one tensor per row gives, from one host tensor (a few operators instead of a
    few per row; each is host time, and a copy, on a GPU)."""
    width = max((len(row) for row in rows), default=0)
    both = torch.tensor(
        [
            [[pad_id] * (width - len(row)) + list(row) for row in rows],
            [[0] * (width - len(row)) + [1] * len(row) for row in rows],
        ],
        dtype=torch.long,
        device=device,
    )
    ids, mask = both.unbind()
    return ids, mask


class _SharedPrefixLayer(DynamicLayer):
    """One layer's cached keys and values of a unit's prompts [P, heads, L, D], read by rows `which` [R]: its attention
    gets prompt + new states, which are not kept. A rollout pass is a single forward, so keeping them (as
    `DynamicLayer` does) would only hold every layer's [R, heads, L + T, D] until the pass ends."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, which: torch.Tensor):
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values, self.which = keys, values, which

    def update(self, key_states, value_states, *args, **kwargs):
        return (
            torch.cat([self.keys.index_select(0, self.which), key_states], dim=-2),
            torch.cat([self.values.index_select(0, self.which), value_states], dim=-2),
        )


def sibling_reference(completion: Any) -> str | None:
    """What a teacher is shown of a successful rollout: its tool calls as JSON (`[{"name", "arguments"}]`, rendered
    like reference calls), else its last `\\boxed{}` answer, else its final text; None when it wrote nothing."""
    calls = parse_tool_calls(completion)
    if calls:
        return json.dumps([{"name": c.get("name"), "arguments": c.get("arguments")} for c in calls])
    if isinstance(completion, (list, tuple)):
        texts = [m.get("content") for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
        text = next((t for t in reversed(texts) if isinstance(t, str) and t.strip()), "")
    else:
        text = completion if isinstance(completion, str) else ""
    answer = last_boxed(text)
    if answer:
        return answer
    return text.strip() or None


def render_reference(ground_truth, processing_class, chat_template: str | None = None):
    """Reference tool calls (a list of {name, arguments}, or one such call, as JSON text or as Python objects) are
    shown as the chat template writes tool calls; other lists and dicts as JSON; anything else as text."""
    calls = ground_truth
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith(("[", "{")):
        try:
            calls = json.loads(ground_truth)
        except (json.JSONDecodeError, RecursionError):
            return ground_truth
    if isinstance(calls, dict) and "name" in calls:
        calls = [calls]
    if isinstance(calls, list) and calls and all(isinstance(c, dict) and "name" in c for c in calls):
        return tool_calls_text(processing_class, calls, chat_template)
    if isinstance(ground_truth, (list, dict)):
        return json.dumps(ground_truth, ensure_ascii=False)
    return ground_truth


def tool_template_for(template: str) -> str | None:
    """The hint of rows whose ground truth is tool calls when `teacher_template` is left at a math default (answer or
    solution): the tool-call one; None for a template of the user's own."""
    return {
        DEFAULT_MATH_TEACHER_TEMPLATE: DEFAULT_TOOL_TEACHER_TEMPLATE,
        DEFAULT_MATH_SOLUTION_TEMPLATE: DEFAULT_TOOL_SOLUTION_TEMPLATE,
    }.get(template)


def prefix_sharing_supported(config) -> bool:
    """Whether a shared key/value prefix is defined for the model: every layer caches full-attention keys and values.

    Sliding-window and chunked attention keep only part of the prefix; Mamba, linear-attention and conv layers
    (NemotronH, Jamba, Qwen3-Next, Falcon-H1, Granite 4, Bamba, Zamba2 hybrids) carry a recurrent state, not keys
    and values, so a cache of keys and values cannot stand for their prompt. Such models take the full teacher pass.
    Read from the configuration, as transformers reads it to build the model's cache.
    """
    layer_types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return all(layer_type == "full_attention" for layer_type in layer_types)


def frozen_copy_kwargs(model, args, quantization_config=None) -> dict:
    """`from_pretrained` arguments of a teacher loaded again from the student's path: the recipe's
    `model_init_kwargs` (revision, trust_remote_code, cache_dir, quantization...), as TRL builds its reference model,
    so that the teacher is the same model as the student, with the student's dtype and attention where the recipe
    names none, and `device_map=None`: under ZeRO-3 DeepSpeed places the weights, and transformers refuses a
    `device_map` (TRL's loader would otherwise default to "auto" on a GPU)."""
    kwargs = dict(args.model_init_kwargs or {})
    if quantization_config is not None:
        kwargs["quantization_config"] = quantization_config
    kwargs["device_map"] = None
    kwargs.setdefault("trust_remote_code", args.trust_remote_code)
    kwargs.setdefault("dtype", model.dtype)
    kwargs.setdefault("attn_implementation", model.config._attn_implementation)
    return kwargs


def copy_initial_adapter(model, copy_name: str = "ref") -> None:
    """`teacher: base` means the run's initial policy. For a model that comes with a trained adapter that is the
    adapter as it is now, not the bare base model: keep a frozen copy named "ref" (TRL's name for the same copy).
    `teacher: ema` starts its averaged adapter the same way, as a frozen copy named "ema"."""
    if copy_name in model.peft_config:
        return
    active = model.active_adapter
    model.add_adapter(copy_name, model.peft_config[active])
    for name, param in model.named_parameters():
        if f".{active}." in name:
            twin = model.get_parameter(name.replace(f".{active}.", f".{copy_name}."))
            twin.data.copy_(param.data)
            twin.requires_grad_(False)
