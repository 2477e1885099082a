"""Column-major linear weights on the CPU (hsd/layout.py): the same values in another layout, only for models hsd
loads itself, never for a model a user hands in; the output stays AR's."""

import copy
import sys
from pathlib import Path

import pytest
import torch
import transformers as tf

import hsd
from builders import bytelevel_tokenizer, tiny_llama
from hsd import layout, loading
from hsd.errors import InvalidSettingError
from hsd.lean import LeanRunner
from hsd.loading import Model

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "assets" / "tiny-code" / "target"


def _linears(net):
    return [m for m in net.modules() if type(m) is torch.nn.Linear]


def _column_major(w: torch.Tensor) -> bool:
    return not w.is_contiguous() and w.t().is_contiguous()


def test_a_model_hsd_loads_on_the_cpu_has_column_major_linears_with_the_files_values():
    model = loading.load_model(str(TARGET), device="cpu")
    plain = tf.AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
    tied = model.model.lm_head.weight is model.model.get_input_embeddings().weight
    assert tied  # the embedded target ties its head to its embedding: that weight keeps its rows
    moved = [m for m in _linears(model.model) if m.weight is not model.model.lm_head.weight]
    assert len(moved) == 7 * model.model.config.num_hidden_layers and all(_column_major(m.weight) for m in moved)
    assert model.model.lm_head.weight.is_contiguous()
    for (name, a), (_, b) in zip(model.model.state_dict().items(), plain.state_dict().items()):
        assert torch.equal(a, b), name  # the values are the file's: only the strides differ
    ids = torch.tensor([[5, 77, 300, 12, 9, 1000]])
    with torch.inference_mode():
        assert torch.allclose(model.model(ids).logits, plain(ids).logits, atol=1e-4, rtol=0)


def test_a_users_model_is_never_relaid(monkeypatch):
    tok = bytelevel_tokenizer()
    net = tiny_llama(tok, 0, layers=2)
    before = {k: (v.data_ptr(), v.stride(), v.clone()) for k, v in net.state_dict().items()}
    model = Model.wrap(net, tok)
    runner = LeanRunner(model)  # the lean drafter keeps column-major copies of its own
    assert _column_major(runner._layers[0].o) and _column_major(runner._layers[0].gate_up[0])
    runner.forward([3, 4, 5, 6])
    for k, v in net.state_dict().items():
        ptr, stride, value = before[k]
        assert (v.data_ptr(), v.stride()) == (ptr, stride) and torch.equal(v, value), k


def test_the_switch_keeps_the_loaded_layout_and_refuses_nonsense(monkeypatch):
    loading.clear_cache()
    try:
        monkeypatch.setenv("HSD_WEIGHT_LAYOUT", "row")
        model = loading.load_model(str(TARGET), device="cpu")
        assert all(m.weight.is_contiguous() for m in _linears(model.model))
        tok = bytelevel_tokenizer()
        assert not _column_major(LeanRunner(Model.wrap(tiny_llama(tok, 0, layers=2), tok))._layers[0].o)
        loading.clear_cache()
        monkeypatch.setenv("HSD_WEIGHT_LAYOUT", "diagonal")
        with pytest.raises(InvalidSettingError, match="HSD_WEIGHT_LAYOUT must be one of column, row"):
            loading.load_model(str(TARGET), device="cpu")
    finally:
        loading.clear_cache()


def test_only_plain_linears_in_float32_on_the_cpu_move_and_row_major_undoes_it():
    tok = bytelevel_tokenizer()
    net = tiny_llama(tok, 0, layers=2)
    net.config.tie_word_embeddings = True
    net.lm_head.weight = net.model.embed_tokens.weight  # tied: the embedding reads rows, so it stays
    special = type("Special", (torch.nn.Linear,), {})(4, 4)  # a subclass may read its weight's memory itself
    net.add_module("special", special)
    n = layout.use_column_major(net)
    assert n == 2 * 7 and net.lm_head.weight.is_contiguous() and special.weight.is_contiguous()
    assert layout.use_column_major(net) == 0  # already done
    assert layout.use_row_major(net) == n and all(m.weight.is_contiguous() for m in _linears(net))
    half = copy.deepcopy(net).to(torch.bfloat16)
    assert not layout.applies(half) and layout.use_column_major(half) == 0


def test_ar_and_the_algorithms_write_the_same_text_in_either_layout():
    """The layout changes which matrix kernel runs, so a logit's last bits may move; the texts (greedy, and a sample
    at a seed) are the same on the embedded pair, and each algorithm's is AR's within a layout (the suite's
    losslessness tests)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import weight_layout

    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    pairs = weight_layout.layouts(pair)
    assert all(_column_major(m.weight) for m in _linears(pairs["column"].target.model)[:-1])
    assert all(m.weight.is_contiguous() for m in _linears(pairs["row"].target.model))
    for settings in (dict(algorithm="ar"), dict(algorithm="slem", lookahead=4),
                     dict(algorithm="slem", temperature=0.7, noise="shared", seed=3),
                     dict(algorithm="tli", temperature=1.0, seed=5, lookahead=2)):
        texts = {name: hsd.generate(p, "def add(a, b):", max_new_tokens=24, **settings).text
                 for name, p in pairs.items()}
        assert texts["row"] == texts["column"], settings


def test_the_layout_benchmark_times_both_layouts_and_compares_their_texts(capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import weight_layout

    rows = weight_layout.main(["--prompts", "1", "--seeds", "1", "--max-new-tokens", "8", "--roles", "drafter"])
    assert [r["algorithm"] for r in rows] == ["slem"] and rows[0]["same"] == rows[0]["outputs"] == 2
    assert rows[0]["row_tau"] == rows[0]["column_tau"] and rows[0]["column_ar_ms"] > 0
    out = capsys.readouterr().out
    assert "| row-major | " in out and "| column-major | " in out and "| drafter | slem | 0 | 12 (stop below 0.5) |" in out
