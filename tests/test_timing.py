"""Timing hygiene: hsd's OpenMP defaults before torch starts, and comparisons that report their spread."""

import json
import os
import subprocess
import sys

import pytest

from hsd import marks
from hsd.metrics import NOISY_SPREAD, spread


def test_importing_hsd_sets_a_passive_wait_policy_before_torch_loads():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    code = ("import sys, os; import hsd; print(os.environ['OMP_WAIT_POLICY'], os.environ['OMP_NUM_THREADS'], "
            "hsd.threads.STATE['in_time'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    policy, threads, in_time = out.split()
    assert policy == "PASSIVE" and int(threads) >= 1 and in_time == "yes"


def test_a_wait_policy_set_by_the_user_is_kept():
    env = {**os.environ, "OMP_WAIT_POLICY": "ACTIVE"}
    out = subprocess.run([sys.executable, "-c", "import os, hsd; print(os.environ['OMP_WAIT_POLICY'])"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ACTIVE"


def test_spread_is_the_interquartile_range_and_flags_noise():
    s = spread([1.0, 1.1, 0.9, 1.0, 5.0])
    assert s.median == 1.0 and (s.low, s.high) == (pytest.approx(1.0), pytest.approx(1.1)) and s.n == 5
    assert not s.noisy
    wide = spread([0.5, 1.0, 2.0])
    assert (wide.low, wide.high) == (0.5, 2.0) and wide.relative > NOISY_SPREAD and wide.noisy
    assert spread([None, float("nan")]) is None and spread([1.0]).noisy  # one value has no spread


def test_compare_repeats_interleaved_and_reports_median_and_spread(model_dirs):
    import app

    from hsd.forms import Form

    out = list(app.compare(model_dirs["target"], model_dirs["drafter"], Form("def f(x):", lookahead=3, max_new_tokens=8)))
    assert any(u[0].startswith(f"{marks.BUSY} Compare · Repeat 2") for u in out)  # interleaved: more than one repeat
    status, _, speedup, *_, table, _ = out[-1]
    assert "median of" in status and "interleaved repeats" in status
    title = speedup.layout.title.text  # a loaded machine (a training job beside the suite) makes it say so instead
    assert "interleaved repeats" in title or "too noisy" in title or "the machine was busy" in title
    assert speedup.data[0].error_y.array is not None  # the spread is drawn
    assert "speedup spread" in table.columns


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_comparison_on_a_busy_cpu_says_the_machine_was_busy_and_why(model_dirs):
    """This process and a busy loop share one core: the comparison gets about half of it, and says so in its status
    and its speedup plot, however steady its repeats look."""
    import hsd
    from hsd import bench, figures, viz

    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    settings = dict(prompt="def f(x):", lookahead=3, max_new_tokens=16, temperature=0.0)
    quiet = [x for x in bench.run_each(pair, ["slem"], min_repeats=2, max_repeats=2, **settings)][-1]
    assert quiet.cpu_share is not None  # on a CPU it is measured; on a GPU it is None
    mask = os.sched_getaffinity(0)
    core = min(mask)
    burner = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"])
    try:
        os.sched_setaffinity(0, {core})
        busy = [x for x in bench.run_each(pair, ["slem"], min_repeats=3, max_repeats=3, **settings)][-1]
    finally:
        os.sched_setaffinity(0, mask)
        burner.kill()
        burner.wait()
    assert busy.cpu_share < bench.BUSY_CPU_SHARE and busy.busy, busy.cpu_share
    note = viz.timing_note(busy)
    assert "The machine was busy" in note and f"{busy.cpu_share:.0%} of the time" in note
    assert "the machine was busy" in figures.speedup_figure(busy.results, "CPU", busy).layout.title.text


@pytest.fixture
def thread_choice(monkeypatch):
    """hsd.threads' choice, restored after the test (the app's import sets it for the whole process)."""
    from hsd import threads

    monkeypatch.setattr(threads, "_CHOICE", threads._CHOICE)
    monkeypatch.setitem(threads.STATE, "user_threads", None)  # as if the user had set no OMP_NUM_THREADS
    return threads


def test_the_automatic_thread_choice_goes_by_the_targets_size(thread_choice, monkeypatch):
    import hsd
    from hsd.errors import InvalidSettingError

    threads = thread_choice
    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    threads.choose(None)
    assert threads.for_pair(pair) is None  # the library's default: torch's count as it is
    threads.choose("auto")
    assert threads.for_pair(pair) == 1  # 13M parameters: one thread
    monkeypatch.setattr(threads, "ONE_THREAD_BELOW", 10_000_000)
    monkeypatch.setitem(threads.STATE, "OMP_NUM_THREADS", "7")
    assert threads.for_pair(pair) == 7  # over the line: hsd's default count
    monkeypatch.setitem(threads.STATE, "user_threads", "3")
    assert threads.for_pair(pair) is None  # OMP_NUM_THREADS from the user wins
    threads.choose(5)
    assert threads.for_pair(pair) == 5  # a count given (the CLI's --threads) wins too
    for bad in ("many", 0, -1, 1.5, True):
        with pytest.raises(InvalidSettingError, match="'auto', a positive count or None"):
            threads.choose(bad)


def test_a_generation_sets_its_threads_on_whichever_thread_runs_each_round(thread_choice):
    import threading

    import torch

    import hsd

    threads = thread_choice
    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    threads.choose(1)
    gen = hsd.stream(pair, "def add(a, b):", algorithm="slem", max_new_tokens=24, lookahead=2)
    seen = []

    def advance():
        torch.set_num_threads(2)  # a worker thread whose torch count is not the chosen one
        next(gen)
        seen.append(torch.get_num_threads())

    for _ in range(2):  # the first round on one thread, the next on another, as a streaming server may
        worker = threading.Thread(target=advance)
        worker.start()
        worker.join()
    assert seen == [1, 1]
    gen.close()


def test_the_cli_lets_hsd_choose_unless_threads_is_given(thread_choice):
    from hsd.cli import build_parser, load_cli_pair

    generate = build_parser().parse_args(["generate", "--preset", "tiny-code", "--prompt", "def f(x):"])
    load_cli_pair(generate)  # no --threads option: hsd chooses by the pair
    assert thread_choice._CHOICE == "auto"
    bench = build_parser().parse_args(["bench", "--preset", "tiny-code", "--threads", "1"])
    load_cli_pair(bench)
    assert thread_choice._CHOICE == 1


def test_the_lossless_check_runs_on_the_chosen_threads(thread_choice):
    import threading

    import torch

    import hsd
    from hsd.lossless import check_next_token

    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    thread_choice.choose(1)
    seen = []

    def check():
        torch.set_num_threads(2)
        check_next_token(pair, "slem", "def add(a, b):", 8, lookahead=2)
        seen.append(torch.get_num_threads())

    worker = threading.Thread(target=check)
    worker.start()
    worker.join()
    assert seen == [1]


def test_the_app_examples_benchmark_runs_each_example_against_ar(thread_choice, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import app_examples

    rows_file = Path(__file__).resolve().parent.parent / "assets" / "prompts" / "code-packages.jsonl"
    package_of = {row["prompt"]: row["package"] for row in map(json.loads, rows_file.read_text().splitlines())}
    prompts = app_examples.held_out_prompts(3)
    assert len({package_of[p] for p in prompts}) == 3  # one function of each of three held-out packages
    held = app_examples.main(["--held-out", "2", "--max-new-tokens", "8", "--only", "0"])
    assert held[0]["seeds"] == 2
    rows = app_examples.main(["--threads", "auto", "--seeds", "2", "--max-new-tokens", "8", "--only", "0", "5"])
    assert [r["label"] for r in rows] == [app_examples.EXAMPLES[i][0] for i in (0, 5)]
    assert rows[1]["same"] == 2  # shared noise: the example writes AR's text at every seed
    assert all(r["ar_tps"] > 0 and r["tps"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert "1 torch threads" in out and "threads auto" in out  # the embedded pair runs on one thread
