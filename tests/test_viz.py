"""hsd.viz: trace -> HTML / plotly / pandas, on hand-built rounds (no models), byte-exact."""

import plotly.graph_objects as go
import pytest

from hsd import figures, viz
from hsd.trace import Emitted, Position, Result, Round, Span


def _round(index=0):
    """Drafter 'de|f f|ib' vs target 'def| fib': one shared boundary inside, two that disagree."""
    draft = b"def fib"
    r = Round(index, draft=draft)
    r.drafted = [Span(10, 0, 2, 0.9), Span(11, 2, 5, 0.8), Span(12, 5, 7, 0.7)]
    r.proposed = [Span(100, 0, 3), Span(101, 3, 7)]
    r.positions = [Position(100, 0.9, None, 0.9, "accepted"), Position(101, 0.2, None, 0.2, "rejected")]
    r.emitted = [Emitted(100, "accepted", b"def"), Emitted(102, "corrected", b" f")]
    r.rejected = b" fib"
    r.events = ["target:merge-across-boundary"]
    return r


def _result(name, ids, temperature=0.0, tps=100.0, acceptance=0.5):
    rounds = [Round(i, emitted=[Emitted(t, "target" if name == "ar" else "accepted", b"x")], t_end=0.01 * (i + 1),
                    t_draft=0.001, t_verify=0.005) for i, t in enumerate(ids)]
    metrics = {"new_tokens": len(ids), "rounds": len(rounds), "tokens_per_s": tps, "ttft_s": 0.01, "tpot_s": 1 / tps,
               "mean_accepted_length": 1.0, "acceptance_rate": None if name == "ar" else acceptance,
               "proposed": 0 if name == "ar" else 4 * len(rounds), "accepted": 0, "per_position_acceptance": [0.8, 0.5],
               "acceptance_histogram": [1, 2, 3], "target_forwards": len(ids) + 1, "drafter_forwards": 0,
               "time_split_s": {"draft": 0.001 * len(ids), "convert": 0.0, "verify": 0.005 * len(ids), "other": 0.0}}
    return Result(name, [1], ids, "x" * len(ids), rounds, metrics, {"temperature": temperature, "dtype": "float32"}, "eos")


def test_char_spans_split_utf8_and_mark_invalid_bytes():
    data = "é中".encode() + b"\xff"
    assert viz.char_spans(data) == [(0, 2, "é"), (2, 5, "中"), (5, 6, "\ufffd")]


def test_output_html_colours_each_origin_and_strikes_rejected_draft():
    html = viz.output_html([_round()])
    assert 'class="hsd-tok hsd-accepted"' in html and "#22c55e" in html
    assert 'class="hsd-tok hsd-corrected"' in html and "#f97316" in html
    assert "hsd-rejected" in html and "line-through" in html and " fib" in html
    assert "hsd-legend" in html
    hidden = viz.output_html([_round()], show_rejected=False, legend=False)
    assert 'class="hsd-tok hsd-rejected"' not in hidden and "hsd-legend" not in hidden


def test_output_html_gives_a_split_character_to_the_token_holding_its_first_byte():
    e = "é".encode()
    r = Round(0, emitted=[Emitted(1, "bonus", e[:1]), Emitted(2, "target", e[1:] + b"!")])
    html = viz.output_html([r], legend=False)
    assert 'hsd-bonus" style="background:#3b82f633;border-bottom:3px solid #3b82f6;border-radius:3px" title' in html
    assert ">é</span>" in html and ">!</span>" in html and "\ufffd" not in html


def test_output_html_escapes_text_and_names_special_tokens():
    r = Round(0, emitted=[Emitted(5, "target", b"<b>&"), Emitted(0, "bonus", b"")])
    html = viz.output_html([r], special_text={0: "<|endoftext|>"})
    assert "&lt;b&gt;&amp;" in html and "<b>&" not in html and "⟨&lt;|endoftext|&gt;⟩" in html


def test_round_html_shows_both_tokenizations_and_marks_disagreeing_boundaries():
    html = viz.round_html(_round(), algorithm="slem")
    assert html.count('class="hsd-drafter-tok"') == 3 and html.count('class="hsd-target-tok"') == 2
    # pieces: de | f | ␣f | ib: cuts at 2 (drafter only), 3 (target only), 5 (drafter only)
    assert html.count("hsd-boundary-disagree") == 3
    assert "q (proposal)" not in html and "P(accept) = p" in html  # SLEM has no proposal probability
    assert "hsd-accepted" in html and "hsd-rejected" in html and "merge-across-boundary" in html


@pytest.mark.parametrize("algorithm,symbol", [("tli", "q′"), ("sd", "q"), ("slrs", "ψ")])
def test_round_html_names_the_proposal_probability(algorithm, symbol):
    r = _round()
    r.positions = [Position(100, 0.9, 0.5, 1.0, "accepted"), Position(101, 0.2, 0.4, 0.5, "rejected")]
    assert f"{symbol} (proposal)" in viz.round_html(r, algorithm=algorithm)


def test_round_html_shows_half_characters_as_hex_and_zero_width_specials():
    e = "中".encode()
    r = Round(0, draft=e + b"a")
    r.drafted = [Span(1, 0, 1), Span(2, 1, 4), Span(3, 4, 4)]  # the drafter splits the character; EOS has no bytes
    r.proposed = [Span(7, 0, 3), Span(8, 3, 4), Span(0, 4, 4)]
    r.positions = [Position(7, 1.0, None, 1.0, "accepted")] * 3
    html = viz.round_html(r, special_drafter={3: "</s>"}, special_target={0: "<|endoftext|>"})
    assert "⟨e4⟩" in html and "⟨b8 ad⟩a" in html and "中" in html
    assert "⟨&lt;/s&gt;⟩" in html and "⟨&lt;|endoftext|&gt;⟩" in html


def test_round_html_for_an_ar_step_says_there_is_no_draft():
    r = Round(3, emitted=[Emitted(5, "target", b"x")])
    assert "no draft" in viz.round_html(r, algorithm="ar")


def test_compare_figures_have_one_trace_per_run():
    results = {"ar": _result("ar", [1, 2]), "slem": _result("slem", [1, 2], tps=150), "tli": _result("tli", [1, 3])}
    speed = figures.speedup_figure(results, "CPU")
    assert isinstance(speed, go.Figure) and [t.type for t in speed.data] == ["bar", "bar"]
    assert list(speed.data[0].y) == pytest.approx([1.5, 1.0])
    label = next(a for a in speed.layout.annotations if "AR = 1" in a.text)  # in the right margin, off the bars
    assert (label.xref, label.x, label.xanchor) == ("paper", 1.0, "left")
    assert [t.name for t in figures.tokens_time_figure(results).data] == ["ar", "slem", "tli"]
    assert [t.name for t in figures.acceptance_histogram_figure(results).data] == ["slem", "tli"]
    assert [t.name for t in figures.position_acceptance_figure(results).data] == ["slem", "tli"]
    assert [t.name for t in figures.time_split_figure(results).data] == ["draft", "convert", "verify", "other"]
    assert len(figures.rounds_figure(results["slem"].rounds).data) == 5


def test_a_long_runs_rounds_plot_averages_groups_of_rounds_and_says_so():
    long = _result("slem", list(range(679)))
    fig = figures.rounds_figure(long.rounds, "slem")
    bars = [t for t in fig.data if t.type == "bar"]
    assert all(len(t.x) <= figures.MAX_ROUND_BARS for t in fig.data)
    assert len(bars[0].x) == 679 // 9 + 1 and "each bar the mean of 9 consecutive rounds" in fig.layout.title.text
    assert bars[0].hovertext[0] == "rounds 0–8" and list(bars[0].y[:1]) == pytest.approx([1.0])  # t_draft: 1 ms
    short = figures.rounds_figure(long.rounds[:50], "slem")
    assert len(short.data[0].x) == 50 and "<sup>" not in short.layout.title.text


def test_the_status_line_speaks_plain_words_and_keeps_the_terms_in_tooltips():
    result = _result("slem", [1, 2, 3], tps=120.0, acceptance=0.5)
    result.metrics.update(mean_accepted_length=2.5, draft_acceptance_rate=0.5, verified_acceptance_rate=0.75)
    line = viz.run_summary(result, viz.tip("CPU, 1 thread", "torch intra-op threads: 1"))
    visible = __import__("re").sub(r'title="[^"]*"', "", line)
    assert "**SLEM** wrote 3 tokens in 3 rounds (120 tokens/s)" in line and "the target ended the text" in line
    assert "2.5 tokens per round" in line and "50% of the drafted tokens" in line
    assert "τ" not in visible and "OpenMP" not in visible and "τ = 2.50" in line  # the term: in the tooltip


def test_summary_table_and_lossless_badge():
    results = {"ar": _result("ar", [1, 2]), "slem": _result("slem", [1, 2]), "tli": _result("tli", [1, 3])}
    table = viz.summary_table(results)
    assert list(table.columns) == viz.SUMMARY_COLUMNS
    assert list(table["same tokens as AR"]) == ["—", "yes", "NO"]
    badge = viz.lossless_badge(results)
    assert "✓ slem: identical to AR" in badge and "✗ tli: differs from AR at token 1" in badge
    sampled = {k: _result(k, [1], temperature=1.0) for k in ("ar", "slem")}
    assert "distribution" in viz.lossless_badge(sampled) and viz.lossless(sampled) == {}
    assert "shared noise" in viz.lossless_badge(sampled)  # says how to see the text itself equal


def test_with_shared_noise_sampled_runs_must_equal_ar_and_the_others_are_said_apart():
    shared = {k: _result(k, ids, temperature=0.7) for k, ids in (("ar", [1, 2]), ("slem", [1, 2]), ("tli", [1, 3]))}
    for k in ("ar", "slem"):
        shared[k].settings["noise"] = "shared"
    assert viz.lossless(shared) == {"slem": True}
    badge = viz.lossless_badge(shared)
    assert "Lossless with shared noise" in badge and "✓ slem: identical to AR" in badge
    assert "tli: sampled with independent noise" in badge and "✗" not in badge
    assert list(viz.summary_table(shared)["same tokens as AR"]) == ["—", "yes", "—"]
    shared["slem"] = _result("slem", [1, 5], temperature=0.7)
    shared["slem"].settings["noise"] = "shared"
    assert "✗ slem: differs from AR at token 1" in viz.lossless_badge(shared)


def test_output_html_places_each_rejected_draft_after_its_round():
    r0 = Round(0, emitted=[Emitted(1, "accepted", b"ab"), Emitted(2, "corrected", b"c")], rejected=b"XY")
    r1 = Round(1, emitted=[Emitted(3, "bonus", b"d")], rejected=b"")
    r2 = Round(2, emitted=[Emitted(4, "corrected", b"e")], rejected=b"Z")
    html = viz.output_html([r0, r1, r2], legend=False)
    order = [html.index(f">{t}</span>") for t in ("ab", "c", "XY", "d", "e", "Z")]
    assert order == sorted(order)


def test_a_whitespace_correction_is_visible_not_an_empty_box():
    span = viz._token_span("  ", "corrected", "round 1")
    assert "␣␣" in span and "hsd-corrected" in span
    assert viz._token_span("  ", "ar", "").count("␣") == 0  # plain AR text keeps its spaces


def test_a_long_round_wraps_only_where_no_token_crosses():
    assert viz._wrap(30, [(0, 2), (2, 30)], [(0, 30)]) == [(0, 30)]  # one token spans all: one line
    assert viz._wrap(30, [(i, i + 1) for i in range(30)], [(0, 13), (13, 30)]) == [(0, 13), (13, 30)]
    assert viz._wrap(30, [(i, i + 1) for i in range(30)], [(i, i + 1) for i in range(30)]) == [(0, 12), (12, 24),
                                                                                                (24, 30)]
