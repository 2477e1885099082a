"""Model card of a model of the embedded pair after resumed training (``train_pair.py export``).

The card states the whole history (every training session, the total tokens and minutes), the
corpus and its licences, the held-out loss on the full held-out split and on the standard-library
files held out since the first pair (comparable with its 1.57 bits/char), greedy samples, and
keeps the latency block of the previous card (latency depends on the shape, not the weights).
The speculative-decoding block is reset: measured speedups belong to the weights they were
measured with, and ``scripts/pair/pair_goals.py --write-cards`` fills it for the new ones.
"""

from __future__ import annotations

import re
from pathlib import Path

MEAS = ("<!-- measurements:start -->", "<!-- measurements:end -->")
ENGINE = ("<!-- hsd-engine:start -->", "<!-- hsd-engine:end -->")
BLURB = {
    "target": "small Llama-architecture *target* model with a GPT-2-style byte-level BPE tokenizer",
    "drafter": "very small Llama-architecture *drafter* with a SentencePiece-style BPE tokenizer (different "
               "from the target's)",
    "drafter-bytes": "very small Llama-architecture byte-level *drafter* (one token per byte)",
    "drafter-shared": "very small Llama-architecture *drafter* with the target's own byte-level BPE tokenizer "
                      "(a shared vocabulary: classic speculative decoding applies)",
    "drafter-sampling": "very small Llama-architecture *drafter* for sampling: the SentencePiece drafter trained "
                        "further on the target's whole next-token distribution, for sampling (TLI at temperature 1, SLEM at temperature 0.7 with shared noise)",
}


def front_matter(licence: str) -> list[str]:
    """The Hub card's YAML header, shared by the from-scratch and the resumed cards."""
    return ["---", f"license: {licence}", "library_name: transformers", "pipeline_tag: text-generation",
            "tags: [hsd, speculative-decoding, tiny, python-code]", "---", ""]


def block(text: str, markers: tuple[str, str]) -> str | None:
    """The text between two markers, markers excluded; None when absent."""
    m = re.search(re.escape(markers[0]) + r"\n(.*?)\n?" + re.escape(markers[1]), text, re.S)
    return m.group(1) if m else None


def replace_block(text: str, markers: tuple[str, str], body: str) -> str:
    pattern = re.escape(markers[0]) + r".*?" + re.escape(markers[1])
    return re.sub(pattern, lambda _: f"{markers[0]}\n{body}\n{markers[1]}", text, count=1, flags=re.S)


def _bpc(ev: dict | None) -> str:
    return "n/a" if not ev or ev.get("bits_per_char") is None else f"{ev['bits_per_char']:.4f}"


def history_rows(totals: dict) -> list[str]:
    rows = ["| session | tokens | minutes of training | held-out bits/char at its end | command |",
            "|---|---|---|---|---|"]
    for s in totals.get("sessions", []):
        cmd = (s.get("command") or "").replace("|", "\\|")
        rows.append(f"| {s.get('what')} ({s.get('finished', '')[:10] or 'first run'}) | {s.get('tokens', 0):,} | "
                    f"{s.get('seconds', 0) / 60:.1f} | {_bpc(s.get('heldout'))} | `{cmd}` |")
    return rows


def distill_lines(segments: list[dict], role: str = "drafter") -> list[str]:
    """How the resumed segments mixed target-written text into the drafter's batches, if they did; for the target,
    the teacher it learnt from (self-distillation, ``resume --role target --distill-logits``)."""
    if role == "target":
        lines = [f"- Segment of {s['started'][:16]}: `{s['soft']['target']}` read {s['soft']['windows']} windows of "
                 f"each batch; its next-token distribution at {s['soft']['positions']:,} positions made "
                 f"{s['soft']['weight']:.0%} of the loss, the corpus's next tokens the rest" for s in segments
                 if s.get("soft")]
        return ["Self-distillation: a grown target learns the distribution of the target it was grown from (the "
                "one its drafters imitate) beside the corpus, so that its new layers learn without drifting from "
                "it.", "", *lines, ""] if lines else []
    lines = [f"- Segment of {s['started'][:16]}: {s['distill']['mix']:.0%} of each batch from "
             f"{s['distill'].get('samples', 0):,} {'greedy ' if s['distill'].get('greedy_only') else ''}continuations "
             f"{'of prompts ending with a docstring ' if s['distill'].get('docstrings_only') else ''}"
             f"({s['distill'].get('tokens', 0):,} tokens) written by "
             f"the target `{s['distill']['target']}` (weights {s['distill']['source']}), the rest from the corpus"
             for s in segments if s.get("distill")]
    lines += [f"- Segment of {s['started'][:16]}: the target `{s['soft']['target']}` read {s['soft']['windows']} windows "
              f"of each batch; at the {s['soft']['positions']:,} positions where both tokenizers cut, its next-token "
              f"distribution, carried to the drafter token each of its tokens starts with, made "
              f"{s['soft']['weight']:.0%} of the loss (`resume --distill-logits`, scripts/soft_labels.py)"
              for s in segments if s.get("soft")]
    return ["Distillation: the drafter learns to write what the target writes.", "", *lines, ""] if lines else []


def finetune_lines(segments: list[dict], blends: list[dict]) -> list[str]:
    """The target's unlikelihood segments and weight blends, if any: why its greedy text loops less."""
    lines = [f"- Segment of {s['started'][:16]}: {s['unlikelihood']['share']:.0%} of {s['steps_done']:,} steps were "
             f"sequence-level unlikelihood steps (Welleck et al., 2020) on {s['unlikelihood']['continuation']} greedy "
             f"tokens after {s['unlikelihood']['prefix']} corpus tokens, penalising every token of a repeated "
             f"{s['unlikelihood']['n']}-gram; peak learning rate {s.get('peak_lr')}; held-out bits/char at its end "
             f"{_bpc(s.get('heldout'))}" for s in segments if s.get("unlikelihood")]
    lines += [f"- Blend of {b['finished'][:16]} (`train_pair.py blend`, weight interpolation as in WiSE-FT): "
              f"{1 - b['share']:.0%} of the checkpoint's weights, {b['share']:.0%} of `{b['other']}`; held-out "
              f"bits/char {_bpc(b.get('heldout'))}" for b in blends]
    if not lines:
        return []
    return ["Fine-tuning against loops: the greedy text of a target trained on next-token loss alone repeats "
            "itself; these steps trade a little held-out loss for text that does not.", "", *lines, ""]


def grown_line(g: dict) -> str:
    """The card's line for one ``train_pair.py grow`` step (deeper, wider MLPs, or both)."""
    what, how = [], []
    if g["layers_after"] != g["layers_before"]:
        what.append(f"from {g['layers_before']} to {g['layers_after']} layers")
        how.append("a copy of a layer with zero output projections inserted after each of layers "
                   f"{', '.join(map(str, g['new_layer_after']))}")
    if g.get("intermediate_after"):
        what.append(f"from {g['intermediate_before']} to {g['intermediate_after']} MLP units")
        how.append("new units with zero down-projection columns")
    return (f"Grown {' and '.join(what)} by `scripts/train_pair.py grow` ({'; '.join(how)}: the same function at "
            "first, then trained on)" + (f", after {g['tokens_before']:,} tokens." if g.get("tokens_before") else "."))



def corpus_lines(man: dict) -> list[str]:
    """The card's lines on the corpus of ``corpus.json``'s manifest: its sources and, for a split by package, the
    packages held out whole."""
    n_pkgs = len(man["packages"])
    lock = (man.get("rules") or {}).get("pypi_lock")
    n_pypi = sum(1 for p in man["packages"] if p.get("wheel"))
    sources = (f"{n_pkgs - 1} packages: {n_pkgs - 1 - n_pypi} that `requirements.txt` installs and {n_pypi} "
               f"permissively licensed pure-Python PyPI packages pinned in `scripts/corpus/{lock}`" if lock else
               f"{n_pkgs - 1} packages that `requirements.txt` installs")
    lines = [f"- {man['train_files']:,} training files ({man['train_chars']:,} characters) and {man['heldout_files']} "
             f"held-out files ({man['heldout_chars']:,} characters): the Python {man['python']} standard library and "
             f"{sources}, deduplicated by content; versions, licences and the held-out list in `../corpus.json`, "
             "rebuilt by `scripts/build_corpus.py`"]
    held = man.get("heldout_packages") or {}
    if held:
        lines.append("- Held out whole, never trained on: " + "; ".join(
            f"{len(names)} {group} packages ({', '.join(names)})" for group, names in held.items() if names)
            + ". The speed and quality figures of the pair are measured on the evaluation packages, its settings "
            "chosen on the calibration ones; the other held-out files are standard-library and package files held "
            "out one in 50")
    return lines


def write_resumed_card(path: Path, config, tok, rec: dict, previous: str) -> None:
    m, totals, man = rec, rec["totals"], rec["manifest"]
    prev = m.get("previous_label") or "previous shipped weights"
    dropped = ", ".join(f"{d['name']} ({d['licence']})" for d in man["dropped_licences"]) or "none"
    lines = [
        *front_matter("apache-2.0"),
        f"# hsd tiny-code {m['role']}", "",
        f"Part of hsd's embedded pair (`assets/tiny-code/`): a {BLURB.get(m['role'], m['role'])}, trained from "
        "scratch on permissively licensed Python sources by `scripts/train_pair.py` and continued with "
        "`scripts/train_pair.py resume`. A toy for demos and tests of speculative decoding across different "
        "vocabularies, not a useful code model.", "",
        "## Model", "",
        f"- Architecture: `{type(config).__name__.replace('Config', 'ForCausalLM')}`, {config.num_hidden_layers} "
        f"layers, hidden {config.hidden_size}, intermediate {config.intermediate_size}, "
        f"{config.num_attention_heads} heads, tied embeddings, max positions {config.max_position_embeddings}",
        f"- Parameters: {m['params']:,}",
        "- Weights: float16 safetensors; `config.json` says float32 so `from_pretrained(dir)` runs in float32",
        f"- Tokenizer: vocabulary {len(tok)}, unchanged since the first run (trained on the standard-library "
        "training files only), so no held-out file was ever seen by it",
        "",
        "## Training data", "",
        *corpus_lines(man),
        f"- Dropped for their licence: {dropped}",
        "",
        "## Training history", "",
        f"In all: **{totals['steps']:,} optimizer steps, {totals['tokens']:,} tokens, "
        f"{totals['seconds'] / 60:.0f} minutes of training** (step time, evaluation excluded), "
        f"batches of {m['hyper']['batch']} x {m['hyper']['seq']} tokens, peak learning rate {m['hyper']['lr']}, "
        "AdamW (betas 0.9/0.95, weight decay 0.1), a warmup and cosine decay to 10% per session"
        + "".join(f"; the segment of {g['started'][:16].replace('T', ' ')} on {g.get('device', 'cpu')}: batches of "
                  f"{g['batch']} x {m['hyper']['seq']} tokens, peak learning rate {g.get('peak_lr', m['hyper']['lr'])}"
                  for g in m.get("segments", []) if g.get("batch")) + ".", "",
        *history_rows(totals), "",
        *[grown_line(g) for g in m.get("grown") or []],
        *([""] if m.get("grown") else []),
        "## Held-out loss (stored float16 weights, run in float32)", "",
        "| held-out text | nats/token | bits/char |", "|---|---|---|",
        f"| all {man['heldout_files']} held-out files | {m['heldout']['nats_per_token']:.4f} | {_bpc(m['heldout'])} |",
        f"| the standard-library files held out since the first pair ({len(m['heldout_stdlib_files'])}) | "
        f"{m['heldout_stdlib']['nats_per_token']:.4f} | {_bpc(m['heldout_stdlib'])} |",
        f"| {prev}, all held-out files | {m['previous_heldout']['nats_per_token']:.4f} | "
        f"{_bpc(m['previous_heldout'])} |",
        *([f"| the target's greedy continuations of held-out prompts (what acceptance depends on) | "
           f"{m['heldout']['target_text_nats_per_token']:.4f} | n/a |",
           f"| {prev}, the same continuations | "
           f"{m['previous_heldout']['target_text_nats_per_token']:.4f} | n/a |"]
          if "target_text_nats_per_token" in m["heldout"] else []),
        "",
        *distill_lines(m.get("segments", []), m["role"]),
        *finetune_lines(m.get("segments", []), m.get("blends") or []),
        "## Sample completions (greedy)", "",
    ]
    for s in m["samples"]:
        lines += ["```python", s["prompt"] + s["completion"], "```", ""]
    meas = block(previous, MEAS) or "(not measured)"
    lines += ["## Measurements", "", MEAS[0], meas, MEAS[1], "",
              "## Speculative decoding with hsd", "", ENGINE[0],
              f"Not measured yet for these weights (exported {m['exported'][:10]}); "
              "`python scripts/pair/pair_goals.py --write-cards` measures and fills this section.", ENGINE[1], "",
              "## Limitations", "",
              "Tiny and trained for little compute on a CPU: completions look like Python but often do not run. "
              "For demos and tests only.", ""]
    path.write_text("\n".join(lines))
