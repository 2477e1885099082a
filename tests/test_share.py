"""hsd.share: a run saved as JSON loads back without models and every view draws it exactly as it drew the
original; the self-contained HTML page; malformed and foreign files are refused with a clear message."""

import json
import re

import pytest

import hsd
from hsd import figures, picture, share, viz
from hsd.share import ShareError
from pairs import heterogeneous, shared_padded

PROMPT = "emoji 😀🎉 and 中文"  # multi-byte characters: tokens that are half a character
CASES = [("ar", "bpe<-sp"), ("sd", "shared"), ("slem", "bpe<-sp"), ("tli", "sp<-bpe"), ("slrs", "bpe<-sp")]


def _pair(kind):
    return shared_padded() if kind == "shared" else heterogeneous(kind)


def _views(result, meta_or_pair):
    """Every view of a run, as text."""
    if isinstance(meta_or_pair, dict):
        st, sd = share.specials(meta_or_pair, "target"), share.specials(meta_or_pair, "drafter")
    else:
        st = meta_or_pair.target.vocab.special_text
        sd = meta_or_pair.drafter.vocab.special_text if meta_or_pair.drafter else {}
    out = [viz.output_html(result.rounds, special_text=st, prompt=PROMPT),
           viz.output_html(result.rounds, show_rejected=False, legend=False),
           figures.rounds_figure(result.rounds).to_json(), viz.run_summary(result, "cpu")]
    out += [viz.round_html(r, algorithm=result.algorithm, special_drafter=sd, special_target=st) for r in result.rounds]
    out += [picture.rejection_figure(result, loc).to_json() + picture.rejection_explanation(result, loc)
            for loc in picture.recorded_positions(result)]
    return out


@pytest.mark.parametrize("algorithm,kind", CASES)
@pytest.mark.parametrize("record", [False, True])
def test_a_loaded_run_renders_exactly_like_the_original(algorithm, kind, record):
    pair = _pair(kind)
    result = hsd.generate(pair, PROMPT, algorithm=algorithm, max_new_tokens=24, temperature=1.0, seed=4,
                          record_distributions=record and algorithm != "ar")
    text = share.result_to_json(result, prompt=PROMPT, pair=pair, settings={"app": "test"})
    loaded, meta = share.result_from_json(text)
    assert loaded.rounds == result.rounds  # byte-exact, every field
    assert (loaded.token_ids, loaded.text, loaded.prompt_ids, loaded.stop_reason) == \
           (result.token_ids, result.text, result.prompt_ids, result.stop_reason)
    assert loaded.metrics == result.metrics and loaded.settings == result.settings
    assert _views(loaded, meta) == _views(result, pair)
    assert share.result_to_html(loaded, meta) == share.result_to_html(result, meta)
    assert share.result_from_json(share.result_to_json(loaded, prompt=PROMPT, pair=pair))[0].rounds == result.rounds


def test_the_file_says_what_made_the_run():
    pair = _pair("bpe<-sp")
    result = hsd.generate(pair, PROMPT, algorithm="slem", max_new_tokens=8)
    doc = json.loads(share.result_to_json(result, prompt=PROMPT, pair=pair, settings={"device_choice": "auto"}))
    assert doc["format"] == "hsd-run" and doc["version"] == share.VERSION
    assert doc["versions"]["hsd"] == hsd.__version__ and doc["versions"]["torch"] and doc["versions"]["transformers"]
    assert doc["machine"]["cpu"] and doc["machine"]["device"] == "cpu"
    assert set(doc["models"]) == set(share.PROVENANCE) and doc["models"]["target"] == result.settings["target"]
    assert doc["prompt"] == PROMPT and doc["settings"]["device_choice"] == "auto"
    assert doc["settings"]["temperature"] == 0.0 and doc["result"]["algorithm"] == "slem"
    assert doc["special_text"]["target"] == {str(k): v for k, v in pair.target.vocab.special_text.items()}


def test_the_html_page_is_self_contained():
    pair = _pair("bpe<-sp")
    result = hsd.generate(pair, PROMPT, algorithm="tli", max_new_tokens=16, temperature=1.0, seed=1,
                          record_distributions=True)
    page = share.result_to_html(result, prompt=PROMPT, pair=pair)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page.lower() and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<style>" in page and '<meta charset="utf-8">' in page
    assert viz.output_html(result.rounds, special_text=pair.target.vocab.special_text, prompt=PROMPT) in page
    assert page.count("<details") == len(result.rounds) and page.count("<details open") == 1
    assert page.count('class="hsd-picture"') == len(picture.recorded_positions(result))
    assert "min(p, q′)" in page


def test_a_hand_built_result_with_a_plain_metrics_dict_saves_too():
    from test_viz import _result, _round

    result = _result("slem", [1, 2, 3])
    result.rounds = [_round(0), _round(1)]
    loaded, meta = share.result_from_json(share.result_to_json(result, machine={"note": "hand-built"}))
    assert loaded.rounds == result.rounds and meta["machine"] == {"note": "hand-built"}
    assert meta["models"]["target"] is None and meta["special_text"] == {"target": {}, "drafter": {}}
    assert share.result_to_html(loaded, meta) == share.result_to_html(result, meta)


@pytest.mark.parametrize("text,match", [
    ("not json at all", "not JSON"),
    (b"\xff\xfe", "not text"),
    ("[1, 2, 3]", 'not an hsd run'),
    ('{"rounds": []}', 'not an hsd run'),
    ('{"format": "hsd-run"}', "no valid format version"),
    ('{"format": "hsd-run", "version": "1"}', "no valid format version"),
    ('{"format": "hsd-run", "version": 99, "result": {}}', "newer hsd"),
    ('{"format": "hsd-run", "version": 1}', "damaged: missing 'result'"),
    ('{"format": "hsd-run", "version": 1, "result": {"algorithm": "slem"}}', "damaged"),
])
def test_malformed_or_foreign_files_are_refused_clearly(text, match):
    with pytest.raises(ShareError, match=match):
        share.result_from_json(text)


def test_damaged_bytes_are_reported():
    pair = _pair("bpe<-sp")
    doc = json.loads(share.result_to_json(hsd.generate(pair, PROMPT, algorithm="slem", max_new_tokens=4), pair=pair))
    doc["result"]["rounds"][0]["draft"] = "zz"
    with pytest.raises(ShareError, match="round 0's draft should be hex"):
        share.result_from_json(json.dumps(doc))
    assert issubclass(ShareError, hsd.HsdError) and issubclass(ShareError, ValueError)


def test_the_html_page_states_the_noise_and_the_draft_threshold():
    import hsd
    from hsd import share

    pair = hsd.load_pair()
    result = hsd.generate(pair, "def f(x):", algorithm="slem", max_new_tokens=4, temperature=0.7, noise="shared",
                          draft_threshold=0.3)
    page = share.result_to_html(result, share.run_meta(result, prompt="def f(x):", pair=pair))
    assert "noise = shared" in page and "draft_threshold = 0.3" in page
