"""Trace bookkeeping (spec §5): what the CLI, the benchmark and the app read must add up."""

import pytest
import torch

import hsd
from hsd.sampling import Sampling
from pairs import bigram, shared_padded


@pytest.mark.parametrize("algorithm,pair", [("sd", shared_padded), ("slem", lambda: bigram("bpe<-sp")),
                                             ("tli", lambda: bigram("bpe<-sp"))])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_round_records_add_up(algorithm, pair, temperature):
    pair = pair()
    res = hsd.generate(pair, "def f", algorithm=algorithm, max_new_tokens=40, temperature=temperature, seed=1)
    emitted = [e.token for r in res.rounds for e in r.emitted]
    assert emitted == res.token_ids
    for r in res.rounds:
        outcomes = [p.outcome for p in r.positions]
        n_acc = outcomes.count("accepted")
        assert outcomes == ["accepted"] * n_acc + ["rejected"] * outcomes.count("rejected") + ["unverified"] * outcomes.count("unverified")
        assert outcomes.count("rejected") <= 1
        assert [e.label for e in r.emitted][:n_acc] == ["accepted"] * min(n_acc, len(r.emitted))
        if not (res.stop_reason and r is res.rounds[-1]):
            assert len(r.emitted) == n_acc + 1  # accepted + one corrected or bonus token
            assert r.emitted[-1].label == ("bonus" if n_acc == len(r.positions) else "corrected")
        # accepted + rejected = drafted: the accepted proposals and the rejected remainder spell the draft
        accepted_bytes = b"".join(e.text for e in r.emitted if e.label == "accepted")
        assert r.draft[r.lag:] == accepted_bytes + r.rejected or algorithm == "sd" and r.draft == accepted_bytes + r.rejected
        for span in r.drafted + r.proposed:
            assert 0 <= span.start <= span.end <= len(r.draft)
        assert r.target_forwards == 1 and r.drafter_forwards >= 1
    m = res.metrics
    assert m["new_tokens"] == len(res.token_ids)
    assert m["mean_accepted_length"] == pytest.approx(len(res.token_ids) / len(res.rounds))  # tau counts the bonus
    assert m["accepted"] == sum(r.n_accepted for r in res.rounds)
    assert sum(m["acceptance_histogram"]) == len(res.rounds)
    assert m["target_forwards"] == len(res.rounds) + 1  # one prefill + one verification per round
    assert m["ttft_s"] <= m["total_s"]
    assert abs(sum(m["time_split_s"].values()) + m["prefill_s"] - m["total_s"]) < 0.05 * m["total_s"] + 1e-3


def test_ar_rounds_are_single_target_tokens():
    res = hsd.generate(bigram("bpe<-sp"), "def f", algorithm="ar", max_new_tokens=10)
    assert all(len(r.emitted) == 1 and r.emitted[0].label == "target" for r in res.rounds)
    assert res.metrics["mean_accepted_length"] == 1.0 and res.metrics["acceptance_rate"] is None


def test_to_dict_is_json_serialisable():
    import json

    res = hsd.generate(bigram("bpe<-sp"), "def f", algorithm="slem", max_new_tokens=10)
    data = json.loads(json.dumps(res.to_dict()))
    assert data["token_ids"] == res.token_ids and len(data["rounds"]) == len(res.rounds)


def test_seeded_sampling_is_reproducible_and_uses_no_global_rng():
    pair = bigram("bpe<-sp")
    torch.manual_seed(123)
    a = hsd.generate(pair, "def f", algorithm="tli", max_new_tokens=20, temperature=1.0, seed=5).token_ids
    torch.manual_seed(999)
    b = hsd.generate(pair, "def f", algorithm="tli", max_new_tokens=20, temperature=1.0, seed=5).token_ids
    assert a == b


def test_sampling_matches_transformers_generate_processors(model_dirs):
    """temperature/top_k/top_p mean what they mean in generate(): same processed distribution."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dirs["target"])
    tok = AutoTokenizer.from_pretrained(model_dirs["target"])
    ids = tok("def f(x):", return_tensors="pt")
    for t, k, p in [(1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.8), (0.9, 20, 0.95)]:
        out = model.generate(**ids, do_sample=True, temperature=t, top_k=k, top_p=p, max_new_tokens=1,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=tok.eos_token_id)
        theirs = torch.softmax(out.scores[0][0].float(), -1)
        logits = model(**ids).logits[0, -1]
        ours = Sampling(t, k, p).probs(logits.unsqueeze(0))[0]
        assert torch.allclose(ours, theirs, atol=1e-6), (t, k, p)
