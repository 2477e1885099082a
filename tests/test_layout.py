"""Linear weights on the CPU (hsd/layout.py): dual (row-major as loaded plus a column-major copy, each number of rows
multiplied by the faster), column-major, or row-major; the same values, only for models hsd loads itself, never for
a model a user hands in; the output stays AR's."""

import copy
import importlib
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


def _dual(module) -> bool:
    return isinstance(module.__dict__.get("forward"), layout.DualLinear)


def test_a_model_hsd_loads_on_the_cpu_is_dual_with_the_files_values():
    model = loading.load_model(str(TARGET), device="cpu")
    plain = tf.AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
    net = model.model
    assert net.lm_head.weight is net.get_input_embeddings().weight  # tied: the dual head only reads the weight
    linears = _linears(net)
    assert len(linears) == 7 * net.config.num_hidden_layers + 1 and all(_dual(m) for m in linears)
    assert all(m.weight.is_contiguous() for m in linears) and layout.layout_of(net) == "dual"
    for m in linears:
        assert _column_major(m.forward.columns) and torch.equal(m.forward.columns, m.weight)
    for (name, a), (_, b) in zip(net.state_dict().items(), plain.state_dict().items()):
        assert torch.equal(a, b), name  # the values are the file's; the copies are no part of the state
    assert net.state_dict().keys() == plain.state_dict().keys()
    with torch.inference_mode():
        for ids in ([5], [5, 77], [5, 77, 300, 12], [5, 77, 300, 12, 9, 1000, 3]):  # each path of DualLinear
            x = torch.tensor([ids])
            assert torch.allclose(net(x).logits, plain(x).logits, atol=1e-4, rtol=0), len(ids)


def _plan_choosing(monkeypatch, rows_by_mm, rows_by_linear_rows=()):
    """Make every plan measured from now on see ``W @ x.T`` twice as fast as ``F.linear`` column-major for
    ``rows_by_mm``, ``F.linear`` row-major so for ``rows_by_linear_rows``, and both half as fast for every other
    number of rows; returns the list of (shapes, threads) each measurement was asked for."""
    calls = []

    def fake(shapes, threads):
        calls.append((tuple(shapes), threads))
        return {n: {"linear_columns": 1.0, "linear_rows": 0.5 if n in rows_by_linear_rows else 2.0,
                    "mm_rows": 0.5 if n in rows_by_mm else 2.0} for n in layout.PLANNED_ROWS}

    monkeypatch.setattr(layout, "_time_kernels", fake)
    monkeypatch.setattr(layout, "_MEASURED", {})
    return calls


def test_a_dual_linear_multiplies_the_rows_its_plan_chose_by_the_weight_and_the_others_by_its_copy(monkeypatch):
    _plan_choosing(monkeypatch, {1, 2, 3})  # one row is never W @ x.T: not even planned
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 40)
    layout.use_dual(lin)
    assert _dual(lin) and lin.forward.weight is lin.weight
    with torch.inference_mode():
        for rows in range(1, 9):
            x = torch.randn(1, rows, 24)
            assert torch.allclose(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias), atol=1e-5), rows
        lin.forward.columns.zero_()  # spoil the copy: only the rows it serves change
        for rows in (2, 3):
            x = torch.randn(rows, 24)
            assert torch.allclose(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias), atol=1e-5)
        for rows in (1, 4, 7, max(layout.PLANNED_ROWS) + 1):
            assert torch.equal(lin(torch.randn(rows, 24)), lin.bias.expand(rows, -1)), rows


def test_a_dual_linear_multiplies_by_f_linear_on_the_weight_as_loaded_where_its_plan_chose_that(monkeypatch):
    _plan_choosing(monkeypatch, {2}, rows_by_linear_rows={3, 4})
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 40)
    layout.use_dual(lin)
    assert layout.kernel_plan(lin).kernel(3) == "linear_rows" and layout.kernel_plan(lin).kernel(2) == "mm_rows"
    with torch.inference_mode():
        lin.forward.columns.zero_()  # spoil the copy: the rows the weight serves, by either kernel, are exact
        for rows in (2, 3, 4):
            x = torch.randn(1, rows, 24)
            assert torch.allclose(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias), atol=1e-5), rows
        for rows in (1, 5):
            assert torch.equal(lin(torch.randn(rows, 24)), lin.bias.expand(rows, -1)), rows


def test_a_plan_measures_once_per_thread_count_and_every_model_of_its_shapes_shares_it(monkeypatch):
    calls = _plan_choosing(monkeypatch, {2})
    tok = bytelevel_tokenizer()
    nets = [tiny_llama(tok, seed, layers=2).eval() for seed in (0, 1)]
    for net in nets:
        layout.use_dual(net)
    plans = [layout.kernel_plan(net) for net in nets]
    assert plans[0] is not plans[1] and plans[0].shapes == plans[1].shapes
    assert plans[0].shapes == [tuple(m.weight.shape) for m in _linears(nets[0])]  # small: all of them
    assert calls == []  # nothing measured before a forward
    before = torch.get_num_threads()
    try:
        with torch.inference_mode():
            for threads in (1, 1, 2):
                torch.set_num_threads(threads)
                for net in nets:
                    net(torch.tensor([[3, 4]]))
    finally:
        torch.set_num_threads(before)
    assert calls == [(tuple(plans[0].shapes), 1), (tuple(plans[0].shapes), 2)]
    assert plans[0].measure(1)[0] == {2: "mm_rows"}


def test_a_generation_measures_its_plans_before_its_clock_starts(monkeypatch):
    calls = _plan_choosing(monkeypatch, {2})
    tok = bytelevel_tokenizer()
    target, drafter = tiny_llama(tok, 0, layers=2).eval(), tiny_llama(tok, 1, layers=1).eval()
    layout.use_dual(target)  # the test's own modules, laid out as hsd lays out what it loads
    pair = hsd.Pair(Model.wrap(target, tok, "target"), Model.wrap(drafter, tok, "drafter"))
    module = importlib.import_module("hsd.generate")  # the module (hsd.generate is its function)
    opened = []
    real_open = module.open_session

    def open_session(*args, **kwargs):
        opened.append(len(calls))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(module, "open_session", open_session)
    threads = torch.get_num_threads()
    hsd.generate(pair, "def f(x):", algorithm="slem", max_new_tokens=4)
    assert opened == [1] and calls == [(tuple(layout.kernel_plan(target).shapes), threads)]
    hsd.generate(pair, "def f(x):", algorithm="slem", max_new_tokens=4)
    assert len(calls) == 1  # measured once


def test_a_plan_takes_another_kernel_only_when_it_is_clearly_faster_and_samples_a_bounded_share(monkeypatch):
    monkeypatch.setattr(layout, "_MEASURED", {})

    def seconds(columns, rows, mm):
        return {"linear_columns": columns, "linear_rows": rows, "mm_rows": mm}

    monkeypatch.setattr(layout, "_time_kernels", lambda shapes, threads: {
        2: seconds(1.0, 0.95, 0.93),  # 5-7% faster is a tie
        3: seconds(1.0, 0.8, 0.75),   # both clearly faster: the fastest
        4: seconds(1.0, 0.85, 1.5),
        5: seconds(1.0, 1.2, 1.5)})
    assert layout.KernelPlan([(8, 8)]).measure(1)[0] == {3: "mm_rows", 4: "linear_rows"}
    big = layout.SAMPLE_BYTES // 4  # float32 entries
    shapes = [(big // 1024 + 1, 1024), (1024, 1024), (2048, 1024), (1024, 2048), (2048, 1024)]
    plan = layout.KernelPlan(shapes)
    assert plan.shapes == [(1024, 1024), (2048, 1024)]  # the one over the cap skipped; 12 MiB filled, then it stops
    assert layout.KernelPlan([(big // 1024 + 2, 1024), (big // 1024 + 1, 1024)]).shapes == [(big // 1024 + 1, 1024)]
    assert layout.KernelPlan([]).shapes == []


def test_a_plan_really_measures_every_kernel():
    seconds = layout._time_kernels([(64, 32), (32, 64)], 1)
    assert sorted(seconds) == list(layout.PLANNED_ROWS)
    assert all(set(by_kernel) == set(layout.KERNELS) and all(0 < t < 1 for t in by_kernel.values())
               for by_kernel in seconds.values())


def test_a_dual_linears_copy_follows_its_weight_and_gradients_flow():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8, bias=False)
    layout.use_dual(lin)
    x = torch.randn(1, 16)
    new = torch.randn(8, 16)
    lin.load_state_dict({"weight": new})  # an in-place copy: the version counter moves
    with torch.inference_mode():
        assert torch.allclose(lin(x), x @ new.T, atol=1e-5)
    lin.weight.data = torch.randn(8, 16)  # new storage
    with torch.inference_mode():
        assert torch.allclose(lin(x), x @ lin.weight.detach().T, atol=1e-5)
    lin(torch.randn(3, 16)).sum().backward()  # grad mode: F.linear with the weight itself
    assert lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0
    lin.to(torch.float64)  # cast: the plain layer, and the copy is dropped
    with torch.inference_mode():
        x = torch.randn(2, 16, dtype=torch.float64)
        assert torch.equal(lin(x), torch.nn.functional.linear(x, lin.weight)) and lin.forward.columns is None


def test_a_deep_copy_of_a_dual_model_multiplies_by_its_own_weights():
    tok = bytelevel_tokenizer()
    net = tiny_llama(tok, 0, layers=2).eval()
    layout.use_dual(net)
    twin = copy.deepcopy(net)
    for a, b in zip(_linears(net), _linears(twin)):
        assert b.forward.weight is b.weight and b.forward.columns.data_ptr() != a.forward.columns.data_ptr()
    with torch.no_grad():
        for m in _linears(twin):
            m.weight.mul_(0.0)
    ids = torch.tensor([[3, 4, 5]])
    with torch.inference_mode():
        assert not torch.equal(net(ids).logits, twin(ids).logits)
        assert torch.allclose(twin(ids[:, :1]).logits, torch.zeros(1), atol=0)  # the copy followed the zeroed weights


def test_auto_is_dual_under_the_limit_and_column_major_over_it(monkeypatch):
    tok = bytelevel_tokenizer()
    net = tiny_llama(tok, 0, layers=2)
    assert layout.dual_bytes(net) == sum(m.weight.numel() * 4 for m in _linears(net))
    assert layout.use_layout(net, "auto") == "dual" == layout.layout_of(net)
    monkeypatch.setattr(layout, "DUAL_LIMIT", layout.dual_bytes(net) - 1)
    assert layout.use_layout(net, "auto") == "column" == layout.layout_of(net)
    assert not any(_dual(m) for m in _linears(net))
    assert layout.use_layout(net, "row") == "row" == layout.layout_of(net)
    assert all(m.weight.is_contiguous() and not _dual(m) for m in _linears(net))
    with pytest.raises(InvalidSettingError, match="layout must be one of auto, dual, column, row, got 'diagonal'"):
        layout.use_layout(net, "diagonal")


def test_a_users_model_is_never_relaid(monkeypatch):
    tok = bytelevel_tokenizer()
    net = tiny_llama(tok, 0, layers=2)
    before = {k: (v.data_ptr(), v.stride(), v.clone()) for k, v in net.state_dict().items()}
    model = Model.wrap(net, tok)
    runner = LeanRunner(model)  # the lean drafter keeps column-major copies of its own
    assert _column_major(runner._layers[0].o) and _column_major(runner._layers[0].gate_up[0])
    runner.forward([3, 4, 5, 6])
    assert not any("forward" in m.__dict__ for m in net.modules())
    for k, v in net.state_dict().items():
        ptr, stride, value = before[k]
        assert (v.data_ptr(), v.stride()) == (ptr, stride) and torch.equal(v, value), k


def test_the_switch_keeps_the_loaded_layout_and_refuses_nonsense(monkeypatch):
    loading.clear_cache()
    try:
        monkeypatch.setenv("HSD_WEIGHT_LAYOUT", "row")
        model = loading.load_model(str(TARGET), device="cpu")
        assert all(m.weight.is_contiguous() and not _dual(m) for m in _linears(model.model))
        tok = bytelevel_tokenizer()
        assert not _column_major(LeanRunner(Model.wrap(tiny_llama(tok, 0, layers=2), tok))._layers[0].o)
        loading.clear_cache()
        monkeypatch.setenv("HSD_WEIGHT_LAYOUT", "column")
        model = loading.load_model(str(TARGET), device="cpu")
        moved = [m for m in _linears(model.model) if m.weight is not model.model.lm_head.weight]
        assert all(_column_major(m.weight) and not _dual(m) for m in moved)
        assert model.model.lm_head.weight.is_contiguous()  # tied to the embedding, which reads rows
        assert len(moved) == 7 * model.model.config.num_hidden_layers
        loading.clear_cache()
        monkeypatch.setenv("HSD_WEIGHT_LAYOUT", "diagonal")
        with pytest.raises(InvalidSettingError, match="HSD_WEIGHT_LAYOUT must be one of auto, dual, column, row"):
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
    assert not layout.applies(half) and layout.use_column_major(half) == 0 and layout.use_dual(half) == 0
    assert layout.use_layout(half, "dual") == "row" and not any(_dual(m) for m in half.modules())
    assert layout.use_dual(net) == 2 * 7 + 1 and _dual(net.lm_head) and not _dual(special)
    assert layout.use_column_major(net) == n and not any(_dual(m) for m in _linears(net))


def test_ar_and_the_algorithms_write_the_same_text_in_either_layout():
    """The layout changes which matrix kernel runs, so a logit's last bits may move; the texts (greedy, and a sample
    at a seed) are the same on the embedded pair, and each algorithm's is AR's within a layout (the suite's
    losslessness tests)."""
    sys.path.insert(0, str(ROOT / "scripts" / "pair"))
    import weight_layout

    pair = hsd.load_pair(preset="tiny-code", device="cpu")
    pairs = weight_layout.layouts(pair)
    assert [layout.layout_of(p.target.model) for p in pairs.values()] == list(pairs) == ["row", "column", "dual"]
    assert layout.layout_of(pair.target.model) == "dual"  # the loaded (cached) pair is left as it was
    for settings in (dict(algorithm="ar"), dict(algorithm="slem", lookahead=4),
                     dict(algorithm="slem", temperature=0.7, noise="shared", seed=3),
                     dict(algorithm="tli", temperature=1.0, seed=5, lookahead=2)):
        texts = {name: hsd.generate(p, "def add(a, b):", max_new_tokens=24, **settings).text
                 for name, p in pairs.items()}
        assert texts["row"] == texts["column"] == texts["dual"], settings


@pytest.mark.slow  # a training or benchmark script end to end: python -m pytest -m slow
def test_the_layout_benchmark_times_both_layouts_and_compares_their_texts(capsys):
    sys.path.insert(0, str(ROOT / "scripts" / "pair"))
    import weight_layout

    rows = weight_layout.main(["--prompts", "1", "--seeds", "1", "--max-new-tokens", "8", "--roles", "drafter"])
    assert [r["algorithm"] for r in rows] == ["slem"] and rows[0]["same"] == rows[0]["outputs"] == 2
    assert rows[0]["row_tau"] == rows[0]["column_tau"] == rows[0]["dual_tau"] and rows[0]["dual_ar_ms"] > 0
    out = capsys.readouterr().out
    assert "| row | " in out and "| column | " in out and "| dual | " in out
    assert "| drafter | slem | 0 | 12 (stop below 0.5) |" in out


def test_the_kernel_plan_script_runs_the_measured_and_the_assumed_plan_on_the_same_texts(capsys):
    sys.path.insert(0, str(ROOT / "scripts" / "pair"))
    import kernel_plan

    rows = kernel_plan.main(["--prompts", "1", "--seeds", "1", "--max-new-tokens", "8"])
    assert [(r["algorithm"], r["plan"]) for r in rows] == [("slem", "measured"), ("slem", "assumed"),
                                                           ("tli", "measured"), ("tli", "assumed")]
    assert all(r["same"] and r["speedup"] > 0 for r in rows)
    assert "measured plan: " in capsys.readouterr().out


def test_the_kernel_plan_script_can_leave_one_kernel_out_of_the_assumed_plan(capsys, monkeypatch):
    """--without KERNEL: the assumed plan is chosen from the same measurement without that kernel."""
    sys.path.insert(0, str(ROOT / "scripts" / "pair"))
    import kernel_plan

    _plan_choosing(monkeypatch, {2}, rows_by_linear_rows={3})
    rows = kernel_plan.main(["--prompts", "1", "--seeds", "1", "--max-new-tokens", "8", "--without", "linear_rows"])
    assert all(r["same"] for r in rows)
    assert "measured plan: linear_rows for [3] rows; mm_rows for [2] rows; assumed: mm_rows for [2] rows" in (
        capsys.readouterr().out)
