"""hsd.picture: the rejection-sampling picture of a verified position, from distributions recorded at run time
only on request (``record_distributions``), for every algorithm; its numbers; and runs that record output
exactly what runs that do not record output."""

import json

import plotly.graph_objects as go
import pytest
import torch

import hsd
from hsd import picture
from hsd.sampling import Sampling
from hsd.trace import Position, Round
from hsd.verify import Recorder, exact_match, rejection, residual
from pairs import bigram, heterogeneous, shared_padded

PROMPT = "def fib(n):"
CASES = [("sd", "shared"), ("slem", "bpe<-sp"), ("tli", "bpe<-sp"), ("slrs", "bpe<-sp")]
SYMBOL = {"sd": "q", "slem": "δ", "tli": "q′", "slrs": "ψ"}


def _pair(kind):
    return shared_padded() if kind == "shared" else heterogeneous(kind)


def _run(algorithm, kind, record=True, **kw):
    settings = dict(max_new_tokens=24, temperature=1.0, seed=3)
    settings.update(kw)
    return hsd.generate(_pair(kind), PROMPT, algorithm=algorithm, record_distributions=record, **settings)


@pytest.mark.parametrize("algorithm,kind", CASES)
def test_a_figure_and_its_explanation_for_every_verified_position(algorithm, kind):
    res = _run(algorithm, kind)
    located = picture.recorded_positions(res)
    verified = [(r.index, i) for r in res.rounds for i, p in enumerate(r.positions) if p.outcome != "unverified"]
    assert located == verified and len(located) >= 5
    for loc in located[:6]:
        rnd = next(r for r in res.rounds if r.index == loc[0])
        pos = rnd.positions[loc[1]]
        fig = picture.rejection_figure(res, loc)
        assert isinstance(fig, go.Figure) and [t.type for t in fig.data] == ["bar"] * 4
        assert len(fig.data[0].y) == len(pos.dist.ids) + 1  # the listed tokens, then all other tokens
        assert f"{pos.accept_prob:.3f}" in fig.layout.title.text and pos.outcome in fig.layout.title.text
        assert SYMBOL[algorithm] in fig.layout.title.text
        line = picture.rejection_explanation(rnd, loc[1])
        assert "\n" not in line and f"{pos.accept_prob:.3f}" in line
        assert ("accepted" if pos.outcome == "accepted" else "rejected") in line
        assert sum(fig.data[0].y) == pytest.approx(1.0, abs=1e-5)  # p, listed plus the rest
        assert sum(fig.data[3].y) == pytest.approx(1.0, abs=1e-5)  # the residual, renormalised


@pytest.mark.parametrize("algorithm,kind", CASES)
def test_recorded_numbers_agree_with_the_round_view(algorithm, kind):
    res = _run(algorithm, kind)
    for rnd in res.rounds:
        for pos in rnd.positions:
            d = pos.dist
            if d is None:
                assert pos.outcome == "unverified"
                continue
            assert sum(d.residual) + d.residual_rest == pytest.approx(1.0, abs=1e-5)
            assert sum(d.p) + d.p_rest == pytest.approx(1.0, abs=1e-5)
            assert 0.0 <= d.accepted_mass <= 1.0 + 1e-6
            if d.token >= 0:  # the drafted token is listed, with the round view's p and proposal probability
                j = d.ids.index(d.token)
                assert d.p[j] == pytest.approx(pos.p, abs=1e-6)
                if algorithm == "slem":
                    assert d.proposal[j] == 1.0 and pos.accept_prob == pytest.approx(d.p[j])
                else:
                    assert d.proposal[j] == pytest.approx(pos.q, abs=1e-6)
                    expected = min(1.0, d.p[j] / d.proposal[j]) if d.proposal[j] > 0 else 0.0
                    assert pos.accept_prob == pytest.approx(expected, rel=1e-5, abs=1e-7)
            emitted = d.emitted if pos.outcome == "rejected" else d.token
            assert d.emitted == emitted and (emitted < 0 or emitted in d.ids)
        rejected = [pos for pos in rnd.positions if pos.outcome == "rejected"]
        if rejected and rejected[0].dist.emitted is not None:  # the correction the round emitted
            corrected = [e.token for e in rnd.emitted if e.label == "corrected"]
            assert corrected in ([rejected[0].dist.emitted], [])


def test_accepted_mass_is_one_minus_total_variation_and_the_residual_is_max_p_minus_q():
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(3, 50, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(2, 50, generator=gen) * 2, -1)
    rec = Recorder([bytes([65 + i % 26]) for i in range(50)], top=50)
    d = rec.position(p[0], q[0], 7, 7)
    assert d.accepted_mass == pytest.approx(1 - 0.5 * float((p[0] - q[0]).abs().sum()), abs=1e-6)
    assert len(d.ids) == 50 and d.p_rest == pytest.approx(0, abs=1e-6)
    r = residual(p[0], q[0])
    assert d.residual == pytest.approx([float(r[i]) for i in d.ids], abs=1e-7)
    assert d.p == sorted(d.p, reverse=True)  # by p, most probable first
    # Kept top-5: the proposal's and the residual's most probable tokens are listed even outside p's top.
    small = Recorder(rec.tokens, top=5).position(p[0], q[0], 7, 7)
    for row in (q[0], r):
        assert set(row.topk(5).indices.tolist()) <= set(small.ids)
    assert 7 in small.ids and sum(small.p) + small.p_rest == pytest.approx(1.0, abs=1e-6)


def test_recording_draws_nothing_from_the_rng_and_changes_no_verdict():
    gen = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(4, 40, generator=gen), -1)
    q = torch.softmax(torch.randn(3, 40, generator=gen), -1)
    sampling = Sampling(1.0)
    for seed in range(20):
        plain = rejection(p, q, [3, 5, 7], sampling, hsd.sampling.Rng(seed))
        rec = rejection(p, q, [3, 5, 7], sampling, hsd.sampling.Rng(seed), record=Recorder([b"x"] * 40))
        assert (plain.n_accepted, plain.token, plain.label) == (rec.n_accepted, rec.token, rec.label)
        assert [pos.dist is not None for pos in rec.positions] == [i <= min(rec.n_accepted, 2) for i in range(3)]
        match = exact_match(p, [3, 5, 7], sampling, hsd.sampling.Rng(seed), record=Recorder([b"x"] * 40))
        assert match.token == exact_match(p, [3, 5, 7], sampling, hsd.sampling.Rng(seed)).token
        first = match.positions[0].dist
        assert first.rule == "exact match" and first.proposal[first.ids.index(3)] == 1.0
        assert first.accepted_mass == pytest.approx(float(p[0, 3]), abs=1e-6)


@pytest.mark.parametrize("algorithm,kind", CASES)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_recording_does_not_change_the_output(algorithm, kind, temperature):
    plain = _run(algorithm, kind, record=False, temperature=temperature, max_new_tokens=32)
    recorded = _run(algorithm, kind, record=True, temperature=temperature, max_new_tokens=32)
    assert recorded.token_ids == plain.token_ids
    assert [[(e.token, e.label) for e in r.emitted] for r in recorded.rounds] == \
           [[(e.token, e.label) for e in r.emitted] for r in plain.rounds]
    assert all(pos.dist is None for r in plain.rounds for pos in r.positions)
    assert plain.settings["record_distributions"] == 0 and recorded.settings["record_distributions"] == 20


def test_off_by_default_and_the_json_trace_keeps_its_keys():
    plain = _run("tli", "bpe<-sp", record=False)
    assert all("dist" not in p for r in plain.to_dict()["rounds"] for p in r["positions"])
    recorded = _run("tli", "bpe<-sp", record=5)
    text = json.dumps(recorded.to_dict())  # the CLI's --json: recorded distributions are plain JSON
    assert '"dist"' in text
    assert max(len(pos.dist.ids) for r in recorded.rounds for pos in r.positions if pos.dist) <= 5 + 5 + 5 + 2


def test_p_is_the_target_distribution_after_the_sampling_settings():
    """On a bigram target the first position's p is one softmax of a table row, in closed form."""
    pair = bigram("shared", pad=16)
    settings = dict(temperature=0.8, top_k=3, top_p=0.9)
    res = hsd.generate(pair, "def f", algorithm="sd", max_new_tokens=4, seed=2, record_distributions=True, **settings)
    d = res.rounds[0].positions[0].dist
    last = pair.target.tokenizer("def f")["input_ids"][-1]
    exact = Sampling(**settings).probs(pair.target.model.table[last].unsqueeze(0))[0]
    assert set(d.ids) >= set(exact.nonzero().squeeze(-1).tolist())
    assert d.p == pytest.approx([float(exact[i]) for i in d.ids], abs=1e-6)


def test_greedy_picture_is_a_point_mass():
    res = _run("sd", "shared", temperature=0.0)
    d = res.rounds[0].positions[0].dist
    assert d.p[0] == 1.0 and d.p_rest == 0.0 and sum(d.p) == 1.0


def test_positions_without_a_picture_say_why():
    plain = _run("slem", "bpe<-sp", record=False)
    with pytest.raises(picture.NoPictureError, match="record_distributions=True"):
        picture.rejection_figure(plain, (0, 0))
    r = Round(0, positions=[Position(1, 0.5, None, 0.5, "rejected"), Position(2, 0.5, None, 0.5, "unverified")])
    with pytest.raises(picture.NoPictureError, match="not verified"):
        picture.rejection_figure(r, 1)
    with pytest.raises(picture.NoPictureError, match="no position 5"):
        picture.rejection_explanation(r, 5)
    recorded = _run("slem", "bpe<-sp")
    with pytest.raises(picture.NoPictureError, match="not one of"):
        picture.rejection_figure(recorded, 10_000)
    assert picture.rejection_figure(recorded, 0).layout.title.text == \
           picture.rejection_figure(recorded, picture.recorded_positions(recorded)[0]).layout.title.text


def test_top_limits_the_columns_but_keeps_the_proposed_and_emitted_tokens():
    res = _run("tli", "bpe<-sp")
    loc = next((r.index, i) for r in res.rounds for i, p in enumerate(r.positions) if p.outcome == "rejected")
    d = res.rounds[loc[0]].positions[loc[1]].dist
    fig = picture.rejection_figure(res, loc, top=4)
    assert len(fig.data[0].x) <= 5 and sum(fig.data[0].y) == pytest.approx(1.0, abs=1e-5)
    ticks = " ".join(fig.layout.xaxis.ticktext)
    assert "(proposed)" in ticks and "(emitted)" in ticks and d.emitted != d.token


def test_token_text_is_visible():
    r = Round(0, positions=[Position(1, 0.5, 0.5, 1.0, "accepted")])
    r.positions[0].dist = hsd.trace.Distributions(
        ids=[1, 2, 3, 4, 5], text=["  ", "\n", "⟨e4 b8⟩", "⟨<|endoftext|>⟩", "\n        x"],
        p=[0.4, 0.3, 0.2, 0.1, 0.0],
        proposal=[0.5, 0.5, 0.0, 0.0, 0.0], residual=[0.0, 0.0, 2 / 3, 1 / 3, 0.0], p_rest=0.0, proposal_rest=0.0,
        residual_rest=0.0, accepted_mass=0.7, token=1, emitted=1, rule="rejection", symbol="q")
    ticks = picture.rejection_figure(r, 0).layout.xaxis.ticktext
    assert ticks[0] == "<b>␣␣ (proposed)</b>" and ticks[1] == "↵" and ticks[2] == "⟨e4 b8⟩"
    assert ticks[3] == "⟨&lt;|endoftext|&gt;⟩" and ticks[4] == "↵␣×8x"  # indentation fits under a bar
    assert picture.visible_token("\n        x") == "↵␣␣␣␣␣␣␣␣x"
