"""When a greedy run differs from AR: the first differing position, both tokens and the target's top-2 margin,
so a half-precision near-tie reads as one. The difference is forced by editing a real result."""

import dataclasses

import pytest
import torch

import hsd
from hsd import viz
from hsd.divergence import Difference, first_difference


def _forced(pair, at=3):
    """AR's result, and a copy whose token ``at`` is the target's second choice there."""
    ar = hsd.generate(pair, "def fibonacci(n):", algorithm="ar", max_new_tokens=8)
    ids = torch.tensor([ar.prompt_ids + ar.token_ids[:at]], device=pair.target.device)
    with torch.inference_mode():
        top = torch.topk(pair.target.model(ids).logits[0, -1, :pair.target.n_logits], 3).indices.tolist()
    # the best other token: in half precision a full forward may rank AR's (cached) choice second, not first
    second = next(t for t in top if t != ar.token_ids[at])
    other = dataclasses.replace(ar, algorithm="slem", token_ids=ar.token_ids[:at] + [second] + ar.token_ids[at + 1:])
    return ar, other, second


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_first_difference_names_the_position_both_tokens_and_the_top2_margin(dtype):
    pair = hsd.load_pair(dtype=dtype, device="cpu")
    ar, other, second = _forced(pair)
    diff = first_difference(pair, ar, other)
    assert diff.position == 3 and diff.ar_token == ar.token_ids[3] and diff.other_token == second
    assert diff.dtype == dtype
    if dtype == "float32":  # exact: the two runs' tokens are the target's top two there
        assert diff.top_tokens == (ar.token_ids[3], second)
    assert diff.margin >= 0 and diff.top_probs[0] >= diff.top_probs[1]
    assert f"at token 3: AR chose {diff.ar_text!r}" in diff.explain("slem")
    assert "float32" in diff.explain("slem")
    assert first_difference(pair, ar, ar) is None


def test_a_small_margin_in_half_precision_is_called_a_near_tie():
    tie = Difference(9, 5, 6, "a", "b", (5, 6), ("a", "b"), (12.01, 12.0), (0.3, 0.29), "bfloat16")
    assert tie.near_tie and "near-tie" in tie.explain() and "dtype float32" in tie.explain()
    assert not dataclasses.replace(tie, dtype="float32").near_tie
    assert not dataclasses.replace(tie, top_logits=(14.0, 12.0)).near_tie


def test_runs_of_different_lengths_are_a_difference_at_the_shorter_end():
    pair = hsd.load_pair()
    ar, _, _ = _forced(pair)
    short = dataclasses.replace(ar, token_ids=ar.token_ids[:5])
    diff = first_difference(pair, ar, short)
    assert diff.position == 5 and diff.other_token is None and "different lengths" in diff.explain()


def test_lossless_badge_explains_a_difference_when_given_the_pair():
    pair = hsd.load_pair()
    ar, other, _ = _forced(pair)
    page = viz.lossless_badge({"ar": ar, "slem": other}, pair)
    assert "differs from AR at token 3" in page and "hsd-divergence" in page and "apart in logits" in page
    assert "hsd-divergence" not in viz.lossless_badge({"ar": ar, "slem": other})
