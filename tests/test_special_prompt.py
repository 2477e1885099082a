"""Special-token text in a raw prompt: parsed into the special token by default, as Transformers
does, or read as plain text with ``parse_special=False``; either way every algorithm equals AR at T = 0."""

import pytest

import hsd
from hsd import viz
from hsd.generate import special_spans

PROMPT = "x = 1<|endoftext|>def f():</s>"


@pytest.fixture(scope="module")
def pair():
    return hsd.load_pair()


def test_special_spans_name_the_text_each_tokenizer_reads_as_special(pair):
    assert special_spans(pair.target, PROMPT) == [(5, 18, "<|endoftext|>")]
    assert special_spans(pair.drafter, PROMPT) == [(26, 30, "</s>")]
    assert special_spans(pair.target, "def f(): pass") == []


def test_parse_special_decides_whether_the_text_becomes_the_token(pair):
    eos = pair.target.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    parsed = hsd.generate(pair, PROMPT, algorithm="ar", max_new_tokens=2)
    plain = hsd.generate(pair, PROMPT, algorithm="ar", max_new_tokens=2, parse_special=False)
    assert eos in parsed.prompt_ids and eos not in plain.prompt_ids
    assert parsed.settings["parse_special"] is True and plain.settings["parse_special"] is False


@pytest.mark.parametrize("parse_special", [True, False])
@pytest.mark.parametrize("algorithm", ["slem", "tli", "slrs"])
def test_greedy_output_identical_to_autoregressive_in_both_modes(pair, algorithm, parse_special):
    ar = hsd.generate(pair, PROMPT, algorithm="ar", max_new_tokens=12, parse_special=parse_special)
    res = hsd.generate(pair, PROMPT, algorithm=algorithm, max_new_tokens=12, parse_special=parse_special)
    assert res.token_ids == ar.token_ids and res.prompt_ids == ar.prompt_ids


@pytest.mark.parametrize("value,fragment", [
    ("no", "parse_special must be True or False"),
    (0, "parse_special must be True or False"),
])
def test_parse_special_must_be_a_bool(pair, value, fragment):
    with pytest.raises(hsd.InvalidSettingError, match=fragment):
        hsd.generate(pair, "def f", algorithm="ar", max_new_tokens=2, parse_special=value)


def test_parse_special_off_refuses_chat_messages(pair):
    with pytest.raises(hsd.InvalidSettingError, match="applies to a raw prompt"):
        hsd.generate(pair, messages=[{"role": "user", "content": "hi"}], parse_special=False)


def test_output_html_flags_the_prompt_text_that_became_a_special_token(pair):
    res = hsd.generate(pair, PROMPT, algorithm="slem", max_new_tokens=4)
    page = viz.output_html(res.rounds, prompt=PROMPT, prompt_special=special_spans(pair.target, PROMPT))
    assert page.count("hsd-prompt-special") == 1 and "parsed as the special token &lt;|endoftext|&gt;" in page
    assert "hsd-prompt-special" not in viz.output_html(res.rounds, prompt=PROMPT)


def test_a_form_passes_parse_special_and_marks_the_spans(pair):
    from hsd import forms

    settings, text = forms.Form(PROMPT, lookahead=4, max_new_tokens=4).read()
    assert settings.parse_special and forms.prompt_special(pair, settings, text) == [(5, 18, "<|endoftext|>")]
    plain, _ = forms.Form(PROMPT, lookahead=4, max_new_tokens=4, parse_special=False).read()
    assert plain.parse_special is False and forms.prompt_special(pair, plain, text) == []
    assert forms.room(pair, plain, text) < forms.room(pair, settings, text)  # the text is many tokens, the token one
    with pytest.raises(hsd.InvalidSettingError, match="parse special tokens must be on or off"):
        forms.Form(PROMPT, parse_special="x").read()
