"""The hsd lab: pick a target and a drafter, run AR / SD / SLEM / TLI / SLRS, see what was accepted.

``python app.py`` locally, or a Hugging Face Space (``sdk: gradio``, ``app_file: app.py``). This file
only wires widgets to the engine (:mod:`hsd`) and the pictures (:mod:`hsd.viz`); see docs/app.md.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import gradio as gr
import torch

import hsd
from hsd import viz
from hsd.algorithms import ALGORITHMS
from hsd.loading import resolve_device, resolve_dtype
from hsd.report import compatibility_report, format_report

try:  # ZeroGPU: the GPU work runs inside @spaces.GPU; elsewhere the decorator does nothing.
    import spaces
except ImportError:
    spaces = None

log = logging.getLogger("hsd.app")
ROOT = Path(__file__).resolve().parent
ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
MAX_PROMPT_CHARS = 20_000
MAX_NEW_TOKENS = 1024
STREAM_INTERVAL_S = 0.15
LOCK_TIMEOUT_S = 600
HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
PAPER = "https://arxiv.org/abs/2502.05202"
EMBEDDED = "tiny-code (embedded, offline, CPU)"
BYTES = "tiny-code-bytes (embedded target, byte-level drafter: SLRS at its cheapest)"
PAIRS = {  # label -> (target, drafter); the embedded pair first: the first click works offline on a CPU
    EMBEDDED: ("assets/tiny-code/target", "assets/tiny-code/drafter"),
    BYTES: ("assets/tiny-code/target", "assets/tiny-code/drafter-bytes"),
    "gemma-2-9b-it ← vicuna-68m (paper, text)": ("google/gemma-2-9b-it", "double7/vicuna-68m"),
    "CodeLlama-13b-Instruct ← tiny_starcoder_py (paper, code)": ("codellama/CodeLlama-13b-Instruct-hf",
                                                                 "bigcode/tiny_starcoder_py"),
    "phi-4 ← Qwen2.5-0.5B-Instruct (paper)": ("microsoft/phi-4", "Qwen/Qwen2.5-0.5B-Instruct"),
    "DeepSeek-R1-Distill-Qwen-14B ← vicuna-68m (paper, reasoning)": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
                                                                     "double7/vicuna-68m"),
    "gemma-2-9b-it ← gemma-2-2b-it (same-vocabulary control)": ("google/gemma-2-9b-it", "google/gemma-2-2b-it"),
    "Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)": ("meta-llama/Llama-3.1-8B-Instruct",
                                                                    "Qwen/Qwen2.5-0.5B-Instruct"),
    "Qwen2.5-1.5B-Instruct ← SmolLM2-135M-Instruct (CPU classroom)": ("Qwen/Qwen2.5-1.5B-Instruct",
                                                                      "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "Custom (type Hub ids or local directories)": ("", ""),
}
ORDER = ["ar", "sd", "slem", "tli", "slrs"]
ALGOS = [a for a in ORDER if a in ALGORITHMS] + [a for a in ALGORITHMS if a not in ORDER]
EXPLAIN = {
    "ar": "**AR** — plain autoregressive decoding: one target forward per token. The baseline every speedup is "
          "measured against, timed by the same loop.",
    "sd": "**SD** — standard speculative decoding (Leviathan et al. 2023): the drafter proposes k tokens, the target "
          "checks them in one forward and accepts each with probability min(1, p/q); a rejection is replaced by a "
          "sample from the residual max(0, p − q). Needs a **shared vocabulary**.",
    "slem": f"**SLEM** — string-level exact match ([paper]({PAPER}), Alg. 2): the drafter's tokens are turned into "
            "text, the text is re-tokenized by the target's tokenizer (with a look-behind window), and the target "
            "keeps each proposed token only if its own sample equals it. Works for any pair of tokenizers; lossless "
            "because every emitted token is the target's own sample. Accepts less than rejection sampling when "
            "sampling.",
    "tli": f"**TLI** — token-level intersection ([paper]({PAPER}), Alg. 4): the drafter may only draft tokens whose "
           "bytes the target also has (q′ = q restricted to the intersection, renormalised); then standard "
           "rejection sampling with q′. Beats SLEM when sampling if the drafter puts most of its mass on shared "
           "tokens; collapses when the intersection is small.",
    "slrs": f"**SLRS** — string-level rejection sampling ([paper]({PAPER}), Alg. 3): rejection sampling on the "
            "target token, where the proposal probability ψ(t) sums every drafter path that spells t. Accepts the "
            "most when sampling, but computing ψ costs many drafter forwards; this app shows that cost.",
}
COLUMNS_HELP = ("p: the target's probability of the proposed token; q / q′ / ψ: the proposal's probability "
                "(SD / TLI / SLRS; SLEM has none); P(accept) = min(1, p/q), or p for SLEM's exact match.")


# ----------------------------------------------------------------------------- loading, locks, GPU

def _gpu(duration):
    """``@spaces.GPU(duration=...)`` on ZeroGPU, nothing elsewhere."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)


_LOAD_LOCK = threading.Lock()
_DEVICE_LOCKS: dict[str, threading.Lock] = {}
_PAIRS: dict[tuple, hsd.Pair] = {}
_LOADED: set[tuple] = set()  # (name, device, dtype) loaded once: no Hub lookup, no memory check again


@contextmanager
def _device_lock(device: str):
    """One run per device at a time: two users never share a model object mid-run, and timings stay clean."""
    with _LOAD_LOCK:
        lock = _DEVICE_LOCKS.setdefault(device, threading.Lock())
    if not lock.acquire(timeout=LOCK_TIMEOUT_S):
        raise hsd.ResourceLimitError(f"The {device} device has been busy for {LOCK_TIMEOUT_S} s: try again shortly.")
    try:
        yield
    finally:
        lock.release()


def _resolve(name: str) -> str:
    """Relative paths (the embedded pair) are relative to this file; anything else is a Hub id or a path."""
    name = (name or "").strip()
    if name and not name.startswith("/") and (ROOT / name).is_dir():
        return str(ROOT / name)
    if name and not Path(name).expanduser().is_dir() and not HUB_ID.match(name):
        hint = (" The embedded pair is made by scripts/train_pair.py (see docs/embedded-pair.md)."
                if "tiny-code" in name else "")
        raise hsd.ModelNotFoundError(f"{name!r} is neither a local model directory nor a Hub id (owner/name).{hint}")
    return name


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type.upper()} ({torch.get_num_threads()} threads)"


def _available_bytes(device: torch.device) -> int | None:
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, RuntimeError):  # RuntimeError: CUDA not usable here (ZeroGPU outside a GPU call)
        pass
    return None


def _hub_params(name: str) -> tuple[int | None, str]:
    """Parameter count from the Hub's safetensors metadata, and a note; never raises."""
    if Path(name).is_dir():
        size = sum(p.stat().st_size for p in Path(name).glob("*.safetensors"))
        return None, f"local directory, {size / 1e6:.1f} MB of weights"
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return None, "Hub offline (HF_HUB_OFFLINE): will use the local Hugging Face cache"
    try:
        from huggingface_hub import model_info

        info = model_info(name, timeout=6)
    except Exception as exc:  # unreachable Hub, unknown id, gated metadata...
        kind = type(exc).__name__
        if "RepositoryNotFound" in kind:
            return None, "not found on the Hub"
        return None, f"Hub not reachable ({kind}): will try the local Hugging Face cache"
    params = getattr(getattr(info, "safetensors", None), "total", None)
    gated = " · gated: needs an accepted licence and HF_TOKEN" if getattr(info, "gated", False) else ""
    return params, (f"{params / 1e9:.2f} B parameters" if params else "parameter count unknown") + gated


def plan_load(target: str, drafter: str, device: str = "auto", dtype: str = "auto") -> str:
    """What will be loaded (from the Hub's metadata when reachable), as Markdown; refuses what cannot fit."""
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    width = torch.finfo(torch_dtype).bits // 8
    lines, total = [], 0
    for role, name in (("target", target), ("drafter", drafter)):
        if not name:
            continue
        if (name, str(dev), str(torch_dtype)) in _LOADED:
            lines.append(f"- **{role}** `{name}`: already loaded")
            continue
        params, note = _hub_params(name)
        if params:
            total += params * width
            note += f", ≈{params * width / 1e9:.1f} GB in {str(torch_dtype).replace('torch.', '')}"
        lines.append(f"- **{role}** `{name}`: {note}")
    free = _available_bytes(dev)
    if free and total > 0.9 * free:
        raise hsd.ResourceLimitError(
            f"These models need about {total / 1e9:.1f} GB but {dev.type} has {free / 1e9:.1f} GB free: choose a "
            "smaller pair, dtype bfloat16, or a machine with more memory.")
    return "\n".join(lines + [f"- device: {_device_name(dev)}"])


def get_pair(target: str, drafter: str, device: str, dtype: str) -> hsd.Pair:
    """``hsd.load_pair`` (LRU-cached models), keeping one Pair per model pair so its vocabulary tables are reused."""
    target, drafter = _resolve(target), _resolve(drafter)
    if not target:
        raise hsd.ModelNotFoundError("No target model: choose a preset or type a Hub id or a local directory.")
    with _LOAD_LOCK:
        pair = hsd.load_pair(target, drafter or None, device=device, dtype=dtype)
        dev = resolve_device(device)
        for model, name in ((pair.target, target), (pair.drafter, drafter)):
            if model is not None:
                _LOADED.add((name, str(dev), str(resolve_dtype(dtype, dev))))
        key = (id(pair.target), id(pair.drafter))
        old = _PAIRS.get(key)
        if old is not None and old.target is pair.target and old.drafter is pair.drafter:
            return old
        _PAIRS[key] = pair
        while len(_PAIRS) > 8:
            _PAIRS.pop(next(iter(_PAIRS)))
        return pair


def _error(exc: BaseException) -> str:
    if isinstance(exc, hsd.HsdError):
        return f"⚠️ **{type(exc).__name__}**: {exc}"
    log.exception("unexpected error in a handler")
    return (f"⚠️ **Unexpected error** ({type(exc).__name__}): {str(exc)[:500]}. The app is still running: change "
            "the settings and try again.")


def _check_prompt(prompt: str) -> None:
    if not isinstance(prompt, str) or not prompt.strip():
        raise hsd.PromptError("The prompt is empty: type some text for the model to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise hsd.PromptError(f"The prompt is {len(prompt):,} characters; this app accepts at most "
                              f"{MAX_PROMPT_CHARS:,}. Shorten it.")


def _number(name: str, value, kind):
    """A form number as int/float; an empty or non-numeric box is a readable error, not a TypeError."""
    if isinstance(value, bool):  # float(True) is 1.0: a checkbox wired to a number box is a bug, not a value
        raise hsd.InvalidSettingError(f"{name} must be a number, got {value!r}.")
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise hsd.InvalidSettingError(f"{name} must be a number, got {value!r}.") from None
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise hsd.InvalidSettingError(f"{name} must be a whole number, got {value!r}.")
    return number


def _settings(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt) -> dict:
    _check_prompt(prompt)
    kw = dict(temperature=_number("temperature", temperature, float), top_k=_number("top-k", top_k, int),
              top_p=_number("top-p", top_p, float), lookahead=_number("lookahead", lookahead, int),
              max_new_tokens=_number("max new tokens", max_new_tokens, int), seed=_number("seed", seed, int))
    if not 1 <= kw["max_new_tokens"] <= MAX_NEW_TOKENS:
        raise hsd.InvalidSettingError(f"max new tokens must be in 1..{MAX_NEW_TOKENS} in this app.")
    if mode == "chat":
        kw["messages"] = [{"role": "user", "content": prompt}]
    else:
        kw["prompt"] = prompt
    return kw


def _interesting_round(rounds) -> int:
    """A round worth showing first: some drafts accepted and one rejected; else the first with a draft."""
    for r in rounds:
        if r.n_accepted and any(p.outcome == "rejected" for p in r.positions):
            return r.index
    return next((r.index for r in rounds if r.proposed), 0)


def _view(state: dict | None, index) -> str:
    if not state:
        return "<i>Run an algorithm to step through its rounds.</i>"
    rounds = state["result"].rounds
    if not rounds:
        return "<i>No rounds.</i>"
    rnd = rounds[max(0, min(int(index or 0), len(rounds) - 1))]
    return viz.round_html(rnd, algorithm=state["result"].algorithm, special_drafter=state["special_drafter"],
                          special_target=state["special_target"])


def _state(pair: hsd.Pair, result: hsd.Result, prompt: str | None) -> dict:
    return {"result": result, "prompt": prompt, "special_target": dict(pair.target.vocab.special_text),
            "special_drafter": dict(pair.drafter.vocab.special_text) if pair.drafter else {}}


def _availability(pair: hsd.Pair) -> str:
    lines = []
    for name in ALGOS:
        try:
            hsd.check_algorithm(pair, name)
            lines.append(f"- ✅ **{name}**")
        except hsd.HsdError as exc:
            lines.append(f"- ⛔ **{name}**: {exc}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- handlers

def _run_duration(target, drafter, algorithm, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, *a, **k):
    return int(min(300, 30 + 0.15 * int(max_new_tokens)))


@_gpu(_run_duration)
def run(target, drafter, algorithm, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, seed,
        mode="raw", device="auto", dtype="auto", show_rejected=True, progress=gr.Progress(track_tqdm=True)):
    """Stream one generation round by round: status, coloured output, round slider, round view, plot, state."""
    none = gr.update()
    try:
        kw = _settings(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt)
        yield "⏳ Checking the models…", none, none, none, none, None
        drafter = drafter if algorithm != "ar" else ""  # AR needs no drafter: don't load one
        plan = plan_load(_resolve(target), _resolve(drafter), device, dtype)
        yield f"⏳ Loading (first time only)…\n{plan}", none, none, none, none, None
        pair = get_pair(target, drafter, device, dtype)
        hsd.check_algorithm(pair, algorithm)
        dev = pair.target.device
        with _device_lock(str(dev)):
            rounds, last, result = [], 0.0, None
            for item in hsd.stream(pair, algorithm=algorithm, **kw):
                if isinstance(item, hsd.Result):
                    result = item
                    break
                rounds.append(item)
                if time.perf_counter() - last > STREAM_INTERVAL_S:
                    last = time.perf_counter()
                    n = sum(len(r.emitted) for r in rounds)
                    html = viz.output_html(rounds, show_rejected=show_rejected, prompt=kw.get("prompt"),
                                           special_text=pair.target.vocab.special_text)
                    yield f"▶️ {algorithm}: round {len(rounds)}, {n} tokens…", html, none, none, none, None
        m = result.metrics
        status = (f"✅ **{algorithm}**: {m['new_tokens']} tokens in {m['rounds']} rounds, "
                  f"{m['tokens_per_s'] or 0:.1f} tokens/s, τ = {m['mean_accepted_length']:.2f}"
                  + (f", acceptance {m['acceptance_rate']:.0%}" if m["acceptance_rate"] is not None else "")
                  + f" · stopped by {result.stop_reason} · {_device_name(dev)}, {result.settings['dtype']}")
        state = _state(pair, result, kw.get("prompt"))
        first = _interesting_round(result.rounds)
        yield (status, viz.output_html(result.rounds, show_rejected=show_rejected, prompt=kw.get("prompt"),
                                       special_text=pair.target.vocab.special_text),
               gr.update(maximum=max(0, len(result.rounds) - 1), value=first), _view(state, first),
               viz.rounds_figure(result.rounds, f"{algorithm}: time and tokens per round"), state)
    except Exception as exc:  # every failure ends as a message to this user; the app stays up
        yield _error(exc), none, none, none, none, None


def show_round(state, index):
    """The token-boundary view of one round of the last run."""
    try:
        return _view(state, index)
    except Exception as exc:
        return _error(exc)


def step_round(state, index, delta):
    """The round index after a ◀/▶ click; a malformed index or state warns and leaves the slider as it is."""
    if not state:
        return 0
    try:
        index, delta = _number("round", index or 0, int), _number("step", delta, int)
        return max(0, min(index + delta, len(state["result"].rounds) - 1))
    except (hsd.HsdError, KeyError, TypeError, AttributeError) as exc:
        gr.Warning(f"Cannot step to another round: {exc if isinstance(exc, hsd.HsdError) else 'no run to step through'}.")
        return gr.update()


def rerender(state, show_rejected):
    """The coloured output again, with or without the rejected drafts; a malformed state warns and changes nothing."""
    if not state:
        return gr.update()
    try:
        return viz.output_html(state["result"].rounds, show_rejected=show_rejected, prompt=state["prompt"],
                               special_text=state["special_target"])
    except (KeyError, TypeError, AttributeError):
        gr.Warning("Cannot redraw the output: this page's run state is malformed. Run an algorithm again.")
        return gr.update()


def _compare_duration(target, drafter, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, *a, **k):
    return int(min(600, 40 + 0.15 * int(max_new_tokens) * len(ALGOS)))


@_gpu(_compare_duration)
def compare(target, drafter, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode="raw",
            device="auto", dtype="auto", progress=gr.Progress(track_tqdm=True)):
    """AR and every applicable algorithm, same prompt, settings and seed, after a warm-up; then the figures."""
    empty = (gr.update(),) * 8
    try:
        kw = _settings(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt)
        yield ("⏳ Checking the models…",) + empty
        plan = plan_load(_resolve(target), _resolve(drafter), device, dtype)
        yield (f"⏳ Loading (first time only)…\n{plan}",) + empty
        pair = get_pair(target, drafter, device, dtype)
        names = ["ar"] + [a for a in ALGOS if a != "ar" and pair.drafter is not None and _applies(pair, a)]
        dev = pair.target.device
        results = {}
        with _device_lock(str(dev)):
            yield (f"⏳ Warming up {', '.join(names)}…",) + empty
            failed = {}
            for name in names:
                try:
                    hsd.generate(pair, algorithm=name, **{**kw, "max_new_tokens": min(8, kw["max_new_tokens"])})
                except hsd.ResourceLimitError as exc:  # e.g. SLRS's path limit: report it, compare the rest
                    failed[name] = str(exc)
            names = [n for n in names if n not in failed]
            for i, name in enumerate(names):
                yield (f"▶️ Running {name} ({i + 1}/{len(names)})…",) + empty
                try:
                    results[name] = hsd.generate(pair, algorithm=name, **kw)
                except hsd.ResourceLimitError as exc:
                    failed[name] = str(exc)
        device_name = f"{_device_name(dev)}, {results['ar'].settings['dtype']}"
        table = viz.summary_table(results)
        csv = Path(tempfile.mkdtemp(prefix="hsd-")) / "hsd-compare.csv"
        table.to_csv(csv, index=False)
        skipped = [a for a in ALGOS if a not in names and a not in failed]
        status = (f"✅ Compared {', '.join(results)} on {device_name}, temperature {kw['temperature']}, seed "
                  f"{kw['seed']}" + (f" · not applicable here: {', '.join(skipped)}" if skipped else "")
                  + "".join(f"\n\n⚠️ {name} stopped: {msg}" for name, msg in failed.items()))
        yield (status, viz.lossless_badge(results), viz.speedup_figure(results, device_name),
               viz.tokens_time_figure(results), viz.acceptance_histogram_figure(results),
               viz.position_acceptance_figure(results), viz.time_split_figure(results), table, str(csv))
    except Exception as exc:
        yield (_error(exc),) + empty


def _applies(pair: hsd.Pair, name: str) -> bool:
    try:
        hsd.check_algorithm(pair, name)
        return True
    except hsd.HsdError:
        return False


def check_pair(target, drafter, device="auto", dtype="auto", algorithm=None):
    """What will be loaded, which algorithms apply and why, and the drafter-compatibility report.

    Also returns the algorithm choices narrowed to those that apply (the others are listed with the reason).
    """
    try:
        plan = plan_load(_resolve(target), _resolve(drafter), device, dtype)
        pair = get_pair(target, drafter, device, dtype)
        usable = [a for a in ALGOS if _applies(pair, a)]
        choices = gr.update(choices=usable, value=algorithm if algorithm in usable else _default_algorithm(usable))
        if pair.drafter is None:
            return f"{plan}\n\nNo drafter: only **ar** runs.", "- ✅ **ar**", choices
        report = compatibility_report(pair)
        return (f"{plan}\n\n```text\n{format_report(report)}\n```\n\n{_explain_report(report)}",
                _availability(pair), choices)
    except Exception as exc:
        message = _error(exc)
        return message, message, gr.update()


@_gpu(120)
def advise_pair(target, drafter, prompt, temperature, device="auto", dtype="auto"):
    """`hsd advise` on this pair and prompt: measured acceptance and costs, predicted speedup per algorithm
    and lookahead 1..12, and a recommendation (or the plain statement that nothing beats AR)."""
    from hsd.advise import advise, format_advice

    try:
        _check_prompt(prompt)
        temperature = _number("temperature", temperature, float)
        pair = get_pair(target, drafter, device, dtype)
        if pair.drafter is None:
            return "No drafter: only **ar** runs, there is nothing to advise."
        with _device_lock(str(pair.target.device)):
            advice = advise(pair, [prompt], temperature=temperature, max_new_tokens=64, log=lambda *_: None)
        return (f"**{advice['recommendation']['text']}**\n\nCalibrated on this prompt (64 new tokens) at "
                f"temperature {temperature:g}; a prediction, not a measurement: **Compare** measures.\n\n"
                f"```text\n{format_advice(advice)}\n```")
    except Exception as exc:
        return _error(exc)


def _default_algorithm(choices: list[str]) -> str:
    return next((a for a in ("slem", "sd", "ar") if a in choices), choices[0])


def _explain_report(r: dict) -> str:
    share = r["intersection_share_of_drafter"]
    lines = ["**What this means**"]
    if r["shared"]:
        lines.append("- The tokenizers are the same (same bytes, same ids): standard **SD** applies, and SLEM/TLI "
                     "reduce to it.")
    else:
        lines.append("- The vocabularies differ, so standard SD cannot run. **SLEM** always works: it converts the "
                     "draft through text.")
    lines.append(f"- **TLI** drafts only from the {r['intersection']:,} shared byte strings ({share:.0%} of the "
                 "drafter's ordinary tokens). The more of the drafter's probability mass falls there, the better "
                 "TLI does; near 0% it collapses.")
    rt = min(r["target"]["roundtrip_rate"], r["drafter"]["roundtrip_rate"])
    lines.append(f"- Round-trip `decode(encode(s)) == s` holds for {rt:.0%} of the samples on the worse side. Below "
                 "100%, the tokenizer is not injective: SLEM re-tokenizes with a look-behind window so the proposal "
                 "continues the emitted tokens, and the round view lists those re-tokenization events.")
    if "slrs" in ALGORITHMS:
        lines.append("- **SLRS** sums the drafter's paths to every target token: its cost grows with how many drafter "
                     "tokens a target token spans, so long target tokens over a short-token drafter are expensive.")
    return "\n".join(lines)


def preset_changed(label):
    target, drafter = PAIRS.get(label, ("", ""))
    return target, drafter


def describe(target, drafter, device="auto", dtype="auto"):
    """What a pair would load (Hub metadata when reachable), before anything is downloaded; every algorithm
    is offered again until **Check pair** narrows the choice."""
    try:
        text = (plan_load(_resolve(target), _resolve(drafter), device, dtype)
                + "\n\nPress **Check pair** to load it and see which algorithms apply.")
    except Exception as exc:
        text = _error(exc)
    return text, gr.update(choices=ALGOS)


# ----------------------------------------------------------------------------- layout

def build() -> gr.Blocks:
    default_target, default_drafter = PAIRS[EMBEDDED]
    with gr.Blocks(title="hsd · speculative decoding across vocabularies") as demo:
        gr.Markdown(f"# hsd · lossless speculative decoding across different vocabularies\nA small drafter "
                    "proposes, a big target verifies, and the output is exactly what the target alone would have "
                    f"produced, even when the two models use different tokenizers. Algorithms from Timor et al., "
                    f"ICML 2025 ([arXiv 2502.05202]({PAPER})).")
        state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                preset = gr.Dropdown(list(PAIRS), value=EMBEDDED, label="Model pair (target ← drafter)")
                target = gr.Textbox(default_target, label="Target (Hub id or local directory)")
                drafter = gr.Textbox(default_drafter, label="Drafter (empty: AR only)")
                algorithm = gr.Radio(ALGOS, value="slem" if "slem" in ALGOS else ALGOS[0], label="Algorithm")
                with gr.Accordion("Decoding settings", open=True):
                    temperature = gr.Slider(0, 2, value=0, step=0.05, label="temperature (0 = greedy)")
                    lookahead = gr.Slider(1, 16, value=5, step=1, label="lookahead k (drafted tokens per round)")
                    max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS, value=96, step=1, label="max new tokens")
                    with gr.Row():
                        top_k = gr.Number(0, label="top-k (0 = off)", precision=0, minimum=0)
                        top_p = gr.Number(1.0, label="top-p", minimum=0.01, maximum=1.0)
                        seed = gr.Number(0, label="seed", precision=0)
                with gr.Accordion("Prompt format, device, dtype", open=False):
                    mode = gr.Radio(["raw", "chat"], value="raw", label="prompt",
                                    info="chat: each model's own chat template")
                    device = gr.Dropdown(["auto", "cpu", "cuda"], value="auto", label="device")
                    dtype = gr.Dropdown(["auto", "float32", "bfloat16", "float16"], value="auto", label="dtype")
                check_btn = gr.Button("Check pair")
                availability = gr.Markdown("Press **Check pair** to see which algorithms apply.")
            with gr.Column(scale=3):
                prompt = gr.Textbox("def fibonacci(n):\n", lines=4, label="Prompt")
                with gr.Row():
                    run_btn = gr.Button("Run", variant="primary")
                    compare_btn = gr.Button("Compare all algorithms")
                    stop_btn = gr.Button("Stop", variant="stop")
                status = gr.Markdown(elem_id="hsd-status")
                with gr.Tabs():
                    with gr.Tab("Output"):
                        show_rejected = gr.Checkbox(True, label="show rejected drafts (struck through)")
                        output = gr.HTML(elem_id="hsd-output")
                        rounds_plot = gr.Plot(label="Rounds")
                    with gr.Tab("Rounds: token boundaries"):
                        gr.Markdown("Top: the drafter's tokens. Middle: the draft string. Bottom: the target's "
                                    f"proposed tokens and their verification. {COLUMNS_HELP}")
                        with gr.Row():
                            prev_btn = gr.Button("◀ previous round", size="sm")
                            round_idx = gr.Slider(0, 1, value=0, step=1, label="round")
                            next_btn = gr.Button("next round ▶", size="sm")
                        round_view = gr.HTML(elem_id="hsd-round")
                    with gr.Tab("Compare"), gr.Column(elem_id="hsd-compare"):
                        badge = gr.HTML(elem_id="hsd-badge")
                        with gr.Row():
                            speedup = gr.Plot(label="speedup", elem_id="hsd-speedup")
                            tokens_time = gr.Plot(label="tokens vs time")
                        with gr.Row():
                            histogram = gr.Plot(label="acceptance length")
                            positions = gr.Plot(label="acceptance by position")
                        time_split = gr.Plot(label="time split")
                        table = gr.DataFrame(label="summary", interactive=False)
                        csv = gr.File(label="summary as CSV")
                    with gr.Tab("Compatibility"):
                        report = gr.Markdown("Press **Check pair**.")
                        advise_btn = gr.Button("Advise: predict the best algorithm and lookahead", size="sm")
                        advice = gr.Markdown()
                    with gr.Tab("Algorithms"):
                        gr.Markdown("\n\n".join(EXPLAIN[a] for a in ALGOS if a in EXPLAIN)
                                    + "\n\nAll are lossless: at temperature 0 the output equals AR's token for "
                                      "token (the Compare tab checks it); when sampling, the output has exactly the "
                                      "target's distribution.")
                gr.Examples(
                    examples=[
                        [EMBEDDED, *PAIRS[EMBEDDED], "def fibonacci(n):\n", "slem", 0, 5, 96],
                        [EMBEDDED, *PAIRS[EMBEDDED], "import os\n\n\ndef read_lines(path):\n", "tli", 1.0, 5, 96],
                        [EMBEDDED, *PAIRS[EMBEDDED], "class Stack:\n    def __init__(self):\n", "slem", 0.8, 8, 96],
                        [BYTES, *PAIRS[BYTES], "def fibonacci(n):\n", "slrs" if "slrs" in ALGOS else "slem", 1.0, 5, 64],
                        ["Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)",
                         *PAIRS["Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)"],
                         "Summarise the plot of Hamlet in three sentences.", "slem", 0, 5, 64],
                    ],
                    inputs=[preset, target, drafter, prompt, algorithm, temperature, lookahead, max_new_tokens],
                    label="Examples: greedy code completion (SLEM), sampling where TLI accepts more than SLEM, "
                          "a long lookahead, SLRS with a byte-level drafter, and a bad drafter (needs a GPU and a "
                          "Hub token)",
                )
        inputs = [temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, device, dtype]
        preset.change(preset_changed, preset, [target, drafter], api_name="preset").then(
            describe, [target, drafter, device, dtype], [availability, algorithm], api_name="describe")
        for box in (target, drafter):  # a new pair: offer every algorithm until Check pair narrows them again
            box.input(lambda: gr.update(choices=ALGOS), None, algorithm, api_visibility="private", queue=False)
        demo.load(check_pair, [target, drafter, device, dtype, algorithm], [report, availability, algorithm],
                  api_visibility="private",
                  concurrency_id="gpu", concurrency_limit=1)
        run_event = run_btn.click(run, [target, drafter, algorithm, prompt, *inputs, show_rejected],
                                  [status, output, round_idx, round_view, rounds_plot, state], api_name="run",
                                  concurrency_id="gpu", concurrency_limit=1)
        compare_event = compare_btn.click(compare, [target, drafter, prompt, *inputs],
                                          [status, badge, speedup, tokens_time, histogram, positions, time_split,
                                           table, csv], api_name="compare", concurrency_id="gpu",
                                          concurrency_limit=1)
        stop_btn.click(None, cancels=[run_event, compare_event], api_visibility="private")
        check_btn.click(check_pair, [target, drafter, device, dtype, algorithm], [report, availability, algorithm],
                        api_name="check",
                        concurrency_id="gpu", concurrency_limit=1)
        advise_btn.click(advise_pair, [target, drafter, prompt, temperature, device, dtype], advice, api_name="advise",
                         concurrency_id="gpu", concurrency_limit=1)
        round_idx.change(show_round, [state, round_idx], round_view, api_name="round", concurrency_limit=4)
        prev_btn.click(lambda s, i: step_round(s, i, -1), [state, round_idx], round_idx, api_name="prev_round")
        next_btn.click(lambda s, i: step_round(s, i, 1), [state, round_idx], round_idx, api_name="next_round")
        show_rejected.change(rerender, [state, show_rejected], output, api_name="rerender", concurrency_limit=4)
    demo.queue(default_concurrency_limit=1, max_size=32)
    return demo


demo = build()

if ZERO_GPU:  # ZeroGPU wants models placed on cuda at module level; the embedded pair is tiny
    try:
        get_pair(*PAIRS[EMBEDDED], "cuda", "auto")
    except Exception:  # noqa: BLE001 - the app still starts; the first run reports the problem
        log.exception("could not pre-place the embedded pair")

if __name__ == "__main__":
    demo.launch(theme=gr.themes.Soft())
