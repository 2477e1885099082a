"""The registry is the single source of truth: an algorithm registered with only its name and step, every other
field left at its default, runs through every consumer that reads the registry (generate, the interleaved
comparison, the benchmark, advise, production, the figures, the losslessness check, the ZeroGPU durations, the
compatibility report), on a pair whose vocabularies differ, with no other module edited."""

import ast

import pytest

import hsd
from hsd import durations, figures, marks, viz, zerogpu
from hsd.advise import advise, format_advice
from hsd.algorithms import tli
from hsd.bench import BenchConfig, row_labels, run_bench, run_each
from hsd.errors import InvalidSettingError
from hsd.lossless import check_next_token, default_n, lossless_figure
from hsd.generate import check_shared_noise
from hsd.production import format_production, production_for_pair
from hsd.report import compatibility_report, explain, format_report

PROMPT = "def fib(n):"


@pytest.fixture
def toy():
    """TLI's step under a new name, declared with the required fields only."""
    algorithm = hsd.register(hsd.Algorithm("toy", tli.step))
    try:
        yield algorithm
    finally:
        hsd.unregister("toy")


@pytest.fixture
def pair(model_dirs):
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    assert not pair.vocab.shared and pair.vocab.intersection_size > 0
    return pair


def test_a_new_algorithm_generates_losslessly_across_vocabularies(pair, toy):
    assert "toy" in hsd.usable_algorithms(pair)
    res = hsd.generate(pair, PROMPT, algorithm="toy", max_new_tokens=12, lookahead=3)
    assert res.token_ids == hsd.generate(pair, PROMPT, algorithm="ar", max_new_tokens=12).token_ids
    assert res.metrics.proposed > 0 and res.metrics.mean_accepted_length >= 1


def test_a_new_algorithm_is_compared_against_ar_and_drawn_in_every_figure(pair, toy):
    for item in run_each(pair, ["toy"], warmup_tokens=2, min_repeats=1, max_repeats=1, prompt=PROMPT,
                         max_new_tokens=8, lookahead=3):
        comparison = item
    results = comparison.results
    assert list(results) == ["ar", "toy"] and len(comparison.speedup["toy"]) == 1
    color = figures._color("toy")
    assert color in figures.EXTRA_COLORS and color != figures._color("ar")
    speed = figures.speedup_figure(results, "CPU", comparison)
    assert list(speed.data[0].x) == ["toy"] and list(speed.data[0].marker.color) == [color]
    for fig in (figures.tokens_time_figure(results), figures.acceptance_histogram_figure(results),
                figures.position_acceptance_figure(results)):
        traces = {t.name: t.to_plotly_json() for t in fig.data}
        assert color in (traces["toy"].get("marker", {}).get("color"), traces["toy"].get("line", {}).get("color"))
    assert "toy" in list(figures.time_split_figure(results).data[0].x)
    assert len(figures.rounds_figure(results["toy"].rounds).data) == len(figures.SPLIT_COLORS) + 1
    assert "toy" in list(viz.summary_table(results, comparison)["algorithm"])


def test_a_new_algorithm_runs_through_the_benchmark_without_a_peer_row(pair, toy):
    assert row_labels(["ar", "toy"], 0.0, peer=True) == ["ar", "toy", "hf-ar"]
    cfg = BenchConfig(algorithms=["ar", "toy"], temperatures=[0.0], num_prompts=1, max_new_tokens=8, warmups=0,
                      repeats=1, peer=False, cost_repeats=2)
    report = run_bench(pair, [PROMPT], cfg, log=lambda _: None)
    row = next(r for r in report["rows"] if r["algorithm"] == "toy")
    assert row["greedy_equals_ar"] == "1/1" and row["tau"] >= 1 and row["vs_transformers"] is None
    throughput = figures.bench_figures(report)["throughput"]
    assert figures._color("toy") in list(throughput.data[0].marker.color)


def test_a_new_algorithm_is_calibrated_and_predicted_by_advise(pair, toy):
    advice = advise(pair, [PROMPT], algorithms=["toy"], max_new_tokens=12, lookaheads=[2], draft_thresholds=(0.5,),
                    dynamic_lookahead=4, log=lambda _: None)
    assert {p["algorithm"] for p in advice["predictions"]} == {"toy"}
    assert set(advice["calibration"]["toy"]) == {2, "4, stop < 0.5"}  # dynamic_lookahead defaults to True
    assert "toy" in format_advice(advice)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_production_says_neither_engine_has_a_new_algorithm(pair, toy, temperature):
    p = production_for_pair(pair, "toy", temperature=temperature)
    assert p.vllm.match == "none" and any("vLLM has no TOY" in n for n in p.vllm.notes)
    assert p.transformers.match == "none" and any("Transformers has no TOY" in n for n in p.transformers.notes)
    for engine in (p.vllm, p.transformers):
        ast.parse(engine.python)
    assert "match: none" in format_production(p)


def test_the_losslessness_check_takes_a_new_algorithm_with_the_default_draws(pair, toy):
    assert default_n("toy") == hsd.Algorithm.lossless_draws
    check = check_next_token(pair, "toy", PROMPT, n=200, temperature=1.0, lookahead=2)
    assert check.algorithm == "toy" and check.passed
    fig = lossless_figure(check)
    assert [t.marker.color for t in fig.data[:2]] == [figures._color("ar"), figures._color("toy")]
    with pytest.raises(InvalidSettingError, match="Unknown algorithm 'nope'"):
        default_n("nope")


def test_zerogpu_prices_a_new_algorithm_at_the_default_round_cost(toy):
    target, drafter = durations.Size(1e9, 24, 2048), durations.Size(1e8, 4, 512)
    seconds = durations.token_seconds("toy", 5, target, drafter)
    tli_seconds = durations.token_seconds("tli", 5, target, drafter)
    assert seconds == pytest.approx(tli_seconds - tli.ALGORITHM.round_seconds + toy.round_seconds)
    assert durations.token_seconds("toy", 5, target, None) == durations.token_seconds("ar", 5, target, None)


def test_the_compatibility_report_lists_a_new_algorithm_without_a_cost_note(pair, toy):
    report = compatibility_report(pair)
    assert report["algorithms"]["toy"] == "ok" and "toy" not in report
    assert "  toy   ok" in format_report(report) and explain(report)
    notes = viz.cost_notes(report)
    assert set(notes) == {"slrs"}
    assert f"- {marks.YES} **toy**" in viz.availability_markdown(hsd.availability(pair), notes)


def test_shared_noise_is_refused_for_a_new_algorithm_by_default(toy):
    with pytest.raises(InvalidSettingError, match="noise='shared' works with ar and slem only, not 'toy'"):
        check_shared_noise("shared", "toy")
