"""`copy_to_local`: local paths pass through; remote ones are copied once into the cache and recopied when the copy
lost files. The remote side is a local directory standing in for HDFS (the hdfs client is not installed here)."""

import os
import shutil

import pytest

import verl.utils.fs as fs


def test_local_path_is_returned_unchanged(tmp_path):
    assert fs.copy_to_local(str(tmp_path)) == str(tmp_path)
    assert not fs.is_non_local("/data/x.parquet") and fs.is_non_local("hdfs://nn/x")


@pytest.fixture
def fake_hdfs(tmp_path, monkeypatch):
    """hdfs://<name> resolves to tmp_path/remote/<name>; copies are counted."""
    remote = tmp_path / "remote"
    (remote / "model" / "sub").mkdir(parents=True)
    (remote / "model" / "config.json").write_text("{}")
    (remote / "model" / "sub" / "w.bin").write_bytes(b"123")
    copies = []

    def copy(src, dst):
        copies.append(src)
        shutil.copytree(remote / src.removeprefix("hdfs://"), dst)

    monkeypatch.setattr(fs, "copy", copy)
    return copies


def test_remote_directory_is_copied_once_and_recopied_when_files_are_missing(tmp_path, fake_hdfs):
    cache = tmp_path / "cache"
    local = fs.copy_to_local("hdfs://model", cache_dir=cache)
    assert local == os.path.join(cache, fs.md5_encode("hdfs://model"), "model")
    assert open(os.path.join(local, "sub", "w.bin"), "rb").read() == b"123"
    assert fs.copy_to_local("hdfs://model", cache_dir=cache) == local and len(fake_hdfs) == 1
    os.remove(os.path.join(local, "sub", "w.bin"))  # an interrupted copy, a cleaned tmp
    fs.copy_to_local("hdfs://model", cache_dir=cache)
    assert len(fake_hdfs) == 2 and os.path.exists(os.path.join(local, "sub", "w.bin"))
    fs.copy_to_local("hdfs://model", cache_dir=cache, always_recopy=True)
    assert len(fake_hdfs) == 3


def test_directory_record_detects_changes(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    record = fs._record_directory_structure(tmp_path)
    assert fs._check_directory_structure(tmp_path, record)
    (tmp_path / "b.txt").write_text("y")
    assert not fs._check_directory_structure(tmp_path, record)
    assert not fs._check_directory_structure(tmp_path, str(tmp_path / "no-record"))


def test_hdfs_without_its_client_names_the_fix(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="hdfs command line on PATH"):
        fs.exists("hdfs://nn/x")
