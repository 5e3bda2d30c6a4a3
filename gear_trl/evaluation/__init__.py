"""Evaluation: what `python -m gear_trl.evaluate` runs, and the same evaluations as functions.

    cli            the command line: options, presets and model settings resolved, the report written (`main`)
    loops          `evaluate` (single turns) and `evaluate_multi_turn` (tool rollouts on TRL's tool loop)
    conversations  `evaluate_bfcl_multi_turn` (BFCL's checker) and `evaluate_interactive` (a simulated user)
    scoring        rewards called as TRL calls them, and the report every loop returns
    pass_at_k      the unbiased pass@k estimate
    bfcl           BFCL's tasks and rows from bfcl-eval, and their per-category figures
    provenance     package versions, commit and model revision a report records
    benchmarks     the paper's benchmarks as `--benchmark` presets
    generation     generation backends (transformers, vLLM), model loading, prompt rendering
    run_settings   the chat settings `gear_trl.train` records for evaluation
    user_sim       simulated users (`--user_simulator`)
    held_out       training's `held_out_datasets: benchmark:NAME` rows, from the presets

Nothing is imported here: `gear_trl.evaluation.benchmarks` (which training's held-out sets read) loads without the
evaluation loops.
"""
