"""Train the tiny tokenizer and build the tiny random-weight Qwen3 model in `data/tiny-qwen3/`.

Run after `data/scripts/make_math_data.py`, whose output is part of the tokenizer's training text:

    python data/scripts/make_tiny_model.py [--output-dir data/tiny-qwen3] [--vocab-size 3000] [--hidden-size 64 ...]

The logic lives in `gear_trl.testing.tiny`, so tests can build models of other sizes the same way.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without installing

from gear_trl.testing.tiny import main

if __name__ == "__main__":
    main()
