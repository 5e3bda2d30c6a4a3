"""GEAR's teacher in one room: what it is shown, how its weights are kept, its pass and its probe.

- `prompts`: the teacher prompts (the reference rendered into the student's prompt), prefix sharing, and
  :func:`~gear_trl.teacher.prompts.shows_sibling`, the one decision about what a row's teacher is shown.
- `kinds`: the teacher kinds (`teacher: live / base / ema / periodic`) as records.
- `weights`: the teacher's own weights (averaging, re-syncing, the checkpoint file) and their callback.
- `teacher`: the `Teacher` (its weights, prompts and pass) and `TeacherHost`, the few named methods it needs from
  its trainer (`GEARTrainer` implements them).
- `probe`: the teacher probe of `gear_trl.evaluate` (does the teacher use the reference?).

This package imports nothing at import time, so that the configuration can read `kinds` without loading the pass.
"""
