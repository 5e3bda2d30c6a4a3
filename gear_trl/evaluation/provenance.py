"""What a score depends on beyond its options: package versions, the gear_trl commit, the model's revision."""

from __future__ import annotations

import os

from .generation import model_revision

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm", "math-verify", "bfcl-eval")
"""The packages whose versions a report records (None where one is not installed)."""


def _git_commit(root: str | None = None) -> tuple[str | None, bool | None]:
    """(the commit of the gear_trl checkout this runs from, `root` (default: the folder above the gear_trl package), and
    whether tracked files differ from it); (None, None) unless `root` is the top of a git checkout (an installed
    wheel: a repository that merely holds the environment is not gear_trl's)."""
    import subprocess

    root = os.path.realpath(root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        top, commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.splitlines()
        status = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, None
    if os.path.realpath(top) != root:
        return None, None
    return commit, bool(status.strip())


def provenance(model: str, backend: str) -> dict:
    """What a score depends on beyond its options: `{backend, packages: {name: version or None}, gear_trl, git_commit,
    git_dirty, model_revision (the Hub commit of the model, or of an adapter's base; None for a local folder),
    base_model (an adapter's)}`."""
    from importlib import metadata

    from .. import __version__
    from .generation import adapter_base

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    commit, dirty = _git_commit()
    return {
        "backend": backend,
        "packages": {name: version(name) for name in PACKAGES},
        "gear_trl": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "model_revision": model_revision(model),
        "base_model": adapter_base(model),
    }
