"""``benchmarks/paper_pairs.py``: the paper's models have the shapes they are named for, the cost model inverts
correctly, and a measurement runs end to end."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from hsd.catalogue import HUB_MODELS

ROOT = Path(__file__).resolve().parent.parent

#: parameters of the paper's models that hsd's catalogue does not list (their model cards)
SIZES = {"Mixtral-8x22B-Instruct-v0.1": 140.6e9, "Llama-3.1-70B-Instruct": 70.6e9, "DeepSeek-R1-Distill-Qwen-32B": 32.8e9,
         "DeepSeek-R1-Distill-Qwen-7B": 7.6e9, "CodeLlama-7b-Instruct-hf": 6.74e9, "Phi-3.5-mini-instruct": 3.82e9}


def _module():
    spec = importlib.util.spec_from_file_location("paper_pairs", ROOT / "benchmarks" / "paper_pairs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _known_size(name: str) -> tuple[float, int | None]:
    hub = next((m for hub_id, m in HUB_MODELS.items() if hub_id.split("/")[1] == name), None)
    return (hub.params, hub.layers) if hub else (SIZES[name], None)


@pytest.mark.parametrize("name", [n for n, s in json.loads((ROOT / "benchmarks" / "paper_pairs" / "models.json")
                                                           .read_text())["models"].items() if "same_as" not in s])
def test_each_model_has_the_size_of_the_model_it_is_named_for(name):
    """Built on the meta device with all its layers: within 3% of its published parameter count."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = _module().load_specs()["models"][name]
    key = "n_layer" if spec["model_type"] == "gpt_bigcode" else "num_hidden_layers"
    config = AutoConfig.for_model(spec["model_type"], **{**spec["config"], key: spec["layers"]})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params, layers = _known_size(name)
    counted = sum(p.numel() for p in model.parameters())
    assert abs(counted / params - 1) < 0.03, (name, counted, params)
    assert layers is None or layers == spec["layers"]


def test_every_pair_names_measured_models():
    data = _module().load_specs()
    for target, drafter, *_ in data["pairs"]:
        assert target in data["models"] and drafter in data["models"]


def test_the_cost_model_and_its_inversion():
    m = _module()
    target = {"fwd_1_ms": 100.0, "fwd_6_ms": 130.0}
    drafter = {"fwd_1_ms": 5.0, "fwd_6_ms": 6.0}
    args = (target, drafter, 1.0, 0.1, 6)
    assert m.speedup(0.0, 1, *args) < 1  # nothing accepted: a round costs more than an AR step for one token
    # α = 1, k = 5: six tokens for 5 drafter steps and a 6-token verification
    assert m.speedup(1.0, 5, *args) == pytest.approx(6 / (25 + 130 + 1.0) * (100 + 0.1))
    even = m.alpha_for(1.0, *args)
    assert m.best(even, *args)[0] == pytest.approx(1.0, abs=1e-6)
    assert m.best(even - 0.01, *args)[0] < 1.0
    assert m.alpha_for(1.0, {"fwd_1_ms": 1.0, "fwd_6_ms": 1.0}, {"fwd_1_ms": 5.0, "fwd_6_ms": 5.0}, 0, 0, 6) is None


def test_a_measurement_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "pairs.json"
    assert _module().main(["--models", "vicuna-68m", "--repeats", "1", "--json", str(out)]) == 0
    costs = json.loads(out.read_text())["costs"]["vicuna-68m"]
    assert costs["fwd_1_ms"] > 0 and costs["layer_1_ms"] >= 0 and costs["layers"] == 2
    assert "vicuna-68m" in capsys.readouterr().out


def test_reuse_keeps_earlier_costs_and_measures_only_the_named_model(tmp_path):
    m = _module()
    earlier = tmp_path / "earlier.json"
    fake = {"layers": 42, "fwd_1_ms": 1000.0, "fwd_6_ms": 1200.0, "layer_1_ms": 20.0, "rest_1_ms": 160.0}
    earlier.write_text(json.dumps({"dtype": "float32", "verify_tokens": 6,
                                   "costs": {"gemma-2-9b-it": fake, "vicuna-68m": {**fake, "fwd_1_ms": 1e9}}}))
    out = tmp_path / "pairs.json"
    assert m.main(["--models", "vicuna-68m", "--repeats", "1", "--reuse", str(earlier), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["costs"]["gemma-2-9b-it"] == fake  # taken over
    assert data["costs"]["vicuna-68m"]["fwd_1_ms"] < 1e6  # measured again
    assert any(r["target"] == "gemma-2-9b-it" and r["drafter"] == "vicuna-68m" for r in data["rows"])
    with pytest.raises(SystemExit):  # measured at another verification length: refused
        m.main(["--models", "vicuna-68m", "--lookahead", "3", "--reuse", str(earlier)])


def test_the_layout_is_the_whole_models():
    m = _module()
    specs = m.load_specs()["models"]
    assert m.full_layout(specs["vicuna-68m"], torch.float32) == "dual"  # 68M parameters: copies are cheap
    assert m.full_layout(specs["DeepSeek-R1-Distill-Qwen-1.5B"], torch.float32) == "column"  # 6 GB in float32
    assert m.full_layout(specs["vicuna-68m"], torch.bfloat16) == "row"


def test_engine_costs_are_read_in_milliseconds():
    engine = _module().engine_costs(str(ROOT / "docs" / "benchmarks" / "engine-cost.json"))
    assert 0.5 < engine[("slem", 0.0)] < 5  # engine_cost.py writes seconds; the cost model adds milliseconds
    assert engine[("ar", 0.0)] < engine[("slrs", 1.0)]


def test_reuse_without_models_measures_only_what_the_earlier_run_lacks(tmp_path, monkeypatch):
    m = _module()
    specs = m.load_specs()["models"]
    fake = {"layers": 2, "fwd_1_ms": 10.0, "fwd_6_ms": 12.0}
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"dtype": "float32", "verify_tokens": 6,
                                   "costs": {n: fake for n in specs if n != "vicuna-68m"}}))
    measured = []
    monkeypatch.setattr(m, "measure", lambda name, *a: measured.append(name) or fake)
    assert m.main(["--reuse", str(earlier)]) == 0
    assert measured == ["vicuna-68m"]
