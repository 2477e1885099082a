"""One metrics path: per-round counts -> summarize() -> Metrics, the same for hsd's trace and the peer."""

import json

import pytest

from hsd.metrics import Counts, Metrics, conditional_acceptance, per_position_acceptance, summarize


def test_per_position_acceptance_counts_reaching_a_position_as_vllm_does():
    counts = [Counts(3, 3, 3, 4), Counts(3, 3, 1, 2), Counts(2, 2, 0, 1)]
    assert per_position_acceptance(counts) == pytest.approx([2 / 3, 1 / 3, 1 / 2])
    # conditional: among rounds that accepted every earlier proposal
    assert conditional_acceptance(counts, 3) == pytest.approx([2 / 3, 1 / 2, 1.0])


def test_summarize_gives_the_paper_harness_numbers():
    counts = [Counts(2, 2, 2, 3, 0.5), Counts(2, 2, 0, 1, 0.7), Counts(0, 0, 0, 1, 0.8)]
    m = summarize(counts, total_s=0.8, target_forwards=4)
    assert m.new_tokens == 5 and m.rounds == 3 and m.ttft_s == 0.5
    assert m.tpot_s == pytest.approx(0.3 / 4) and m.tokens_per_s == pytest.approx(4 / 0.3)
    assert m.acceptance_rate == 0.5 and m.acceptance_histogram == [2, 0, 1] and m.mean_accepted_length == 5 / 3


def test_metrics_read_by_key_and_round_trip_through_json():
    m = summarize([Counts(1, 1, 1, 2, 0.1)], total_s=0.2, extra={"psi_paths": 7})
    assert m["psi_paths"] == 7 and "psi_paths" in m and "overhead" not in m and m["new_tokens"] == 2
    data = json.loads(json.dumps(m.to_dict()))
    assert "extra" not in data and Metrics.of(data) == m


def test_verified_acceptance_counts_only_the_positions_the_target_judged():
    # round 1 accepts 1 of 4 (judges 2), round 2 accepts all 4 (judges 4), round 3 proposes nothing
    m = summarize([Counts(4, 4, 1, 2), Counts(4, 4, 4, 5), Counts(0, 0, 0, 1)])
    assert m.draft_acceptance_rate == 5 / 8 and m.verified == 6 and m.verified_acceptance_rate == 5 / 6
    assert m.acceptance_rate == m["acceptance_rate"] == m.draft_acceptance_rate  # the old name still reads
    old = {k: v for k, v in m.to_dict().items() if k != "draft_acceptance_rate"} | {"acceptance_rate": 5 / 8}
    assert Metrics.of(old) == m and "acceptance_rate" not in m.to_dict()


@pytest.mark.parametrize("algorithm", ["slem", "tli", "slrs"])
def test_verified_positions_are_those_the_trace_did_not_mark_unverified(algorithm):
    import hsd

    res = hsd.generate(hsd.load_pair(), "def fibonacci(n):", algorithm=algorithm, temperature=0.7, max_new_tokens=24)
    judged = sum(p.outcome != "unverified" for r in res.rounds for p in r.positions)
    assert res.metrics.verified == judged and res.metrics.verified_acceptance_rate == res.metrics.accepted / judged
