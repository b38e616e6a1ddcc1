"""Stale vLLM-CPU tensor-parallel shared memory is cleared before an engine starts; files a live process holds stay."""

import mmap
import os

from verl.workers.rollout.vllm_rollout.cpu_shm import clear_stale_tp_shm, files_in_use


def test_only_the_files_no_live_process_holds_are_removed(tmp_path):
    stale = tmp_path / "-tp:0-[0-1]-cpushm_0"  # the name vLLM gives it under external_launcher
    mapped = tmp_path / "-tp:0-[0-1]-cpushm_1"
    opened = tmp_path / "x-tp:0-[0-1]-cpushm_0"
    other = tmp_path / "psm_c511a8e0"  # not vLLM's: never touched
    for path in (stale, mapped, opened, other):
        path.write_bytes(b"\0" * 4096)
    with open(mapped, "r+b") as f, open(opened, "rb"):
        view = mmap.mmap(f.fileno(), 4096)
        try:
            assert files_in_use([str(stale), str(mapped), str(opened)]) == {str(mapped), str(opened)}
            assert clear_stale_tp_shm(str(tmp_path)) == [str(stale)]
        finally:
            view.close()
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in (mapped, opened, other))
    assert clear_stale_tp_shm(str(tmp_path)) == sorted([str(opened), str(mapped)])  # now nobody holds them
    assert os.listdir(tmp_path) == [other.name]


def test_a_file_mapped_with_its_descriptor_closed_is_held(tmp_path):
    """vLLM keeps the mapping, not necessarily the descriptor: /proc/<pid>/maps alone marks it as in use."""
    path = tmp_path / "-tp:0-[0-1]-cpushm_1"
    path.write_bytes(b"\0" * 4096)
    fd = os.open(path, os.O_RDWR)
    view = mmap.mmap(fd, 4096)
    os.close(fd)
    try:
        assert files_in_use([str(path)]) == {str(path)} and clear_stale_tp_shm(str(tmp_path)) == []
    finally:
        view.close()
