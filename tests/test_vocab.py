"""Token bytes, shared-vocabulary detection, the TLI intersection, special roles (spec §0, §1, §3)."""

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import hsd
from builders import bytelevel_tokenizer, sentencepiece_tokenizer


def test_bytelevel_token_bytes_undo_the_gpt2_alphabet():
    tok = bytelevel_tokenizer()
    vocab = hsd.Vocab.from_tokenizer(tok)
    assert vocab.scheme == "bytelevel"
    assert vocab.tokens[tok.convert_tokens_to_ids("Ġ")] == b" "
    assert vocab.tokens[tok.convert_tokens_to_ids("Ċ")] == b"\n"
    assert vocab.tokens[tok.convert_tokens_to_ids("ĠĠĠ")] == b"   "
    assert vocab.tokens[tok.eos_token_id] is None  # special tokens have no text
    assert vocab.undetermined == 0


def test_sentencepiece_token_bytes_handle_marker_and_byte_fallback():
    tok = sentencepiece_tokenizer()
    vocab = hsd.Vocab.from_tokenizer(tok)
    assert vocab.scheme == "sentencepiece"
    assert vocab.tokens[tok.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert vocab.tokens[tok.convert_tokens_to_ids("<0xF0>")] == b"\xf0"
    assert vocab.tokens[tok.convert_tokens_to_ids("▁▁")] == b"  "
    for tid in (tok.bos_token_id, tok.eos_token_id, tok.unk_token_id):
        assert vocab.tokens[tid] is None


def test_wordpiece_token_bytes():
    tk = Tokenizer(models.WordPiece({"[UNK]": 0, "hello": 1, "##lo": 2, "hel": 3}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    from tokenizers import decoders
    tk.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]")
    vocab = hsd.Vocab.from_tokenizer(tok)
    assert vocab.scheme == "wordpiece"
    assert vocab.tokens[2] == b"lo" and vocab.tokens[1] == b" hello"


def test_encoding_spells_the_text_byte_for_byte():
    for tok in (bytelevel_tokenizer(), sentencepiece_tokenizer()):
        vocab = hsd.Vocab.from_tokenizer(tok)
        for text in ["def f(x):\n\treturn x", "中文 😀 e\u0301", "  a  b  "]:
            ids = tok.encode(text, add_special_tokens=False)
            spelled = vocab.text_of(ids)
            assert spelled.strip() == text.encode().strip()


def test_intersection_matches_on_bytes_not_strings():
    t, d = hsd.Vocab.from_tokenizer(bytelevel_tokenizer()), hsd.Vocab.from_tokenizer(sentencepiece_tokenizer())
    pv = hsd.PairVocab.build(t, d)
    assert not pv.shared and pv.intersection_size > 100
    d_space = d.bytes_to_id[b" "]
    t_space = t.bytes_to_id[b" "]
    assert pv.drafter_to_target[d_space] == t_space  # '▁' (drafter) is 'Ġ' (target)
    newline_d = sentencepiece_tokenizer().convert_tokens_to_ids("<0x0A>")
    assert pv.drafter_to_target[newline_d] == t.bytes_to_id[b"\n"]  # '<0x0A>' is 'Ċ'
    for dd, tt in enumerate(pv.drafter_to_target.tolist()):
        if tt >= 0 and d.tokens[dd] is not None:
            assert d.tokens[dd] == t.tokens[tt]


def test_special_roles_are_mapped():
    t, d = hsd.Vocab.from_tokenizer(bytelevel_tokenizer()), hsd.Vocab.from_tokenizer(sentencepiece_tokenizer())
    pv = hsd.PairVocab.build(t, d)
    t_eos, d_eos = pv.special_map["eos"]
    assert t.tokens[t_eos] is None and d.tokens[d_eos] is None
    assert int(pv.drafter_to_target[d_eos]) == t_eos  # a drafted EOS proposes the target's EOS


def test_same_tokenizer_is_shared_even_with_padded_vocab_size():
    from pairs import shared_padded

    pair = shared_padded()
    assert pair.drafter.model.config.vocab_size == len(pair.drafter.tokenizer) + 64
    assert pair.vocab.shared
    assert pair.drafter.n_logits == len(pair.drafter.tokenizer)  # padding rows are cut


def test_different_tokenizers_are_not_shared():
    pv = hsd.PairVocab.build(hsd.Vocab.from_tokenizer(bytelevel_tokenizer()),
                             hsd.Vocab.from_tokenizer(bytelevel_tokenizer(vocab_size=590)))
    assert not pv.shared


def test_duplicate_bytes_map_to_the_lowest_target_id():
    vocab = hsd.Vocab([b"a", b"b", b"a", None], frozenset({3}), (3,), None, None, "plain")
    assert vocab.bytes_to_id[b"a"] == 0
    assert torch.equal(hsd.PairVocab.build(vocab, vocab).drafter_to_target, torch.tensor([0, 1, 0, 3]))
