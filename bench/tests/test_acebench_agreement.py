"""bench/acebench_agreement.py: `gear_trl.rewards.acebench` agrees with ACEBench's own evaluation on generated answers
(needs a checkout of github.com/ACEBench/ACEBench named by ACEBENCH_DIR; skipped without one)."""

from __future__ import annotations

import os

import pytest

from gear_trl.data import acebench as acebench_data
from gear_trl.data.acebench import NON_INTERACTIVE_CATEGORIES

CHECKOUT = os.environ.get("ACEBENCH_DIR")


@pytest.mark.skipif(
    not (CHECKOUT and acebench_data.is_checkout(CHECKOUT)),
    reason="set ACEBENCH_DIR to a checkout of github.com/ACEBench/ACEBench",
)
@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # ACEBench's ast.parse of squeezed answers (`1if`)
def test_acebenchs_own_evaluation_agrees_on_generated_answers():
    from bench import acebench_agreement

    figures = acebench_agreement.main(["--acebench", CHECKOUT, "--rows", "5"])
    total = figures["total"]
    assert total["rows"] == 5 * len(NON_INTERACTIVE_CATEGORIES) and total["cases"] > 2000
    assert total.get("disagree", 0) == 0 and total.get("acebench raises", 0) == 0, figures["disagreements"]
