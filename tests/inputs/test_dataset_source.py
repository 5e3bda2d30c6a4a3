"""A dataset that is not there is named as what it was meant to be (a file or a folder), and the did-you-mean
proposes only what could be a dataset (issue 76, item 6)."""

from __future__ import annotations

import pytest

from gear_trl.inputs.preflight import PreflightError, check_dataset_source, load_dataset_named


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.log").write_text("step 1\n")
    (tmp_path / "train.yaml").write_text("a: 1\n")
    return tmp_path


def test_a_missing_data_file_is_a_missing_file_not_a_folder_or_a_hub_id(folder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("train.jsonl", "./train.jsonl", "data/train.parquet"):
        with pytest.raises(PreflightError) as err:
            load_dataset_named(name)
        message = str(err.value)
        assert message.startswith(f"`dataset_name`: no such local file: {name!r}"), message
        assert "folder:" not in message and "Hugging Face cache" not in message
        assert "train.log" not in message and "train.yaml" not in message


def test_the_did_you_mean_proposes_data_files_and_folders_only(folder):
    (folder / "trian.jsonl").write_text('{"question": "1+1", "answer": "2"}\n')
    with pytest.raises(PreflightError, match=r"no such local file: 'train.jsonl' \(did you mean './trian.jsonl'\?\)"):
        check_dataset_source("train.jsonl")
    # a folder-like name: a log or a recipe of the same stem is never proposed; a folder is
    with pytest.raises(PreflightError) as err:
        check_dataset_source("./train")
    assert str(err.value) == "`dataset_name`: no such local folder: './train'."
    (folder / "trains").mkdir()
    with pytest.raises(PreflightError, match=r"no such local folder: './train' \(did you mean './trains'\?\)"):
        check_dataset_source("./train")


def test_an_existing_file_and_a_hub_id_pass(folder):
    (folder / "rows.csv").write_text("question,answer\n1+1,2\n")
    check_dataset_source("rows.csv")
    check_dataset_source("openai/gsm8k")  # a Hub id: checked when it is loaded
