"""``benchmarks/pair_goals.py``'s arithmetic: what a speed goal asks of a drafter (no models needed)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import pair_goals  # noqa: E402


def test_free_drafting_and_verification_needs_half_the_proposals_for_2x():
    """With a free drafter and a verification as cheap as a step, the speedup is τ: 2x needs a just over 0.5."""
    r = pair_goals.requirement(2.0, 0.0, lambda n: 1.0, 1.0)
    assert r["needed_acceptance"] == pytest.approx(0.5, abs=0.011) and r["ceiling"] == pytest.approx(13.0)


def test_costly_drafting_lowers_the_ceiling_and_can_make_a_goal_unreachable():
    # each proposal costs a whole target step to draft: at best (m+1)/(m+1) = 1x
    r = pair_goals.requirement(1.5, 1.0, lambda n: 1.0, 1.0)
    assert r["needed_acceptance"] is None and r["ceiling"] == pytest.approx(13 / 13)
    # a byte drafter needs 1/0.28 steps per proposal: the same cost ratio reaches less
    assert (pair_goals.requirement(1.0, 0.2, lambda n: 1.0, 0.28)["ceiling"]
            < pair_goals.requirement(1.0, 0.2, lambda n: 1.0, 1.0)["ceiling"])


def test_distinct_4gram_share():
    assert pair_goals.distinct_4gram_share([1, 2, 3, 4, 5]) == 1.0
    assert pair_goals.distinct_4gram_share([7] * 10) == pytest.approx(1 / 7)
