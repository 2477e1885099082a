"""`hsd space rehearse`: the app's handlers as a ZeroGPU Space runs them, with the real spaces package.

The rehearsal runs in its own process (spaces patches torch for the whole process), so these tests leave the
test process as it was."""

from pathlib import Path

import pytest

from hsd import emulation
from hsd.rehearse import SPACES_VERSION, rehearse, spaces_version

needs_spaces = pytest.mark.skipif(spaces_version() != SPACES_VERSION,
                                  reason=f"needs spaces=={SPACES_VERSION} (requirements.txt installs it)")
ROOT = Path(__file__).resolve().parents[1]

# The thread-local emulation taken away again, as hsd had it before loads entered it on the handler's thread
NO_THREAD_EMULATION = """
import contextlib, hsd.emulation
hsd.emulation.on_this_thread = contextlib.nullcontext
"""


@needs_spaces
def test_preloaded_and_run_time_pairs_run_on_gradio_worker_threads():
    lines = []
    code, results = rehearse(handlers=("check", "run"), echo=lines.append)
    assert code == 0, "\n".join(lines)
    assert [(r["pair"], r["handler"]) for r in results] == [
        ("embedded", "check"), ("embedded", "run"), ("directories", "check"), ("directories", "run")]
    assert all(r["ok"] for r in results)
    assert all(r["line"].startswith("[done] **SLEM** wrote") for r in results if r["handler"] == "run")
    # the first run forks a fresh GPU worker; the second reuses it, though it was forked before the directories
    # pair was loaded: the worker loads that pair itself
    assert any("2 (1 in a fresh worker, 1 in a reused one)" in line for line in lines), lines
    assert any("stands in for a GPU here" in line for line in lines)


@needs_spaces
def test_the_rehearsal_catches_a_load_on_a_thread_without_the_emulation(tmp_path):
    import os

    (tmp_path / "sitecustomize.py").write_text(NO_THREAD_EMULATION)
    lines = []
    code, results = rehearse(handlers=("check",), echo=lines.append,
                             env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert code == 1, "\n".join(lines)
    by_pair = {r["pair"]: r for r in results}
    assert by_pair["embedded"]["ok"]  # preloaded on the main thread, where spaces entered its mode
    assert not by_pair["directories"]["ok"]
    assert "CUDA" in by_pair["directories"]["line"], by_pair["directories"]


def test_emulation_is_a_no_op_without_spaces_zerogpu():
    assert not emulation.active()
    with emulation.on_this_thread():
        import torch
        assert torch.zeros(2).device.type == "cpu"


def test_the_rehearsal_runs_the_spaces_version_the_requirements_pin():
    pins = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.startswith("spaces")]
    assert pins == [f"spaces=={SPACES_VERSION}"]


@needs_spaces
def test_a_rehearsal_out_of_time_leaves_no_process_behind():
    import subprocess

    def children() -> int:
        out = subprocess.run(["pgrep", "-f", "hsd.rehearse --child"], capture_output=True, text=True).stdout
        return len(out.split())

    before = children()
    code, results = rehearse(handlers=("check", "run"), timeout_s=6, echo=lambda *_: None)
    assert code == 124 and children() == before  # the Space and the GPU workers spaces forked are gone
