"""Soft labels across vocabularies (scripts/soft_labels.py): the target's distribution, carried to the drafter's
next token, at the positions where both tokenizers cut."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from hsd.vocab import Vocab  # noqa: E402

PAIR = ROOT / "assets" / "tiny-code"
CODE = "def add(a, b):\n    return a + b\n\n\nclass Point:\n    x: int = 0\n"


@pytest.fixture(scope="module")
def labeler():
    from transformers import AutoTokenizer

    from soft_labels import SoftLabeler

    torch.set_num_threads(1)
    return SoftLabeler(PAIR / "target", AutoTokenizer.from_pretrained(PAIR / "drafter"))


def _row(labeler, *texts):
    """Drafter ids of ``texts`` as packed files are: ``<s>`` text ``</s>`` each."""
    tok_d = _drafter_tok()
    out = []
    for t in texts:
        out += [tok_d.bos_token_id] + tok_d.encode(t, add_special_tokens=False) + [tok_d.eos_token_id]
    return out


def _drafter_tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(PAIR / "drafter")


def test_each_target_token_maps_to_the_drafter_token_its_text_starts_with():
    from transformers import AutoTokenizer

    from soft_labels import first_piece_map

    tok_t, tok_d = AutoTokenizer.from_pretrained(PAIR / "target"), _drafter_tok()
    first, exact = first_piece_map(tok_t, tok_d)
    vt, vd = Vocab.from_tokenizer(tok_t), Vocab.from_tokenizer(tok_d)
    for t, b in enumerate(vt.tokens):
        if b:
            assert first[t] >= 0 and b.startswith(vd.tokens[first[t]]), (t, b)
    assert first[tok_t.eos_token_id] == tok_d.eos_token_id
    shared = {b for b in vd.tokens if b} & {b for b in vt.tokens if b}
    ids = vd.bytes_to_id
    # a token both vocabularies hold maps to itself whenever the drafter spells it as one token
    for b in shared:
        t = vt.tokens.index(b)
        if tok_d.encode(b.decode("utf-8", "ignore"), add_special_tokens=False) == [ids[b]]:
            assert first[t] == ids[b]
    assert 0.8 * len(shared) <= exact <= len(shared)


def test_labels_are_the_targets_next_token_distribution_where_both_tokenizers_cut(labeler):
    row = _row(labeler, CODE)
    x = torch.tensor([row[:-1]])  # <s> CODE: the window is one file
    idx, y, share = labeler.labels(x)
    L = x.shape[1] - 1
    # aligned positions: exactly the drafter positions whose token ends where a target token ends
    ends, pos = [], 0
    for t in row[1:-1]:
        pos += len(labeler.d_bytes[t])
        ends.append(pos)
    enc = labeler.tok_t(CODE, add_special_tokens=False, return_offsets_mapping=True)
    t_ends = {o[1] for o in enc["offset_mapping"]}
    want = [1 + k for k, e in enumerate(ends[:-1]) if e in t_ends and 1 + k < L]
    assert idx.tolist() == want and share == pytest.approx(len(want) / L)
    assert torch.allclose(y.sum(-1), torch.ones(len(want)), atol=1e-5)
    # each label, recomputed from the target reading the text up to that byte on its own
    first = labeler.first
    for n, p in enumerate(want):
        prefix = CODE[:ends[p - 1]]
        ids = labeler.tok_t(prefix, add_special_tokens=False)["input_ids"]
        if ids != enc["input_ids"][:len(ids)]:
            continue  # the prefix alone is cut differently: not the context the window gave the target
        with torch.no_grad():
            probs = torch.softmax(labeler.target(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        manual = torch.zeros(labeler.n_drafter)
        for t in range(probs.numel()):
            manual[first[t]] += probs[t]
        assert torch.allclose(y[n], manual, atol=1e-4), p


def test_each_file_of_a_window_is_labelled_as_if_it_were_alone(labeler):
    first_file = "import os\nprint(os.sep)\n"
    row = _row(labeler, first_file, CODE)
    x = torch.tensor([row[:-1]])
    idx, y, _ = labeler.labels(x)
    boundary = row.index(_drafter_tok().bos_token_id, 1)  # the second file's <s>
    before, after = idx < boundary, idx > boundary
    assert before.any() and after.any() and not (idx == boundary).any() and not (idx == boundary - 1).any()
    for part, start, end in ((before, 0, boundary), (after, boundary, len(row) - 1)):
        alone = torch.tensor([row[start:end]])
        idx2, y2, _ = labeler.labels(alone)
        assert (idx[part] - start).tolist() == idx2.tolist()
        assert torch.allclose(y[part], y2, atol=1e-5)


def test_a_window_that_starts_inside_a_character_keeps_only_the_texts_labels(labeler):
    tok_d = _drafter_tok()
    ids = tok_d.encode("é = 'x'\n", add_special_tokens=False)
    assert tok_d.convert_ids_to_tokens(ids[:2]) == ["<0xC3>", "<0xA9>"]
    idx, y, share = labeler.labels(torch.tensor([ids[1:]]))  # starts with the character's second byte
    assert idx.numel() == 0 and y.shape == (0, labeler.n_drafter) and share == 0.0
    idx, _, _ = labeler.labels(torch.tensor([ids]))
    assert idx.numel() > 0


def test_the_soft_loss_is_smallest_at_the_labels(labeler):
    from soft_labels import soft_loss

    row = _row(labeler, CODE)
    x = torch.tensor([row[:-1]])
    idx, y, _ = labeler.labels(x)
    L, V = x.shape[1] - 1, labeler.n_drafter
    at_labels = torch.zeros(1, L, V)
    at_labels.reshape(-1, V)[idx] = torch.log(y.clamp_min(1e-12))
    uniform = torch.zeros(1, L, V)
    entropy = -(y * torch.log(y.clamp_min(1e-12))).sum(-1).mean()
    assert soft_loss(at_labels, idx, y) == pytest.approx(entropy.item(), abs=1e-4)
    assert soft_loss(uniform, idx, y) > soft_loss(at_labels, idx, y)


def test_for_a_byte_drafter_a_label_is_the_targets_probability_of_each_first_byte():
    from transformers import AutoTokenizer

    from soft_labels import SoftLabeler

    tok_b = AutoTokenizer.from_pretrained(PAIR / "drafter-bytes")
    labeler = SoftLabeler(PAIR / "target", tok_b)
    assert labeler.exact == 256  # the target's single-byte tokens
    ids = [tok_b.bos_token_id] + tok_b.encode(CODE, add_special_tokens=False)
    idx, y, _ = labeler.labels(torch.tensor([ids]))
    enc = labeler.tok_t(CODE, add_special_tokens=False, return_offsets_mapping=True)
    assert idx.tolist() == [e for _, e in enc["offset_mapping"][:-1]]  # every target boundary is a byte boundary
    with torch.no_grad():
        probs = torch.softmax(labeler.target(input_ids=torch.tensor([enc["input_ids"]])).logits[0].float(), -1)
    vt = Vocab.from_tokenizer(labeler.tok_t)
    byte_id = {b: i for i, b in enumerate(labeler.d_bytes) if len(b) == 1}
    j = 3  # after the target's fourth token: the mass of the tokens starting with each byte
    manual = torch.zeros(labeler.n_drafter)
    for t, b in enumerate(vt.tokens):
        if b:
            manual[byte_id[b[:1]]] += probs[j, t]
    assert torch.allclose(y[j], manual / manual.sum(), atol=1e-4)


def test_labels_at_a_lower_temperature_are_the_targets_sharper_distribution(labeler):
    """``temperature`` takes the labels at the target's sampling temperature: the same aligned positions, sharper
    rows, each the T-softmax of the target's logits carried to the drafter's tokens; 1 is the default's labels."""
    from soft_labels import SoftLabeler

    x = torch.tensor([_row(labeler, CODE)[:-1]])
    idx, y, _ = labeler.labels(x)
    cold = SoftLabeler.__new__(SoftLabeler)
    cold.__dict__.update(labeler.__dict__, temperature=0.7)
    idx_c, y_c, _ = cold.labels(x)
    assert idx_c.tolist() == idx.tolist()
    assert torch.allclose(y_c.sum(-1), torch.ones(len(idx)), atol=1e-5)
    entropy = lambda p: float(-(p * p.clamp_min(1e-12).log()).sum(-1).mean())  # noqa: E731
    assert entropy(y_c) < entropy(y)
    same = SoftLabeler.__new__(SoftLabeler)
    same.__dict__.update(labeler.__dict__, temperature=1.0)
    assert torch.allclose(same.labels(x)[1], y)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SoftLabeler(PAIR / "target", _drafter_tok(), temperature=0)


@pytest.fixture(scope="module")
def labeler_all(labeler):
    """The same labeler, also labelling the drafter positions inside a target token (``positions="all"``)."""
    from soft_labels import SoftLabeler, inside_map

    every = SoftLabeler.__new__(SoftLabeler)
    every.__dict__.update(labeler.__dict__, positions="all",
                          inside=inside_map(labeler.tok_t, _drafter_tok(), labeler.target.config.vocab_size))
    return every


def test_inside_a_target_token_the_label_is_the_targets_distribution_given_the_bytes_written(labeler, labeler_all):
    """``positions="all"``: the aligned labels unchanged, and every position that ends inside a target token
    labelled with the target's distribution at that token's start, restricted to the tokens that spell the bytes
    already written and go on, each carried to the drafter token the rest of its text starts with."""
    from soft_labels import _first_piece

    row = _row(labeler, CODE)
    x = torch.tensor([row[:-1]])
    idx_a, y_a, share_a = labeler.labels(x)
    idx, y, share = labeler_all.labels(x)
    rows = {p: r for r, p in enumerate(idx.tolist())}
    assert set(idx_a.tolist()) < set(rows) and share > share_a
    assert torch.allclose(y[[rows[p] for p in idx_a.tolist()]], y_a, atol=1e-6)
    assert torch.allclose(y.sum(-1), torch.ones(len(idx)), atol=1e-5)
    ends, pos = [], 0
    for t in row[1:-1]:
        pos += len(labeler.d_bytes[t])
        ends.append(pos)
    enc = labeler.tok_t(CODE, add_special_tokens=False, return_offsets_mapping=True)
    t_ends = [o[1] for o in enc["offset_mapping"]]
    inner = [p for p in rows if p not in set(idx_a.tolist())]
    assert inner
    vt, vd = Vocab.from_tokenizer(labeler.tok_t), Vocab.from_tokenizer(_drafter_tok())
    data, checked = CODE.encode(), 0
    for p in inner:
        end = ends[p - 1]  # position p (after <s>) predicts the drafter token that starts at byte `end`
        j = max(k for k, e in enumerate(t_ends) if e < end)  # the covering target token is j + 1
        start, written = t_ends[j], data[t_ends[j]:end]
        assert 0 < len(written) and t_ends[j + 1] > end
        with torch.no_grad():
            probs = torch.softmax(labeler.target(input_ids=torch.tensor([enc["input_ids"][:j + 1]])).logits[0, -1], -1)
        manual = torch.zeros(labeler.n_drafter)
        for t, b in enumerate(vt.tokens[:probs.numel()]):
            if b and len(b) > len(written) and b.startswith(written):
                manual[_first_piece(_drafter_tok(), vd, b[len(written):])] += probs[t]
        assert torch.allclose(y[rows[p]], manual / manual.sum(), atol=1e-4), (p, written)
        # the drafter token that actually follows is one the label allows
        assert y[rows[p], row[p + 1]] > 0
        checked += 1
        assert start < end
    assert checked == len(inner)


def test_for_the_targets_own_vocabulary_every_label_is_its_next_token_distribution():
    """Self-distillation (``resume --role target --distill-logits``: a grown target learning from the target it was
    grown from): with one tokenizer every position is aligned and each label is the teacher's own next-token
    distribution at that position."""
    from transformers import AutoTokenizer

    from soft_labels import SoftLabeler

    tok = AutoTokenizer.from_pretrained(PAIR / "target")
    teacher = SoftLabeler(PAIR / "target", tok)
    ids = tok(CODE, add_special_tokens=False)["input_ids"]
    x = torch.tensor([ids])  # the target's windows carry no <s>
    idx, y, share = teacher.labels(x)
    assert idx.tolist() == list(range(len(ids) - 1)) and share == 1.0
    with torch.no_grad():
        own = torch.softmax(teacher.target(input_ids=x[:, :-1]).logits[0].float(), -1)
    assert torch.allclose(y, own, atol=1e-5)


def test_positions_must_be_aligned_or_all():
    from soft_labels import SoftLabeler

    with pytest.raises(ValueError, match="positions must be one of"):
        SoftLabeler(PAIR / "target", _drafter_tok(), positions="inner")


def test_the_held_out_score_splits_aligned_positions_from_those_inside_a_target_token(labeler, labeler_all):
    from transformers import AutoModelForCausalLM

    from soft_labels import heldout_soft_loss

    model = AutoModelForCausalLM.from_pretrained(PAIR / "drafter")
    stream = torch.tensor(_row(labeler, CODE, "import os\nprint(os.sep)\n", CODE) * 2)
    seq = 32
    plain = heldout_soft_loss(model, labeler, stream, seq)
    every = heldout_soft_loss(model, labeler_all, stream, seq)
    assert set(plain) == {"soft_ce", "entropy", "positions"}
    assert every["positions_aligned"] == plain["positions"] and every["soft_ce_aligned"] == pytest.approx(
        plain["soft_ce"], abs=1e-4)
    assert every["positions"] == every["positions_aligned"] + every["positions_inside"] > plain["positions"]
    mixed = (every["soft_ce_aligned"] * every["positions_aligned"] + every["soft_ce_inside"] * every["positions_inside"])
    assert every["soft_ce"] * every["positions"] == pytest.approx(mixed, rel=1e-4)
    assert every["soft_ce_inside"] >= every["entropy_inside"] - 1e-5
