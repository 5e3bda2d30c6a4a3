"""The studies' tests (bench/tests/, beside the studies in bench/) share the library tests' set-up: no test reaches the
Hugging Face Hub, and the fixtures of tests/conftest.py are theirs too."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from tests.conftest import never_load_a_model  # noqa: F401
