"""Does TRL's SDPO teacher know the answer on the horizon task? A probe of the warm start, no training.

The credit-methods study's `sdpo-trl` arms collapse on `independent-k8` (training reward 0 within a few steps). SDPO's
loss at its defaults is distillation alone, toward the policy shown SDPO's reprompt (TRL's `reprompt_template`,
`solution_template`, `feedback_template`). The tiny warm start learned GEAR's teacher prompt in its SFT data
(data/scripts/make_warm_start.py), not SDPO's, so SDPO's teacher may not use what its prompt shows. This probe decodes
the warm start greedily on held-out problems under four prompts and scores each with the task's reward, through
the project's evaluation loop (`gear_trl.evaluation.loops.evaluate`):

- `student`: the plain prompt (what the policy sees);
- `gear-solution`: GEAR's teacher prompt with the reference solution (`teacher_reference: solution`, the default
  solution template), the teacher of the study's GEAR and GRPO + distillation arms;
- `sdpo-demonstration`: SDPO's reprompt with the reference completion as its "successful previous attempt" (what
  `sdpo-trl`'s teacher sees when a sibling succeeded, with a right demonstration);
- `sdpo-feedback`: SDPO's reprompt with the reference solution as environment feedback and no demonstration
  (`sdpo-trl-solution`'s teacher in a group without a success).

TRL's templates are read from `SDPOConfig`'s defaults at run time, not copied.

    python -m bench.sdpo_teacher                       # 200 held-out problems, independent K = 8
    python -m bench.sdpo_teacher --cell chained-k4     # sdpo_teacher_chained-k4.json
"""

from __future__ import annotations

import argparse
import json
import time

from bench.harness import REPO_ROOT, reports, results_dir

MODEL = "data/tiny-qwen3-horizon-independent"
DATA = "data/horizon/independent/k8/test.jsonl"
CELLS = {
    "independent-k8": (MODEL, DATA, 8),
    "independent-k4": (MODEL, "data/horizon/independent/k4/test.jsonl", 4),
    "chained-k4": ("data/tiny-qwen3-horizon-chained", "data/horizon/chained/k4/test.jsonl", 4),
}
"""The credit-methods study's horizon cells: warm start, held-out split, K."""


def sdpo_templates() -> dict[str, str]:
    """TRL's SDPO reprompt templates, as its config ships them."""
    import dataclasses

    from trl.experimental.sdpo import SDPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(SDPOConfig)}
    return {k: defaults[k] for k in ("reprompt_template", "solution_template", "feedback_template")}


def prompts_for(row: dict, templates: dict[str, str]) -> dict[str, list[dict]]:
    """The four prompts of one problem, conversational, as the trainers build them."""
    from gear_trl.data.math_tasks import GENERIC
    from gear_trl.teacher.prompts import teacher_prompt
    from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE

    student = GENERIC(row)["prompt"]  # the prompt the trainer builds (`dataset_format: generic`), one user turn
    question = student[-1]["content"]  # what SDPO's reprompt reads of it (its last user message's text)
    solution = templates["solution_template"].format(successful_previous_attempt=row["reference_solution"])
    feedback = templates["feedback_template"].format(feedback_raw=row["reference_solution"])
    return {
        "student": student,
        "gear-solution": teacher_prompt(student, row["ground_truth"], DEFAULT_MATH_SOLUTION_TEMPLATE,
                                        row["reference_solution"]),
        "sdpo-demonstration": [{"role": "user", "content": templates["reprompt_template"].format(
            prompt=question, solution=solution, feedback="")}],
        "sdpo-feedback": [{"role": "user", "content": templates["reprompt_template"].format(
            prompt=question, solution="", feedback=feedback)}],
    }


def main(argv: list[str] | None = None, log=print) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--cell", choices=sorted(CELLS), default="independent-k8")
    args = parser.parse_args(argv)
    model_path, data_path, k = CELLS[args.cell]
    from bench.horizon import max_completion_length
    from gear_trl.evaluation.generation import load_model
    from gear_trl.evaluation.loops import evaluate
    from gear_trl.rewards.horizon import decision_correct, horizon_accuracy

    wall = time.perf_counter()
    rows = [json.loads(line) for line in (REPO_ROOT / data_path).read_text().splitlines()[: args.problems]]
    model, tokenizer = load_model(str(REPO_ROOT / model_path), dtype="float32")
    templates = sdpo_templates()
    all_prompts = [prompts_for(row, templates) for row in rows]
    out: dict = {"kinds": {}}
    for kind in all_prompts[0]:
        dataset = [{"prompt": prompts[kind], "ground_truth": row["ground_truth"]}
                   for prompts, row in zip(all_prompts, rows, strict=True)]  # fmt: skip
        scored = evaluate(model, tokenizer, dataset, [horizon_accuracy], batch_size=args.batch,
                          max_new_tokens=max_completion_length(k), temperature=0.0)  # fmt: skip
        decisions = sum(sum(decision_correct(s["completion"], rows[s["index"]]["results"])) for s in scored["per_sample"])
        out["kinds"][kind] = {"accuracy": scored["accuracy"], "decision_accuracy": decisions / (k * len(rows))}
        log(f"{kind}: problems right {scored['accuracy']:.3f}, decisions right {decisions / (k * len(rows)):.3f}")
    out.update(title="SDPO's teacher prompt against GEAR's on the horizon warm start (greedy, no training)",
               cell=args.cell, model=model_path, data=data_path, problems=len(rows), templates=templates,
               **reports.provenance(wall))  # fmt: skip
    suffix = "" if args.cell == "independent-k8" else f"_{args.cell}"
    path = results_dir("credit_methods") / f"sdpo_teacher{suffix}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    log(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
