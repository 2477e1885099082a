"""The embedded pair's corpus and resumable training (scripts/build_corpus.py, scripts/resumable.py)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import build_corpus  # noqa: E402
import corpus_sources  # noqa: E402
import resumable  # noqa: E402


class _Meta(dict):
    def get_all(self, key):
        return self.get("_classifiers") if key == "Classifier" else None


class _Dist:
    def __init__(self, **fields):
        self.metadata = _Meta(fields)


@pytest.mark.parametrize("fields, permissive", [
    (dict(**{"License-Expression": "MIT"}), True),
    (dict(**{"License-Expression": "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"}), True),
    (dict(**{"License-Expression": "MPL-2.0"}), False),
    (dict(**{"License-Expression": "MPL-2.0 AND MIT"}), False),
    (dict(**{"License-Expression": "Apache-2.0 OR MIT"}), True),
    (dict(**{"License-Expression": "GPL-3.0-only OR MIT"}), True),
    (dict(License="Dual License", _classifiers=["License :: OSI Approved :: BSD License",
                                                "License :: OSI Approved :: Apache Software License"]), True),
    (dict(_classifiers=["License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)"]), False),
    (dict(License="Apache 2.0 License"), True),
    (dict(), False),  # unknown licence: dropped
])
def test_only_permissive_licences_are_kept(fields, permissive):
    assert build_corpus.licence_of(_Dist(**fields))[1] is permissive


def test_heldout_split_depends_only_on_the_path():
    keys = [f"pkg/mod{i}.py" for i in range(2000)]
    held = [k for k in keys if build_corpus.heldout_by_hash(k, 50)]
    assert 10 <= len(held) <= 80  # about 1 in 50
    assert held == [k for k in keys if build_corpus.heldout_by_hash(k, 50)]


def test_repetitive_generated_files_are_filtered_but_code_is_not():
    code = (ROOT / "hsd" / "runner.py").read_text()
    table = "".join(f"    'x{i % 7}': Validator('x{i % 7}', parent='layout'),\n" for i in range(400))
    assert not build_corpus.is_repetitive(code, 0.12)
    assert build_corpus.is_repetitive(table, 0.12)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The real corpus rules on this machine, shrunk to a slice (the whole build takes ~10 s)."""
    previous = json.loads((ROOT / "assets" / "tiny-code" / "corpus.json").read_text())
    if previous.get("previous_train"):
        previous = dict(train=previous["previous_train"], heldout=previous["heldout"])
    import sysconfig

    return build_corpus.build(ROOT / "requirements.txt", Path(sysconfig.get_paths()["stdlib"]), previous)


def test_corpus_is_deduplicated_split_by_file_and_keeps_the_first_pairs_split(corpus):
    train, heldout, manifest = corpus
    texts = [d["text"] for d in train + heldout]
    assert len(set(hashlib.sha256(t.encode()).digest() for t in texts)) == len(texts)
    assert not {d["path"] for d in train} & {d["path"] for d in heldout}
    first = json.loads((ROOT / "assets" / "tiny-code" / "corpus.json").read_text())
    first_train = set(first.get("previous_train") or first["train"])
    held_paths = {d["path"] for d in heldout}
    assert not first_train & held_paths, "a file the shipped pair trained on would be tested on"
    assert {"smtplib.py", "tracemalloc.py", "asyncio/timeouts.py"} <= held_paths  # held out by the first pair
    assert manifest["train_chars"] > 1e8  # the first pair's corpus: 1.0e7
    names = {p["name"].lower() for p in manifest["packages"]}
    assert {"python", "torch", "transformers", "gradio"} <= names
    assert all(corpus_sources._expression_permissive(d["licence"]) is not True for d in manifest["dropped_licences"])


def test_windows_visit_every_window_once_per_epoch_and_resume_at_the_same_place():
    stream = torch.arange(1000)
    w = resumable.Windows(stream, seq=10, batch=7, seed=3)
    seen = torch.cat([w.next_batch()[:, 0] for _ in range(len(w) // 7)])
    assert len(set(seen.tolist())) == len(seen)
    state = w.state_dict()
    ahead = [w.next_batch() for _ in range(30)]  # crosses into the next epochs
    again = resumable.Windows(stream, seq=10, batch=7, seed=3)
    again.load_state_dict(state)
    assert all(torch.equal(a, again.next_batch()) for a in ahead)


@pytest.fixture()
def work(tmp_path):
    """A work folder with a small corpus and a tiny model to start from."""
    from builders import bytelevel_tokenizer, corpus as texts, tiny_llama

    tok = bytelevel_tokenizer()
    model = tiny_llama(tok, 0, layers=1)
    init = tmp_path / "pair" / "target"
    model.save_pretrained(init)
    tok.save_pretrained(init)
    docs = [dict(source="stdlib", path=f"f{i}.py", text=t) for i, t in enumerate(texts() * 2)]
    work = tmp_path / "work"
    build_corpus.write_jsonl(work / "corpus" / "train.jsonl", docs[1:])
    build_corpus.write_jsonl(work / "corpus" / "heldout.jsonl", docs[:1])
    manifest = dict(sha256="test", train_chars=1, heldout_chars=1, train_files=len(docs) - 1, heldout_files=1,
                    packages=[], dropped_licences=[], python="3", heldout=["f0.py"])
    (work / "corpus" / "manifest.json").write_text(json.dumps(manifest))
    return work, init


def _resume(work, init, *extra):
    return resumable.main(["resume", "--work", str(work), "--init", str(init), "--threads", "1", "--warmup", "2",
                           "--eval-minutes", "1000", *extra])


def _checkpoint(work):
    return torch.load(work / "ckpt" / "target.pt", map_location="cpu", weights_only=False)


def test_interrupted_training_continues_exactly_like_an_uninterrupted_run(work, tmp_path, capsys):
    work_dir, init = work
    other = tmp_path / "work2"
    import shutil

    shutil.copytree(work_dir, other)
    assert _resume(work_dir, init, "--steps", "4") == 0
    assert _resume(other, init, "--steps", "4", "--for-steps", "2") == 0
    half = _checkpoint(other)
    assert half["segment"]["steps_done"] == 2 and half["totals"]["steps"] == 2
    # no length given: the unfinished segment continues, with its own settings (a new peak lr is refused, aloud)
    assert _resume(other, init, "--peak-lr", "0.5") == 0
    assert "--peak-lr only shape a new segment" in capsys.readouterr().out
    a, b = _checkpoint(work_dir), _checkpoint(other)
    assert a["totals"]["steps"] == b["totals"]["steps"] == 4
    assert a["data"] == b["data"]
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert a["segments"][-1]["heldout"]["bits_per_char"] > 0


def test_a_finished_segment_is_extended_only_on_request(work):
    work_dir, init = work
    assert _resume(work_dir, init, "--steps", "2") == 0
    assert _resume(work_dir, init) == 0  # nothing to continue: says so, trains nothing
    assert _checkpoint(work_dir)["totals"]["steps"] == 2
    assert _resume(work_dir, init, "--steps", "3") == 0
    state = _checkpoint(work_dir)
    assert state["totals"]["steps"] == 5 and len(state["segments"]) == 2
    assert [s["what"] for s in state["totals"]["sessions"]] == ["resume segment", "resume segment"]


def test_export_writes_a_loadable_float16_model_and_a_card_with_the_history(work):
    work_dir, init = work
    assert _resume(work_dir, init, "--steps", "3") == 0
    out = init.parent
    code = resumable.main(["export", "--work", str(work_dir), "--out", str(out), "--force", "--sample-tokens", "4",
                           "--threads", "1"])
    assert code == 0
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out / "target")
    assert model.dtype == torch.float32
    state = _checkpoint(work_dir)
    for key, value in model.state_dict().items():
        if key in state["model"]:
            assert torch.equal(value, state["model"][key].half().float()), key
    card = (out / "target" / "README.md").read_text()
    assert "## Training history" in card and "3 optimizer steps" in card
    assert "Not measured yet for these weights" in card
    log = json.loads((out / "train_log.json").read_text())
    assert log["target"]["totals"]["steps"] == 3


def test_a_snapshot_keeps_the_weights_for_another_session_which_continues_from_them(work, tmp_path):
    """A lent machine keeps nothing: ``snapshot`` writes the checkpoint's weights (float16) with its history, and a
    fresh work folder resumes from them with ``--init``."""
    import shutil

    from transformers import AutoModelForCausalLM

    work_dir, init = work
    assert _resume(work_dir, init, "--steps", "3") == 0
    out = tmp_path / "training"
    assert resumable.main(["snapshot", "--work", str(work_dir), "--out", str(out), "--threads", "1"]) == 0
    model = AutoModelForCausalLM.from_pretrained(out / "target")
    state = _checkpoint(work_dir)
    for key, value in model.state_dict().items():
        if key in state["model"]:
            assert torch.equal(value, state["model"][key].half().float()), key
    record = json.loads((out / "target" / "training.json").read_text())
    assert record["totals"]["steps"] == 3 and record["segment_finished"] and record["started_from"] == str(init)
    fresh = tmp_path / "fresh"
    shutil.copytree(work_dir / "corpus", fresh / "corpus")  # the corpus is rebuilt by build_corpus; the rest is gone
    assert _resume(fresh, out / "target", "--steps", "2") == 0
    again = _checkpoint(fresh)
    assert again["init"] == str(out / "target") and again["totals"]["steps"] == 3 + 2  # the history carries over
    with pytest.raises(SystemExit, match="outside the shipped pair"):  # never over the shipped weights unjudged
        resumable.main(["snapshot", "--work", str(work_dir), "--threads", "1"])


def test_a_grown_target_trains_and_exports_over_the_shallower_shipped_one(work, tmp_path):
    """``grow`` then ``resume --init GROWN`` then ``export``: the export takes the checkpoint's shape, not the
    shipped model's, and the card says how the model was grown."""
    import grow
    from transformers import AutoModelForCausalLM

    work_dir, init = work
    deep = tmp_path / "deep" / "target"
    assert grow.main(["--from", str(init), "--layers", "2", "--out", str(deep)]) == 0
    assert _resume(work_dir, deep, "--steps", "2") == 0
    code = resumable.main(["export", "--work", str(work_dir), "--out", str(init.parent), "--force",
                           "--sample-tokens", "4", "--threads", "1"])
    assert code == 0
    assert AutoModelForCausalLM.from_pretrained(init).config.num_hidden_layers == 2
    card = (init / "README.md").read_text()
    assert "Grown from 1 to 2 layers by `scripts/train_pair.py grow`" in card and "2 layers, hidden" in card


def test_export_says_which_folder_a_checkpoint_of_another_shape_needs(work, tmp_path):
    import grow

    work_dir, init = work
    deep = tmp_path / "deep" / "target"
    assert grow.main(["--from", str(init), "--layers", "2", "--out", str(deep)]) == 0
    assert _resume(work_dir, deep, "--steps", "1") == 0
    import shutil

    shutil.rmtree(deep)  # the grown folder is gone: the shipped 1-layer shape cannot hold the weights
    with pytest.raises(SystemExit, match="do not fit the model in"):
        resumable.main(["export", "--work", str(work_dir), "--out", str(init.parent), "--force", "--threads", "1"])


@pytest.fixture()
def distill_work(work):
    """The work folder plus a SentencePiece-style drafter to train against the tiny target's text."""
    from builders import sentencepiece_tokenizer, tiny_llama

    work_dir, target = work
    tok = sentencepiece_tokenizer()
    drafter = target.parent / "drafter"
    tiny_llama(tok, 1, layers=1).save_pretrained(drafter)
    tok.save_pretrained(drafter)
    return work_dir, target, drafter


def _distill(work, target, *extra):
    return resumable.main(["distill", "--work", str(work), "--target", str(target), "--threads", "1", "--batch", "3",
                           "--new-tokens", "5", "--heldout-samples", "2", *extra])


def test_distillation_texts_are_appended_batch_by_batch_and_continue_with_new_prompts(distill_work):
    work_dir, target, _ = distill_work
    assert _distill(work_dir, target, "--samples", "6") == 0
    folder = resumable.distill_dir(work_dir, target)
    assert folder.name == resumable.weights_digest(target)
    heldout = (folder / "heldout.jsonl").read_text()
    assert _distill(work_dir, target, "--samples", "3") == 0
    rows = [json.loads(line) for line in (folder / "train.jsonl").read_text().splitlines()]
    meta = json.loads((folder / "meta.json").read_text())
    assert len(rows) == meta["samples"] == 9 and meta["batches"] == 3 and len(meta["runs"]) == 2
    assert (folder / "heldout.jsonl").read_text() == heldout  # written once
    assert len({r["prompt"] + r["continuation"] for r in rows}) > 3  # each batch draws new prompts
    assert all(r["continuation"] and set(r) == {"prompt", "continuation", "greedy"} for r in rows)


def test_a_drafter_segment_mixes_target_text_and_resumes_both_data_positions(distill_work, tmp_path):
    import shutil

    work_dir, target, drafter = distill_work
    assert _distill(work_dir, target, "--samples", "6") == 0
    other = tmp_path / "work2"
    shutil.copytree(work_dir, other)

    def run(work, *extra):
        return _resume(work, drafter, "--role", "drafter", "--distill-from", str(target), "--distill-mix", "0.5",
                       *extra)

    assert run(work_dir, "--steps", "4") == 0
    assert run(other, "--steps", "4", "--for-steps", "2") == 0
    assert run(other) == 0
    a, b = (torch.load(w / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False) for w in (work_dir, other))
    assert a["data_distill"] == b["data_distill"] and a["data_distill"]["batch"] == 16
    assert a["data"] == b["data"] and a["data"]["batch"] == 16  # half of each batch of 32 from the corpus
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    seg = a["segments"][-1]
    assert seg["distill"]["mix"] == 0.5 and seg["distill"]["samples"] == 6
    assert seg["heldout"]["target_text_nats_per_token"] > 0


def test_a_drafter_segment_can_read_only_the_greedy_continuations(distill_work):
    work_dir, target, drafter = distill_work
    assert _distill(work_dir, target, "--samples", "6") == 0
    path = resumable.distill_dir(work_dir, target) / "train.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, r in enumerate(rows):  # a known mix: rows 0, 2, 4 greedy
        r["greedy"] = i % 2 == 0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def run(*extra):
        return _resume(work_dir, drafter, "--role", "drafter", "--distill-from", str(target), "--distill-greedy",
                       *extra)

    assert run("--steps", "1") == 0
    seg = torch.load(work_dir / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)["segments"][-1]
    assert seg["distill"]["greedy_only"] is True and seg["distill"]["samples"] == 3
    import model_card

    assert "3 greedy continuations" in "\n".join(model_card.distill_lines([seg]))
    packed = json.loads((work_dir / "packed" / f"drafter-distill-{path.parent.name}-train-greedy.json").read_text())
    tok = resumable.load_init(drafter, "drafter")[1]
    greedy_text = [r["prompt"] + r["continuation"] for r in rows if r["greedy"]]
    assert packed["tokens"] == resumable.pack(tok, [dict(text=t) for t in greedy_text],
                                              work_dir / "check.u16", drafter=True)["tokens"]
    for r in rows:
        r["greedy"] = False
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SystemExit, match="no greedy continuations"):
        run("--steps", "1")


FUNCTIONS = ('def area(width, height):\n    """The area of a rectangle of this width and height."""\n'
             '    return width * height\n\n\ndef perimeter(width, height):\n'
             '    """Twice the sum of the sides, in the units given."""\n    total = width + height\n'
             '    return 2 * total\n')


def test_distillation_can_prompt_where_docstrings_end_and_a_drafter_can_read_only_those(distill_work):
    """``distill --function-prompts 1`` cuts every prompt where a function's docstring ends (the evaluation prompts'
    shape); ``resume --distill-docstrings`` then reads only those continuations."""
    work_dir, target, drafter = distill_work
    train = work_dir / "corpus" / "train.jsonl"
    docs = list(build_corpus.read_jsonl(train)) + [dict(source="stdlib", path="shapes.py", text=FUNCTIONS)]
    build_corpus.write_jsonl(train, docs)
    assert _distill(work_dir, target, "--samples", "3") == 0
    assert _distill(work_dir, target, "--samples", "6", "--function-prompts", "1") == 0
    path = resumable.distill_dir(work_dir, target) / "train.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [bool(r.get("after_docstring")) for r in rows] == [False] * 3 + [True] * 6
    for r in rows[3:]:
        assert r["prompt"].endswith(('height."""', 'given."""')) or r["prompt"].rstrip().endswith(('"""', "'''")), r

    def run(*extra):
        return _resume(work_dir, drafter, "--role", "drafter", "--distill-from", str(target), "--distill-docstrings",
                       *extra)

    assert run("--steps", "1") == 0
    seg = torch.load(work_dir / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)["segments"][-1]
    assert seg["distill"]["docstrings_only"] is True and seg["distill"]["samples"] == 6
    import model_card

    assert "6 continuations of prompts ending with a docstring" in "\n".join(model_card.distill_lines([seg]))
    for r in rows:
        r.pop("after_docstring", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SystemExit, match="after docstrings in .*--function-prompts"):
        run("--steps", "1")


def test_a_drafter_segment_can_learn_the_targets_distribution_across_vocabularies(distill_work, tmp_path, capsys):
    import shutil

    work_dir, target, drafter = distill_work
    for name in ("work2", "work3"):
        shutil.copytree(work_dir, tmp_path / name)
    other, plain = tmp_path / "work2", tmp_path / "work3"

    def run(work, *extra):
        return _resume(work, drafter, "--role", "drafter", "--distill-logits", str(target), "--soft-windows", "4",
                       "--soft-weight", "0.5", *extra)

    assert run(work_dir, "--steps", "3") == 0
    assert "soft labels from" in capsys.readouterr().out
    assert run(other, "--steps", "3", "--for-steps", "1") == 0
    assert run(other) == 0  # the unfinished segment keeps reading the target
    assert _resume(plain, drafter, "--role", "drafter", "--steps", "3") == 0
    a, b, c = (torch.load(w / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)
               for w in (work_dir, other, plain))
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert any(not torch.equal(a["model"][k], c["model"][k]) for k in a["model"])  # the labels changed the training
    soft = a["segments"][-1]["soft"]
    assert soft["target"] == str(target) and soft["weight"] == 0.5 and soft["windows"] == 4
    assert soft["positions"] == b["segments"][-1]["soft"]["positions"] > 0 and soft["loss"] > 0
    with pytest.raises(SystemExit, match="another vocabulary"):  # the target learns only from its own vocabulary
        _resume(work_dir, target, "--distill-logits", str(drafter), "--steps", "1")
    # export scores both weights on the target's soft labels of the held-out split, and the card says how it trained
    code = resumable.main(["export", "--role", "drafter", "--work", str(work_dir), "--out", str(drafter.parent),
                           "--distill-logits", str(target), "--force", "--sample-tokens", "4", "--threads", "1"])
    assert code == 0 and "soft labels on held-out text" in capsys.readouterr().out
    scored = json.loads((drafter.parent / "train_log.json").read_text())["drafter"]["resumed"]
    assert scored["heldout"]["soft_label"]["positions"] > 0
    assert scored["heldout"]["soft_label"]["soft_ce"] >= scored["heldout"]["soft_label"]["entropy"] - 1e-6
    assert "Distillation" in (drafter / "README.md").read_text()
    assert f"the target `{target}` read 4 windows" in (drafter / "README.md").read_text()


def test_a_target_segment_can_learn_from_a_teacher_with_its_own_vocabulary(work):
    """A grown target keeps close to the target it was grown from (so its drafters stay valid) by learning that
    target's distribution beside the corpus: every position of its windows is labelled."""
    work_dir, target = work
    assert _resume(work_dir, target, "--distill-logits", str(target), "--soft-windows", "2", "--soft-weight", "0.5",
                   "--steps", "2") == 0
    seg = _checkpoint(work_dir)["segments"][-1]
    soft = seg["soft"]
    assert soft["target"] == str(target) and soft["share"] > 0.9 and soft["positions"] > 0 and soft["loss"] > 0
    import model_card

    card = "\n".join(model_card.distill_lines([seg], "target"))
    assert card.startswith("Self-distillation") and f"`{target}` read 2 windows" in card
    assert "the drafter learns" not in card and "drafter token" not in card


def test_a_drafter_segment_can_also_learn_the_targets_distribution_inside_its_tokens(distill_work, tmp_path):
    """``--soft-positions all`` labels the positions that end inside a target token too: more of them, and the
    segment records which positions it read."""
    import shutil

    work_dir, target, drafter = distill_work
    shutil.copytree(work_dir, tmp_path / "work2")
    runs = {}
    for where, work in (("aligned", work_dir), ("all", tmp_path / "work2")):
        assert _resume(work, drafter, "--role", "drafter", "--distill-logits", str(target), "--soft-windows", "4",
                       "--soft-positions", where, "--soft-temperature", "0.7", "--steps", "2") == 0
        runs[where] = torch.load(work / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)["segments"][-1]
    assert runs["aligned"]["soft"]["where"] == "aligned" and runs["all"]["soft"]["where"] == "all"
    assert runs["all"]["soft"]["positions"] > runs["aligned"]["soft"]["positions"] > 0
    assert runs["all"]["soft"]["temperature"] == 0.7 and runs["all"]["soft"]["inside_weight"] == 1.0
    shutil.copytree(tmp_path / "work2", tmp_path / "work3", ignore=shutil.ignore_patterns("ckpt"))
    assert _resume(tmp_path / "work3", drafter, "--role", "drafter", "--distill-logits", str(target), "--soft-windows",
                   "4", "--soft-positions", "all", "--soft-inside-weight", "0.25", "--soft-temperature", "0.7",
                   "--steps", "2") == 0
    state = torch.load(tmp_path / "work3" / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)
    assert state["segments"][-1]["soft"]["inside_weight"] == 0.25
    assert state["segments"][-1]["soft"]["loss"] < runs["all"]["soft"]["loss"]  # the inner rows count a quarter


def test_a_segment_can_take_more_windows_per_step_and_keeps_them_when_resumed(distill_work):
    work_dir, target, drafter = distill_work
    assert _distill(work_dir, target, "--samples", "6") == 0

    def run(*extra):
        return _resume(work_dir, drafter, "--role", "drafter", "--distill-from", str(target), *extra)

    assert run("--steps", "3", "--train-batch", "8", "--for-steps", "1") == 0
    assert run() == 0  # the unfinished segment continues with its own batch, not the role's
    state = torch.load(work_dir / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)
    seg = state["segments"][-1]
    assert seg["batch"] == 8 and seg["steps_done"] == 3
    assert state["data"]["batch"] == state["data_distill"]["batch"] == 4
    assert seg["tokens_done"] == 3 * 8 * resumable.HYPER["drafter"]["seq"]
    assert run("--steps", "1") == 0  # a new segment without --train-batch: the role's 32 windows
    state = torch.load(work_dir / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)
    assert "batch" not in state["segments"][-1] and state["data"]["batch"] == 16


def test_distillation_is_refused_for_the_target_and_without_texts(distill_work):
    work_dir, target, drafter = distill_work
    with pytest.raises(SystemExit, match="distill --target"):
        _resume(work_dir, drafter, "--role", "drafter", "--distill-from", str(target), "--steps", "1")
    with pytest.raises(SystemExit, match="for the drafters"):
        _resume(work_dir, target, "--distill-from", str(target), "--steps", "1")
    with pytest.raises(SystemExit, match="--distill-from TARGET_DIR"):
        _resume(work_dir, drafter, "--role", "drafter", "--distill-greedy", "--steps", "1")


def test_a_drafter_is_exported_on_its_loss_on_the_targets_held_out_text(distill_work):
    work_dir, target, drafter = distill_work
    assert _distill(work_dir, target, "--samples", "3") == 0
    assert _resume(work_dir, drafter, "--role", "drafter", "--distill-from", str(target), "--steps", "2") == 0
    code = resumable.main(["export", "--role", "drafter", "--work", str(work_dir), "--out", str(drafter.parent),
                           "--distill-from", str(target), "--force", "--sample-tokens", "4", "--threads", "1"])
    assert code == 0
    card = (drafter / "README.md").read_text()
    assert "the target's greedy continuations of held-out prompts" in card
    assert "50% of each batch from 3 continuations" in card


def test_the_shared_vocabulary_drafter_starts_fresh_with_the_targets_tokenizer_and_exports(distill_work):
    """``drafter-shared``: no shipped weights; the drafter's shape, the target's tokenizer, distilled."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    work_dir, target, drafter = distill_work
    shared = target.parent / "drafter-shared"
    assert _distill(work_dir, target, "--samples", "3") == 0
    assert _resume(work_dir, shared, "--role", "drafter-shared", "--distill-from", str(target),
                   "--distill-mix", "0.4", "--steps", "2") == 0
    state = torch.load(work_dir / "ckpt" / "drafter-shared.pt", map_location="cpu", weights_only=False)
    assert state["totals"]["steps"] == 2 and state["totals"]["sessions"][0]["what"] == "resume segment"
    assert state["init"].startswith("fresh") and state["hyper"]["batch"] == 32
    t_tok = AutoTokenizer.from_pretrained(target)
    assert state["model"]["model.embed_tokens.weight"].shape[0] == len(t_tok)
    d_cfg = AutoModelForCausalLM.from_pretrained(drafter).config
    assert state["model"]["model.embed_tokens.weight"].shape[1] == d_cfg.hidden_size
    # packed like the target (no <s> in front): the same ids the target's tokenizer gives a prompt
    packed = resumable.load_stream(work_dir / "packed" / "drafter-shared-train.u16")
    first = build_corpus.read_jsonl(work_dir / "corpus" / "train.jsonl")[0]["text"]
    assert packed[:5].tolist() == t_tok(first)["input_ids"][:5]
    assert not (work_dir / "ckpt" / "target.pt").exists()
    code = resumable.main(["export", "--role", "drafter-shared", "--work", str(work_dir), "--out",
                           str(target.parent), "--distill-from", str(target), "--sample-tokens", "4", "--threads", "1"])
    assert code == 0  # better than the untrained initial weights: written without --force
    model = AutoModelForCausalLM.from_pretrained(shared)
    tok = AutoTokenizer.from_pretrained(shared)
    assert tok.get_vocab() == t_tok.get_vocab() and model.config.vocab_size == len(t_tok)
    card = (shared / "README.md").read_text()
    assert "the target's own byte-level BPE tokenizer" in card and "the untrained initial weights" in card


def test_the_sampling_drafter_continues_the_drafter_and_exports_beside_it(distill_work, capsys):
    """``drafter-sampling``: begins as the shipped drafter (weights, tokenizer, history), trains on the target's
    distribution, and is written to its own folder; the drafter it started from is left as it was."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    work_dir, target, drafter = distill_work
    history = dict(steps=7, tokens=700, seconds=70.0, sessions=[dict(what="the drafter's own training", steps=7,
                                                                      tokens=700, seconds=70.0)])
    (target.parent / "train_log.json").write_text(json.dumps({"drafter": {"totals": history}}))
    before = {k: v.clone() for k, v in AutoModelForCausalLM.from_pretrained(drafter).state_dict().items()}
    sampling = target.parent / "drafter-sampling"
    assert _resume(work_dir, sampling, "--role", "drafter-sampling", "--distill-logits", str(target),
                   "--soft-windows", "4", "--soft-weight", "0.8", "--steps", "2") == 0
    assert "first resume of drafter-sampling: starting from " + str(drafter) in capsys.readouterr().out
    state = torch.load(work_dir / "ckpt" / "drafter-sampling.pt", map_location="cpu", weights_only=False)
    assert state["init"] == str(drafter) and state["hyper"]["batch"] == 32
    assert state["totals"]["steps"] == 7 + 2 and state["totals"]["tokens"] > 700  # the drafter's history, continued
    assert [s["what"] for s in state["totals"]["sessions"]][0] == "the drafter's own training"
    assert state["segments"][-1]["soft"]["weight"] == 0.8
    for key, value in before.items():  # started from the drafter's weights, and moved
        assert state["model"][key].shape == value.shape
    assert any(not torch.equal(state["model"][k], before[k]) for k in before)
    assert not (work_dir / "ckpt" / "drafter.pt").exists()
    code = resumable.main(["export", "--role", "drafter-sampling", "--work", str(work_dir), "--out",
                           str(target.parent), "--distill-logits", str(target), "--force", "--sample-tokens", "4",
                           "--threads", "1"])
    assert code == 0
    assert AutoTokenizer.from_pretrained(sampling).get_vocab() == AutoTokenizer.from_pretrained(drafter).get_vocab()
    after = AutoModelForCausalLM.from_pretrained(drafter).state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)  # the drafter itself is untouched
    card = (sampling / "README.md").read_text()
    assert "*drafter* for sampling" in card and "drafter, the weights it continued" in card
    log = json.loads((target.parent / "train_log.json").read_text())
    assert log["drafter-sampling"]["totals"]["steps"] == 9 and log["drafter"]["totals"] == history


def test_repeated_ngram_mask_marks_every_token_of_each_repeat_and_nothing_else():
    assert resumable.repeated_ngram_mask([1, 2, 3, 4, 5, 6], 2) == [False] * 6
    assert resumable.repeated_ngram_mask([1, 2, 1, 2, 1], 2) == [False, False, True, True, True]
    assert resumable.repeated_ngram_mask([7, 7, 7, 7, 7], 4) == [False, True, True, True, True]
    assert resumable.repeated_ngram_mask([1, 2, 3], 4) == [False, False, False]


def test_unlikelihood_lowers_the_probability_of_a_repeated_greedy_token(work):
    """One optimizer step on the unlikelihood loss alone lowers p(token) at the penalised positions."""
    from transformers import AutoModelForCausalLM

    work_dir, init = work
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(init)
    stream = torch.arange(200) % 7
    spec = dict(resumable.UNLIKELIHOOD, batch=4, prefix=8, continuation=16, n=1)  # n=1: any repeated token

    def loss():
        return resumable.unlikelihood_loss(model, stream, torch.Generator().manual_seed(3), "cpu", spec)

    before, share, tokens = loss()
    assert share > 0 and tokens == 4 * (8 + 16 - 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = loss()[0]
    assert after < before


def test_an_unlikelihood_segment_resumes_exactly_and_is_recorded(work, tmp_path):
    work_dir, init = work
    other = tmp_path / "work2"
    import shutil

    shutil.copytree(work_dir, other)
    args = ("--steps", "4", "--unlikelihood", "0.5", "--peak-lr", "1e-3")
    assert _resume(work_dir, init, *args) == 0
    assert _resume(other, init, *args, "--for-steps", "2") == 0
    assert _resume(other, init) == 0
    a, b = _checkpoint(work_dir), _checkpoint(other)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    seg = a["segments"][-1]
    assert seg["peak_lr"] == 1e-3 and seg["unlikelihood"]["share"] == 0.5
    assert seg["unlikelihood"]["steps"] == b["segments"][-1]["unlikelihood"]["steps"]
    assert a["data"] == b["data"]


def test_unlikelihood_is_refused_for_a_drafter_and_out_of_range(distill_work, work):
    work_dir, init = work
    with pytest.raises(SystemExit, match="unlikelihood"):
        _resume(work_dir, init, "--steps", "1", "--unlikelihood", "1.5")


def test_blend_interpolates_two_checkpoints_records_it_and_training_resumes(work, tmp_path):
    work_dir, init = work
    assert _resume(work_dir, init, "--steps", "2") == 0
    before = tmp_path / "before.pt"
    import shutil

    shutil.copy(work_dir / "ckpt" / "target.pt", before)
    assert _resume(work_dir, init, "--steps", "2", "--unlikelihood", "0.5", "--peak-lr", "1e-3") == 0
    after = _checkpoint(work_dir)
    first = torch.load(before, map_location="cpu", weights_only=False)
    args = ["blend", "--work", str(work_dir), "--init", str(init), "--out", str(init.parent), "--threads", "1",
            "--with", str(before)]
    assert resumable.main([*args, "--share", "0.25"]) == 0
    blended = _checkpoint(work_dir)
    for key, value in blended["model"].items():
        assert torch.allclose(value, 0.75 * after["model"][key] + 0.25 * first["model"][key]), key
    assert blended["optimizer"] is None
    # the other checkpoint is this one's ancestor: no compute is counted twice
    assert blended["totals"]["tokens"] == after["totals"]["tokens"]
    last = blended["totals"]["sessions"][-1]
    assert last["what"].startswith("blend: 75% these weights, 25% ") and last["heldout"]["bits_per_char"] > 0
    assert blended["blends"][-1]["share"] == 0.25
    assert resumable.main(["export", "--work", str(work_dir), "--out", str(init.parent), "--force",
                           "--sample-tokens", "4", "--threads", "1"]) == 0
    card = (init / "README.md").read_text()
    assert "50% of 2 steps were sequence-level unlikelihood steps" in card
    assert "75% of the checkpoint's weights, 25% of" in card
    assert _resume(work_dir, init, "--steps", "1") == 0  # a fresh optimizer, the blend as the start
    assert _checkpoint(work_dir)["totals"]["steps"] == 5
    with pytest.raises(SystemExit, match="--share"):
        resumable.main([*args, "--share", "1.5"])
    with pytest.raises(SystemExit, match="no checkpoint"):
        resumable.main([*args[:-1], str(tmp_path / "missing.pt"), "--share", "0.5"])
    with pytest.raises(SystemExit, match="--with"):
        resumable.main([*args[:-2], "--share", "0.5"])


def test_blend_counts_the_compute_of_a_checkpoint_trained_apart(work, tmp_path):
    work_dir, init = work
    import shutil

    other = tmp_path / "apart"
    shutil.copytree(work_dir, other)
    assert _resume(work_dir, init, "--steps", "2") == 0
    assert _resume(other, init, "--steps", "3", "--seed", "7") == 0
    mine, theirs = _checkpoint(work_dir), _checkpoint(other)
    assert resumable.main(["blend", "--work", str(work_dir), "--init", str(init), "--out", str(init.parent),
                           "--threads", "1", "--with", str(other / "ckpt" / "target.pt"), "--share", "0.5"]) == 0
    blended = _checkpoint(work_dir)
    assert blended["totals"]["steps"] == mine["totals"]["steps"] + theirs["totals"]["steps"] == 5
    assert [s["what"].split(":")[0] for s in blended["totals"]["sessions"]] == [
        "resume segment", "resume segment (blended in)", "blend"]


def test_pair_goals_scores_the_bits_per_char_of_the_target_it_is_given(work, tmp_path):
    """A candidate's bits/char, not the shipped target's (scripts/pair/pair_goals.py once ignored --pair here)."""
    from builders import bytelevel_tokenizer, tiny_llama

    sys.path.insert(0, str(ROOT / "scripts" / "pair"))
    import pair_goals

    work_dir, init = work
    other = tmp_path / "other" / "target"
    tiny_llama(bytelevel_tokenizer(), 1, layers=1).save_pretrained(other)
    bytelevel_tokenizer().save_pretrained(other)
    assert pair_goals.bits_per_char(work_dir, init, "heldout") is None  # nothing packed yet: n/a, not an error
    resumable.prepare_data(work_dir, "target", bytelevel_tokenizer())
    a, b = pair_goals.bits_per_char(work_dir, init, "heldout"), pair_goals.bits_per_char(work_dir, other, "heldout")
    assert a["bits_per_char"] > 0 and b["bits_per_char"] > 0 and a["bits_per_char"] != b["bits_per_char"]


@pytest.mark.slow  # a training or benchmark script end to end: python -m pytest -m slow
def test_gpu_drafters_pack_run_and_merge_extend_the_distillation_set_and_the_checkpoint(distill_work, tmp_path):
    """scripts/gpu_drafters.py end to end on the CPU: what the GPU run does, with tiny models."""
    import gpu_drafters

    work_dir, target, drafter = distill_work
    assert _resume(work_dir, drafter, "--role", "drafter", "--steps", "1") == 0  # packs the corpus for the drafter
    assert _distill(work_dir, target, "--samples", "3") == 0
    folder = resumable.distill_dir(work_dir, target)
    before = (folder / "train.jsonl").read_text().splitlines()
    bundle = tmp_path / "bundle.tar.xz"
    deeper = tmp_path / "deeper" / "drafter"  # a candidate of another shape, trained beside the shipped drafter
    assert gpu_drafters.main(["fresh", "--like", str(drafter), "--out", str(deeper), "--layers", "2"]) == 0
    assert gpu_drafters.main(["pack", "--work", str(work_dir), "--bundle", str(bundle), "--target", str(target),
                              "--roles", "drafter", "--corpus-mb", "0.001", "--train-mb", "0.01",
                              "--candidate", "deep", "drafter", str(deeper)]) == 0
    out = tmp_path / "out"
    assert gpu_drafters.main(["run", "--bundle", str(bundle), "--out", str(out), "--target", str(target), "--init",
                              str(target.parent), "--device", "cpu", "--threads", "1", "--distill-minutes", "0.005",
                              "--distill-batch", "3", "--train-minutes", "0.01", "--train-batch", "4",
                              "--soft", "drafter", "0.7", "--soft-windows", "2", "--peak-lr", "4e-4"]) == 0
    ran = json.loads((out / "run.json").read_text())
    assert ran["status"] == {"distill": 0, "drafter": 0, "candidate deep": 0} and ran["new_samples"] >= 3
    assert _distill(work_dir, target, "--samples", "3") == 0  # the set grew here meanwhile: merging is refused
    with pytest.raises(SystemExit, match="make a new bundle"):
        gpu_drafters.main(["merge", "--results", str(out), "--work", str(work_dir)])
    lines = (folder / "train.jsonl").read_text().splitlines()
    (folder / "train.jsonl").write_text("\n".join(lines[:len(before)]) + "\n")
    old = torch.load(work_dir / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)
    assert gpu_drafters.main(["merge", "--results", str(out), "--work", str(work_dir), "--candidates-to",
                              str(tmp_path)]) == 0
    after = (folder / "train.jsonl").read_text().splitlines()
    assert after[:len(before)] == before and len(after) == len(before) + ran["new_samples"]
    assert json.loads((folder / "meta.json").read_text())["samples"] == len(after)
    state = torch.load(work_dir / "ckpt" / "drafter.pt", map_location="cpu", weights_only=False)
    seg = state["segments"][-1]
    assert seg["batch"] == 4 and seg["device"] == "cpu" and seg["distill"]["samples"] == len(after)
    assert seg["soft"]["temperature"] == 0.7 and seg["soft"]["where"] == "aligned" and seg["soft"]["windows"] == 2
    assert seg["peak_lr"] == 4e-4
    kept = torch.load(work_dir / "ckpt" / "drafter.pre-gpu.pt", map_location="cpu", weights_only=False)
    assert kept["totals"] == old["totals"]
    from transformers import AutoModelForCausalLM

    got = AutoModelForCausalLM.from_pretrained(tmp_path / "candidates" / "deep" / "drafter")
    assert got.config.num_hidden_layers == 2
    assert json.loads((tmp_path / "candidates" / "deep" / "segment.json").read_text())["segments"][-1]["batch"] == 4
    assert resumable.main(["export", "--work", str(work_dir), "--role", "drafter", "--out", str(target.parent),
                           "--distill-from", str(target), "--force"]) == 0
    card = (target.parent / "drafter" / "README.md").read_text()
    assert "on cpu: batches of 4 x 256 tokens" in card  # the card says which segment took other batches


@pytest.mark.slow  # a training or benchmark script end to end: python -m pytest -m slow
def test_gpu_drafters_can_carry_part_of_the_texts_and_merge_them_back_in_order(distill_work, tmp_path):
    import gpu_drafters

    work_dir, target, drafter = distill_work
    assert _resume(work_dir, drafter, "--role", "drafter", "--steps", "1") == 0
    assert _distill(work_dir, target, "--samples", "6") == 0
    folder = resumable.distill_dir(work_dir, target)
    before = (folder / "train.jsonl").read_text().splitlines()
    meta_before = json.loads((folder / "meta.json").read_text())
    bundle, out = tmp_path / "bundle.tar.xz", tmp_path / "out"
    one_row = len(before[0].encode()) + 1
    assert gpu_drafters.main(["pack", "--work", str(work_dir), "--bundle", str(bundle), "--target", str(target),
                              "--roles", "drafter", "--corpus-mb", "0.001", "--train-mb", "0.01",
                              "--texts-mb", str(1.5 * one_row / 2**20)]) == 0
    assert gpu_drafters.main(["run", "--bundle", str(bundle), "--out", str(out), "--target", str(target), "--init",
                              str(target.parent), "--device", "cpu", "--threads", "1", "--distill-minutes", "0.005",
                              "--distill-batch", "3", "--roles"]) == 0  # distillation only
    ran = json.loads((out / "run.json").read_text())
    assert ran["bundle"]["old_samples"] == 1 and ran["bundle"]["source_samples"] == 6
    assert ran["status"] == {"distill": 0} and not (out / "drafter.pt").exists()
    assert gpu_drafters.main(["merge", "--results", str(out), "--work", str(work_dir)]) == 0
    after = (folder / "train.jsonl").read_text().splitlines()
    assert after[:6] == before and len(after) == 6 + ran["new_samples"]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["samples"] == len(after) and len(meta["runs"]) == len(meta_before["runs"]) + 1
    assert meta["batches"] == meta_before["batches"] + ran["new_samples"] // 3
    assert meta["generated_tokens"] > meta_before["generated_tokens"]


def test_the_card_names_the_packages_held_out_whole_and_the_pinned_pypi_sources():
    """A corpus split by package: the card says which packages were held out whole, for which use, and how many
    packages came from the PyPI lock; a corpus without one keeps the requirement-closure wording."""
    import model_card

    man = dict(train_files=10, train_chars=1000, heldout_files=3, heldout_chars=300, python="3.11.7",
               rules=dict(pypi_lock="pypi.lock"),
               packages=[dict(name="python"), dict(name="numpy"), dict(name="attrs", wheel="attrs.whl"),
                         dict(name="isort", wheel="isort.whl", split="evaluation")],
               heldout_packages=dict(evaluation=["isort"], calibration=[]))
    text = "\n".join(model_card.corpus_lines(man))
    assert "3 packages: 1 that `requirements.txt` installs and 2 permissively licensed" in text
    assert "scripts/corpus/pypi.lock" in text and "1 evaluation packages (isort)" in text
    old = dict(man, rules={}, heldout_packages={})
    text = "\n".join(model_card.corpus_lines(old))
    assert "3 packages that `requirements.txt` installs" in text and "Held out whole" not in text
