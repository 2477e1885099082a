"""One settings object: hsd.Settings, checked once, built by the CLI and the app's form, carried to the Result."""
from __future__ import annotations

import dataclasses

import pytest

import hsd
from hsd.forms import FORM_FIELDS, Form
from hsd.settings import NAMES, Settings


def test_the_defaults_are_generates_and_the_object_is_frozen():
    s = Settings()
    assert (s.temperature, s.lookahead, s.max_new_tokens, s.noise, s.drafter_temperature) == (0.0, 5, 64, "independent",
                                                                                             None)
    assert s.drafter_sampling is s.sampling and s.sampling.greedy
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.temperature = 1.0


@pytest.mark.parametrize("bad,message", [
    (dict(temperature=-1), "temperature must be a finite number"),
    (dict(top_p=0), "top_p must be in"),
    (dict(lookahead=0), "lookahead must be an integer in 1..64"),
    (dict(max_new_tokens=10**6), "max_new_tokens must be an integer"),
    (dict(seed=1.5), "seed must be an integer"),
    (dict(drafter_temperature=-0.5), "drafter_temperature must be a finite number ≥ 0 (0 = the drafter proposes"),
    (dict(draft_threshold=1.0), "draft_threshold must be a number in [0, 1)"),
    (dict(noise="coupled"), "noise must be one of independent, shared"),
    (dict(parse_special="yes"), "parse_special must be True or False"),
    (dict(slrs_max_paths=0), "slrs_max_paths must be an integer"),
    (dict(record_distributions=-1), "record_distributions must be an integer"),
])
def test_a_setting_that_cannot_run_is_refused_when_the_object_is_built(bad, message):
    with pytest.raises(hsd.InvalidSettingError) as info:
        Settings(**bad)
    assert message in str(info.value)


def test_replace_checks_again_and_names_the_settings_that_exist():
    s = Settings(temperature=0.7, seed=3)
    assert s.replace(lookahead=2) == Settings(temperature=0.7, seed=3, lookahead=2)
    with pytest.raises(hsd.InvalidSettingError, match="Unknown setting lookahed: the settings are .*lookahead"):
        s.replace(lookahed=2)
    with pytest.raises(hsd.InvalidSettingError, match="lookahead must be"):
        s.replace(lookahead=-1)
    assert Settings(record_distributions=True).record_distributions == 20  # True: the picture's top tokens
    assert Settings.from_dict({**s.to_dict(), "target": "x", "device": "cpu"}) == s  # a Result's provenance ignored


def test_generate_reads_the_object_and_its_changes_and_the_result_records_every_field():
    pair = hsd.load_pair(device="cpu")
    base = Settings(max_new_tokens=8, lookahead=3)
    a = hsd.generate(pair, "def f(x):", algorithm="slem", settings=base)
    b = hsd.generate(pair, "def f(x):", algorithm="slem", max_new_tokens=8, lookahead=3)
    assert a.token_ids == b.token_ids
    assert Settings.from_dict(a.settings) == base and set(NAMES) <= set(a.settings)
    c = hsd.generate(pair, "def f(x):", algorithm="slem", settings=base, max_new_tokens=4)  # a change on top
    assert len(c.token_ids) == 4 and c.token_ids == a.token_ids[:4]
    with pytest.raises(hsd.InvalidSettingError, match="must be an hsd.Settings"):
        hsd.generate(pair, "x", settings={"temperature": 1})
    with pytest.raises(hsd.InvalidSettingError, match="Unknown setting"):
        hsd.generate(pair, "x", temprature=1)


def test_the_apps_form_reads_into_settings_and_a_prompt_once():
    settings, text = Form("def f(x):", temperature="0.7", lookahead=3.0, drafter_temperature="",
                          draft_threshold=0, shared_noise=True, record=True).read()
    assert settings == Settings(temperature=0.7, lookahead=3, max_new_tokens=96, noise="shared",
                                record_distributions=20)
    assert text == {"prompt": "def f(x):"}
    chat_settings, chat = Form("hi", mode="chat", parse_special=False).read()
    assert chat == {"messages": [{"role": "user", "content": "hi"}]} and chat_settings.parse_special  # raw only
    for bad, message in [(dict(lookahead=2.5), "lookahead must be a whole number"),
                         (dict(temperature=3), "temperature must be in 0..2"),
                         (dict(prompt=""), "The prompt is empty"),
                         (dict(shared_noise="on"), "shared noise must be on or off")]:
        with pytest.raises(hsd.HsdError, match=message):
            Form(**{"prompt": "x", **bad}).read()
    # every setting the form fills is a Settings field or a form-only box (the prompt and how it is sent)
    assert set(FORM_FIELDS) - {"prompt", "mode", "shared_noise", "record"} <= set(NAMES)
