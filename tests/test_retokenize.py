"""Look-behind re-tokenization is byte-exact and matches in-context tokenization (spec §2 step 2)."""

import hsd
from builders import bytelevel_tokenizer, sentencepiece_tokenizer
from hsd.retokenize import Retokenizer, incomplete_utf8_tail

TEXTS = ["def fib(n):\n    return fib(n - 1) + fib(n - 2)\n", "the  quick\tbrown 中文 😀 fox", "x=1;y=22;z=333"]


def _retok(tok):
    return Retokenizer(tok, hsd.Vocab.from_tokenizer(tok))


def test_continuation_equals_tokenizing_the_whole_text():
    """Cutting a text at any word start and re-tokenizing the tail in context gives the same tokens
    (guaranteed for a byte-level BPE, whose pre-tokenizer never merges across a word start)."""
    for tok in (bytelevel_tokenizer(),):
        r = _retok(tok)
        for text in TEXTS:
            whole = tok.encode(text, add_special_tokens=False)
            for cut in range(1, len(whole)):
                head = whole[:cut]
                if not r.vocab.tokens[whole[cut]].startswith(b" "):
                    continue
                tail = r.vocab.text_of(whole)[len(r.vocab.text_of(head)):]
                cont = r.continue_ids(head, tail)
                assert head + cont.new_ids == whole, (text, cut)


def test_continuation_is_always_byte_exact():
    for tok in (bytelevel_tokenizer(), sentencepiece_tokenizer()):
        r = _retok(tok)
        for text in TEXTS:
            data = text.encode()
            for cut in range(1, len(data)):
                head_ids = r.vocab.greedy_encode(data[:cut])[0]
                cont = r.continue_ids(head_ids, data[cut:])
                assert r.vocab.text_of(cont.new_ids) == data[cut:len(data) - cont.pending]
                rewritten = r.continue_ids(head_ids, data[cut:], rewrite=True)
                ids = head_ids[:rewritten.n_keep] + rewritten.new_ids
                assert r.vocab.text_of(ids) == data[:len(data) - rewritten.pending]


def test_dummy_prefix_space_is_not_invented():
    """A SentencePiece-style tokenizer prepends '▁' to every encoding; in context there is none."""
    tok = sentencepiece_tokenizer()
    r = _retok(tok)
    head = tok.encode("def fib(n):", add_special_tokens=False)
    for tail in [b"\n    return", b" + 1", b"ine"]:
        cont = r.continue_ids(head, tail)
        assert r.vocab.text_of(cont.new_ids) == tail and "normalized" not in cont.events, (tail, cont)
        cont = r.continue_ids(head, tail, rewrite=True)
        assert r.vocab.text_of(head[:cont.n_keep] + cont.new_ids) == r.vocab.text_of(head) + tail


def test_incomplete_utf8_is_held_back():
    assert incomplete_utf8_tail("😀".encode()[:2]) == 2
    assert incomplete_utf8_tail("a😀".encode()) == 0
    assert incomplete_utf8_tail(b"ab\xe4") == 1
    r = _retok(bytelevel_tokenizer())
    cont = r.continue_ids(r.vocab.greedy_encode(b"hi ")[0], "中".encode()[:2])
    assert cont.new_ids == [] and cont.pending == 2


def test_boundary_merge_keeps_emitted_tokens_fixed():
    """'def' emitted as 'd'+'ef': the re-tokenization may want 'def', but only what continues is proposed."""
    tok = bytelevel_tokenizer()
    r = _retok(tok)
    head = r.vocab.greedy_encode(b"x = d")[0]
    cont = r.continue_ids(head, b"ef f():")
    assert r.vocab.text_of(cont.new_ids) == b"ef f():"


def test_a_shared_vocabulary_drafter_reads_the_targets_own_ids():
    """The target as its own drafter: after each round the drafter's context is the target's emitted ids
    (not a re-encoding of their text), so q′ = p and TLI accepts every verified position, as SD does."""
    from hsd.assets import ASSETS

    target = str(ASSETS / "tiny-code/target")
    pair = hsd.load_pair(target, target, device="cpu", dtype="float32")
    assert pair.vocab.shared
    res = hsd.generate(pair, "def parse(line):", algorithm="tli", temperature=1.0, max_new_tokens=48, seed=3)
    outcomes = [p.outcome for r in res.rounds for p in r.positions if p.outcome != "unverified"]
    assert len(outcomes) >= 40 and outcomes.count("accepted") / len(outcomes) >= 0.98


def test_the_rust_tokenizer_called_directly_gives_transformers_encode_on_real_vocabularies():
    """Where the Rust tokenizer is called directly (a third of the cost per call in the loop), it gives what
    transformers' ``encode(..., split_special_tokens=True)`` gives, on every real vocabulary and awkward text."""
    import pytest

    import realtok
    names = realtok.usable_names()
    if not names:
        pytest.skip(f"no real vocabulary files: run `{realtok.FETCH_COMMAND}`")
    direct = 0
    for name in names:
        tok = realtok.load_tokenizer(name)
        r = _retok(tok)
        direct += r._rust is not None
        for text in realtok.ADVERSARIAL_PROMPTS + TEXTS + ["<|endoftext|></s><s> [INST]<unk>"]:
            assert r.encode(text) == tok.encode(text, add_special_tokens=False, split_special_tokens=True), (name, text)
    assert direct >= len(names) // 2  # the shortcut is taken for most fast tokenizers, not silently never


def test_a_tokenizer_with_truncation_switched_on_keeps_the_transformers_path():
    tok = bytelevel_tokenizer()
    r = _retok(tok)
    if r._rust is None:
        return  # this tokenizer is not a plain wrapper: nothing to switch
    text = "word " * 40
    r._rust.enable_truncation(8)
    try:
        assert r.encode(text) == tok.encode(text, add_special_tokens=False, split_special_tokens=True)
        assert len(r.encode(text)) > 8
    finally:
        r._rust.no_truncation()
