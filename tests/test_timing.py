"""Timing hygiene: hsd's OpenMP defaults before torch starts, and comparisons that report their spread."""

import os
import subprocess
import sys

import pytest

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

    out = list(app.compare(model_dirs["target"], model_dirs["drafter"], "def f(x):", 0, 0, 1.0, 3, 8, 0))
    assert any(u[0].startswith("▶️ Repeat 2") for u in out)  # interleaved: more than one repeat
    status, _, speedup, *_, table, _ = out[-1]
    assert "median of" in status and "interleaved repeats" in status
    assert "interleaved repeats" in speedup.layout.title.text or "too noisy" in speedup.layout.title.text
    assert speedup.data[0].error_y.array is not None  # the spread is drawn
    assert "speedup spread" in table.columns
