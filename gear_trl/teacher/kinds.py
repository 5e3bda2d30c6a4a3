"""Teacher kinds as records: which weights the teacher pass reads (`GEARConfig.teacher`).

One :class:`TeacherKind` per kind, read by the configuration's checks, `Teacher` (gear_trl/teacher/teacher.py), the
model card and the documentation instead of comparing names:

- ``weights``: ``"policy"`` (the current policy itself), ``"initial"`` (the run's initial policy, frozen) or
  ``"following"`` (weights of its own that follow the policy after optimizer steps, saved in checkpoints: under PEFT a
  frozen adapter named after the kind, else a frozen copy of the model).
- ``follow``: for a following kind, what it does after each optimizer step, given the `Teacher` and the step.
- ``options``: the `GEARConfig` fields only this kind reads.

A new kind is one record (and, if it follows the policy, one function)::

    register_teacher_kind(TeacherKind(name="slow-ema", weights="following", follow=my_follow, summary="..."))
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WEIGHTS = ("policy", "initial", "following")


@dataclass(frozen=True)
class TeacherKind:
    """One teacher kind (see the module docstring for each field)."""

    name: str
    weights: str
    follow: Callable[[Any, int], None] | None = None
    options: tuple[str, ...] = ()
    summary: str = ""

    @property
    def adapter(self) -> str | None:
        """The frozen adapter a following kind reads under PEFT (named after the kind), else None."""
        return self.name if self.weights == "following" else None

    @property
    def saves_weights(self) -> bool:
        """Whether checkpoints carry the teacher's weights (those that change during training)."""
        return self.weights == "following"


_REGISTRY: dict[str, TeacherKind] = {}


def register_teacher_kind(kind: TeacherKind, *, replace: bool = False) -> TeacherKind:
    """Add `kind` to the registry (`replace=True` to overwrite a kind of the same name)."""
    name = kind.name
    if not name or name != name.lower() or any(c in name for c in "_+ ") or name.strip("-") != name:
        raise ValueError(f"A teacher kind's name is lower case words joined by hyphens; got {name!r}.")
    if name in _REGISTRY and not replace:
        raise ValueError(f"A teacher kind named {name!r} is already registered (pass replace=True to overwrite it).")
    if kind.weights not in WEIGHTS:
        raise ValueError(f"TeacherKind.weights must be one of {WEIGHTS}; got {kind.weights!r}.")
    if (kind.weights == "following") != (kind.follow is not None):
        raise ValueError(f"Teacher kind {name!r}: a `follow` function goes with `weights: following`, and only there.")
    _REGISTRY[name] = kind
    return kind


def teacher_kinds() -> tuple[str, ...]:
    """The registered teacher kinds' names, the built-in ones first."""
    return tuple(_REGISTRY)


def teacher_kind(name: str) -> TeacherKind:
    """The record of teacher kind `name`; a ValueError naming the valid ones otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        pass
    close = difflib.get_close_matches(name, list(_REGISTRY), n=1) if isinstance(name, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"`teacher` must be one of {list(_REGISTRY)}, got {name!r}{hint}.")


def _follow_ema(teacher, step: int) -> None:
    """theta_T <- (1 - r) theta_T + r theta_S after every optimizer step (r = `teacher_ema_decay`)."""
    teacher.update_ema()


def _follow_periodic(teacher, step: int) -> None:
    """Copy the policy's weights after every `teacher_sync_steps`-th optimizer step (RLSD's published setup)."""
    teacher.sync_every(step)


BUILT_IN = (
    TeacherKind("live", "policy", summary="The current policy, shown the reference (GEAR's teacher)."),
    TeacherKind("base", "initial", summary="The run's initial policy, frozen."),
    TeacherKind("ema", "following", _follow_ema, options=("teacher_ema_decay",),
                summary="An exponential moving average of the trained weights."),
    TeacherKind("periodic", "following", _follow_periodic, options=("teacher_sync_steps",),
                summary="A copy of the trained weights re-synced every `teacher_sync_steps` optimizer steps (RLSD)."),
)  # fmt: skip

for _kind in BUILT_IN:
    register_teacher_kind(_kind)
