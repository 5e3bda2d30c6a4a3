"""gear_trl imports without bfcl-eval, which `make install` adds `--no-deps` and is not a dependency: a user who
pip-installs the package gets the library, and BFCL's official environment says what to install when it is used."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_gear_trl_imports_and_bfcl_official_says_what_to_install_without_bfcl_eval():
    script = textwrap.dedent(
        """
        import sys
        sys.modules["bfcl_eval"] = None  # `import bfcl_eval` now raises ImportError, as when it is not installed
        import gear_trl
        from gear_trl import GEARConfig, GEARTrainer
        from gear_trl.envs.bfcl_official import BFCLOfficialEnvironment, load_tasks
        from gear_trl.inputs.errors import UserInputError

        assert not hasattr(BFCLOfficialEnvironment, "cd"), "tools installed without bfcl-eval"
        try:
            load_tasks("multi_turn_base")
        except UserInputError as err:
            print("refused:", err)
        else:
            raise SystemExit("load_tasks ran without bfcl-eval")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pip install --no-deps bfcl-eval" in done.stdout
