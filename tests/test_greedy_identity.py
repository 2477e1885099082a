"""Temperature 0 in float32: every algorithm emits exactly the AR token ids (spec §6, first bullet)."""

import pytest

import hsd
from pairs import PROMPTS, bigram, byte_pair, heterogeneous, shared_padded

PAIRS = {
    "bpe<-sp": lambda: heterogeneous("bpe<-sp"),
    "sp<-bpe": lambda: heterogeneous("sp<-bpe"),
    "bigram bpe<-sp": lambda: bigram("bpe<-sp"),
    "bigram sp<-bpe": lambda: bigram("sp<-bpe"),
    "shared padded": shared_padded,
    "bpe<-bytes": lambda: byte_pair("llama"),
    "bigram bpe<-bytes": lambda: byte_pair("bigram"),
    "bigram shared": lambda: bigram("shared", pad=16),
}
ALGORITHMS = {name: ["slem", "tli", "slrs"] for name in PAIRS}
ALGORITHMS["shared padded"] = ["sd", "slem", "tli", "slrs"]
ALGORITHMS["bigram shared"] = ["slrs"]  # SLRS's many-path case: a multi-byte drafter that often matches


@pytest.mark.parametrize("pair_name", list(PAIRS))
def test_greedy_output_identical_to_autoregressive(pair_name):
    pair = PAIRS[pair_name]()
    mismatches = []
    for i, prompt in enumerate(PROMPTS):
        ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=20)
        lookahead = (1, 3, 5, 8)[i % 4]
        for algorithm in ALGORITHMS[pair_name]:
            res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=20, lookahead=lookahead)
            if res.token_ids != ref.token_ids or res.stop_reason != ref.stop_reason:
                mismatches.append((algorithm, lookahead, prompt, ref.token_ids, res.token_ids))
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("pair_name,drafter_temperature,budget", [("bigram shared", None, 1), ("bigram bpe<-sp", 1.0, 2)])
def test_slrs_greedy_output_identical_with_a_tiny_path_budget(pair_name, drafter_temperature, budget):
    """A tiny slrs_max_paths makes many drafted tokens heavy (proposed as ⊥), decided by the enumeration
    (greedy drafter) or by the path counts (drafter sampling at temperature 1): still AR's output."""
    pair = PAIRS[pair_name]()
    heavy = 0
    for prompt in PROMPTS[:11]:
        ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=16)
        res = hsd.generate(pair, prompt, algorithm="slrs", max_new_tokens=16, lookahead=4, slrs_max_paths=budget,
                           drafter_temperature=drafter_temperature)
        assert res.token_ids == ref.token_ids and res.stop_reason == ref.stop_reason, prompt
        heavy += sum(r.extra["psi_heavy"] for r in res.rounds)
    assert heavy > 0


def test_greedy_identity_exercises_acceptance():
    """The identity above would be trivial if no draft were ever accepted: check that some are."""
    cases = [(shared_padded(), "sd"), (shared_padded(), "slem"), (shared_padded(), "tli"), (shared_padded(), "slrs"),
             (bigram("shared", pad=16), "slrs")]
    for pair, algorithm in cases:
        rates = [hsd.generate(pair, p, algorithm=algorithm, max_new_tokens=24).metrics["acceptance_rate"] or 0
                 for p in PROMPTS[:6]]
        assert max(rates) > 0.3, (algorithm, rates)


def test_eos_stops_exactly_like_autoregressive():
    pair = bigram("bpe<-sp")
    for seed in range(6):
        ref = hsd.generate(pair, "x", algorithm="ar", max_new_tokens=200, temperature=1.0, seed=seed)
        assert ref.stop_reason in ("eos", "max_new_tokens")
        if ref.stop_reason == "eos":
            assert ref.token_ids[-1] in pair.target.vocab.eos_ids
            break
    else:
        pytest.skip("no seed reached EOS")


@pytest.mark.parametrize("pair_name", ["shared padded", "bpe<-sp"])
def test_greedy_output_identical_with_a_dynamic_lookahead(pair_name):
    """``draft_threshold`` stops a round's drafting after a token the drafter doubts: shorter, uneven drafts,
    the same output."""
    pair = PAIRS[pair_name]()
    short = 0
    for prompt in PROMPTS[:6]:
        ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=20)
        for algorithm in [a for a in ALGORITHMS[pair_name] if a != "slrs"]:
            res = hsd.generate(pair, prompt, algorithm=algorithm, max_new_tokens=20, lookahead=8, draft_threshold=0.6)
            assert res.token_ids == ref.token_ids and res.stop_reason == ref.stop_reason, (algorithm, prompt)
            assert res.settings["draft_threshold"] == 0.6
            short += sum(0 < len(r.drafted) < 8 for r in res.rounds)
    assert short > 0  # the threshold did stop some drafts early
