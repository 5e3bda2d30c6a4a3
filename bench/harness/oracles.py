"""Label oracles (bench code only, never in the library) as credit modes registered through the library's extension
point (`gear_trl.credit.modes.register_credit_mode`): credit that no teacher computes, built from a task's labels, to
measure the ceiling of token credit. Registered in the worker process before its trainer is built; the run's
`--credit` is then the registered name (`register`, which `bench.harness.runs.credit_of` calls for a job with an
`oracle`).

Two families:

- Label signals (bench/headroom.py's `oracle-gear`, `oracle-token`, `oracle-strong`; `oracle_signal`): the teacher's
  KL replaced by a signal built from labels, 1 from the first wrong token of a failed rollout on (`from_error`) or at
  that token only (`error_token`), 0 elsewhere, passed through the arm's own built-in mode (GEAR's segments and
  weights, or `token`'s): `credit_mode(mode).compute` on the oracle signal in place of the KL.
- Horizon weightings (bench/horizon.py's `oracle-prefix`, `oracle-two-sided`, `oracle-process`, ...; `WEIGHT_KINDS`):
  `credit_mode(mode).compute` on a zero KL (so GEAR's own weights are 1), then the oracle's token weights, or for the
  process kinds its token advantages, replace GEAR's:

- `prefix_weights` (`oracle-prefix`): in a failed rollout weight 0 before its first wrong token and 1 from it on,
  rescaled to mean 1; passed rollouts unchanged. The most any sign-preserving weighting inside a rollout can do.
- `two_sided_weights` (`oracle-two-sided`): a failed rollout's tokens at 1 - eps before its first wrong token and
  1 + eps from it on, rescaled to mean 1: GEAR's shape, but able to lower the prefix as well as raise the error.
- `process_advantages` + `process_token_advantages` (`oracle-process`): each decision's correctness (its result is
  the reference's: `decision_correct`) as a dense per-decision advantage, normalized per decision over the group as
  GRPO normalizes the outcome. The ceiling of credit assignment in general, not of a weighting.

More, added when `oracle-prefix` and `oracle-process` both fell below GRPO on `chained` (docs/results/horizon.md):
in `chained` the lines after an early error compute right from the wrong carried value, and both oracles blame them.

- `oracle-process-local`: `oracle-process` with each step's own correctness (`step_correct`: right given the lines
  before it), so a consistent line after an error is a right step.
- `oracle-first-error` (`error_span`, then `prefix_weights` over that span): in a failed rollout weight only on its
  first wrong token and the rest of that token's line, 0 on the prefix before and on the lines after, rescaled to
  mean 1. A sign-preserving weighting like `oracle-prefix` that blames the error, not its consequences.
- `-raw` variants of both (`rescale=False`): the same tokens at weight 1, the others 0, not rescaled, so a failed
  rollout's blame is dropped where it is 0 rather than moved onto the tokens it keeps.

And one added when `oracle-prefix` collapsed on `independent` by no longer stopping after its K lines:

- `oracle-prefix-keep-close` (`keep_close=True`): `oracle-prefix` with a failed rollout's end-of-sequence token set
  back to GRPO's weight 1, so that the choice to stop gets GRPO's push (zero net over a group) and the rest of the
  weighting is unchanged. It tests the reading that the mean-1 rescale, by putting a failed rollout's blame on a
  tail that always holds the close, unlearns stopping.

Pure tensor functions first, then the labels on tokens, then the registered modes.
"""

from __future__ import annotations

import torch

WEIGHT_KINDS = ("prefix", "two_sided", "process", "process_local", "first_error")


# ---------------------------------------------------------------------------------------------------------------------
# Pure tensor functions
# ---------------------------------------------------------------------------------------------------------------------


def _mean_one(raw: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """raw [B, T] rescaled so that its mean over each row's model tokens (mask [B, T]) is 1; 0 off the mask."""
    m = mask.float()
    total = (raw * m).sum(1, keepdim=True)
    count = m.sum(1, keepdim=True)
    return torch.where(total > 0, raw * m * count / total.clamp_min(1e-12), m)


def prefix_weights(
    after: torch.Tensor,
    mask: torch.Tensor,
    failed: torch.Tensor,
    rescale: bool = True,
    close: torch.Tensor | None = None,
) -> torch.Tensor:
    """`oracle-prefix` token weights.

    Args:
        after: [B, T] bool, True at the first wrong token and every token after it (all False where the error was
            not located).
        mask: [B, T] bool, the model's tokens.
        failed: [B] bool, failed rollouts (negative advantage).

        rescale: False leaves the marked tokens at 1 (the row's blame dropped off the prefix, not moved onto the
            rest: `-raw` arms).
        close: [B, T] bool or None, each row's end-of-sequence token (`oracle-prefix-keep-close`). Where given, a
            located failed row whose error lies before its close has the close set back to 1 after the rescale, as
            GRPO weights it (the row's mean then a little under 1); a row whose only marked token is its close (it
            stopped short: the close is the error) keeps the oracle's weight there.

    Returns:
        [B, T] float: in failed rollouts with a located error, 0 before the first wrong token and a constant from it
        on, the row's mean over model tokens 1 (1 without `rescale`); every other row 1 on its model tokens; 0 off
        the mask.
    """
    marked = after & mask
    located = failed & marked.any(1)
    weights = _mean_one(marked.float(), mask) if rescale else marked.float()
    weights = torch.where(located[:, None], weights, mask.float())
    if close is not None:
        close = close & mask
        spare = located & (marked & ~close).any(1)
        weights = torch.where(close & spare[:, None], torch.ones_like(weights), weights)
    return weights


def two_sided_weights(after: torch.Tensor, mask: torch.Tensor, failed: torch.Tensor, eps: float) -> torch.Tensor:
    """`oracle-two-sided` token weights: in failed rollouts with a located error, 1 - eps before the first wrong token
    and 1 + eps from it on, then rescaled to mean 1 over the row's model tokens; other rows 1. Shapes as
    `prefix_weights` (after, mask [B, T] bool; failed [B] bool) -> [B, T]. eps in [0, 1]: at 1 this is
    `prefix_weights`."""
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"eps must be in [0, 1]; got {eps}.")
    located = failed & (after & mask).any(1)
    raw = torch.where(after, 1.0 + eps, 1.0 - eps)
    return torch.where(located[:, None], _mean_one(raw, mask), mask.float())


def process_advantages(correct: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Per-decision advantages: each decision's correctness normalized over the rollouts of its group.

    Args:
        correct: [B, K] float, 1.0 where rollout i's decision k is right, 0.0 where wrong, NaN where rollout i has no
            decision k (a problem with fewer decisions, or one whose labels are unknown).
        groups: [B] long, the group (prompt) of each rollout.

    Returns:
        [B, K] float: (c - mean) / std over the group's rollouts that have decision k (the sample std, as GRPO's
        group normalization); 0 where that std is 0 (every rollout of the group alike on k) or NaN (fewer than two
        rollouts have it), and 0 where the rollout has no decision k.
    """
    out = torch.zeros_like(correct)
    for group in groups.unique():
        rows = groups == group
        block = correct[rows]  # [G, K]
        have = ~torch.isnan(block)
        n = have.sum(0)  # [K]
        filled = torch.nan_to_num(block, nan=0.0)
        mean = filled.sum(0) / n.clamp_min(1)
        var = (((filled - mean) * have) ** 2).sum(0) / (n - 1).clamp_min(1)
        std = var.sqrt()
        ok = (n >= 2) & (std > 0)
        adv = torch.where(have & ok, (filled - mean) / std.clamp_min(1e-12), torch.zeros_like(filled))
        out[rows] = adv
    return out


def process_token_advantages(
    decision_of_token: torch.Tensor, decision_adv: torch.Tensor, outcome_adv: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """`oracle-process` token advantages: every token of decision k's line gets that decision's advantage.

    Args:
        decision_of_token: [B, T] long, the decision whose line holds each token, -1 outside every decision's line.
        decision_adv: [B, K] float, from `process_advantages`.
        outcome_adv: [B] float, the rollout's outcome (GRPO) advantage, for tokens outside every line (a chat
            template's think block, the end-of-sequence token: whether to stop is the outcome's business).
        mask: [B, T] bool, the model's tokens.

    Returns:
        [B, T] float, 0 off the mask.
    """
    index = decision_of_token.clamp(min=0, max=max(decision_adv.shape[1] - 1, 0))
    if decision_adv.shape[1]:
        per_token = torch.gather(decision_adv, 1, index)
    else:
        per_token = torch.zeros_like(decision_of_token, dtype=outcome_adv.dtype)
    adv = torch.where(decision_of_token >= 0, per_token, outcome_adv[:, None].expand_as(per_token))
    return adv * mask.float()


# ---------------------------------------------------------------------------------------------------------------------
# Labels on tokens
# ---------------------------------------------------------------------------------------------------------------------


def _is_special(token: str) -> bool:
    return token.startswith("<|") and token.endswith("|>")


def completion_layout(tokens: list[str], mask: list[bool]) -> tuple[str, list[int], list[int]]:
    """The text of the model tokens (special tokens such as `<|im_end|>` left out) and, for the tokens kept, their
    indices and character offsets in it."""
    text, indices, offsets = "", [], []
    for index, (token, m) in enumerate(zip(tokens, mask, strict=True)):
        if not m or _is_special(token):
            continue
        indices.append(index)
        offsets.append(len(text))
        text += token
    return text, indices, offsets


def task_problem(prompt) -> tuple:
    """(the labels module, the problem, each decision's reference value) of the task a prompt states: the horizon
    family (gear_trl/rewards/horizon.py: results) or the item-list family (gear_trl/rewards/item_lists.py: items;
    its labels bound to the prompt's variant, `item_lists.labels`), whose label functions share their names and
    meaning; (None, None, None) where it states neither."""
    from gear_trl.rewards import horizon, item_lists

    problem = horizon.horizon_problem(prompt)
    if problem is not None:
        return horizon, problem, problem.results
    problem = item_lists.item_list_problem(prompt)
    if problem is not None:
        return item_lists.labels(problem.variant), problem, list(problem.items)
    return None, None, None


def horizon_error_site(tokens: list[str], row: dict) -> int | None:
    """The index of a rollout's first wrong token (bench/headroom.py's `error_site` interface: `row` has `prompt` and
    `mask`): the token holding the first character where the text departs from the reference solution; a rollout
    that stops short is wrong at its last model token (its end-of-sequence token, where it chose to stop). None where
    the prompt states no horizon or item-list problem (`task_problem`), the rollout does not depart, or never writes
    the first operand."""
    labels, problem, _ = task_problem(row["prompt"])
    if problem is None:
        return None
    text, indices, offsets = completion_layout(tokens, row["mask"])
    site = labels.first_wrong_char(text, labels.reference_lines(problem))
    if site is None:
        return None
    if site >= len(text):
        model = [k for k, m in enumerate(row["mask"]) if m]
        return model[-1] if model else None
    return indices[max(k for k, offset in enumerate(offsets) if offset <= site)]


def decisions_of_tokens(tokens: list[str], row: dict, local: bool = False) -> tuple[list[int], list[float]]:
    """Per token (len(tokens)), the decision whose line holds it (-1 outside); and per decision of the problem, 1.0
    right or 0.0 wrong: its result is the reference's (`decision_correct`), or with `local` the step is right given
    the lines before it (`step_correct`; an item-list line is right on its own). ([-1] * T, []) where the prompt states
    no horizon or item-list problem."""
    labels, problem, wanted = task_problem(row["prompt"])
    owner = [-1] * len(tokens)
    if problem is None:
        return owner, []
    text, indices, offsets = completion_layout(tokens, row["mask"])
    chars = labels.decision_of_char(text, len(wanted))
    for index, offset in zip(indices, offsets, strict=True):
        if offset < len(chars):
            owner[index] = chars[offset]
    step_correct = getattr(labels, "step_correct", None)  # item lists: a line is right or wrong on its own
    correct = step_correct(text, problem) if local and step_correct else labels.decision_correct(text, wanted)
    return owner, [float(c) for c in correct]


def close_mask(rows: list[dict]) -> torch.Tensor:
    """[B, T] bool, True at each row's end-of-sequence token: its last model token where that is a special token such
    as `<|im_end|>` (a rollout cut at the length limit has none). `rows` as `horizon_error_site`'s, with `tokens`."""
    width = max((len(row["mask"]) for row in rows), default=0)
    close = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        model = [k for k, m in enumerate(row["mask"]) if m]
        if model and _is_special(row["tokens"][model[-1]]):
            close[i, model[-1]] = True
    return close


def error_span(tokens: list[str], row: dict) -> tuple[int, int] | None:
    """[start, end) token indices of a rollout's first wrong token and the rest of the decision line that holds it
    (`oracle-first-error`'s blame): the line's tokens, up to its newline; from the site to the last model token where
    the site is in no decision line (a malformed line, the end-of-sequence token). None where `horizon_error_site`
    finds no site."""
    site = horizon_error_site(tokens, row)
    if site is None:
        return None
    owner, _ = decisions_of_tokens(tokens, row)
    model = [k for k, m in enumerate(row["mask"]) if m]
    if owner[site] < 0:
        return site, model[-1] + 1
    end = site
    while end + 1 < len(tokens) and owner[end + 1] == owner[site]:
        end += 1
    return site, end + 1


# ---------------------------------------------------------------------------------------------------------------------
# Label signals (bench/headroom.py's oracles)
# ---------------------------------------------------------------------------------------------------------------------

SIGNAL_KINDS = ("from_error", "error_token")


def oracle_signal(rows: list[dict], length: int, kind: str, error_site) -> tuple[list[list[float]], int]:
    """Per-token oracle signal from labels, in place of the teacher's KL.

    Each row: `tokens` (the completion's token texts, [T]), `mask` (model tokens, [T] bool), `prompt`, `failed`
    (a failed rollout: with the binary accuracy reward, a negative advantage). `error_site(tokens, row)` gives the
    index of the first wrong token, or None (the rollout matches the reference, or its error cannot be located).

    kind: `from_error`: 1 at model tokens from the first wrong token on, 0 before; `error_token`: 1 at the first wrong
    token only. Rows that did not fail, and failed rows without a located error, are 0 everywhere (weights 1).

    Returns:
        ([B][length] floats, the number of failed rows whose error was located).
    """
    if kind not in SIGNAL_KINDS:
        raise ValueError(f"kind must be 'from_error' or 'error_token'; got {kind!r}.")
    signal, located = [], 0
    for row in rows:
        out = [0.0] * length
        site = error_site(row["tokens"], row) if row["failed"] else None
        if site is not None:
            located += 1
            stop = length if kind == "from_error" else site + 1
            for t in range(site, stop):
                out[t] = 1.0 if row["mask"][t] else 0.0
        signal.append(out)
    return signal, located


def error_site_for(name: str):
    """The label that locates a failed rollout's first wrong token, by task family: `arith`, `tools` (the calculator
    tasks; bench/credit_sites.py) or `horizon` (`horizon_error_site`)."""
    if name in ("horizon", "item_lists"):  # `horizon_error_site` reads either family's prompt (`task_problem`)
        return horizon_error_site
    from bench.credit_sites import arith_error_site, calc_error_site

    return {"arith": arith_error_site, "tools": calc_error_site}[name]


# ---------------------------------------------------------------------------------------------------------------------
# The registered credit modes
# ---------------------------------------------------------------------------------------------------------------------


def rows_of(inputs) -> list[dict]:
    """A batch's rollouts as the labels read them, from a `CreditInputs`: per row its token texts (`tokens`), model
    token mask (`mask`), decoded prompt (`prompt`) and whether it failed (`failed`: a negative GRPO advantage)."""
    from gear_trl.reporting.rows import decode_tokens

    tokenizer = getattr(inputs.tokenizer, "tokenizer", inputs.tokenizer)
    mask = inputs.mask.bool()
    prompts = tokenizer.batch_decode(inputs.prompt_ids, skip_special_tokens=True)
    failed = (inputs.base < 0).tolist()
    return [
        {"tokens": decode_tokens(tokenizer, ids), "mask": m, "prompt": p, "failed": f}
        for ids, m, p, f in zip(inputs.completion_ids.tolist(), mask.tolist(), prompts, failed, strict=True)
    ]


def label_signal_credit(kind: str, mode: str, site: str):
    """The `compute` of a label-signal oracle: `credit_mode(mode).compute` with the oracle signal (`oracle_signal` of
    `kind`, the error located by `error_site_for(site)`) in place of the KL; segments, weights as `mode` makes them."""
    import dataclasses

    from gear_trl.credit.modes import credit_mode

    base = credit_mode(mode)
    error_site = error_site_for(site)

    def compute(inputs):
        signal, _ = oracle_signal(rows_of(inputs), inputs.mask.shape[1], kind, error_site)
        oracle = torch.tensor(signal, dtype=torch.float32, device=inputs.entropy.device)
        return base.compute(dataclasses.replace(inputs, kl=oracle))

    return compute


def horizon_weight_credit(kind: str, mode: str, eps: float = 0.5, rescale: bool = True, keep_close: bool = False):
    """The `compute` of a horizon weighting (`kind` in `WEIGHT_KINDS`): `credit_mode(mode).compute` on a zero KL (so
    GEAR's own weights are 1), then this oracle's weights (or, for the process kinds, advantages) replace GEAR's.
    `keep_close` (kind `prefix` only) passes each row's end-of-sequence token, its last model token where that is a
    special token, to `prefix_weights`."""
    if kind not in WEIGHT_KINDS:
        raise ValueError(f"kind must be one of {WEIGHT_KINDS}; got {kind!r}.")
    if keep_close and kind != "prefix":
        raise ValueError(f"keep_close is an option of kind 'prefix' only; got kind {kind!r}.")
    import dataclasses

    from gear_trl.credit.modes import credit_mode

    base_mode = credit_mode(mode)

    def compute(inputs):
        out = base_mode.compute(dataclasses.replace(inputs, kl=torch.zeros_like(inputs.kl)))
        mask = inputs.mask.bool()
        base = inputs.base
        rows = rows_of(inputs)
        prompts = [row["prompt"] for row in rows]
        if kind in ("process", "process_local"):
            labels = [decisions_of_tokens(row["tokens"], row, local=kind == "process_local") for row in rows]
            width = max((len(c) for _, c in labels), default=0)
            correct = torch.full((len(rows), width), float("nan"))
            for i, (_, c) in enumerate(labels):
                correct[i, : len(c)] = torch.tensor(c)
            group_of = {p: g for g, p in enumerate(dict.fromkeys(prompts))}
            groups = torch.tensor([group_of[p] for p in prompts])
            owner = torch.tensor([o for o, _ in labels], dtype=torch.long)
            advantages = process_token_advantages(
                owner, process_advantages(correct, groups), base.float().cpu(), mask.cpu()
            ).to(out.weights)
            return dataclasses.replace(out, advantages=advantages)
        after = torch.zeros_like(mask)
        failed = (base < 0).cpu()
        for i, row in enumerate(rows):
            if not failed[i]:
                continue
            if kind == "first_error":
                span = error_span(row["tokens"], row)
                if span is not None:
                    after[i, span[0] : span[1]] = True
                continue
            site = horizon_error_site(row["tokens"], row)
            if site is not None:
                after[i, site:] = True
        after &= mask
        close = close_mask(rows).to(mask.device) if keep_close else None
        if kind in ("prefix", "first_error"):  # first_error: `after` marks the error's span only
            weights = prefix_weights(after, mask, failed.to(mask.device), rescale=rescale, close=close)
        else:
            weights = two_sided_weights(after, mask, failed.to(mask.device), eps)
        weights = weights.to(out.weights)
        return dataclasses.replace(out, weights=weights, advantages=base[:, None] * weights)

    return compute


def mode_name(oracle: str, mode: str, site: str | None = None, options: dict | None = None) -> str:
    """The registered name of an oracle on `mode`: lower case words joined by hyphens, one per (oracle, mode, label,
    options), e.g. `oracle-from-error-on-gear-arith` or `oracle-prefix-on-gear-rescale-false`."""
    parts = ["oracle", oracle, "on", mode]
    if oracle in SIGNAL_KINDS and site:
        parts.append(site)
    for key, value in sorted((options or {}).items()):
        parts += [key, str(value)]
    text = "-".join(parts).lower()
    for char in "_+. ":
        text = text.replace(char, "-")
    return "-".join(filter(None, text.split("-")))


def register(oracle: str, mode: str, site: str | None = None, options: dict | None = None) -> str:
    """Register the credit mode of label oracle `oracle` (`SIGNAL_KINDS`: a label signal through `mode`, the error
    located by the label `site`; `WEIGHT_KINDS`: a horizon weighting on `mode`'s zero-KL trace, with `options`) and
    return its name, for `--credit`. The record is `mode`'s (teacher pass, segmenter, onsets, options) with this
    oracle's `compute`; registering the same oracle again replaces it (each worker process registers its own)."""
    import dataclasses

    from gear_trl.credit.modes import credit_mode, register_credit_mode

    if oracle in SIGNAL_KINDS:
        if options:
            raise ValueError(f"the label signal {oracle!r} takes no options; got {options}.")
        if site is None:
            raise ValueError(f"the label signal {oracle!r} needs the task's error site (`error_site`).")
        compute = label_signal_credit(oracle, mode, site)
        summary = f"Label oracle (bench): `{mode}` on the `{oracle}` signal of the `{site}` labels in place of the KL."
    elif oracle in WEIGHT_KINDS:
        compute = horizon_weight_credit(oracle, mode, **(options or {}))
        summary = f"Label oracle (bench): horizon `{oracle}` weighting on `{mode}`'s zero-KL trace."
    else:
        raise ValueError(f"oracle must be one of {SIGNAL_KINDS + WEIGHT_KINDS}; got {oracle!r}.")
    name = mode_name(oracle, mode, site, options)
    record = dataclasses.replace(credit_mode(mode), name=name, compute=compute, summary=summary)
    register_credit_mode(record, replace=True)
    return name
