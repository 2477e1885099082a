"""The model cache caps memory: at most ``MAX_CACHED_MODELS`` models live, an evicted model is
freed (no Pair, vocabulary table, result or plan keeps it), a model asked for again is loaded once, and a pair
that does not fit the free memory evicts the cache before it is refused."""

import gc
import threading
import time
import weakref

import pytest

import hsd
import hsd.loading as loading
import hsd.planning as planning
from builders import bytelevel_tokenizer, sentencepiece_tokenizer, tiny_llama


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """Two pairs of tiny models saved to directories: a/target, a/drafter, b/target, b/drafter."""
    root = tmp_path_factory.mktemp("cache-models")
    out = {}
    for pair, seed in (("a", 10), ("b", 20)):
        for role, tok in (("target", bytelevel_tokenizer()), ("drafter", sentencepiece_tokenizer())):
            model = tiny_llama(tok, seed + (role == "drafter"))
            model.generation_config.eos_token_id = tok.eos_token_id
            path = root / pair / role
            model.save_pretrained(path)
            tok.save_pretrained(path)
            out[f"{pair}/{role}"] = str(path)
    return out


@pytest.fixture
def loads(monkeypatch):
    """The cache emptied and capped at 2 models; returns the list of names actually loaded (not cache hits),
    and checks at each load that no more than ``cap - 1`` models are alive anywhere in the process."""
    hsd.clear_cache()
    monkeypatch.setattr(loading, "MAX_CACHED_MODELS", 2)
    real, made, names = loading._load, [], []

    def counting(name, *args, **kwargs):
        gc.collect()
        alive = sum(ref() is not None for ref in made)
        assert alive <= loading.MAX_CACHED_MODELS - 1, f"{alive} models alive before loading {name}"
        model = real(name, *args, **kwargs)
        made.append(weakref.ref(model.model))
        names.append(name)
        return model

    monkeypatch.setattr(loading, "_load", counting)
    yield names
    hsd.clear_cache()


def _refs(pair):
    return [weakref.ref(pair), weakref.ref(pair.target.model), weakref.ref(pair.drafter.model),
            weakref.ref(pair.target), weakref.ref(pair.drafter.tokenizer)]


def test_evicted_models_are_freed_even_after_runs_and_kept_results(dirs, loads):
    pair = hsd.load_pair(dirs["a/target"], dirs["a/drafter"], device="cpu")
    results = [hsd.generate(pair, "def f(x):", algorithm=name, max_new_tokens=4, temperature=t)
               for name, t in (("slem", 0.0), ("tli", 1.0), ("slrs", 1.0))]  # fills vocabulary maps, tries, paths
    assert pair.vocab.intersection_size > 0
    refs = _refs(pair)
    del pair
    hsd.load_pair(dirs["b/target"], dirs["b/drafter"], device="cpu")
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs), "an evicted model is still alive"
    assert results[0].settings["target"] == dirs["a/target"]  # results outlive their models
    assert loading.cached_models() == [dirs["b/target"], dirs["b/drafter"]]
    assert len(loads) == 4


def test_a_model_asked_for_again_is_loaded_once(dirs, loads):
    first = hsd.load_pair(dirs["a/target"], dirs["a/drafter"], device="cpu")
    assert hsd.load_pair(dirs["a/target"], dirs["a/drafter"], device="cpu") is first
    assert hsd.load_model(dirs["a/drafter"], device="cpu") is first.drafter
    del first
    hsd.load_pair(dirs["b/target"], dirs["b/drafter"], device="cpu")
    again = hsd.load_pair(dirs["a/target"], dirs["a/drafter"], device="cpu")  # evicted: loaded anew, once
    assert hsd.load_pair(dirs["a/target"], dirs["a/drafter"], device="cpu") is again
    assert loads == [dirs["a/target"], dirs["a/drafter"], dirs["b/target"], dirs["b/drafter"],
                     dirs["a/target"], dirs["a/drafter"]]
    assert not hsd.is_loaded(dirs["b/target"], device="cpu") and hsd.is_loaded(dirs["a/target"], device="cpu")


def test_two_threads_asking_for_one_model_load_it_once(dirs, loads, monkeypatch):
    slow = loading._load

    def slower(*args, **kwargs):
        time.sleep(0.3)  # both threads are inside load_model while the first load runs
        return slow(*args, **kwargs)

    monkeypatch.setattr(loading, "_load", slower)
    got = []
    threads = [threading.Thread(target=lambda: got.append(hsd.load_model(dirs["a/target"], device="cpu")))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and got[0] is got[1]


def test_a_pair_that_does_not_fit_evicts_the_cache_before_it_is_refused(dirs, loads, monkeypatch):
    pair = hsd.load_pair(dirs["a/target"], dirs["a/drafter"], device="cpu")
    refs = _refs(pair)
    del pair
    gb = 10**9
    # 1 GB free while the two cached models are loaded, 3 GB once they are gone; each Hub model needs 1 GB: 0.5 GB
    # of float32 weights and as much again for the CPU's dual layout (hsd/layout.py)
    monkeypatch.setattr(planning, "available_bytes", lambda dev: 3 * gb - len(loading._CACHE) * gb)
    monkeypatch.setattr(planning, "hub_params", lambda name, revision=None: (gb // 8, "from the Hub"))
    plan = planning.plan_load(dirs["a/target"], dirs["a/drafter"], device="cpu", dtype="float32")
    assert plan.count("already loaded") == 2 and "evicted" not in plan  # a pair never evicts itself
    plan = planning.plan_load("org/big-target", "org/big-drafter", device="cpu", dtype="float32")
    assert "evicted 2 cached models" in plan and loading.cached_models() == []
    assert plan.count("≈0.5 GB in float32 (+0.5 GB of column-major copies for the CPU)") == 2
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    # 4 GB each: over the dual layout's 2 GiB, so column-major in place, no copies
    monkeypatch.setattr(planning, "hub_params", lambda name, revision=None: (gb, "from the Hub"))
    with pytest.raises(hsd.ResourceLimitError, match="need about 8.0 GB but cpu has 3.0 GB free"):
        planning.plan_load("org/huge-target", "org/huge-drafter", device="cpu", dtype="float32")


@pytest.mark.parametrize("value", ["1", "0", "four", ""])
def test_max_cached_models_below_a_pair_is_refused_with_the_fix(value):
    with pytest.raises(hsd.InvalidSettingError, match="HSD_MAX_CACHED_MODELS=.*at least 2"):
        loading._max_cached_models(value)
    assert loading._max_cached_models("3") == 3
