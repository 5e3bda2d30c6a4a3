"""Credit modes as records: what a mode needs, and the pure function that turns a batch's signals into its credit.

A credit mode (`GEARConfig.credit`) is one :class:`CreditMode`: its name, the function ``compute`` that maps a
:class:`CreditInputs` to a :class:`CreditOutputs`, and the facts the configuration checks, the trainer and the
documentation read instead of comparing names:

- ``teacher``: the mode runs the teacher pass (GEAR's divergence needs it; plain GRPO and GiGPO do not).
- ``segmenter``: the segmenter (:func:`gear_trl.credit.segments.register_segmenter`) that builds its segments, or
  None for a mode without them.
- ``onsets``: its segments open at divergence onsets (so a failed rollout has a prefix before its first onset, which
  `failed_prefix_weight` may lower, and onset metrics mean something).
- ``per_step``: its advantages are per step (GiGPO's, GIGPO.md) rather than one per completion.
- ``steps``: the advantages that replace GRPO's before the teacher pass (:class:`StepAdvantages`: a function of the
  batch's groups and the options it reads), GiGPO's for a mode with ``per_step`` (:data:`GIGPO`); None keeps GRPO's.
- ``signal``: what the divergence pass computes for it: ``"divergence"`` (the configured `divergence`) or
  ``"log_ratio"`` (the sampled token's signed log pS - log pT, RLSD's signal).
- ``log_ratio``: it reads the sampled token's teacher/student log-ratio besides the divergence.
- ``options``: the `GEARConfig` fields that only it reads (the model card lists them).
- ``reads``: the `GEARConfig` fields it reads besides ``options`` (shared with other modes, not on the model card).
  Its ``compute`` receives exactly ``options + reads`` (:attr:`CreditInputs.options`), never the whole configuration.
- ``distillation``: the dense term blended into its advantages (:class:`Distillation`: a function and the options it
  reads), SDPO's sampled-token log-ratio under `distillation_weight` by default (:data:`SDPO`); None for none.
- ``unlogged``: the `gear/` metrics that mean nothing under it (docs/metrics.md tabulates them).

The trainer calls two functions, each with the mode's record, whatever the mode: after generation
:func:`gear_trl.credit.assign.group_credit` (the mode's step advantages and what its distillation reads of each row's
group, from a :class:`GroupBatch` that carries the trainer's gathers), and with the divergence
:func:`gear_trl.credit.assign.assign_credit` (its weights, distillation and
:class:`~gear_trl.credit.credit_trace.CreditTrace`). Each hands every part its declared options; the trainer never
changes when a mode is added.

A new mode is one record and one function::

    register_credit_mode(CreditMode(name="my-mode", compute=my_weights, segmenter="gear", summary="..."))

after which `GEARConfig(credit="my-mode")` validates and `GEARTrainer` uses it. Names use hyphens only; the spellings
of earlier releases (`gear_no_entropy`, `gear+gigpo`) are refused with the new name suggested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from .distill import DISTILLATION_OPTIONS, DistillationTerm, sdpo_distillation, sdpo_group_inputs
from .gigpo import GIGPO_OPTIONS, gigpo_step_advantages
from .rlsd import rlsd_lambda, rlsd_token_weights
from .segments import MODE_SEGMENTERS, segment_signal
from .signed import signed_signal
from .weights import spare_failed_prefix, weights_from_signal


@dataclass(frozen=True)
class CreditInputs:
    """What every credit function receives. Tensors are [B, T] on one device unless said otherwise.

    Attributes:
        kl: float, the divergence pass's per-token signal: the configured divergence (reverse KL by default), or for
            a mode whose ``signal`` is ``"log_ratio"`` the sampled token's log pS - log pT.
        entropy: float, the student's entropy.
        log_ratio: float, the sampled token's log pT - log pS, or None when the mode and configuration do not ask
            for it (`GEARConfig.wants_log_ratio`).
        mask: bool, True at model-written tokens.
        base: float, GRPO's advantages, [B] (one per completion) or [B, T] (GiGPO's per-step ones spread over tokens).
        options: the options the consumer declared (`CreditMode.options + reads`, or `Distillation.options`), read
            as attributes (``inputs.options.weight_alpha``); :func:`declared_options` builds it.
        step: the optimizer step the batch trains (for schedules).
        turn_starts: bool, True at the first model token of each assistant turn, or None for single-turn rows.
        completion_ids: long [B, T], the sampled tokens; prompt_ids: long [B, P]; tokenizer: the trainer's tokenizer.
            For modes that read the text (the studies' label oracles); the built-in modes do not.
        agreement: float [2, B, T], pT(y_t) and sum_v pS(v) pT(v), or None (`GEARConfig.wants_agreement`).
        group_signal: bool [B], whether each row's group's rewards differ (`distillation_gate`), or None.
        group_scale: float [B], each row's group's mean |advantage| (`distillation_bound`), or None.
        group_size: the rollouts per prompt (`num_generations`), for group-normalized terms.
    """

    kl: torch.Tensor
    entropy: torch.Tensor
    log_ratio: torch.Tensor | None
    mask: torch.Tensor
    base: torch.Tensor
    options: Any = None
    step: int = 0
    turn_starts: torch.Tensor | None = None
    completion_ids: torch.Tensor | None = None
    prompt_ids: torch.Tensor | None = None
    tokenizer: Any = None
    agreement: torch.Tensor | None = None
    group_signal: torch.Tensor | None = None
    group_scale: torch.Tensor | None = None
    group_size: int = 1

    @property
    def config(self) -> Any:
        """Deprecated: the declared options (`options`); a mode no longer receives the whole configuration."""
        import warnings

        warnings.warn(
            "CreditInputs.config is deprecated: read CreditInputs.options.", DeprecationWarning, stacklevel=2
        )
        return self.options


class DeclaredOptions(SimpleNamespace):
    """The options a credit function declared, as attributes; reading an undeclared one names the declaration."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"option {name!r} was not declared: add it to the CreditMode's `options` or `reads` (or the "
            "Distillation's `options`) to receive it."
        )


def declared_options(names: tuple[str, ...], settings: Any) -> DeclaredOptions:
    """The options `names` read off `settings` (a `GEARConfig`, or any object with those attributes)."""
    return DeclaredOptions(**{name: getattr(settings, name) for name in dict.fromkeys(names)})


@dataclass(frozen=True)
class CreditOutputs:
    """A credit function's result, [B, T] each.

    Attributes:
        signal: float, the per-token signal the weights came from (0 where none).
        segment_ids: long, -1 outside segments, else 0, 1, 2, ... per row.
        weights: float, the per-token weights on the advantage; 0 or 1 at masked-out positions.
        advantages: float, per-token advantages when the mode sets them itself; None means ``base * weights``.
        stats: `gear/` metrics of the mode's own, name -> (numerator, denominator), both summed over ranks before
            the ratio is logged (a constant c logs as (c, 1.0)).
    """

    signal: torch.Tensor
    segment_ids: torch.Tensor
    weights: torch.Tensor
    advantages: torch.Tensor | None = None
    stats: dict[str, tuple[Any, Any]] = field(default_factory=dict)


CreditFunction = Callable[[CreditInputs], CreditOutputs]


GROUP_INPUTS = ("group_signal", "group_scale")
"""What a distillation term may ask of each row's group (`Distillation.groups`), computed by
:func:`gear_trl.credit.assign.group_credit` into `CreditInputs.group_signal` and `CreditInputs.group_scale`."""


@dataclass(frozen=True)
class Distillation:
    """A mode's distillation: ``term(inputs, advantages, rows)`` -> :class:`DistillationTerm`, or None when off.

    ``inputs`` carries `options` (only these ``options``) and, for a mode whose signal is the log-ratio, its
    ``log_ratio`` as log pT - log pS; ``advantages`` [B, T] are the mode's credit after the no-teacher fallback;
    ``rows`` [B] bool the rows that may be distilled (a teacher and a score). Whether the term is off must follow
    from its options alone (every rank agrees: `gear/distill_share` is logged where it is on).

    ``groups(options)``: which of :data:`GROUP_INPUTS` the term reads under these options (each costs the trainer
    work over the whole generation batch, one gather for ``group_scale``); None for none."""

    term: Callable[[CreditInputs, torch.Tensor, torch.Tensor], DistillationTerm | None]
    options: tuple[str, ...] = ()
    groups: Callable[[Any], tuple[str, ...]] | None = None


SDPO = Distillation(sdpo_distillation, DISTILLATION_OPTIONS, sdpo_group_inputs)
"""`distillation_weight`'s blend of the teacher's sampled-token log-ratio (SDPO) or `distillation_signal: agreement`,
with `distillation_gate`, `distillation_clip` and `distillation_bound`: every built-in mode's distillation."""


@dataclass(frozen=True)
class GroupBatch:
    """What the trainer hands :func:`gear_trl.credit.assign.group_credit` after generation: one rank's rows, the
    whole generation batch's rewards, and the trainer's gathers (groups span ranks; the functions here stay free of
    any distributed state).

    Attributes:
        mask: bool [B, T], True at this rank's model-written tokens.
        advantages: float [B], GRPO's advantages of this rank's rows.
        rewards_per_func: float [N, F], every rank's rollouts (N = ranks x B, in rank order) per reward function,
            NaN where a function gave none.
        reward_weights: float [F], the reward functions' weights.
        group_size: rollouts per prompt (consecutive rows of the N form a group).
        rank: this rank's index (its rows are N's rows rank * B to rank * B + B - 1).
        anchors: a function returning this rank's rows' step anchors (one list of hashable states per row), called
            only by a part that reads them (GiGPO's).
        gather_object: every rank's list of Python objects, concatenated in rank order (made on every rank alike).
        gather: every rank's tensor, concatenated along dim 0 in rank order (made on every rank alike).
        options: the options the consumer declared (`StepAdvantages.options`), as attributes.
    """

    mask: torch.Tensor
    advantages: torch.Tensor
    rewards_per_func: torch.Tensor
    reward_weights: torch.Tensor
    group_size: int
    rank: int = 0
    anchors: Callable[[], list] = list
    gather_object: Callable[[list], list] = lambda objects: objects
    gather: Callable[[torch.Tensor], torch.Tensor] = lambda tensor: tensor
    options: Any = None


@dataclass(frozen=True)
class StepAdvantages:
    """A mode's own advantages in place of GRPO's, computed after generation (before the teacher pass):
    ``compute(batch)`` with `batch` a :class:`GroupBatch` whose `options` are only these ``options`` ->
    (advantages [B, T] float on `batch.mask`'s device, metrics {name: float}, logged under their names)."""

    compute: Callable[[GroupBatch], tuple[torch.Tensor, dict[str, float]]]
    options: tuple[str, ...] = ()


GIGPO = StepAdvantages(gigpo_step_advantages, GIGPO_OPTIONS)
"""GiGPO's episode + anchor-state step advantages (`gigpo_gamma`, `gigpo_omega`, `gigpo_mode`,
`gigpo_similarity_threshold`) and its `gigpo/` metrics: the ``steps`` of `gigpo` and `gear-gigpo`."""


@dataclass(frozen=True)
class CreditMode:
    """One credit mode (see the module docstring for each field)."""

    name: str
    compute: CreditFunction
    teacher: bool = True
    segmenter: str | None = None
    onsets: bool = False
    per_step: bool = False
    signal: str = "divergence"
    log_ratio: bool = False
    options: tuple[str, ...] = ()
    unlogged: tuple[str, ...] = ()
    summary: str = ""
    reads: tuple[str, ...] = ()
    distillation: Distillation | None = SDPO
    steps: StepAdvantages | None = None

    def __post_init__(self):
        # `per_step` and `steps` say one thing: a record of earlier releases with `per_step=True` alone meant GiGPO's.
        if self.steps is not None and not self.per_step:
            object.__setattr__(self, "per_step", True)
        elif self.per_step and self.steps is None:
            object.__setattr__(self, "steps", GIGPO)

    @property
    def declared(self) -> tuple[str, ...]:
        """Every option its ``compute`` receives: ``options`` then ``reads``."""
        return tuple(dict.fromkeys((*self.options, *self.reads)))

    @property
    def prefix_weights(self) -> bool:
        """Whether `failed_prefix_weight` applies: segments open at onsets and the advantage is one per completion."""
        return self.onsets and not self.per_step


_REGISTRY: dict[str, CreditMode] = {}

RENAMED = {"gear_no_entropy": "gear-no-entropy", "gear+gigpo": "gear-gigpo"}
"""Names of earlier releases, refused with the new one suggested."""


def register_credit_mode(mode: CreditMode, *, replace: bool = False) -> CreditMode:
    """Add `mode` to the registry (`replace=True` to overwrite a mode of the same name). Names are lower case words
    joined by hyphens."""
    name = mode.name
    if not name or name != name.lower() or any(c in name for c in "_+ ") or name.strip("-") != name:
        raise ValueError(f"A credit mode's name is lower case words joined by hyphens; got {name!r}.")
    if name in _REGISTRY and not replace:
        raise ValueError(f"A credit mode named {name!r} is already registered (pass replace=True to overwrite it).")
    if mode.signal not in ("divergence", "log_ratio"):
        raise ValueError(f"CreditMode.signal must be 'divergence' or 'log_ratio'; got {mode.signal!r}.")
    if mode.onsets and mode.segmenter is None:
        raise ValueError(f"Credit mode {name!r} has onsets but no segmenter.")
    _REGISTRY[name] = mode
    MODE_SEGMENTERS[name] = mode.segmenter or "none"
    return mode


def credit_modes() -> tuple[str, ...]:
    """The registered credit modes' names, in registration order (the built-in ones first)."""
    return tuple(_REGISTRY)


def credit_mode(name: str) -> CreditMode:
    """The record of credit mode `name`: a registered name, or the import path of a user's record
    (`my_package.modes:LAST_TOKEN`, registered under its own name at first use, so a recipe can name a mode its own
    package defines); a ValueError naming the valid ones (and the new name of an old one) otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        pass
    if isinstance(name, str) and ":" in name:
        return _load_credit_mode(name)
    import difflib

    if name in RENAMED:
        hint = f" (renamed: did you mean {RENAMED[name]!r}?)"
    else:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"`credit` must be one of {list(_REGISTRY)}, got {name!r}{hint}.")


def _load_credit_mode(path: str) -> CreditMode:
    from ..inputs.plugins import load_plugin

    record = load_plugin(path, "credit")
    if not isinstance(record, CreditMode):
        raise ValueError(  # noqa: TRY004 -- a configuration error, as every `credit` refusal
            f"`credit: {path}` names a {type(record).__name__}, not a `gear_trl.credit.CreditMode` record."
        )
    if _REGISTRY.get(record.name) is not record:
        register_credit_mode(record)
    MODE_SEGMENTERS[path] = record.segmenter or "none"
    return record


# ---------------------------------------------------------------------------------------------------------------------
# The built-in modes' functions


def uniform(inputs: CreditInputs) -> CreditOutputs:
    """Every model token weight 1, no signal, no segments: GRPO's own advantage (`none`, `gigpo`)."""
    mask = inputs.mask.bool()
    return CreditOutputs(
        signal=torch.zeros(mask.shape, dtype=torch.float32, device=mask.device),
        segment_ids=torch.full(mask.shape, -1, dtype=torch.long, device=mask.device),
        weights=mask.float(),
    )


def segmented(segmenter: str, *, signed: bool = False) -> CreditFunction:
    """GEAR's steps 3-5 with segmenter `segmenter`: normalized signal and segments, then the clipped exponential
    weights (`weight_alpha`, `weight_eps`, `weight_lambda`, `weight_norm`) and `failed_prefix_weight`. With `signed`,
    the signal is signed by the teacher's log-ratio first (`credit: gear-signed`, :func:`signed_signal`)."""

    def compute(inputs: CreditInputs) -> CreditOutputs:
        args = inputs.options
        signal, segment_ids = segment_signal(
            inputs.kl,
            inputs.entropy,
            inputs.mask,
            mode=segmenter,
            onset_threshold=args.onset_threshold,
            entropy_threshold=args.entropy_threshold,
            turn_starts=inputs.turn_starts,
            fixed_segment_len=args.fixed_segment_len,
            max_segment_len=args.max_segment_len,
            normalize=args.normalize,
            onset_min_kl=args.onset_min_kl,
        )
        if signed:
            signal = signed_signal(signal, inputs.log_ratio, inputs.mask)
        weights = weights_from_signal(
            signal,
            inputs.mask,
            inputs.base,
            alpha=args.weight_alpha,
            eps=args.weight_eps,
            lam=args.weight_lambda,
            weight_norm=args.weight_norm,
        )
        if args.failed_prefix_weight != 1.0:  # the configuration allows it only in modes with `prefix_weights`
            weights = spare_failed_prefix(weights, segment_ids, inputs.mask, inputs.base, args.failed_prefix_weight)
        return CreditOutputs(signal=signal, segment_ids=segment_ids, weights=weights)

    compute.__name__ = f"segmented_{segmenter.replace('-', '_')}" + ("_signed" if signed else "")
    compute.__doc__ = f"GEAR's weights over the `{segmenter}` segmenter's segments" + (", signed." if signed else ".")
    return compute


def rlsd(inputs: CreditInputs) -> CreditOutputs:
    """RLSD (arXiv 2604.03128): no segments; w_t = (1 - lam) + lam * clip(exp(sign(A) * delta_t), 1 - eps, 1 + eps)
    with delta_t = log pT - log pS of the sampled token (the divergence pass gives log pS - log pT here) and lam on
    its schedule (`rlsd_lambda`, `rlsd_lambda_warmup_steps`, `rlsd_lambda_decay_steps`). Its own metrics: the blend
    now, and the share of model tokens (of rows with a teacher) whose weight sits at a clip bound."""
    args = inputs.options
    mask = inputs.mask.bool()
    delta = -inputs.kl
    lam = rlsd_lambda(args.rlsd_lambda, inputs.step, args.rlsd_lambda_decay_steps, args.rlsd_lambda_warmup_steps)
    weights = rlsd_token_weights(
        delta, mask, inputs.base, lam=lam, eps=args.rlsd_eps, negative_only=args.rlsd_negative_only
    )
    bound = lam * args.rlsd_eps
    clipped = ((weights - 1).abs() >= bound * (1 - 1e-5)) & mask if bound > 0 else torch.zeros_like(mask)
    return CreditOutputs(
        signal=delta,
        segment_ids=torch.full(mask.shape, -1, dtype=torch.long, device=mask.device),
        weights=weights,
        stats={"rlsd_lambda": (lam, 1.0), "rlsd_clip_frac": (clipped.float().sum(), mask.float().sum())},
    )


NO_SEGMENT_METRICS = ("onset_rate", "segment_len_mean", "in_segment_frac", "onsets_in_failed_frac")
"""What a mode without segments leaves out when it runs the teacher (`none` or `gigpo` with `distillation_weight`)."""
KL_METRICS = ("kl_mean", "kl_max", "kl_floor", "kl_floor_max", "below_floor_frac", "kl_wrong_over_right")
SEGMENT_METRICS = (
    "onset_rate",
    "segment_len_mean",
    "in_segment_frac",
    "kl_failed_over_passed",
    "onsets_in_failed_frac",
)

_GEAR_OPTIONS = ("onset_threshold", "entropy_threshold", "normalize", "max_segment_len", "weight_alpha",
                 "weight_lambda", "weight_norm", "weight_eps")  # fmt: skip
_GIGPO_OPTIONS = ("gigpo_gamma", "gigpo_omega", "gigpo_mode")
_SEGMENTED_READS = ("onset_threshold", "entropy_threshold", "fixed_segment_len", "max_segment_len", "normalize",
                    "onset_min_kl", "weight_alpha", "weight_eps", "weight_lambda", "weight_norm",
                    "failed_prefix_weight")  # fmt: skip

BUILT_IN = (
    CreditMode("none", uniform, teacher=False, unlogged=NO_SEGMENT_METRICS,
               summary="Plain GRPO: every token carries its completion's advantage."),
    CreditMode("token", segmented("token"), segmenter="token", options=_GEAR_OPTIONS, reads=_SEGMENTED_READS,
               summary="Each token weighted by its own normalized divergence; no segments (ablation)."),
    CreditMode("turn", segmented("turn"), segmenter="turn", options=_GEAR_OPTIONS, reads=_SEGMENTED_READS,
               summary="One segment per assistant turn carrying its largest divergence (ablation)."),
    CreditMode("fixed", segmented("fixed"), segmenter="fixed", options=(*_GEAR_OPTIONS, "fixed_segment_len"),
               reads=_SEGMENTED_READS,
               summary="Windows of `fixed_segment_len` tokens carrying their largest divergence (ablation)."),
    CreditMode("gear-no-entropy", segmented("gear-no-entropy"), segmenter="gear-no-entropy", onsets=True,
               options=_GEAR_OPTIONS, reads=_SEGMENTED_READS,
               summary="GEAR's onsets without entropy: a segment runs to the next onset."),
    CreditMode("gear", segmented("gear"), segmenter="gear", onsets=True, log_ratio=True, options=_GEAR_OPTIONS,
               reads=_SEGMENTED_READS,
               summary="GEAR (arXiv 2605.11853): onsets open segments, entropy closes them, clipped weights."),
    CreditMode("gigpo", uniform, teacher=False, steps=GIGPO, options=_GIGPO_OPTIONS, unlogged=NO_SEGMENT_METRICS,
               summary="GiGPO (arXiv 2505.10978): step-level advantages from anchor-state groups; no teacher."),
    CreditMode("gear-gigpo", segmented("gear"), segmenter="gear", onsets=True, steps=GIGPO,
               options=(*_GEAR_OPTIONS, *_GIGPO_OPTIONS), reads=_SEGMENTED_READS,
               summary="GEAR's weights on GiGPO's step advantages."),
    CreditMode("rlsd", rlsd, signal="log_ratio",
               options=("rlsd_lambda", "rlsd_eps", "rlsd_lambda_decay_steps", "rlsd_lambda_warmup_steps",
                        "rlsd_negative_only"),
               unlogged=(*KL_METRICS, *SEGMENT_METRICS),
               summary="RLSD (arXiv 2604.03128): the sampled token's clipped teacher/student ratio; no segments."),
    CreditMode("gear-signed", segmented("gear", signed=True), segmenter="gear", onsets=True, log_ratio=True,
               options=_GEAR_OPTIONS, reads=_SEGMENTED_READS,
               summary="GEAR's segments, the signal signed by the teacher's log-ratio (this project's variant)."),
)  # fmt: skip

for _mode in BUILT_IN:
    register_credit_mode(_mode)

CREDIT_MODES: tuple[str, ...] = tuple(mode.name for mode in BUILT_IN)
"""The built-in credit modes (`credit_modes()` adds the registered ones)."""


def modes_table() -> str:
    """The credit modes as a Markdown table (docs/configuration.md): name, teacher, segments, advantage, summary."""
    lines = [
        "| `credit` | teacher pass | segments | advantage | what it does |",
        "|---|---|---|---|---|",
    ]
    for mode in _REGISTRY.values():
        segments = "onsets" if mode.onsets else (mode.segmenter if mode.segmenter not in (None, "none") else "-")
        lines.append(
            f"| `{mode.name}` | {'yes' if mode.teacher else 'no (yes with `distillation_weight`)'} | {segments} | "
            f"{'per step' if mode.per_step else 'per completion'} | {mode.summary} |"
        )
    return "\n".join(lines)
