"""One-off probes: scripts that answered one question once, which no study index, document or Makefile target runs.

Each module's first docstring line says what it asked and where the answer is; bench/probes/README.md lists them.
Run one as ``python -m bench.probes.<name>`` from the repository root.
"""
