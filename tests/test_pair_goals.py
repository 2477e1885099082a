"""``scripts/pair/pair_goals.py``'s arithmetic: what a speed goal asks of a drafter (no models needed)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "pair"))

import pair_goals  # noqa: E402


def test_free_drafting_and_verification_needs_half_the_proposals_for_2x():
    """With a free drafter and a verification as cheap as a step, the speedup is τ: 2x needs a just over 0.5."""
    r = pair_goals.requirement(2.0, 0.0, lambda n: 1.0, 1.0)
    assert r["needed_acceptance"] == pytest.approx(0.5, abs=0.011) and r["ceiling"] == pytest.approx(13.0)


def test_costly_drafting_lowers_the_ceiling_and_can_make_a_goal_unreachable():
    # each proposal costs a whole target step to draft: at best (m+1)/(m+1) = 1x
    r = pair_goals.requirement(1.5, 1.0, lambda n: 1.0, 1.0)
    assert r["needed_acceptance"] is None and r["ceiling"] == pytest.approx(13 / 13)
    # a byte drafter needs 1/0.28 steps per proposal: the same cost ratio reaches less
    assert (pair_goals.requirement(1.0, 0.2, lambda n: 1.0, 0.28)["ceiling"]
            < pair_goals.requirement(1.0, 0.2, lambda n: 1.0, 1.0)["ceiling"])


def test_distinct_4gram_share():
    assert pair_goals.distinct_4gram_share([1, 2, 3, 4, 5]) == 1.0
    assert pair_goals.distinct_4gram_share([7] * 10) == pytest.approx(1 / 7)


def test_missed_goals_are_explained_in_numbers_and_met_ones_are_not():
    req = dict(needed_acceptance=0.5, ceiling=3.0, cost_ratio=0.08, needed_at_k=3, ceiling_k=12)
    rows = [dict(preset="p", algorithm="slem", temperature=0.0, goal=2.0, speedup=2.1, tau=5.0,
                 verified_acceptance=0.9, requirement=req),
            dict(preset="p", algorithm="tli", temperature=1.0, goal=1.0, speedup=0.9, tau=1.4,
                 verified_acceptance=0.4, requirement=req),
            dict(preset="p", algorithm="tli", temperature=0.0, goal=None, speedup=0.5, tau=1.0,
                 verified_acceptance=0.4)]
    lines = pair_goals.missed_lines(rows)
    assert len(lines) == 1
    assert "tli at T=1.0: **0.90×** against 1.0× (10% short)" in lines[0]
    assert "needs 0.50 accepted per verified proposal, has 0.40" in lines[0] and "c = 0.080" in lines[0]


def test_a_missed_goal_says_whether_an_oracle_drafter_could_reach_it(tmp_path):
    req = dict(needed_acceptance=0.5, ceiling=3.0, cost_ratio=0.08, needed_at_k=3, ceiling_k=12)
    rows = [dict(preset="p", algorithm="slem", temperature=0.7, goal=1.2, speedup=0.9, tau=1.3,
                 verified_acceptance=0.3, requirement=dict(req)),
            dict(preset="p", algorithm="slem", temperature=0.0, goal=2.0, speedup=1.7, tau=3.0,
                 verified_acceptance=0.7, requirement=dict(req))]
    bound = lambda x: dict(speedup=x, lookahead=3, threshold=0.0, tau=1.5)  # noqa: E731
    saved = tmp_path / "oracle.json"
    saved.write_text(json.dumps(dict(rows=[
        dict(algorithm="slem", temperature=0.7, oracle_acceptance=0.45, free=bound(1.3), smallest=bound(1.1)),
        dict(algorithm="slem", temperature=0.0, oracle_acceptance=1.0, free=bound(7.0), smallest=bound(4.5))])))
    pair_goals.attach_oracle(rows, str(saved))
    lines = pair_goals.missed_lines(rows)
    assert "accepted at 0.45 of positions" in lines[0] and "1.30× if drafting were free, 1.10×" in lines[0]
    assert "out of reach for any drafter as cheap as the smallest model" in lines[0]
    assert "within reach of a better drafter" in lines[1]


def test_the_oracle_bound_is_attached_to_independent_noise_only(tmp_path):
    """The oracle bounds an exact match drawn independently (at most max p per position); shared noise can pass it."""
    req = dict(needed_acceptance=0.46, ceiling=6.0, cost_ratio=0.04, needed_at_k=3, ceiling_k=12)
    rows = [dict(preset="p", algorithm="slem", temperature=0.7, goal=1.2, speedup=1.1, tau=1.7, noise=noise,
                 verified_acceptance=0.44, requirement=dict(req)) for noise in ("shared", "independent")]
    bound = dict(speedup=1.3, lookahead=3, threshold=0.0, tau=1.5)
    saved = tmp_path / "oracle.json"
    saved.write_text(json.dumps(dict(rows=[dict(algorithm="slem", temperature=0.7, oracle_acceptance=0.5, free=bound,
                                                smallest=bound)])))
    pair_goals.attach_oracle(rows, str(saved))
    assert "oracle" not in rows[0] and "oracle" in rows[1]
    lines = pair_goals.missed_lines(rows)
    assert "slem at T=0.7 with shared noise: **1.10×**" in lines[0] and "oracle" not in lines[0]
    assert "| p | slem | 0.7 | shared |" in pair_goals.table(
        [dict(r, lookahead="3", ar_tps=80.0, tps=88.0, acceptance=0.3) for r in rows], "m",
        type("A", (), dict(prompt_set="packages", prompts=8, max_new_tokens=128, lookahead=3,
                           calibration_prompts=12))())


@pytest.mark.slow  # a training or benchmark script end to end: python -m pytest -m slow
def test_drafter_pair_gives_the_same_exact_numbers_for_the_same_drafters():
    """At T = 0 τ and acceptance are exact: one drafter set compared with itself differs in nothing but tokens/s."""
    import drafter_pair

    pair = str(Path(__file__).resolve().parent.parent / "assets" / "tiny-code")
    rows = drafter_pair.main(["--old", pair, "--new", pair, "--prompts", "1", "--max-new-tokens", "12"])
    assert len(rows) == len(drafter_pair.SETTINGS)
    for row in rows:
        if row["temperature"] == 0.0:
            assert row["old_tau"] == row["new_tau"] >= 1.0
            assert row["old_verified_acceptance"] == row["new_verified_acceptance"]
        assert row["old_tps"] > 0 and row["new_tps"] > 0
    some = drafter_pair.main(["--old", pair, "--new", pair, "--prompts", "1", "--max-new-tokens", "12",
                              "--roles", "drafter-sampling"])
    assert [r["lookahead"] for r in some] == [r["lookahead"] for r in rows if r["role"] == "drafter-sampling"]
    calibration = drafter_pair.main(["--old", pair, "--new", pair, "--prompts", "1", "--max-new-tokens", "12",
                                     "--roles", "drafter", "--prompt-set", "calibration"])
    assert [r["old_tau"] for r in calibration] != [r["old_tau"] for r in rows if r["role"] == "drafter"]
    assert [r["old_tau"] for r in some] == [r["old_tau"] for r in rows if r["role"] == "drafter-sampling"]


def test_target_pair_times_a_grown_target_beside_the_original_with_the_same_tau(tmp_path, capsys):
    """A target grown by ``train_pair.py grow`` computes what the original computes, so every goal setting
    accepts the same (τ exactly equal, at T > 0 too: same seeds, same draws) and only the costs differ."""
    import target_pair

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import grow

    assets = Path(__file__).resolve().parent.parent / "assets" / "tiny-code"
    deep = tmp_path / "deep" / "target"
    assert grow.main(["--from", str(assets / "target"), "--layers", "18", "--out", str(deep)]) == 0
    rows = target_pair.main(["--new", str(deep), "--prompts", "1", "--seeds", "1", "--max-new-tokens", "10"])
    assert [(r["algorithm"], r["temperature"]) for r in rows] == [(g[1], g[2]) for g in target_pair.GOALS]
    for row in rows:
        assert row["old_tau"] == row["new_tau"] >= 1.0
        assert row["old_speedup"] > 0 and row["new_ar_ms"] > 0
    out = capsys.readouterr().out
    assert "| drafter-sampling | slem | 0.7 | 12 (stop below 0.5), shared noise | 1.2x |" in out
    some = target_pair.main(["--new", str(deep), "--prompts", "1", "--max-new-tokens", "6", "--roles", "drafter-bytes"])
    assert [r["algorithm"] for r in some] == ["slrs"]


def test_shapes_measures_model_folders_interleaved(capsys):
    import shapes

    assets = Path(__file__).resolve().parent.parent / "assets" / "tiny-code"
    assert shapes.main(["--folders", str(assets / "drafter"), str(assets / "drafter-bytes"), "--rounds", "2",
                        "--reps", "3", "--context", "8", "--after", str(assets / "target")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {assets}")]
    assert [r.split(" | ")[1] for r in rows] == ["2 x 192 (512)", "2 x 128 (352)"]
    for r in rows:
        cells = r.rstrip(" |").split(" | ")
        assert cells[3] == "lean"  # what the engine drafts with on a CPU
        median, (low, high), first = float(cells[4]), map(float, cells[5].split("-")), float(cells[6])
        assert 0 < low <= median <= high and first > 0


def test_oracle_rounds_stop_at_the_first_miss_and_at_a_doubtful_position():
    from oracle_ceiling import Position, replay

    rec = [Position(h, p, 2) for h, p in [(True, .9), (True, .9), (False, .2), (True, .9), (True, .4), (True, .9)]]
    # lookahead 4: 2 hits then a miss (3 tokens), then 3 hits capped by the end of the text
    assert replay(rec, 4, 0.0) == [(3, 4, 8), (3, 3, 6)]
    # stop drafting after a position the oracle gives less than 0.5: after the miss at 2, and after 4, whose hit
    # earns the bonus token at 5
    assert replay(rec, 4, 0.5) == [(3, 3, 6), (3, 2, 4)]
    assert sum(r[0] for r in replay(rec, 1, 0.0)) == len(rec)


def test_oracle_ceiling_bounds_the_goals_with_measured_costs(tmp_path):
    """On the embedded pair: the oracle never misses at T = 0, and a costlier drafter only lowers the bound."""
    import oracle_ceiling

    pair = str(Path(__file__).resolve().parent.parent / "assets" / "tiny-code")
    saved = tmp_path / "oracle.json"
    rows = oracle_ceiling.main(["--pair", pair, "--prompts", "1", "--seeds", "1", "--new-tokens", "10",
                                "--repeats", "2", "--rounds", "1", "--json", str(saved)])
    assert oracle_ceiling.main(["--replay", str(saved)]) == rows  # the saved decodings and costs give the same
    # other runs' cost tables: verifying several tokens costs one step (flat) or two (steep); with a free drafter
    # every round verifies at least 2 tokens, so the steep table halves every bound
    bounds = []
    for steep in (1, 2):
        table = dict(draft_ms=1.0, **{f"verify_{n}_ms": 10.0 * (1 if n == 1 else steep) for n in range(1, 10)})
        other = tmp_path / f"goals{steep}.json"
        other.write_text(json.dumps(dict(costs={"tiny-code": table, "tiny-code-bytes": table})))
        bounds.append([r["free"]["speedup"] for r in oracle_ceiling.main(["--replay", str(saved), "--costs-from",
                                                                            str(other)])])
    assert bounds[1] == pytest.approx([b / 2 for b in bounds[0]])
    assert bounds[0][0] == pytest.approx(10.0)  # greedy: the oracle's one round emits all 10 tokens for one step
    assert [(r["algorithm"], r["temperature"]) for r in rows] == [(a, t) for a, t, _, _ in oracle_ceiling.GOALS]
    for r in rows:
        assert r["positions"] == 10
        assert r["free"]["speedup"] >= r["smallest"]["speedup"] > 0 and r["free"]["speedup"] >= r["drafter_cost"]["speedup"]
        if r["temperature"] == 0.0:
            assert r["oracle_acceptance"] == 1.0
        assert 0.0 <= r["oracle_acceptance"] <= 1.0


def test_calibration_prompts_never_overlap_the_measured_ones_and_the_card_names_how_many(capsys):
    from argparse import Namespace

    n = len(pair_goals.prompt_rows("code"))
    for bad in (["--prompt-set", "files", "--prompts", str(n - 7), "--calibration-prompts", "8"],
                ["--calibration-prompts", "0"],
                ["--calibration-prompts", str(len(pair_goals.prompt_rows("code-calibration")) + 1)]):
        with pytest.raises(SystemExit):
            pair_goals.main(["--skip-bpc", "--skip-quality", "--lookahead", "auto", *bad])
        assert "calibration" in capsys.readouterr().err
    for prompt_set, says in (("files", "chosen on 12 other held-out prompts"),
                             ("packages", "chosen on 12 prompts of `code-calibration.jsonl` (functions of the "
                                          "calibration packages, never measured)")):
        text = pair_goals.table([], "a machine", Namespace(prompt_set=prompt_set, prompts=8, max_new_tokens=128,
                                                           lookahead="auto", calibration_prompts=12))
        assert says in text and f"--prompt-set {prompt_set}" in text


def test_the_package_set_measures_evaluation_prompts_and_calibrates_on_the_calibration_file_only():
    measurable, calibration = pair_goals.select_prompts("packages", 5)
    evaluation, calibration_file = pair_goals.prompt_rows("code-packages"), pair_goals.prompt_rows("code-calibration")
    assert measurable == evaluation and calibration == calibration_file[:5]
    assert not {r["package"] for r in measurable} & {r["package"] for r in calibration}
    # the files set keeps its own last prompts apart
    measurable, calibration = pair_goals.select_prompts("files", 4)
    code = pair_goals.prompt_rows("code")
    assert measurable == code[:-4] and calibration == code[-4:]


def test_lookahead_auto_with_the_package_set_calibrates_on_calibration_prompts(tmp_path, monkeypatch):
    """main hands choose_lookahead the calibration file's first prompts and measures the evaluation prompts; the
    JSON says which sets and which split."""
    seen = []

    def choose(pair, algorithm, temperature, prompts, max_new_tokens, noise="independent"):
        seen.extend(prompts)
        return (1, None, 0.0), {(1, None, 0.0): 1.0}

    monkeypatch.setattr(pair_goals, "choose_lookahead", choose)
    out = tmp_path / "goals.json"
    assert pair_goals.main(["--skip-bpc", "--skip-quality", "--only", "slem@0", "--prompts", "1", "--lookahead", "auto",
                            "--calibration-prompts", "3", "--max-new-tokens", "4", "--json", str(out)]) == 0
    assert seen == [r["prompt"] for r in pair_goals.prompt_rows("code-calibration")[:3]]
    saved = json.loads(out.read_text())
    assert saved["settings"]["prompt_set"] == "packages" and saved["settings"]["bpc_split"] == "evaluation"
    assert (saved["settings"]["prompt_file"], saved["settings"]["calibration_file"]) == (
        "code-packages.jsonl", "code-calibration.jsonl")
    assert saved["speed"][0]["lookahead"] == "1" and saved["speed"][0]["speedup"] > 0


class _ByteTokenizer:
    def encode(self, text, add_special_tokens=False):
        return list(text.encode())


def test_the_human_share_reads_each_prompts_own_file_from_the_corpus_split(tmp_path):
    """Package prompts: the evaluation split's file the prompt was cut from; standard-library prompts: the file."""
    rows = pair_goals.prompt_rows("code-packages")[:2]
    split = tmp_path / "evaluation.jsonl"
    assert pair_goals.human_share(_ByteTokenizer(), rows, 16, pair_goals.source_texts(rows, split)) is None
    docs = [dict(source=r["package"], path=r["source"].rsplit(":", 1)[0],
                 text="x = 1\n" + r["prompt"] + "\n    return 1 + 2 + 3\n") for r in rows]
    split.write_text("".join(json.dumps(d) + "\n" for d in docs))
    texts = pair_goals.source_texts(rows, split)
    want = pair_goals.distinct_4gram_share(list(b"\n    return 1 + 2 + 3\n"))
    assert pair_goals.human_share(_ByteTokenizer(), rows, 64, texts) == pytest.approx(want)
    code = pair_goals.prompt_rows("code")[:2]
    assert set(pair_goals.source_texts(code, split)) == {r["source"].rsplit(":", 1)[0] for r in code}


def test_bits_per_char_of_the_package_set_scores_the_evaluation_split(tmp_path):
    """--prompt-set packages scores WORK/corpus/evaluation.jsonl, packed on first use with the target's tokenizer
    beside (not over) the split training packs; a work folder without it gives None."""
    import resumable

    target = Path(__file__).resolve().parent.parent / "assets" / "tiny-code" / "target"
    assert pair_goals.bits_per_char(tmp_path, target, "evaluation") is None
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "manifest.json").write_text(json.dumps(dict(sha256="abc")))
    docs = [dict(source="p", path=f"p/m{i}.py", text=r["prompt"] + "\n        return None\n", group="evaluation")
            for i, r in enumerate(pair_goals.prompt_rows("code-packages")[:3])]
    (tmp_path / "corpus" / "evaluation.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    got = pair_goals.bits_per_char(tmp_path, target, "evaluation")
    assert got["split"] == "evaluation" and 0 < got["bits_per_char"] < 8
    meta = json.loads((tmp_path / "packed" / "target-evaluation.json").read_text())
    assert meta["chars"] == sum(len(d["text"]) for d in docs) and meta["files"] == 3
    assert not (tmp_path / "packed" / "target-heldout.u16").exists()
    assert pair_goals.bits_per_char(tmp_path, target, "evaluation") == got  # cached by weights digest
    with pytest.raises(ValueError):
        resumable.pack_split(tmp_path, "target", None, "heldout")


def test_tli_at_t1_is_measured_with_the_drafter_for_sampling_beside_the_greedy_one(tmp_path):
    """The goal's row uses ``drafter-sampling`` (what the demo samples with); the greedy drafter's row, no goal."""
    out = tmp_path / "goals.json"
    assert pair_goals.main(["--skip-bpc", "--skip-quality", "--only", "tli@1", "--prompts", "1", "--lookahead", "1",
                            "--max-new-tokens", "8", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["speed"]
    assert [(r["preset"], r["algorithm"], r["temperature"], r["goal"]) for r in rows] == [
        ("tiny-code-sampling", "tli", 1.0, pair_goals.PROMPT_SETS["packages"]["speed_goals"][("tli", 1.0)]), ("tiny-code", "tli", 1.0, None)]
    assert all(r["speedup"] > 0 and r["tau"] >= 1.0 for r in rows)


def test_slem_at_t07_is_measured_with_the_drafter_for_sampling_and_shared_noise_beside_the_others(tmp_path):
    """The goal's row: the drafter for sampling with shared noise; the greedy drafter with shared and with
    independent noise beside it, no goal."""
    out = tmp_path / "goals.json"
    assert pair_goals.main(["--skip-bpc", "--skip-quality", "--only", "slem@0.7", "--prompts", "1", "--lookahead",
                            "1", "--max-new-tokens", "8", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["speed"]
    assert [(r["preset"], r["temperature"], r["goal"], r["noise"]) for r in rows] == [
        ("tiny-code-sampling", 0.7, 1.2, "shared"), ("tiny-code", 0.7, None, "shared"),
        ("tiny-code", 0.7, None, "independent")]
    assert all(r["algorithm"] == "slem" and r["speedup"] > 0 for r in rows)


def test_cards_get_the_rows_measured_with_their_own_drafter(tmp_path):
    """``--cards-from``: the target's card every row; each drafter's card its own rows; the forward costs in all."""
    root = Path(__file__).resolve().parent.parent
    saved = root / "tests" / "data" / "pair-goals-saved-run.json"  # a saved --json --costs run
    for sub in ("target", "drafter", "drafter-bytes", "drafter-sampling"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "README.md").write_text((root / "assets" / "tiny-code" / sub / "README.md").read_text())
    assert pair_goals.main(["--cards-from", str(saved), "--pair", str(tmp_path)]) == 0
    rows = json.loads(saved.read_text())["speed"]
    for sub, preset in (("target", None), ("drafter", "tiny-code"), ("drafter-bytes", "tiny-code-bytes"),
                        ("drafter-sampling", "tiny-code-sampling")):
        card = (tmp_path / sub / "README.md").read_text()
        engine = card.split("<!-- hsd-engine:start -->")[1].split("<!-- hsd-engine:end -->")[0]
        own = [r for r in rows if preset is None or r["preset"] == preset]
        assert engine.count("\n| tiny-code") == len(own), sub
        assert "Not measured yet" not in card and "Target decoding step" in card


def test_round_costs_times_the_loop_and_puts_everything_back(tmp_path):
    """scripts/pair/round_costs.py: the drafter's forwards by place in the round and the field's draws are timed inside
    SLEM's loop, beside the back-to-back step; the patched functions are restored."""
    import round_costs

    import hsd.lean
    import hsd.sampling
    import hsd.session

    before = (hsd.sampling.noise_sample, hsd.session.DrafterContext.draft, hsd.lean.LeanRunner.forward)
    out = round_costs.main(["--prompts", "1", "--seeds", "1", "--max-new-tokens", "12", "--json",
                            str(tmp_path / "r.json")])
    assert (hsd.sampling.noise_sample, hsd.session.DrafterContext.draft, hsd.lean.LeanRunner.forward) == before
    assert out["round_ms"] > 0 and out["tokens_per_round"] >= 1 and out["speedup"] > 0
    assert set(out["split_ms"]) >= {"draft", "verify"}
    places = out["drafter_forward_ms"]
    assert "later" in places and any(k.startswith("first") for k in places)  # k=3: the first, then two more
    assert out["draws_per_round"] > 1 and out["draw_us"] > 0  # the drafter's draws and the target's
    assert out["back_to_back_ms"]["drafter_step"] > 0
    assert json.loads((tmp_path / "r.json").read_text())["settings"]["noise"] == "shared"


def test_round_costs_measures_a_pair_folder_on_the_evaluation_packages(capsys):
    """--pair/--role load a candidate pair from its folder, --prompt-set takes the prompts from another set."""
    import round_costs

    out = round_costs.main(["--pair", str(Path(__file__).resolve().parent.parent / "assets" / "tiny-code"), "--role", "drafter", "--algorithm", "slem",
                            "--temperature", "0", "--prompt-set", "code-packages", "--prompts", "1", "--seeds", "1",
                            "--max-new-tokens", "12"])
    assert out["tokens_per_round"] >= 1 and "draws_per_round" in out
    printed = capsys.readouterr().out
    assert "target + drafter" in printed and "1 prompts of code-packages" in printed
