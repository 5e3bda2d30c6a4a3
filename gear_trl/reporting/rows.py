"""Trace rows: the rollouts of a `CreditTrace` as per-token lists, and what the reports read off them.

A `trace_row` is a dict with one entry per completion token for `kl`, `entropy`, `signal`, `weights`, `segment_ids`
(-1 outside segments) and `mask` (False: a tool result, not trained), and optionally `advantage`, `reward`, `rewards`
({reward name: value}), `prompt`, `ground_truth`, `completion_ids`, `below_floor` (its largest KL is below the noise
floor `onset_min_kl`). The renderers take decoded token strings and a
`trace_row`, so they work without a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def _floats(values) -> list[float]:
    values = values.tolist() if hasattr(values, "tolist") else values
    return [float(v) for v in values]


def _column(trace_row: dict, key: str, n: int, default) -> list:
    values = trace_row.get(key)
    if values is None:
        return [default] * n
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    if len(values) != n:
        raise ValueError(f"trace_row[{key!r}] has {len(values)} values for {n} tokens.")
    return values


def token_table(tokens: Sequence[str], trace_row: dict) -> list[dict]:
    """Per token: text, mask, raw and max-normalized KL and entropy, signal, weight, segment, onset/first/last flags,
    and the advantage the loss gets where it is not A * weight (`loss_advantage`: `distillation_weight`; else None)."""
    n = len(tokens)
    mask = [bool(m) for m in _column(trace_row, "mask", n, True)]
    kl = [float(v) for v in _column(trace_row, "kl", n, 0.0)]
    entropy = [float(v) for v in _column(trace_row, "entropy", n, 0.0)]
    signal = [float(v) for v in _column(trace_row, "signal", n, 0.0)]
    weights = [float(v) for v in _column(trace_row, "weights", n, 1.0)]
    segments = [int(v) for v in _column(trace_row, "segment_ids", n, -1)]
    ids = _column(trace_row, "completion_ids", n, None)
    loss_advantages = _column(trace_row, "loss_advantages", n, None)
    kl_max = max([v for v, m in zip(kl, mask, strict=True) if m] or [0.0])
    h_max = max([v for v, m in zip(entropy, mask, strict=True) if m] or [0.0])
    table = []
    for i in range(n):
        seg = segments[i] if mask[i] else -1
        previous = segments[i - 1] if i > 0 and mask[i - 1] else -1
        following = segments[i + 1] if i + 1 < n and mask[i + 1] else -1
        table.append(
            {
                "index": i,
                "text": tokens[i],
                "id": ids[i],
                "mask": mask[i],
                "kl": kl[i],
                "kl_norm": kl[i] / kl_max if kl_max > 0 else 0.0,
                "entropy": entropy[i],
                "entropy_norm": entropy[i] / h_max if h_max > 0 else 0.0,
                "signal": signal[i],
                "weight": weights[i],
                "segment": seg,
                "first": seg >= 0 and previous != seg,  # the segment's onset token
                "last": seg >= 0 and following != seg,
                "loss_advantage": None if loss_advantages[i] is None else float(loss_advantages[i]),
            }
        )
    return table


def rollout_summary(trace_row: dict) -> dict:
    """Mean KL over model tokens, number of segments (onsets), weight range, model-token count."""
    kl = _floats(trace_row.get("kl", []))
    n = len(kl)
    mask = [bool(m) for m in _column(trace_row, "mask", n, True)]
    weights = _floats(_column(trace_row, "weights", n, 1.0))
    segments = [int(s) for s in _column(trace_row, "segment_ids", n, -1)]
    kept_kl = [v for v, m in zip(kl, mask, strict=False) if m]
    kept_w = [v for v, m in zip(weights, mask, strict=False) if m]
    onsets = len({s for s, m in zip(segments, mask, strict=False) if m and s >= 0})
    return {
        "model_tokens": len(kept_kl),
        "mean_kl": sum(kept_kl) / len(kept_kl) if kept_kl else 0.0,
        "max_kl": max(kept_kl, default=0.0),
        "onsets": onsets,
        "weight_min": min(kept_w, default=1.0),
        "weight_max": max(kept_w, default=1.0),
    }


def display_token(text: str) -> str:
    """A token as shown: newlines, tabs and other control characters made visible."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\u21b5")
        elif ch == "\t":
            out.append("\u21e5")
        elif ch == "\r":
            out.append("\u240d")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def header_parts(trace_row: dict) -> list[str]:
    summary = rollout_summary(trace_row)
    parts = [trace_row["group"]] if trace_row.get("group") else []
    reward = trace_row.get("reward")
    if reward is not None:
        detail = trace_row.get("rewards") or {}
        inner = ", ".join(f"{name} {value:.3g}" for name, value in detail.items() if value is not None)
        parts.append(f"reward {reward:.3g}" + (f" ({inner})" if inner and len(detail) > 1 else ""))
    advantage = trace_row.get("advantage")
    if advantage is not None:
        parts.append(f"advantage {advantage:+.3f}")
    if trace_row.get("has_ground_truth") is False:
        parts.append("no ground truth: plain GRPO weights")
    parts.append(f"{summary['model_tokens']} model tokens")
    if trace_row.get("below_floor"):
        # max-normalized, this row's colours are noise: say so rather than count segments
        parts.append("KL below the noise floor (onset_min_kl): weights 1")
    else:
        parts.append(f"{summary['onsets']} segment{'s' if summary['onsets'] != 1 else ''}")
    parts.append(f"mean KL {summary['mean_kl']:.4g}")
    parts.append(f"weight {summary['weight_min']:.3f}\u2013{summary['weight_max']:.3f}")
    return parts


def header_lines(trace_row: dict) -> tuple[str, str]:
    """(reward and advantage, token statistics) for a two-line header."""
    parts = header_parts(trace_row)
    head = [p for p in parts if p.startswith(("prompt ", "reward", "advantage"))]
    return "  \u00b7  ".join(head) or "(no reward recorded)", "  \u00b7  ".join(p for p in parts if p not in head)


def decode_tokens(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each token's text, in order, such that their concatenation is the decoded completion.

    Tokens are decoded in context (the previous piece included), so leading spaces survive tokenizers that drop them
    when a token is decoded alone; the bytes of a character split over several tokens go to the token that completes
    it (the others show as empty).
    """
    ids = [int(i) for i in ids]

    def decode(part):
        return tokenizer.decode(part, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    pieces, prefix, read = [], 0, 0
    for t in range(len(ids)):
        prefix_text = decode(ids[prefix:read])
        text = decode(ids[prefix : t + 1])
        if (len(text) > len(prefix_text) and not text.endswith("\ufffd")) or t + 1 - read >= 4:
            pieces.append(text[len(prefix_text) :] if text.startswith(prefix_text) else decode(ids[read : t + 1]))
            prefix, read = read, t + 1
        else:
            pieces.append("")
    if read < len(ids):  # an incomplete character at the very end
        pieces[-1] = decode(ids[read:])
    return pieces


def trace_rows(
    trace,
    *,
    pad_token_id: int | None = None,
    completion_mask=None,
    rewards=None,
    reward_details: list[dict] | None = None,
    base_advantages=None,
    prompts: Sequence[Any] | None = None,
    ground_truths: Sequence[Any] | None = None,
    teacher_references: Sequence[tuple[str, Any]] | None = None,
) -> list[dict]:
    """The rollouts of a `CreditTrace` as per-token lists (`trace_row` dicts), padding removed.

    Padding is cut using `completion_mask` (or the trace's own `completion_mask` field when it has one); without it,
    trailing tokens that are masked out and equal `pad_token_id`. `rewards` [B] and `base_advantages` [B] (or [B, T]:
    shown as their mean over model tokens) label the header; without them the trace's `rewards` / `base_advantages`
    fields are used when present, and the advantage is recovered from the per-token advantages as
    sum(A_i w_t) / sum(w_t). `teacher_references` [B] of (kind, text): what each row's teacher was shown (`ground
    truth`, `successful sibling`, `none (no sibling)`), kept as `teacher_reference` / `teacher_reference_kind`.
    """
    completion_mask = completion_mask if completion_mask is not None else getattr(trace, "completion_mask", None)
    rewards = rewards if rewards is not None else getattr(trace, "rewards", None)
    base_advantages = base_advantages if base_advantages is not None else getattr(trace, "base_advantages", None)
    rows = []
    for i in range(trace.completion_ids.size(0)):
        ids = trace.completion_ids[i].tolist()
        mask = trace.mask[i].bool().tolist()
        if completion_mask is not None:
            kept = [j for j, m in enumerate(completion_mask[i].tolist()) if m]
            length = kept[-1] + 1 if kept else 0
        else:
            length = len(ids)
            while length and not mask[length - 1] and pad_token_id is not None and ids[length - 1] == pad_token_id:
                length -= 1
        weights = trace.weights[i].float()
        m = trace.mask[i].float()
        if base_advantages is not None:
            base = base_advantages[i]
            advantage = float((base * m).sum() / m.sum().clamp(min=1)) if base.dim() else float(base)
        else:
            total = (weights * m).sum()
            advantage = float((trace.advantages[i].float() * m).sum() / total) if total > 0 else 0.0
        row = {
            "completion_ids": ids[:length],
            "mask": mask[:length],
            "kl": trace.kl[i, :length].tolist(),
            "entropy": trace.entropy[i, :length].tolist(),
            "signal": trace.signal[i, :length].tolist(),
            "weights": trace.weights[i, :length].tolist(),
            "segment_ids": trace.segment_ids[i, :length].tolist(),
            "advantage": advantage,
            "has_ground_truth": bool(trace.has_ground_truth[i]),
        }
        distilled = getattr(trace, "distilled", None)  # `distillation_weight`: the loss's own advantages
        if distilled is not None:
            row["loss_advantages"] = distilled[i, :length].tolist()
        below_floor = getattr(trace, "below_floor", None)
        if below_floor is not None:
            row["below_floor"] = bool(below_floor[i])
        if rewards is not None:
            value = float(rewards[i])
            row["reward"] = value if math.isfinite(value) else None
        if reward_details is not None:
            row["rewards"] = reward_details[i]
        if prompts is not None:
            row["prompt"] = prompts[i]
        if ground_truths is not None:
            row["ground_truth"] = ground_truths[i]
        if teacher_references is not None:
            row["teacher_reference_kind"], row["teacher_reference"] = teacher_references[i]
        rows.append(row)
    return rows


ROLLOUT_CHOICES = ("mixed", "first")
"""How a credit report picks its rollouts: `mixed` (a passed and a failed rollout of the same prompt side by side),
`first` (the first N, in batch order)."""


def choose_rollouts(rows: Sequence[dict], limit: int, groups: Sequence[Any], choice: str = "mixed") -> list[dict]:
    """Up to `limit` of `rows` (`trace_row` dicts with an `advantage`), each labelled with its group (`group`).

    `groups`: per row, a key its prompt's other rollouts share (the prompt's token ids, its text), so that a group
    is one prompt's rollouts however the batch was shuffled. `mixed`: per group whose rollouts mix outcomes (some
    advantage above 0 and some below: GRPO's advantage is the reward against the group's mean), in order of first
    appearance, its best rollout and then its worst side by side, until `limit`; the rest, if any, are the first rows
    not chosen. With no group mixed, the first `limit` rows, each said to be in a group with no mix. `first`: the
    first `limit` rows. Returned rows are copies; `group` reads e.g. "prompt 2: 3 of 8 above the group's mean, 5
    below" or "prompt 0: no mix, all 8 alike (advantage 0)" (counted over the rows given: a training batch may hold
    part of a group).
    """
    if choice not in ROLLOUT_CHOICES:
        raise ValueError(f"choice must be one of {ROLLOUT_CHOICES}; got {choice!r}.")
    if len(groups) != len(rows):
        raise ValueError(f"{len(groups)} group keys for {len(rows)} rows.")
    members: dict[Any, list[int]] = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    notes, mixed = {}, []
    for g, group in enumerate(members.values()):
        advantages = [rows[i].get("advantage") or 0.0 for i in group]
        above, below = sum(a > 0 for a in advantages), sum(a < 0 for a in advantages)
        if above and below:
            note = f"prompt {g}: {above} of {len(group)} above the group's mean, {below} below"
            mixed.append(group)
        elif above or below:  # a shuffled training batch may hold only part of a group
            side = "above" if above else "below"
            note = f"prompt {g}: no mix here, the {len(group)} in this batch all {side} the group's mean"
        else:
            note = f"prompt {g}: no mix, all {len(group)} alike (advantage 0)"
        for i in group:
            notes[i] = note
    chosen: list[int] = []
    if choice == "mixed":
        for group in mixed:
            if len(chosen) >= limit:
                break
            best = max(group, key=lambda i: rows[i].get("advantage") or 0.0)
            worst = min(group, key=lambda i: rows[i].get("advantage") or 0.0)
            chosen += [best, worst][: limit - len(chosen)]
    chosen += [i for i in range(len(rows)) if i not in chosen][: max(0, limit - len(chosen))]
    return [{**rows[i], "group": notes[i]} for i in chosen]


def prompt_text(prompt: Any) -> str:
    """The last user message of a conversational prompt (or the prompt itself)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else str(content)
    return str(prompt)


def trainer_tokenizer(trainer):
    """The trainer's tokenizer (a processor's own tokenizer for vision-language models), or None."""
    tokenizer = getattr(trainer, "_tokenizer", None) or getattr(trainer, "processing_class", None)
    return getattr(tokenizer, "tokenizer", tokenizer)


def credit_table(rollouts: Sequence[tuple[Sequence[str], dict]], step: int | None = None, text_limit: int = 300):
    """Rows of (step, rollout, text, mean KL, onsets, weight range, reward, advantage) for experiment trackers."""
    columns = ["step", "rollout", "text", "mean_kl", "onsets", "weight_min", "weight_max", "reward", "advantage"]
    data = []
    for index, (tokens, row) in enumerate(rollouts):
        summary = rollout_summary(row)
        text = "".join(tokens)
        data.append(
            [
                step,
                index,
                text if len(text) <= text_limit else text[: text_limit - 1] + "\u2026",
                round(summary["mean_kl"], 6),
                summary["onsets"],
                round(summary["weight_min"], 4),
                round(summary["weight_max"], 4),
                row.get("reward"),
                None if row.get("advantage") is None else round(row["advantage"], 4),
            ]
        )
    return columns, data
