# Fresh machine: `make demo` installs and trains GEAR on the tiny offline model; `make test` installs and runs the tests.
PYTHON ?= python3
TORCH_VERSION ?= 2.13.0
PYTEST_ARGS ?=
export HF_HUB_OFFLINE = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install demo test test-fast clean

# torch first and pinned: an unpinned torch pulls several GB of CUDA wheels on machines without a GPU.
install:
	$(PYTHON) -m pip install --quiet "torch==$(TORCH_VERSION)"
	$(PYTHON) -m pip install --quiet -e ".[dev]"

demo: install
	$(PYTHON) -m gear_trl.train --config recipes/tiny/config_math.yaml --output_dir outputs/demo

test: install
	$(PYTHON) -m pytest tests -q $(PYTEST_ARGS)

test-fast:
	$(PYTHON) -m pytest tests -q -m "not slow and not distributed" $(PYTEST_ARGS)

clean:
	rm -rf outputs build *.egg-info .pytest_cache
