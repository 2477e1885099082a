"""Drafter comparison (hsd/drafters.py, ``python -m hsd drafters``) on the embedded target and its two drafters."""

from __future__ import annotations

import json

import pytest

import hsd.advise
import hsd.bench
from hsd.cli import main
from hsd.drafters import (COLUMNS, DrafterComparison, check_comparison, compare_drafters, drafters_figure,
                          drafters_table, format_comparison, run_comparison)
from hsd.errors import InvalidSettingError

DRAFTERS = ["assets/tiny-code/drafter", "tiny-code-bytes"]  # a path and a preset name (its drafter)
PROMPTS = ["def fibonacci(n):\n"]
SMALL = dict(max_new_tokens=8, lookahead=3, min_repeats=1, max_repeats=1, budget_s=5.0)


@pytest.fixture(scope="module")
def best():
    """Every applicable algorithm per drafter, advise's prediction beside each, greedy."""
    lines = []
    result = run_comparison(None, DRAFTERS, PROMPTS, "best", log=lines.append, **SMALL)
    return result, lines


def test_best_per_drafter_measures_every_applicable_algorithm_and_picks_the_fastest(best):
    result, lines = best
    assert isinstance(result, DrafterComparison) and result.target == "assets/tiny-code/target"
    assert [e.name for e in result.entries] == DRAFTERS
    assert result.entries[1].path == "assets/tiny-code/drafter-bytes"
    assert any("Warming up" in line for line in lines) and any("advise" in line for line in lines)
    for e in result.entries:
        assert e.error is None
        c = e.compatibility
        assert c["shared_vocabulary"] is False and c["shared_tokens"] > 0 and "sd" in c["not_applicable"]
        assert {"slem", "tli"} <= set(c["applicable"]) and 0 <= c["drafter_roundtrip"] <= 1
        assert [r.algorithm for r in e.rows] == c["applicable"]
        assert sum(r.chosen for r in e.rows) == 1
        assert e.chosen.speedup == max(r.speedup for r in e.rows)
        assert 0 < e.costs["cost_ratio"] < 5 and e.costs["draft_ms"] > 0
        for r in e.rows:
            assert 0 <= r.draft_acceptance_rate <= 1 and r.mean_accepted_length >= 1
            assert r.per_position_acceptance and all(0 <= a <= 1 for a in r.per_position_acceptance)
            assert r.speedup > 0 and r.tokens_per_s > 0 and r.ar_tokens_per_s > 0
            assert r.speedup_n == 1 and r.noisy  # measured once: marked noisy
            assert r.predicted_speedup > 0 and r.predicted_tau >= 1  # advise, calibrated on the same prompts
            assert r.greedy_equals_ar == "1/1"  # lossless: greedy output is AR's
            assert r.new_tokens == 8


def test_the_table_the_text_and_the_figure_are_pure_functions_of_the_result(best):
    result, _ = best
    table = drafters_table(result)
    assert list(table.columns) == COLUMNS and len(table) == 2 and set(table["chosen"]) == {"✓"}
    full = drafters_table(result, all_rows=True)
    assert len(full) == sum(len(e.rows) for e in result.entries)
    assert table.equals(drafters_table(result))
    text = format_comparison(result)
    assert "assets/tiny-code/drafter" in text and "predicted speedup (advise)" in text
    fig = drafters_figure(result)
    assert len(fig.data) == 5 + 2  # speedup, predicted, acceptance, τ, predicted τ; one line per drafter
    short = {"assets/tiny-code/drafter": "drafter", "tiny-code-bytes": "tiny-code-bytes"}  # folders by their name
    assert list(fig.data[0].x) == [f"{short[e.name]}<br>{e.chosen.algorithm}" for e in result.entries]
    json.dumps(result.to_dict(), default=str)


def test_a_named_algorithm_runs_where_it_applies_and_other_drafters_get_rows_that_say_why(tmp_path):
    """SD with the target as its own drafter (a shared vocabulary) accepts everything; the heterogeneous
    drafter gets a 'not applicable' row, and a folder that is not a model a 'not loaded' one."""
    missing = str(tmp_path / "no-such-drafter")
    result = run_comparison("tiny-code", ["assets/tiny-code/target", "tiny-code", missing], PROMPTS, "sd",
                            predict=False, log=lambda _: None, **SMALL)
    same, other, bad = result.entries
    assert same.compatibility["shared_vocabulary"] is True and "sd" in same.compatibility["applicable"]
    assert same.chosen.algorithm == "sd" and same.chosen.draft_acceptance_rate == 1.0 and same.advice is None
    assert other.rows[0].algorithm == "sd" and other.rows[0].chosen and "not applicable" in other.rows[0].note
    assert other.rows[0].speedup is None and other.costs["cost_ratio"] > 0
    assert bad.error and not bad.rows
    table = drafters_table(result)
    assert table["note"].iloc[2].startswith("not loaded") and table["shared vocabulary"].iloc[0] == "yes"


@pytest.mark.parametrize("args, match", [
    (dict(drafters=[]), "list of drafters"),
    (dict(drafters="assets/tiny-code/drafter"), "list of drafters"),
    (dict(drafters=["tiny-code", "assets/tiny-code/drafter"]), "twice"),
    (dict(drafters=["assets/tiny-code/nothing"]), "no embedded model"),
    (dict(algorithm="ar"), "uses no drafter"),
    (dict(algorithm="fast"), "Unknown algorithm"),
    (dict(prompts=[]), "prompt"),
    (dict(temperature=-1.0), "emperature"),
    (dict(lookahead=0), "lookahead"),
    (dict(min_repeats=3, max_repeats=2), "max_repeats"),
    (dict(budget_s=0), "budget_s"),
    (dict(draft_threshold=1.0), "draft_threshold must be a number in"),
    (dict(drafter_temperature=-1.0), "drafter_temperature: .*emperature"),
])
def test_bad_arguments_are_refused_before_any_model_loads(args, match):
    kw = dict(target=None, drafters=DRAFTERS, prompts=PROMPTS, algorithm="best")
    kw.update(args)
    with pytest.raises(InvalidSettingError, match=match):
        check_comparison(**kw)
    with pytest.raises(InvalidSettingError, match=match):
        next(compare_drafters(**kw))  # the generator checks before its first progress line


def test_cli_prints_the_table_and_writes_csv_and_json(tmp_path, capsys):
    csv, js = tmp_path / "drafters.csv", tmp_path / "drafters.json"
    code = main(["drafters", "--drafter", "assets/tiny-code/drafter", "--drafter", "assets/tiny-code/drafter-bytes",
                 "--algorithm", "slem", "--num-prompts", "1", "--max-new-tokens", "8", "--lookahead", "3",
                 "--min-repeats", "1", "--max-repeats", "1", "--budget-s", "5", "--no-advise", "--csv", str(csv), "--json", str(js)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "assets/tiny-code/drafter-bytes" in out.out and "slem" in out.out
    import pandas as pd

    table = pd.read_csv(csv)
    assert list(table.columns) == COLUMNS and list(table["algorithm"]) == ["slem", "slem"]
    assert json.loads(js.read_text())["algorithm"] == "slem"


def test_cli_refuses_bad_options_with_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["drafters", "--drafter", "tiny-code", "--algorithm", "ar"]) == 2
    assert "uses no drafter" in capsys.readouterr().err
    assert main(["drafters", "--drafter", "tiny-code", "--csv", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_the_drafter_temperature_and_draft_threshold_reach_the_measurement_and_the_prediction(model_dirs, monkeypatch):
    calls = {"measured": [], "advise": []}
    for module, key in ((hsd.bench, "measured"), (hsd.advise, "advise")):
        real = module.generate
        monkeypatch.setattr(module, "generate", lambda *a, _real=real, _key=key, **kw: calls[_key].append(kw)
                            or _real(*a, **kw))
    result = run_comparison(model_dirs["target"], [model_dirs["drafter"]], PROMPTS, "slem", log=lambda _: None,
                            **{**SMALL, "lookahead": 6}, drafter_temperature=0.0, draft_threshold=0.5)
    timed = [kw for kw in calls["measured"] if kw["algorithm"] == "slem"]
    assert timed and all(kw["drafter_temperature"] == 0.0 and kw["draft_threshold"] == 0.5 for kw in timed)
    calibrated = [kw for kw in calls["advise"] if kw.get("draft_threshold")]
    assert calibrated and all((kw["lookahead"], kw["draft_threshold"], kw["drafter_temperature"]) == (6, 0.5, 0.0)
                              for kw in calibrated)  # advise predicts the setting measured
    row = result.entries[0].chosen
    assert row.algorithm == "slem" and row.predicted_speedup > 0 and row.greedy_equals_ar == "1/1"
    assert result.settings["drafter_temperature"] == 0.0 and result.settings["draft_threshold"] == 0.5
    assert "temperature 0, drafter temperature 0, lookahead 6, draft threshold 0.5" in format_comparison(result)


def test_cli_refuses_a_draft_threshold_outside_zero_to_one_before_loading(capsys):
    assert main(["drafters", "--drafter", "tiny-code", "--draft-threshold", "1.5"]) == 2
    assert "draft_threshold must be a number in [0, 1)" in capsys.readouterr().err
    assert main(["drafters", "--drafter", "tiny-code", "--drafter-temperature", "-1"]) == 2
    assert "drafter_temperature:" in capsys.readouterr().err
