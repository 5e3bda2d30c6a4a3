"""Training callbacks.

`CreditReportCallback` shows GEAR's credit while a run trains: every `credit_report_steps` steps `GEARTrainer` keeps
the credit of its first batch (`last_credit_trace`, and its prompts); the callback renders `credit_report_rollouts`
of those rollouts (by default a passed and a failed rollout of the same prompt side by side: `credit_report_choice`)
with `gear_trl.reporting`'s renderers to `output_dir/credit/step_XXXXX.{html,png}` and logs a table (step, rollout,
text, mean KL, onsets, weight range, reward, advantage) and the PNG through the trackers in `report_to`
(tensorboard, wandb, trackio).
"""

from __future__ import annotations

import logging
import os

from transformers import TrainerCallback

from ..reporting import choose_rollouts, credit_table, decode_tokens, trace_rows, trainer_tokenizer, write_report

logger = logging.getLogger(__name__)


def _report_to(args) -> list[str]:
    report_to = args.report_to
    if report_to is None:
        return []
    if isinstance(report_to, str):
        report_to = [report_to]
    return [name for name in report_to if name and name != "none"]


def _markdown_table(columns: list[str], data: list[list]) -> str:
    def cell(value):
        if value is None:
            return ""
        if isinstance(value, float):
            value = f"{value:.4g}"
        return str(value).replace("|", "\\|").replace("\n", "\u21b5 ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in data]
    return "\n".join(lines)


class CreditReportCallback(TrainerCallback):
    """Render and log the credit `GEARTrainer` keeps every `args.credit_report_steps` steps.

    Args:
        trainer: the `GEARTrainer` whose `last_credit_trace` is read (and cleared after each report).
        num_rollouts: rollouts per report (default: `args.credit_report_rollouts`).

    Only the main process writes; the other processes just clear their trace. A report that fails is logged as a
    warning and never stops training.
    """

    def __init__(self, trainer, num_rollouts: int | None = None):
        self.trainer = trainer
        self.num_rollouts = num_rollouts
        self._own_writer = None

    def on_step_end(self, args, state, control, processing_class=None, **kwargs):
        trace = getattr(self.trainer, "last_credit_trace", None)
        if trace is None:
            return
        self.trainer.last_credit_trace = None
        if not state.is_world_process_zero:
            return
        try:
            self.report(args, state, trace, processing_class)
        except Exception as err:  # noqa: BLE001 -- a picture must never cost a training run
            logger.warning("Credit report at step %d failed: %r", state.global_step, err)

    def on_train_end(self, args, state, control, **kwargs):
        if self._own_writer is not None:
            self._own_writer.close()
            self._own_writer = None

    def report(self, args, state, trace, processing_class=None) -> tuple[str, str | None]:
        """Write `output_dir/credit/step_XXXXX.{html,png}` and log them; returns the two paths."""
        tokenizer = trainer_tokenizer(self.trainer) or getattr(processing_class, "tokenizer", processing_class)
        limit = self.num_rollouts or getattr(args, "credit_report_rollouts", 4)
        shown = getattr(self.trainer, "last_credit_references", None)  # what each row's teacher saw
        rows = trace_rows(
            trace,
            pad_token_id=tokenizer.pad_token_id,
            teacher_references=shown if shown is not None and len(shown) == trace.completion_ids.size(0) else None,
        )
        prompt_ids = getattr(self.trainer, "last_credit_prompt_ids", None)
        if prompt_ids is not None and len(prompt_ids) == len(rows):
            keys = [tuple(ids) for ids in prompt_ids.tolist()]
        else:  # without the prompts, every rollout is a group of its own: no mix, the first N
            keys = list(range(len(rows)))
        rows = choose_rollouts(rows, limit, keys, getattr(args, "credit_report_choice", "mixed"))
        rollouts = [(decode_tokens(tokenizer, row["completion_ids"]), row) for row in rows]
        step = state.global_step
        out_dir = os.path.join(args.output_dir, "credit")
        title = f"GEAR credit at step {step} (credit={getattr(args, 'credit', '?')})"
        html_path, png_path = write_report(rollouts, out_dir, f"step_{step:05d}", title)
        columns, data = credit_table(rollouts, step)
        trackers = _report_to(args)
        if "tensorboard" in trackers:
            self._log_tensorboard(args, step, columns, data, png_path)
        if "wandb" in trackers:
            self._log_wandb(step, columns, data, png_path)
        if "trackio" in trackers:
            self._log_trackio(step, columns, data, png_path)
        return html_path, png_path

    # -- trackers ------------------------------------------------------------------------------------------------------

    def _tensorboard_writer(self, args):
        from transformers.integrations import TensorBoardCallback

        handler = getattr(self.trainer, "callback_handler", None)
        for callback in getattr(handler, "callbacks", []):
            if isinstance(callback, TensorBoardCallback) and callback.tb_writer is not None:
                return callback.tb_writer  # the run's own event file
        if self._own_writer is None:
            from torch.utils.tensorboard import SummaryWriter

            log_dir = os.getenv("TENSORBOARD_LOGGING_DIR") or os.path.join(args.output_dir, "runs", "credit")
            self._own_writer = SummaryWriter(log_dir=log_dir)
        return self._own_writer

    def _log_tensorboard(self, args, step, columns, data, png_path):
        writer = self._tensorboard_writer(args)
        if png_path is not None:  # None: matplotlib is not installed, the table is logged alone
            import numpy as np
            from PIL import Image

            with Image.open(png_path) as image:
                pixels = np.asarray(image.convert("RGB"))
            writer.add_image("credit/tokens", pixels, step, dataformats="HWC")
        writer.add_text("credit/rollouts", _markdown_table(columns, data), step)
        writer.flush()

    @staticmethod
    def _log_wandb(step, columns, data, png_path):
        try:
            import wandb
        except ImportError:
            return
        if wandb.run is None:
            return
        logs = {"credit/rollouts": wandb.Table(columns=columns, data=data), "train/global_step": step}
        if png_path is not None:
            logs["credit/tokens"] = wandb.Image(png_path)
        wandb.log(logs)

    @staticmethod
    def _log_trackio(step, columns, data, png_path):
        try:
            import trackio
        except ImportError:
            return
        logs = {"credit/rollouts": trackio.Table(columns=columns, data=data)}
        if png_path is not None:
            logs["credit/tokens"] = trackio.Image(png_path)
        trackio.log(logs, step=step)


class DistillationMonitor:
    """The collapse monitor of `distillation_weight` (on whenever it is > 0): at every training log it reads the
    logged `gear/distill_share`, `reward` and `entropy`, judges the history with `gear_trl.credit.collapse_verdict`,
    and returns its own `gear/` metrics; warns once when the verdict fires, and with `distillation_backoff` halves
    `args.distillation_weight` (floor `distillation_backoff_floor`) at each verdict that fires, one window apart.

    Every rank logs the same reduced metrics, so every rank reaches the same verdict and weight: ranks stay in
    lockstep without a collective of their own.
    """

    def __init__(self, args, window: int | None = None):
        from ..credit.distill import MONITOR_WINDOW

        self.args = args
        self.window = window or MONITOR_WINDOW
        self.share: list = []
        self.reward: list = []
        self.entropy: list = []
        self.warned = False
        self.backoffs = 0
        self._quiet_until = 0  # logged step before which a back-off may not repeat

    def resume(self, log_history: list[dict]) -> None:
        """Take up a resumed run's history from its checkpoint's `log_history` (the trainer's state, saved with every
        checkpoint): each training log the monitor saw is an entry with its `gear/distill_weight`, and the inputs it
        judged are the same entry's `gear/distill_share`, `reward` and `entropy` (TRL logs the NaN-free means the
        monitor reads). So after a resume the warning is not repeated, the back-off keeps the weight it had reached
        (and its spacing), and the windows span the whole run, not only what followed the resume."""
        seen = [e for e in log_history if "gear/distill_weight" in e and "reward" in e]
        if not seen or self.reward:
            return
        for entry in seen:
            self.share.append(entry.get("gear/distill_share"))
            self.reward.append(entry.get("reward"))
            self.entropy.append(entry.get("entropy"))
        self.warned = any(e.get("gear/collapse_warning") == 1.0 for e in seen)
        weights = [e["gear/distill_weight"] for e in seen]
        configured = self.args.distillation_weight  # the recipe's, read again by the resumed run
        lowered = [k for k, w in enumerate(weights) if w < (weights[k - 1] if k else configured)]
        self.backoffs = len(lowered)
        if lowered:
            self._quiet_until = lowered[-1] + 1 + self.window
        if self.args.distillation_backoff:
            self.args.distillation_weight = weights[-1]

    def observe(self, share, reward, entropy) -> dict[str, float]:
        """One training log's means (None where not logged); returns the monitor's metrics for the same log."""
        from ..credit.distill import collapse_verdict, collapse_warning

        self.share.append(share)
        self.reward.append(reward)
        self.entropy.append(entropy)
        verdict = collapse_verdict(self.share, self.reward, self.entropy, window=self.window)
        nan = float("nan")
        metrics = {
            "gear/distill_share_window": nan if verdict["share"] is None else verdict["share"],
            "gear/reward_trend": nan if verdict["reward_trend"] is None else verdict["reward_trend"],
            "gear/entropy_trend": nan if verdict["entropy_trend"] is None else verdict["entropy_trend"],
            "gear/collapse_warning": float(verdict["fires"]),
        }
        if verdict["fires"]:
            weight = self.args.distillation_weight
            if not self.warned:
                self.warned = True
                logger.warning(collapse_warning(verdict, weight, self.args.distillation_backoff))
            if self.args.distillation_backoff and len(self.reward) >= self._quiet_until:
                lowered = max(weight / 2, self.args.distillation_backoff_floor)
                if lowered < weight:
                    self.args.distillation_weight = lowered
                    self.backoffs += 1
                    logger.warning(
                        "distillation_backoff: `distillation_weight` %g -> %g (back-off %d; floor %g).",
                        weight,
                        lowered,
                        self.backoffs,
                        self.args.distillation_backoff_floor,
                    )
                self._quiet_until = len(self.reward) + self.window
        metrics["gear/distill_weight"] = self.args.distillation_weight
        return metrics
