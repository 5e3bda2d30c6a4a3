"""The weights the teacher pass reads when it is not the live policy: `teacher: base`, `ema` and `periodic`.

- `base`: the run's initial policy, frozen. Under PEFT the adapters are disabled (or a frozen copy of an adapter the
  model arrived with is used); under full fine-tuning a frozen copy of the initial model, shared with TRL's reference
  model when `beta > 0`.
- `ema`: an exponential moving average of the trained weights, `theta_T <- (1 - r) theta_T + r theta_S` after every
  optimizer step (`r = teacher_ema_decay`); under PEFT of the adapter only (a frozen adapter named `ema`), else of a
  copy of the whole model. It is saved in every checkpoint (`gear_teacher.safetensors`) and restored on resume.
  The average is kept in float32: teacher weights held in bfloat16 or float16 get a float32 master copy (`ema_masters`;
  4 bytes per averaged value, e.g. 32 GB for a fully fine-tuned 8B model on one GPU, that divided by the number of
  ranks under ZeRO-3, a few MB for a LoRA adapter), and the teacher pass reads the average rounded to their dtype.
- `periodic`: a frozen copy of the trained weights (the adapter under PEFT, a frozen adapter named `periodic`),
  overwritten with the policy's after every `teacher_sync_steps` optimizer steps (RLSD's published setup); saved and
  restored like `ema`'s.

Under DeepSpeed ZeRO-3 the averaged and the trained parameters are partitioned alike (same shapes, same ranks), so
each rank averages its own shards: no gather. Saving and restoring gather one parameter at a time.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
from transformers import TrainerCallback

TEACHER_STATE_FILE = "gear_teacher.safetensors"


def _shard(param: torch.Tensor) -> torch.Tensor:
    """A parameter's local values: its ZeRO-3 partition when it has one, else the whole tensor."""
    return param.ds_tensor if hasattr(param, "ds_tensor") else param.data


LOW_PRECISION = (torch.bfloat16, torch.float16)
"""Teacher dtypes whose EMA is kept in a float32 master copy (`ema_update_`'s `masters`)."""


@torch.no_grad()
def ema_update_(
    pairs: list[tuple[torch.Tensor, torch.Tensor]], rate: float, masters: list[torch.Tensor | None] | None = None
) -> None:
    """``teacher <- (1 - rate) * teacher + rate * student`` for every (teacher, student) parameter pair, in place,
    shard by shard under ZeRO-3 (each rank updates the partition it holds).

    `masters` (one entry per pair): a float32 copy of the teacher's local values that holds the average, which the
    teacher then receives rounded to its own dtype, or None to average in the teacher's dtype. In bfloat16 a step's
    change `rate * (student - teacher)` is mostly below half a unit in the last place of the teacher and rounds away:
    at rate 0.05 most entries never move. `ema_masters` makes them.
    """
    for index, (teacher, student) in enumerate(pairs):
        local_t, local_s = _shard(teacher), _shard(student)
        if local_t.shape != local_s.shape:
            raise RuntimeError(
                f"The EMA teacher's parameter is partitioned unlike the student's ({tuple(local_t.shape)} vs "
                f"{tuple(local_s.shape)}); both must live in models of the same shape on the same ranks."
            )
        master = masters[index] if masters is not None else None
        if master is None:
            local_t.lerp_(local_s.to(local_t.dtype), rate)
        else:
            master.lerp_(local_s.float(), rate)
            local_t.copy_(master)


@torch.no_grad()
def sync_(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """``teacher <- student`` for every (teacher, student) parameter pair, in place, shard by shard under ZeRO-3."""
    for teacher, student in pairs:
        local_t, local_s = _shard(teacher), _shard(student)
        if local_t.shape != local_s.shape:
            raise RuntimeError(
                f"The periodic teacher's parameter is partitioned unlike the student's ({tuple(local_t.shape)} vs "
                f"{tuple(local_s.shape)}); both must live in models of the same shape on the same ranks."
            )
        local_t.copy_(local_s)


def ema_masters(teachers: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """For each teacher parameter, a float32 copy of its local values (its ZeRO-3 shard) when it is held in a
    `LOW_PRECISION` dtype, else None. Costs 4 bytes per such value on the rank that holds it."""
    return [
        _shard(teacher).detach().float().clone() if _shard(teacher).dtype in LOW_PRECISION else None
        for teacher in teachers
    ]


@contextmanager
def gathered(params: list[torch.Tensor], modifier_rank: int | None = None):
    """ZeRO-3 partitioned `params` gathered whole for the duration (a no-op for ordinary tensors)."""
    if any(hasattr(p, "ds_id") for p in params):
        import deepspeed

        with deepspeed.zero.GatheredParameters(params, modifier_rank=modifier_rank):
            yield
    else:
        with nullcontext():
            yield


def teacher_state(named: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Whole CPU copies of the teacher parameters `named` ({name: parameter}); under ZeRO-3 every rank must call."""
    state = {}
    for name, param in named.items():
        with gathered([param]):
            state[name] = param.data.detach().to("cpu", copy=True).contiguous()
    return state


@torch.no_grad()
def load_teacher_state(named: dict[str, torch.Tensor], state: dict[str, torch.Tensor], rank: int) -> None:
    """Copy `state` into the teacher parameters `named`; under ZeRO-3 every rank must call (rank 0's copy is
    partitioned back to all)."""
    missing = sorted(set(named) - set(state))
    if missing:
        raise ValueError(f"{TEACHER_STATE_FILE} lacks {len(missing)} teacher parameters, e.g. {missing[0]!r}.")
    for name, param in named.items():
        partitioned = hasattr(param, "ds_id")
        with gathered([param], modifier_rank=0):
            if not partitioned or rank == 0:
                param.data.copy_(state[name].to(param.dtype))


class TeacherWeightsCallback(TrainerCallback):
    """Drives an EMA or periodic teacher through training: restore on resume, average or sync after optimizer steps
    (the trainer saves it into each checkpoint folder before the Trainer's own files). `teacher` is the trainer's
    `Teacher`."""

    def __init__(self, teacher):
        self.teacher = teacher

    def on_train_begin(self, args, state, control, **kwargs):
        checkpoint = self.teacher.host.teacher_parts().resume_checkpoint
        if checkpoint:
            self.teacher.restore(checkpoint)

    def on_step_end(self, args, state, control, **kwargs):
        self.teacher.after_optimizer_step(state.global_step)
