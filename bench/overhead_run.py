"""How bench/overhead.py runs its configurations: the trainers on a shape's model and rows (generation fixed),
their steps timed round-robin beside GiGPO's grouping and real generation, and the profile of one step."""

from __future__ import annotations

import copy
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict

from bench.overhead_measure import CUDAMonitor, HostMonitor, StepRecorder, _instrument, _instrument_gear_module
from bench.overhead_shapes import (
    NO_SHARING,
    REPO_ROOT,
    TINY_MODEL,
    TRAINER_CONFIGS,
    Shape,
    build_model,
    build_rows,
    draw_completions,
)

# ---------------------------------------------------------------------------------------------------------------------
# Trainers


def token_parity(completion_ids, **kwargs):
    """A cheap reward that varies between completions, so advantages (and SDPO/GEAR weights) are not all zero."""
    return [sum(i % 2 for i in ids) / max(len(ids), 1) for ids in completion_ids]


def make_trainer(name: str, model, tokenizer, dataset, shape: Shape, opts, output_dir: str):
    from trl import GRPOConfig, GRPOTrainer
    from trl.experimental.sdpo import SDPOConfig, SDPOTrainer

    from gear_trl import GEARConfig, GEARTrainer
    from gear_trl.rewards import get_reward_funcs

    cuda = opts.device == "cuda"
    common = {
        "output_dir": output_dir,
        "per_device_train_batch_size": shape.batch,
        "num_generations": shape.num_generations,
        "max_completion_length": shape.length,
        "gradient_accumulation_steps": 1,
        "num_iterations": opts.num_iterations,
        "beta": 0.0,
        "temperature": 1.0,
        "learning_rate": 1e-6,
        "use_cpu": not cuda,
        "bf16": cuda,
        "gradient_checkpointing": cuda,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "seed": opts.seed,
    }
    reward_funcs = [*get_reward_funcs(["accuracy", "format"]), token_parity]
    if not name.startswith("sdpo/"):
        # GRPO and GEAR patch the model's forward (TRL's fused LM head; SDPO does not). Start from the model's own
        # forward so the patches do not nest; they are identical (same temperature), so the last one serves all.
        model.__dict__.pop("forward", None)
    if name == "grpo":
        kind, cls, args = "grpo", GRPOTrainer, GRPOConfig(**common)
    elif name.startswith("gear/"):
        credit, _, variant = name.split("/", 1)[1].partition(":")
        extra = {"teacher_prefix_sharing": False} if variant == "no_prefix_sharing" else {}
        args = GEARConfig(**common, credit=credit, divergence_chunk_size=opts.divergence_chunk_size, **extra)
        kind, cls = "gear", GEARTrainer
    elif name.startswith("sdpo/"):
        mode = name.split("/", 1)[1]
        args = SDPOConfig(
            **common,
            distillation_mode=mode,
            distillation_topk=opts.sdpo_topk if mode == "topk_logits" else None,
            distillation_alpha=1.0,  # reverse KL, as GEAR's divergence
            teacher_model_kind="live",  # GEAR's default teacher: the current policy
            use_successful_as_teacher=False,
            include_environment_feedback=True,  # the ground truth, via the rows' `privileged_context`
        )
        kind, cls = "sdpo", SDPOTrainer
    else:
        raise ValueError(name)
    trainer = cls(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset, processing_class=tokenizer)
    # Set by Trainer.train(); the loss normalizers read it.
    trainer.current_gradient_accumulation_steps = 1
    _instrument(trainer, kind)
    return trainer, kind


def fix_generation(trainer, kind: str, completions: dict):
    """Generation returns `completions["ids"][i]` for row i: same batch for every trainer, no EOS, length T."""

    if kind == "sdpo":

        def generate(prompt_ids):
            return prompt_ids, [list(c) for c in completions["ids"][: len(prompt_ids)]]

        original = "_generate"
    else:

        def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            return [list(c) for c in completions["ids"][: len(prompt_ids)]], None

        original = "_generate_single_turn"
    setattr(trainer, original, generate)


# ---------------------------------------------------------------------------------------------------------------------
# GiGPO batch


def gigpo_batch(num_prompts=8, group_size=8, num_steps=10, seed=0):
    """64 rollouts x 10 steps: anchors are environment states (a few hundred characters of JSON) that rollouts of the
    same prompt often share at the same step, as in tool-use tasks."""
    import torch

    rng = random.Random(seed)
    anchors = []
    for prompt in range(num_prompts):
        for _ in range(group_size):
            rollout = []
            for step in range(num_steps):
                variant = rng.randrange(3)  # three reachable states per step: groups of ~2-3 rollouts each
                files = {f"file_{k}.txt": f"content {prompt}-{step}-{(variant + k) % 5} " * 3 for k in range(6)}
                rollout.append(json.dumps({"cwd": f"/home/user/p{prompt}/s{step}", "files": files}, sort_keys=True))
            anchors.append(rollout)
    rewards = torch.tensor([rng.random() for _ in anchors])
    group_ids = torch.arange(len(anchors)) // group_size
    return rewards, group_ids, anchors


def time_gigpo(batch, inner: int = 5) -> float:
    from gear_trl.credit import gigpo_advantages

    rewards, group_ids, anchors = batch
    start = time.perf_counter()
    for _ in range(inner):
        gigpo_advantages(rewards, group_ids, anchors)
    return (time.perf_counter() - start) / inner


# ---------------------------------------------------------------------------------------------------------------------
# The benchmark


def _stats(values: list[float]) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    if len(values) == 1:
        q1 = q3 = values[0]
    else:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return {
        "median": statistics.median(values),
        "min": ordered[0],
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "n": len(values),
        "samples": list(values),  # in the order of the repetitions
    }


def _release_memory(device: str):
    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def run_step(trainer, kind: str, rows, recorder: StepRecorder, device: str, seed: int):
    import torch

    trainer.model.train()
    inputs = copy.deepcopy(rows)
    torch.manual_seed(seed)
    with recorder.step():
        with recorder.phase("prepare"):
            if kind == "sdpo":
                batch = trainer._prepare_training_batch(inputs)
            else:
                batch = trainer._generate_and_score_completions(inputs)
        with recorder.phase("loss"):
            loss = trainer.compute_loss(trainer.model, batch)
            loss.backward()
    loss_value = float(loss.detach())
    trainer.model.zero_grad(set_to_none=True)
    del batch, loss
    _release_memory(device)
    return loss_value


def benchmark_shape(shape: Shape, opts, monitor, log) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    device = opts.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    recorder = StepRecorder(monitor, sync)
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    model = build_model(shape, device)
    if device == "cuda":
        model.config.use_cache = False
    rows = build_rows(shape, tokenizer)
    dataset = Dataset.from_list(rows)
    prompt_tokens = sorted(
        len(
            tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        for row in rows[:: shape.num_generations]
    )
    vocab = model.config.vocab_size
    completions = {"ids": draw_completions(shape, vocab, tokenizer, shape.warmup_length, opts.seed)}
    wanted = [c for c in opts.configs if shape.configs is None or c in shape.configs]
    configs = [c for c in wanted if c in TRAINER_CONFIGS]
    pseudo = [c for c in wanted if c == "gigpo" or (c == "hf_generate" and shape.hf_generate)]

    log(
        f"\n== shape {shape.name}: model {shape.model} (vocab {vocab}, hidden {model.config.hidden_size}, "
        f"{model.config.num_hidden_layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params), "
        f"B={shape.batch} completions ({shape.num_generations} per prompt), T={shape.length}, reps={shape.reps}"
    )
    _instrument_gear_module()
    trainers = {}
    tmp = tempfile.mkdtemp(prefix="gear-bench-")
    for name in configs:
        trainer, kind = make_trainer(
            name, model, tokenizer, dataset, shape, opts, os.path.join(tmp, name.replace("/", "-"))
        )
        fix_generation(trainer, kind, completions)
        trainers[name] = (trainer, kind)
    if device == "cuda":
        # Trainer.train() turns gradient checkpointing on; without it a 4B model's activations at B x 4096 tokens
        # would not fit. GEAR's and TRL's no-grad passes switch it off themselves.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    gigpo_data = gigpo_batch()
    generate_prompt_ids = None
    if "hf_generate" in pseudo and "grpo" in trainers:
        grpo = trainers["grpo"][0]
        generate_prompt_ids = grpo._tokenize_prompts([row["prompt"] for row in rows])[0]
        # Real generation of the timed completions' length (EOS is blocked until then), for end-to-end ratios. The
        # trainers' own steps never call it (their generation is fixed), so only this timing sees the setting.
        grpo.generation_config.min_new_tokens = shape.length
        grpo.generation_kwargs["min_new_tokens"] = shape.length

    samples = {name: [] for name in configs + pseudo}
    gen_lengths = []
    errors = {}

    def one_round(rep: int, record: bool):
        # Rotate the order every round, so no configuration always runs right after the same neighbour.
        start = rep % len(configs) if configs else 0
        for name in configs[start:] + configs[:start]:
            if name in errors:
                continue
            trainer, kind = trainers[name]
            try:
                loss = run_step(trainer, kind, rows, recorder, device, seed=opts.seed + rep)
            except torch.OutOfMemoryError as err:  # e.g. SDPO full_logits at 4B x 4096 tokens
                errors[name] = f"out of memory: {str(err).splitlines()[0]}"
                log(f"  {name}: {errors[name]}")
                _release_memory(device)
                continue
            if record:
                samples[name].append(
                    {
                        "times": dict(recorder.times),
                        "cpu": dict(recorder.cpu),
                        "extra": dict(recorder.extra),
                        "local": dict(recorder.local),
                        "loss": loss,
                        "inside": {p: sorted(v) for p, v in recorder.inside.items()},
                    }
                )
        if "gigpo" in pseudo:
            # Timed alone: no memory window (none is reported for it), so the sampler is idle meanwhile.
            seconds = time_gigpo(gigpo_data)
            if record:
                samples["gigpo"].append({"times": {"step": seconds}, "extra": {}, "local": {}})
        if "hf_generate" in pseudo and generate_prompt_ids is not None:
            from trl import GRPOTrainer

            grpo = trainers["grpo"][0]
            grpo.model.eval()
            torch.manual_seed(opts.seed + rep)
            with recorder.step():
                ids, _ = GRPOTrainer._generate_single_turn(grpo, generate_prompt_ids, None, {}, shape.num_generations)
            if record:
                gen_lengths.extend(len(c) for c in ids)
                samples["hf_generate"].append(
                    {"times": {"step": recorder.times["step"]}, "extra": {"step": recorder.extra["step"]}, "local": {}}
                )

    started = time.perf_counter()
    # Warm-up on short completions: first-call costs (lazy imports, allocator growth), not the timings.
    for rep in range(opts.warmup):
        one_round(rep=rep, record=False)
    log(f"  warm-up done in {time.perf_counter() - started:.1f}s")
    completions["ids"] = draw_completions(shape, vocab, tokenizer, shape.length, opts.seed)
    for rep in range(shape.reps):
        t0 = time.perf_counter()
        one_round(rep, record=True)
        steps = ", ".join(f"{n} {samples[n][-1]['times']['step']:.2f}s" for n in configs if samples[n])
        log(f"  rep {rep + 1}/{shape.reps} ({time.perf_counter() - t0:.0f}s): {steps}")

    results = {}
    for name in configs + pseudo:
        if name in errors:
            results[name] = {"error": errors[name]}
            continue
        runs = samples[name]
        phases = sorted({p for run in runs for p in run["times"]} - {"step"})
        results[name] = {
            "step_s": _stats([run["times"]["step"] for run in runs]),
            "phases_s": {p: _stats([run["times"].get(p, 0.0) for run in runs]) for p in phases},
            "extra_peak_mb": {
                p: statistics.median(run["extra"].get(p, 0) / 2**20 for run in runs)
                for p in sorted({p for run in runs for p in run["extra"]})
            },
            "phase_local_peak_mb": {
                p: statistics.median(run["local"].get(p, 0) / 2**20 for run in runs)
                for p in sorted({p for run in runs for p in run["local"]})
            },
        }
        if name in TRAINER_CONFIGS:
            results[name]["cpu"] = {
                "user_s": _stats([run["cpu"]["user_s"] for run in runs]),
                "system_s": _stats([run["cpu"]["system_s"] for run in runs]),
                "minor_faults": statistics.median(run["cpu"]["minor_faults"] for run in runs),
            }
            results[name]["loss"] = runs[-1]["loss"]
            results[name]["phase_inside"] = runs[-1]["inside"]
            if opts.num_iterations > 1:
                amortized = [run["times"]["prepare"] / opts.num_iterations + run["times"]["loss"] for run in runs]
                results[name]["amortized_step_s"] = _stats(amortized)
    if gen_lengths:
        results["hf_generate"]["mean_generated_tokens"] = sum(gen_lengths) / len(gen_lengths)
    generation = results.get("hf_generate", {}).get("step_s")
    grpo = results.get("grpo", {})
    if "step_s" in grpo:
        for name, res in results.items():
            if "step_s" in res and name in TRAINER_CONFIGS:
                res["step_ratio_to_grpo"] = res["step_s"]["median"] / grpo["step_s"]["median"]
                # Interference from other processes only adds time, so the fastest repetitions are the least disturbed.
                res["step_ratio_to_grpo_min"] = res["step_s"]["min"] / grpo["step_s"]["min"]
                # Per round, against GRPO's step of the same round: less sensitive to load that drifts between rounds.
                paired = [a / b for a, b in zip(res["step_s"]["samples"], grpo["step_s"]["samples"])]
                res["step_ratio_to_grpo_paired"] = _stats(paired)
                # What the step computes, without the kernel's page-zeroing (see StepRecorder).
                res["user_cpu_ratio_to_grpo"] = res["cpu"]["user_s"]["median"] / grpo["cpu"]["user_s"]["median"]
                res["phase_ratio_to_grpo"] = {
                    p: res["phases_s"][p]["median"] / grpo["phases_s"][p]["median"]
                    for p in ("prepare", "rewards", "loss")
                    if p in res["phases_s"] and grpo["phases_s"].get(p, {}).get("median")
                }
                grpo_peak = grpo["extra_peak_mb"]["step"]
                res["extra_peak_over_grpo_mb"] = res["extra_peak_mb"]["step"] - grpo_peak
                if generation and name != "grpo":
                    # Generation (same prompts, same lengths) + step, over generation + GRPO's step, per round.
                    gen = generation["samples"]
                    res["end_to_end_ratio_to_grpo_paired"] = _stats(
                        [
                            (g + a) / (g + b)
                            for g, a, b in zip(gen, res["step_s"]["samples"], grpo["step_s"]["samples"], strict=True)
                        ]
                    )
    shared, full = results.get("gear/gear", {}), results.get(NO_SHARING, {})
    if "teacher" in shared.get("phases_s", {}) and "teacher" in full.get("phases_s", {}):
        a, b = shared["phases_s"]["teacher"], full["phases_s"]["teacher"]
        shared["teacher_ratio_to_no_prefix_sharing"] = a["median"] / b["median"]
        shared["teacher_ratio_to_no_prefix_sharing_paired"] = _stats(
            [x / y for x, y in zip(a["samples"], b["samples"], strict=True)]
        )
    n_params = sum(p.numel() for p in model.parameters())
    trainers.clear()
    del model
    _release_memory(device)
    return {
        "shape": asdict(shape),
        "model": {"vocab_size": vocab, "parameters": n_params},
        "prompt_tokens": prompt_tokens,
        "wall_s": time.perf_counter() - started,
        "results": results,
    }


# ---------------------------------------------------------------------------------------------------------------------
# Profile (NOTES.md): where a GEAR step's time goes


def profile_shape(shape: Shape, opts, log) -> str:
    import cProfile
    import io
    import pstats

    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    model = build_model(shape, opts.device)
    rows = build_rows(shape, tokenizer)
    monitor = CUDAMonitor() if opts.device == "cuda" else HostMonitor()
    recorder = StepRecorder(monitor, torch.cuda.synchronize if opts.device == "cuda" else (lambda: None))
    _instrument_gear_module()
    out = []
    for name in opts.configs:
        if name not in TRAINER_CONFIGS or (shape.configs is not None and name not in shape.configs):
            continue
        trainer, kind = make_trainer(name, model, tokenizer, Dataset.from_list(rows), shape, opts, tempfile.mkdtemp())
        completions = {"ids": draw_completions(shape, model.config.vocab_size, tokenizer, shape.warmup_length, 0)}
        fix_generation(trainer, kind, completions)
        run_step(trainer, kind, rows, recorder, opts.device, seed=0)  # warm-up
        completions["ids"] = draw_completions(shape, model.config.vocab_size, tokenizer, shape.length, 0)
        run_step(trainer, kind, rows, recorder, opts.device, seed=0)
        phases = ", ".join(f"{p} {t:.3f}s" for p, t in sorted(recorder.times.items(), key=lambda kv: -kv[1]))
        out.append(f"## {name} at shape {shape.name} (B={shape.batch}, T={shape.length})\n\nphases: {phases}\n")

        profiler = cProfile.Profile()
        profiler.enable()
        run_step(trainer, kind, rows, recorder, opts.device, seed=0)
        profiler.disable()
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(30)
        out.append("### cProfile, top 30 by own time\n\n```\n" + _trim_pstats(stream.getvalue()) + "```\n")

        activities = [torch.profiler.ProfilerActivity.CPU]
        if opts.device == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            run_step(trainer, kind, rows, recorder, opts.device, seed=0)
        sort = "self_cuda_time_total" if opts.device == "cuda" else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=sort, row_limit=25, max_name_column_width=60)
        out.append("### torch.profiler, top 25 ops by self time\n\n```\n" + table + "\n```\n")
        log(out[-3])
        del trainer
        _release_memory(opts.device)
    monitor.shutdown()
    return "\n".join(out)


def _trim_pstats(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return (
        "\n".join(line.replace(str(REPO_ROOT) + "/", "").replace(sys.prefix, "<py>") for line in lines[start:]) + "\n"
    )
