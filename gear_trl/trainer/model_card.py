"""The model card of a `GEARTrainer`: TRL's, with local paths named as paths (TRL links every name to the Hub) and
an account of the credit assignment's settings."""

from __future__ import annotations

import os

from accelerate.utils import is_peft_model

from ..inputs.preflight import looks_like_local_path
from ..teacher.kinds import teacher_kind


class CreditCardMixin:
    """`create_model_card` for `GEARTrainer` (TRL's card plus a "Credit assignment" section)."""

    def create_model_card(self, model_name=None, dataset_name=None, tags=None):
        base_model = getattr(self.accelerator.unwrap_model(self.model).config, "_name_or_path", "") or None
        if is_peft_model(self.accelerator.unwrap_model(self.model)):
            base_model = getattr(self._causal_lm().config, "_name_or_path", "") or base_model
        hub_dataset = dataset_name if dataset_name and is_hub_id(dataset_name) else None
        super().create_model_card(model_name=model_name, dataset_name=hub_dataset, tags=tags)
        if not self.is_world_process_zero():
            return
        path = os.path.join(self.args.output_dir, "README.md")
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        origin = "This model is a fine-tuned version of " + name_or_link(base_model, "")
        if dataset_name:
            origin += " on the " + name_or_link(dataset_name, "datasets/") + " dataset"
        lines = [origin + "." if line.startswith("This model is a fine-tuned version of") else line for line in lines]
        if not self.hub_model_id:  # not pushed: the quick start loads the saved folder
            lines = [line.replace('model="None"', f'model="{self.args.output_dir}"') for line in lines]
        at = next(
            (i + 1 for i, line in enumerate(lines) if line.startswith("This model was trained with")), len(lines)
        )
        lines[at:at] = ["", *self._credit_card_lines()]
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines))

    def _credit_card_lines(self) -> list[str]:
        """The model card's account of the credit assignment: the mode and the settings that shape its numbers."""
        args = self.args
        settings = {"credit": args.credit}
        mode = args.credit_mode
        if args.uses_teacher:
            settings.update(
                teacher=args.teacher,
                divergence=args.divergence if args.divergence != "topk" else f"topk (k={args.divergence_top_k})",
                teacher_reference=args.teacher_reference,
            )
            # the teacher kind's own knob: two runs differing only in it must not have the same card
            settings.update({name: getattr(args, name) for name in teacher_kind(args.teacher).options})
        settings.update({name: getattr(args, name) for name in mode.options})
        if mode.prefix_weights:
            settings.update(failed_prefix_weight=args.failed_prefix_weight)
        if args.uses_teacher:
            settings.update(distillation_weight=args.distillation_weight)
            if args.distillation_weight > 0:
                # every option the mode's distillation declares (signal, gate, clip, bound) and the monitor's
                # back-off: two runs differing only in one of them must not have the same card
                distillation = mode.distillation
                settings.update({name: getattr(args, name) for name in getattr(distillation, "options", ())})
                settings.update(distillation_backoff=args.distillation_backoff)
                if args.distillation_backoff:
                    settings.update(distillation_backoff_floor=args.distillation_backoff_floor)
        settings.update(
            rewards=", ".join(self.reward_func_names),
            num_generations=self.num_generations,
            max_completion_length=self.max_completion_length,
            learning_rate=args.learning_rate,
            beta=args.beta,
        )
        return [
            "### Credit assignment",
            "",
            "Trained with gear_trl's `GEARTrainer` (a subclass of TRL's `GRPOTrainer`) with these settings:",
            "",
            *(f"- {name}: `{value}`" for name, value in settings.items()),
        ]


def is_hub_id(name: str) -> bool:
    """Whether `name` names a Hub repository (`org/name` or `name`) rather than a local file or folder."""
    return not os.path.exists(os.path.expanduser(name)) and not looks_like_local_path(name)


def name_or_link(name: str | None, kind: str) -> str:
    """A Hub id as a link to its page (`kind`: "" for models, "datasets/"), a local path as a path."""
    if not name:
        return "a local model"
    if is_hub_id(name):
        return f"[{name}](https://huggingface.co/{kind}{name})"
    return f"`{name}` (a local path)"
