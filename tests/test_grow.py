"""``scripts/grow.py``: a deeper model that computes exactly what the original computed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from builders import bytelevel_tokenizer, tiny_llama, tiny_windowed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import grow  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return bytelevel_tokenizer()


def _ids(vocab: int, n: int = 40) -> torch.Tensor:
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(3))


def test_grown_llama_has_the_same_logits_and_cached_greedy_text(tok):
    model = tiny_llama(tok, seed=1, layers=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    grown, after = grow.grow_depth(model, 7)
    assert after == [0, 0, 1, 2] and len(grown.model.layers) == 7 and grown.config.num_hidden_layers == 7
    assert [layer.self_attn.layer_idx for layer in grown.model.layers] == list(range(7))
    assert model.config.num_hidden_layers == 3 and len(model.model.layers) == 3  # the original is untouched
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    ids = _ids(model.config.vocab_size)
    assert grow.max_logit_difference(model, grown, ids) < 1e-5
    kw = dict(max_new_tokens=24, do_sample=False, pad_token_id=tok.eos_token_id)
    assert torch.equal(model.generate(ids, **kw), grown.generate(ids, **kw))  # the KV cache sees 7 layers


def test_the_new_layers_learn(tok):
    """Zero output projections still get a gradient, so training changes what the copies add."""
    grown, _ = grow.grow_depth(tiny_llama(tok, seed=2, layers=2), 4)
    ids = _ids(grown.config.vocab_size)
    grown.train()
    grown(input_ids=ids, labels=ids).loss.backward()
    copy = grown.model.layers[1]
    assert copy.self_attn.o_proj.weight.grad.abs().sum() > 0
    assert copy.mlp.down_proj.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", ["gemma2", "mistral"])
def test_windowed_models_keep_their_layer_types(tok, kind):
    model = tiny_windowed(kind, tok, seed=4, layers=2)
    grown, _ = grow.grow_depth(model, 4)
    types = getattr(model.config, "layer_types", None)
    if types:
        assert grown.config.layer_types == [types[0], types[0], types[1], types[1]]
    ids = _ids(model.config.vocab_size, 48)  # longer than the window of 16
    assert grow.max_logit_difference(model, grown, ids) < 1e-4


def test_grow_refuses_to_shrink(tok):
    with pytest.raises(SystemExit, match="already has 3 layers"):
        grow.grow_depth(tiny_llama(tok, seed=1, layers=3), 3)


def test_grow_command_writes_a_model_folder_with_the_totals(tmp_path, tok):
    src = tmp_path / "pair" / "target"
    tiny_llama(tok, seed=5, layers=2).save_pretrained(src)
    tok.save_pretrained(src)
    (src.parent / "train_log.json").write_text(json.dumps({"phases": {"target": {"steps": 7}}}))
    out = tmp_path / "deep" / "target"
    assert grow.main(["--from", str(src), "--layers", "3", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 3 and cfg["dtype"] == "float32"
    log = json.loads((out.parent / "train_log.json").read_text())
    assert log["phases"]["target"]["steps"] == 7
    assert log["grown"][0]["layers_before"] == 2 and log["grown"][0]["layers_after"] == 3
    assert "is_local" not in json.loads((out / "tokenizer_config.json").read_text())


def test_the_shipped_drafter_grows_and_passes_the_exactness_check(tmp_path):
    """The check compares with the float16-rounded *weights*: rounding the float32 rotary buffers too made the
    2-layer drafter's reference differ by 1.6e-3 and the command refuse a grown model that was exact."""
    out = tmp_path / "deeper" / "drafter"
    assert grow.main(["--from", str(ROOT / "assets" / "tiny-code" / "drafter"), "--layers", "3", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 3


def test_wider_mlps_keep_the_logits_and_learn(tok):
    model = tiny_llama(tok, seed=5, layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    old = model.config.intermediate_size
    wide = grow.widen_mlp(model, old + 24, seed=1)
    assert wide.config.intermediate_size == old + 24 and model.config.intermediate_size == old
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the original is untouched
    mlp = wide.model.layers[1].mlp
    assert mlp.gate_proj.weight.shape[0] == old + 24 and mlp.down_proj.weight.shape[1] == old + 24
    assert mlp.up_proj.weight[old:].abs().sum() > 0 and not mlp.down_proj.weight[:, old:].any()
    ids = _ids(model.config.vocab_size)
    assert grow.max_logit_difference(model, wide, ids) < 1e-5
    wide.train()
    wide(input_ids=ids, labels=ids).loss.backward()
    assert mlp.down_proj.weight.grad[:, old:].abs().sum() > 0  # the new units start learning at once
    with pytest.raises(SystemExit, match="already have"):
        grow.widen_mlp(model, old)


def test_grow_cli_widens_and_records_it(tmp_path, tok):
    from train_common import save_model_dir

    src = tmp_path / "pair" / "drafter"
    save_model_dir(tiny_llama(tok, seed=6, layers=2), tok, src)
    (tmp_path / "pair" / "train_log.json").write_text(json.dumps({"drafter": {"totals": {"tokens": 1234}}}))
    out = tmp_path / "wide" / "drafter"
    assert grow.main(["--from", str(src), "--intermediate", "96", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["intermediate_size"] == 96
    step = json.loads((out.parent / "train_log.json").read_text())["grown"][0]
    assert step["intermediate_after"] == 96 and step["tokens_before"] == 1234 and step["layers_after"] == 2
    import model_card

    line = model_card.grown_line(step)
    assert "to 96 MLP units" in line and "layers" not in line and "1,234 tokens" in line
    with pytest.raises(SystemExit):
        grow.main(["--from", str(src), "--out", str(tmp_path / "x")])
