"""bench/overhead.py's verdicts and tables, computed from a report's results alone (no torch, no model): the
targets, the markdown report and the README's table (`--readme-table`)."""

from __future__ import annotations

from bench.overhead_shapes import NO_SHARING, PSEUDO_CONFIGS, TRAINER_CONFIGS

# ---------------------------------------------------------------------------------------------------------------------
# Targets

# Targets from the issue ("Performance and scale"); checked and reported, never tuned.
MAX_STEP_RATIO = 1.3  # GEAR step time / GRPO step time, CPU shapes
MAX_EXTRA_MEMORY_FRACTION = 0.10  # GEAR's extra peak memory / GRPO's step peak, CPU shapes
MAX_DIVERGENCE_VS_SDPO = 0.2  # GEAR divergence-pass extra memory / SDPO full_logits extra memory, vocab shape
MAX_GIGPO_FRACTION = 0.005  # GiGPO grouping + step advantages / GEAR step time
MAX_LONG_PROMPT_STEP_RATIO = 1.15  # GEAR step time / GRPO step time, long_prompt shape (issue 12)
MAX_PREFIX_SHARING_RATIO = 0.4  # teacher pass with prefix sharing / without, long_prompt shape
MAX_END_TO_END_RATIO = 1.10  # (generation + GEAR step) / (generation + GRPO step), every shape


def teacher_pass_peak_mb(result: dict) -> float | None:
    """What GEAR's teacher pass itself allocates: the largest extra peak of its parts (the backbone pass in the
    generation batch, the LM-head chunks inside `compute_loss`) over the memory in use when each starts.

    The extra peak over the step's start counted GRPO's own memory as GEAR's: the LM-head chunks run after GRPO's
    training forward, whose saved activations (GRPO's, not GEAR's) are then in use. At the long_prompt shape that made
    ~200 MB of activations look like the pass's, which itself allocates a few MB there. Reports made before the parts
    were timed have only the step-start reading, which is then returned.

    Where the LM-head chunks run inside the loss's LM-head forward (gear_trl.trainer.fused_head: no `teacher_lm_head` phase,
    an `lm_head_forward` one), that whole forward's own peak counts too: an upper bound, since it also holds the
    student's logits, which TRL's forward in its place would allocate anyway."""
    local = result.get("phase_local_peak_mb", {})
    if "teacher" in local:
        fused = "teacher_lm_head" not in local and "lm_head_forward" in local
        return max(local["teacher"], local["lm_head_forward"]) if fused else local["teacher"]
    return result.get("extra_peak_mb", {}).get("teacher")


def evaluate_targets(shapes: dict, device: str) -> list[dict]:
    targets = []

    def add(name, shape, value, threshold, holds, description):
        targets.append(
            {
                "target": name,
                "shape": shape,
                "value": value,
                "threshold": threshold,
                "holds": holds,
                "description": description,
            }
        )

    for shape_name, shape in shapes.items():
        res = shape["results"]
        grpo, gear = res.get("grpo", {}), res.get("gear/gear", {})
        if "step_s" in grpo and "step_s" in gear:
            ratio = gear["step_ratio_to_grpo"]
            limit = MAX_LONG_PROMPT_STEP_RATIO if shape_name == "long_prompt" else MAX_STEP_RATIO
            add(
                "step_time",
                shape_name,
                ratio,
                limit,
                ratio <= limit,
                "GEAR (credit gear) median step time / GRPO's (per-round paired ratio: median "
                f"{gear['step_ratio_to_grpo_paired']['median']:.2f}; "
                f"fastest reps: {gear['step_ratio_to_grpo_min']:.2f})",
            )
            grpo_peak = grpo["extra_peak_mb"]["step"]
            over = max(gear["extra_peak_mb"]["step"] - grpo_peak, 0.0)
            fraction = over / grpo_peak if grpo_peak > 0 else float("inf")
            add(
                "extra_peak_memory",
                shape_name,
                fraction,
                MAX_EXTRA_MEMORY_FRACTION,
                fraction <= MAX_EXTRA_MEMORY_FRACTION,
                "(GEAR step's extra peak - GRPO step's extra peak) / GRPO step's extra peak",
            )
            divergence = teacher_pass_peak_mb(gear) or 0.0
            fraction = divergence / grpo_peak if grpo_peak > 0 else float("inf")
            local = gear.get("phase_local_peak_mb", {})
            fused = "teacher_lm_head" not in local and "lm_head_forward" in local
            parts = "its parts" + (", the LM-head chunks as the whole fused LM-head forward," if fused else "")
            add(
                "divergence_pass_memory",
                shape_name,
                fraction,
                MAX_EXTRA_MEMORY_FRACTION,
                fraction <= MAX_EXTRA_MEMORY_FRACTION,
                f"stricter reading: GEAR teacher pass's own extra peak ({parts} over the memory in use when each "
                f"starts: {divergence:.0f} MB; over the step's start: {gear['extra_peak_mb'].get('teacher', 0.0):.0f}"
                " MB) / GRPO step's extra peak",
            )
        if "end_to_end_ratio_to_grpo_paired" in gear:
            ratio = gear["end_to_end_ratio_to_grpo_paired"]["median"]
            gen = res["hf_generate"]
            add(
                "end_to_end_step_time",
                shape_name,
                ratio,
                MAX_END_TO_END_RATIO,
                ratio <= MAX_END_TO_END_RATIO,
                "(real HF generation + GEAR step) / (generation + GRPO step), median of per-round ratios; "
                f"generation {_fmt_s(gen['step_s'])} for {gen.get('mean_generated_tokens', 0):.0f} tokens per "
                "completion",
            )
        if shape_name == "long_prompt" and "teacher_ratio_to_no_prefix_sharing_paired" in gear:
            ratio = gear["teacher_ratio_to_no_prefix_sharing_paired"]["median"]
            full = res[NO_SHARING]["phases_s"]["teacher"]
            add(
                "teacher_prefix_sharing",
                shape_name,
                ratio,
                MAX_PREFIX_SHARING_RATIO,
                ratio <= MAX_PREFIX_SHARING_RATIO,
                "GEAR teacher pass with prefix sharing / without (`teacher_prefix_sharing: false`), median of "
                f"per-round ratios; {_fmt_s(gear['phases_s']['teacher'])} vs {_fmt_s(full)}",
            )
        sdpo = res.get("sdpo/full_logits", {})
        if shape_name != "tiny" and "step_s" in gear and "extra_peak_mb" in sdpo:
            divergence = teacher_pass_peak_mb(gear) or 0.0
            sdpo_peak = sdpo["extra_peak_mb"]["step"]
            fraction = divergence / sdpo_peak if sdpo_peak > 0 else float("inf")
            add(
                "divergence_vs_sdpo_full_logits",
                shape_name,
                fraction,
                MAX_DIVERGENCE_VS_SDPO,
                fraction <= MAX_DIVERGENCE_VS_SDPO,
                "GEAR divergence pass's extra peak / SDPO full_logits step's extra peak",
            )
        gigpo = res.get("gigpo", {})
        if "step_s" in gigpo and "step_s" in gear:
            fraction = gigpo["step_s"]["median"] / gear["step_s"]["median"]
            add(
                "gigpo_fraction",
                shape_name,
                fraction,
                MAX_GIGPO_FRACTION,
                fraction < MAX_GIGPO_FRACTION,
                "gigpo_advantages on 64 rollouts x 10 steps / GEAR step time",
            )
    return targets


# ---------------------------------------------------------------------------------------------------------------------
# Report


def _fmt_s(stats: dict | None) -> str:
    if not stats:
        return "-"
    median = stats["median"]
    unit, scale = ("ms", 1e3) if median < 1 else ("s", 1.0)
    return f"{median * scale:.3g} {unit}"


def _fmt_mb(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.2f} GB" if abs(value) >= 1024 else f"{value:.0f} MB"


def _fmt_cpu(result: dict) -> str:
    cpu = result.get("cpu")
    if not cpu:
        return "-"
    text = f"{_fmt_s(cpu['user_s'])} + {_fmt_s(cpu['system_s'])}"
    ratio = result.get("user_cpu_ratio_to_grpo")
    return text if ratio is None else f"{text} ({ratio:.2f})"


def _fmt_lengths(lengths) -> str:
    if not lengths:
        return "?"
    return f"{lengths[0]}" if lengths[0] == lengths[-1] else f"{lengths[0]}-{lengths[-1]}"


def shape_table(shape: dict) -> list[str]:
    res = shape["results"]
    s = shape["shape"]
    title = (
        f"**{s['name']}** ({s['model']}, vocab {shape['model']['vocab_size']:,}; B={s['batch']} completions, "
        f"T={s['length']} tokens; prompts of {_fmt_lengths(shape.get('prompt_tokens'))} tokens; median of "
        f"{s['reps']} interleaved reps)"
    )
    header = (
        "| configuration | step (IQR) | x GRPO | x GRPO, fastest reps | rewards | teacher pass | segments+weights "
        "| loss fwd+bwd | LM-head fwd | CPU user + system (user x GRPO) | step extra peak | teacher-pass extra peak |"
    )
    lines = [title, "", header, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for config in TRAINER_CONFIGS:
        name = _as_measured(config, res)
        r = res.get(name)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {name} | {r['error']} | | | | | | | | | | |")
            continue
        ph = r["phases_s"]
        seg = None
        if "segments" in ph or "weights" in ph:
            seg = {"median": ph.get("segments", {}).get("median", 0) + ph.get("weights", {}).get("median", 0)}
        teacher = _fmt_s(ph.get("teacher"))
        inside = r.get("phase_inside", {}).get("teacher", [])
        if "loss" in inside:
            teacher += " (partly in loss)" if "prepare" in inside else " (in loss)"
        step = r["step_s"]
        iqr = f"{_fmt_s(step)} ({_fmt_s({'median': step['iqr']})})"
        lines.append(
            f"| {name} | {iqr} | {r.get('step_ratio_to_grpo', float('nan')):.2f} "
            f"| {r.get('step_ratio_to_grpo_min', float('nan')):.2f} | {_fmt_s(ph.get('rewards'))} "
            f"| {teacher} | {_fmt_s(seg)} | {_fmt_s(ph.get('loss'))} | {_fmt_s(ph.get('lm_head_forward'))} "
            f"| {_fmt_cpu(r)} | {_fmt_mb(r['extra_peak_mb'].get('step'))} | {_fmt_mb(teacher_pass_peak_mb(r))} |"
        )
    for name in PSEUDO_CONFIGS:
        r = res.get(name)
        if r and "step_s" in r:
            note = ""
            if name == "gigpo":
                note = "gigpo_advantages, 64 rollouts x 10 steps"
            if name == "hf_generate":
                note = f"real HF generate, mean {r.get('mean_generated_tokens', 0):.0f} tokens"
            lines.append(f"| {name} ({note}) | {_fmt_s(r['step_s'])} | | | | | | | | | | |")
    return lines


def markdown_report(report: dict) -> str:
    meta = report["meta"]
    setup = (
        f"`{meta.get('command', 'python bench/overhead.py')} {' '.join(meta['argv'])}` on {meta['machine']}; "
        f"torch {meta['torch']}, "
        f"transformers {meta['transformers']}, trl {meta['trl']}; num_iterations={meta['num_iterations']}, "
        f"divergence_chunk_size={meta['divergence_chunk_size']}, SDPO top-k={meta['sdpo_topk']}. "
        "Same rows and the same fixed completions (no EOS) through every trainer, configurations interleaved "
        "round-robin; generation is excluded. Memory: extra peak over the step's start "
        f"({meta['memory_method']})."
    )
    columns = (
        "Columns: step = prepare (`_generate_and_score_completions`, SDPO `_prepare_training_batch`) + loss "
        "(`compute_loss` + `backward`), median (IQR); x GRPO: ratio of medians, and of the fastest repetitions "
        "(other processes only add time, so those are the least disturbed); teacher pass = GEAR's added backbone "
        "passes (and its LM-head chunks where they run as a pass of their own), "
        'SDPO\'s no-grad teacher forward, "(in loss)" when it runs inside `compute_loss` (then the loss column '
        "includes it, or that part of it); step extra peaks are over the step's start; the teacher pass's is what "
        "it allocates itself, the largest peak of its parts over the memory in use when each starts (inside "
        "`compute_loss` that memory holds GRPO's own forward activations); LM-head fwd = the forward of the loss's "
        "fused LM head (TRL's `ChunkedLogProbFunction`, or GEAR's `gear_trl.trainer.fused_head` computing TRL's outputs and "
        "the divergence from the same student logits), inside the loss column; CPU = this thread's user and system "
        "(kernel: mostly zeroing the pages of freshly allocated tiles) CPU seconds per step, and the ratio of median "
        "user CPU to GRPO's."
    )
    title = f"# GEAR overhead vs GRPO and SDPO ({meta['device']})"
    lines = [title, "", setup, "", f"gear_trl: {_source_line(meta)}.", "", columns, ""]
    for shape in report["shapes"].values():
        lines += shape_table(shape) + [""]
    lines += ["| target | shape | value | threshold | holds |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        lines.append(
            f"| {t['description']} | {t['shape']} | {t['value']:.3g} | {t['threshold']:g} "
            f"| {'yes' if t['holds'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def _source_line(meta: dict) -> str:
    source = meta.get("gear_trl", {})
    if source.get("label"):
        return source["label"]
    changes = source.get("uncommitted_changes")
    dirty = f" plus uncommitted changes ({', '.join(changes)})" if changes else ""
    return f"the repository at {meta.get('commit')}{dirty}"


def print_report(report: dict, log):
    log("")
    log(markdown_report(report))


def readme_table(report: dict) -> str:
    """The README's performance table and targets, from a report (`--readme-table PATH`)."""
    shapes = report["shapes"]

    def cell(shape: dict, key: str) -> str:
        res, s = shape["results"], shape["shape"]
        grpo, gear, full = res.get("grpo", {}), res.get("gear/gear", {}), res.get(NO_SHARING, {})
        gen, sdpo, gigpo = res.get("hf_generate", {}), res.get("sdpo/full_logits", {}), res.get("gigpo", {})
        if key == "shape":
            return (
                f"{s['model']}, V={shape['model']['vocab_size']:,}, prompt {_fmt_lengths(shape.get('prompt_tokens'))}"
                f" + completion {s['length']} tokens, {s['batch']} completions ({s['num_generations']} per prompt)"
            )
        if key == "grpo":
            return _fmt_s(grpo.get("step_s"))
        if key == "gear":
            if "step_s" not in gear:
                return "-"
            paired = gear["step_ratio_to_grpo_paired"]["median"]
            return f"{_fmt_s(gear['step_s'])}, **{gear['step_ratio_to_grpo']:.2f}x** (paired {paired:.2f}x)"
        if key == "cpu":
            if "user_cpu_ratio_to_grpo" not in gear:
                return "-"
            return (
                f"{_fmt_s(gear['cpu']['user_s'])} + {_fmt_s(gear['cpu']['system_s'])} vs {_fmt_s(grpo['cpu']['user_s'])}"
                f" + {_fmt_s(grpo['cpu']['system_s'])}: user **{gear['user_cpu_ratio_to_grpo']:.2f}x**"
            )
        if key == "lm_head":
            phases = (grpo.get("phases_s", {}), gear.get("phases_s", {}))
            if any("lm_head_forward" not in p for p in phases):
                return "-"
            return f"{_fmt_s(phases[0]['lm_head_forward'])} / {_fmt_s(phases[1]['lm_head_forward'])}"
        if key == "teacher":
            if "teacher" not in gear.get("phases_s", {}):
                return "-"
            text = _fmt_s(gear["phases_s"]["teacher"])
            if "teacher_ratio_to_no_prefix_sharing_paired" in gear:
                ratio = gear["teacher_ratio_to_no_prefix_sharing_paired"]["median"]
                text += f"; without sharing {_fmt_s(full['phases_s']['teacher'])} (**{ratio:.2f}x**)"
            return text
        if key == "generation":
            if "step_s" not in gen:
                return "-"
            ratio = gear.get("end_to_end_ratio_to_grpo_paired", {}).get("median")
            text = f"{_fmt_s(gen['step_s'])} ({gen.get('mean_generated_tokens', 0):.0f} tokens)"
            return text + (f"; GEAR **{ratio:.3f}x** GRPO" if ratio else "")
        if key == "memory":
            if "extra_peak_mb" not in gear:
                return "-"
            return (
                f"{_fmt_mb(grpo['extra_peak_mb']['step'])} / {_fmt_mb(gear['extra_peak_mb']['step'])} / "
                f"{_fmt_mb(teacher_pass_peak_mb(gear))}"
            )
        if key == "sdpo":
            if "error" in sdpo:  # a configuration the harness could not run, e.g. "out of memory: CUDA out of ..."
                return sdpo["error"].split(":")[0]
            if "step_s" not in sdpo:
                return "-"
            return f"{_fmt_s(sdpo['step_s'])}, {_fmt_mb(sdpo['extra_peak_mb']['step'])}"
        if key == "gigpo":
            if "step_s" not in gigpo or "step_s" not in gear:
                return "-"
            return f"{_fmt_s(gigpo['step_s'])} ({gigpo['step_s']['median'] / gear['step_s']['median']:.2%} of a step)"
        raise KeyError(key)

    rows = [
        ("shape", "| shape |"),
        ("grpo", "| GRPO step |"),
        ("gear", "| GEAR step (`credit: gear`), x GRPO |"),
        ("cpu", "| CPU seconds per step, user + system (kernel: page zeroing), GEAR vs GRPO |"),
        ("lm_head", "| the loss's LM-head forward: GRPO (TRL's) / GEAR (TRL's outputs + the divergence) |"),
        (
            "teacher",
            (
                "| GEAR teacher pass (teacher backbone, and the LM-head chunks where they are a pass of their own), "
                "x without prefix sharing |"
            ),
        ),
        ("generation", "| real HF generation of the same lengths; (generation + step) x GRPO's |"),
        ("memory", "| extra peak memory: GRPO step / GEAR step / GEAR teacher pass |"),
        ("sdpo", "| SDPO `full_logits` step, extra peak |"),
        ("gigpo", "| GiGPO grouping (64 rollouts x 10 steps) |"),
    ]
    names = list(shapes)
    lines = ["| |" + "".join(f" {n} |" for n in names), "|---|" + "---|" * len(names)]
    lines += [label + "".join(f" {cell(shapes[n], key)} |" for n in names) for key, label in rows]
    lines += ["", "| target | shape | value | threshold | holds |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        lines.append(
            f"| `{t['target']}` | {t['shape']} | {t['value']:.3g} | {t['threshold']:g} | "
            f"{'yes' if t['holds'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def _as_measured(config: str, results: dict) -> str:
    """The key a report measured `config` under: a report written before the credit modes took hyphens only keeps
    the earlier spelling (`gear/gear_no_entropy`), which its table shows as it was measured."""
    if config in results:
        return config
    from gear_trl.credit.modes import RENAMED

    earlier = {f"gear/{old}": f"gear/{new}" for old, new in RENAMED.items()}
    return next((old for old, new in earlier.items() if new == config and old in results), config)
