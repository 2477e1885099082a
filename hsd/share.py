"""Share a run: save it as JSON, load it back without models, or write it as one self-contained HTML page.

A teacher prepares runs before class (or on a GPU) and shows them anywhere. :func:`result_to_json` writes
the whole trace (every round, byte-exact: token bytes are hex, since a token may be half a character),
the settings, the library versions, the machine and the models' names and commits; :func:`result_from_json`
reads it back into a :class:`~hsd.trace.Result` that every view draws exactly as it drew the original
(:func:`hsd.viz.output_html`, :func:`hsd.viz.round_html`, :func:`hsd.figures.rounds_figure`, and the
rejection-sampling pictures of :mod:`hsd.picture` when the run recorded them). :func:`result_to_html` is a
page with inline CSS and no scripts: the coloured output and every round's token-boundary view.

The file says what it is (``"format": "hsd-run"``) and which layout it has (``"version"``); anything else
is refused with a :class:`ShareError` that says what is wrong.
"""

from __future__ import annotations

import html
import json
import platform
import time
from dataclasses import asdict, fields

from . import __version__
from .errors import HsdError
from .metrics import Metrics
from .trace import Distributions, Emitted, Position, Result, Round, Span

FORMAT = "hsd-run"
VERSION = 1
PROVENANCE = ("target", "target_revision", "target_commit", "drafter", "drafter_revision", "drafter_commit")


class ShareError(HsdError, ValueError):
    """A file that is not an hsd run, or a damaged one, or one from a newer hsd."""


# ----------------------------------------------------------------------------- writing

def _json_default(value):
    """JSON for what a round's ``extra`` may hold besides JSON's own types."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _round_dict(r: Round) -> dict:
    d = asdict(r)
    d["draft"] = r.draft.hex()
    d["rejected"] = r.rejected.hex()
    for e in d["emitted"]:
        e["text"] = e["text"].hex()
    for pos in d["positions"]:
        if pos["dist"] is None:
            del pos["dist"]
    return d


def _result_dict(result: Result) -> dict:
    metrics = result.metrics.to_dict() if hasattr(result.metrics, "to_dict") else dict(result.metrics)
    return {"algorithm": result.algorithm, "prompt_ids": list(result.prompt_ids), "token_ids": list(result.token_ids),
            "text": result.text, "stop_reason": result.stop_reason, "settings": result.settings, "metrics": metrics,
            "prefill": result.prefill, "rounds": [_round_dict(r) for r in result.rounds]}


def versions() -> dict:
    """The versions of hsd and of the libraries that shape its output."""
    out = {"hsd": __version__, "python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - a description never fails a save
            out[name] = None
    return out


def run_meta(result: Result, *, prompt: str | None = None, pair=None, settings: dict | None = None,
             machine: dict | None = None) -> dict:
    """Everything a saved run says besides its trace, as JSON has it (special tokens' ids as strings)."""
    from .machine import machine_info

    models = pair.provenance() if pair is not None else {k: result.settings.get(k) for k in PROVENANCE}
    special = {}
    for role in ("target", "drafter"):
        model = getattr(pair, role, None) if pair is not None else None
        special[role] = {str(k): v for k, v in sorted(model.vocab.special_text.items())} if model is not None else {}
    return {"format": FORMAT, "version": VERSION, "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": versions(), "machine": machine if machine is not None else machine_info(pair),
            "models": models, "special_text": special, "prompt": prompt,
            "settings": {**result.settings, **(settings or {})}}


def result_to_json(result: Result, *, prompt: str | None = None, pair=None, settings: dict | None = None,
                   machine: dict | None = None, indent: int | None = None, meta: dict | None = None) -> str:
    """The run as JSON: its trace, settings (``result.settings`` and ``settings``, e.g. the app's), the
    versions of hsd, torch and transformers, the machine (:func:`hsd.machine.machine_info`), the models'
    names and commits (``pair.provenance()``, else what the result's settings say) and their special
    tokens' names, which the views need. ``prompt`` is the text the user typed. ``meta``: all of that as
    :func:`run_meta` gave it when the run ended (an app keeps it, since the models may be gone by then)."""
    meta = meta if meta is not None else run_meta(result, prompt=prompt, pair=pair, settings=settings, machine=machine)
    return json.dumps({**meta, "result": _result_dict(result)}, ensure_ascii=False, indent=indent,
                      default=_json_default)


# ----------------------------------------------------------------------------- reading

def _only_fields(cls, d: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _hex(value, where: str) -> bytes:
    try:
        return bytes.fromhex(value)
    except (TypeError, ValueError):
        raise ShareError(f"This hsd run is damaged: {where} should be hex bytes, got {str(value)[:40]!r}.") from None


def _position(d: dict) -> Position:
    dist = d.get("dist")
    pos = Position(**_only_fields(Position, {k: v for k, v in d.items() if k != "dist"}))
    if dist is not None:
        pos.dist = Distributions(**_only_fields(Distributions, dist))
    return pos


def _round(d: dict) -> Round:
    r = Round(**_only_fields(Round, {k: v for k, v in d.items()
                                     if k not in ("drafted", "proposed", "positions", "emitted", "draft", "rejected")}))
    r.draft = _hex(d.get("draft", ""), f"round {r.index}'s draft")
    r.rejected = _hex(d.get("rejected", ""), f"round {r.index}'s rejected draft")
    r.drafted = [Span(**_only_fields(Span, s)) for s in d.get("drafted", [])]
    r.proposed = [Span(**_only_fields(Span, s)) for s in d.get("proposed", [])]
    r.positions = [_position(p) for p in d.get("positions", [])]
    r.emitted = [Emitted(e["token"], e["label"], _hex(e["text"], f"round {r.index}'s emitted text"))
                 for e in d.get("emitted", [])]
    return r


def result_from_json(text: str | bytes) -> tuple[Result, dict]:
    """A run saved by :func:`result_to_json`: the :class:`Result` (no models needed) and the rest as a dict
    (``versions``, ``machine``, ``models``, ``special_text``, ``prompt``, ``settings``...). Raises
    :class:`ShareError` for text that is not JSON, JSON that is not an hsd run, a run from a newer hsd, or
    a damaged one."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ShareError("This file is not text (not UTF-8): choose a .json file saved by hsd.") from None
    if not isinstance(text, str):
        raise ShareError(f"A saved run is JSON text, not {type(text).__name__}.")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ShareError(f"This file is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): choose a "
                         "run saved by hsd (Download JSON, or hsd.share.result_to_json).") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ShareError(f'This JSON is not an hsd run: it has no "format": "{FORMAT}" field. Choose a run saved by '
                         "hsd (Download JSON, or hsd.share.result_to_json).")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ShareError(f"This hsd run has no valid format version (got {version!r}): the file is damaged.")
    if version > VERSION:
        raise ShareError(f"This run was saved by a newer hsd (format version {version}); this hsd ({__version__}) "
                         f"reads version {VERSION} and older. Upgrade hsd to open it.")
    try:
        d = doc["result"]
        result = Result(algorithm=d["algorithm"], prompt_ids=list(d["prompt_ids"]), token_ids=list(d["token_ids"]),
                        text=d["text"], rounds=[_round(r) for r in d["rounds"]], metrics=Metrics.of(d["metrics"]),
                        settings=dict(d["settings"]), stop_reason=d["stop_reason"], prefill=dict(d.get("prefill", {})))
    except ShareError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ShareError(f"This hsd run is damaged: {what}. Save it again from the run.") from None
    meta = {k: v for k, v in doc.items() if k != "result"}
    return result, meta


# ----------------------------------------------------------------------------- one HTML page

def specials(meta: dict, role: str) -> dict[int, str]:
    """The special tokens' names of ``role`` ("target" or "drafter") from a run's meta, by id."""
    return {int(k): v for k, v in (meta.get("special_text") or {}).get(role, {}).items()}


_CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#0f172a;background:#fff}h1{font-size:1.5em;margin-bottom:0.2em}h2{font-size:1.2em;margin-top:1.6em}
.hsd-meta{color:#475569;font-size:0.9em}.hsd-meta td{padding:1px 12px 1px 0;vertical-align:top}
details{margin:0.4em 0;border:1px solid #e2e8f0;border-radius:8px;
padding:0.3em 0.8em}summary{cursor:pointer;font-weight:600}.hsd-picture{font-size:0.85em;margin:0.6em 0}
.hsd-picture table{border-collapse:collapse}.hsd-picture td,.hsd-picture th{padding:1px 8px;text-align:right}
.hsd-bar{display:inline-block;height:0.7em;vertical-align:middle}"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _short(name) -> str:
    """A model's name for a title: a Hub id as it is, a local directory by its last two parts."""
    name = str(name)
    if name.startswith("/") or "\\" in name:
        return "/".join(name.replace("\\", "/").rstrip("/").split("/")[-2:])
    return name


def _summary_line(result: Result) -> str:
    m = Metrics.of(result.metrics)
    parts = [f"<b>{_e(result.algorithm)}</b>: {m.new_tokens} tokens in {m.rounds} rounds"]
    if m.tokens_per_s:
        parts.append(f"{m.tokens_per_s:.1f} tokens/s")
    if m.mean_accepted_length is not None:
        parts.append(f"τ = {m.mean_accepted_length:.2f}")
    if m.draft_acceptance_rate is not None:
        parts.append(f"acceptance {m.draft_acceptance_rate:.0%}")
    return ", ".join(parts) + f" · stopped by {_e(result.stop_reason)}"


def _pictures_html(rnd: Round) -> str:
    """Each recorded position of the round: its explanation and a table of the picture's numbers."""
    from .picture import COLORS, rejection_explanation, visible_token

    out = []
    for i, pos in enumerate(rnd.positions):
        d = pos.dist
        if d is None:
            continue
        low = [min(a, b) for a, b in zip(d.p, d.proposal)]
        rows = []
        for j, t in enumerate(d.ids[:12]):
            cells = "".join(
                f'<td>{v:.3f} <span class="hsd-bar" style="width:{60 * v:.1f}px;background:{COLORS[k]}"></span></td>'
                for k, v in (("p", d.p[j]), ("proposal", d.proposal[j]), ("min", low[j]), ("residual", d.residual[j])))
            mark = " (proposed)" if t == d.token else ""
            label = _e(visible_token(d.text[j]))
            rows.append(f'<tr><td style="text-align:left;font-family:monospace">{label}{mark}</td>{cells}</tr>')
        head = (f'<tr><th style="text-align:left">token</th><th>p</th><th>{_e(d.symbol)}</th>'
                f"<th>min(p, {_e(d.symbol)})</th><th>residual</th></tr>")
        out.append(f'<div class="hsd-picture"><b>Position {i + 1}</b>: {_e(rejection_explanation(rnd, i))}'
                   f"<table>{head}{''.join(rows)}</table></div>")
    return "".join(out)


def result_to_html(result: Result, meta: dict | None = None, *, prompt: str | None = None, pair=None,
                   title: str | None = None) -> str:
    """One self-contained page (inline CSS, no scripts): the run's summary, settings, models, machine and
    versions, the prompt, the coloured output, and every round's token-boundary view (collapsed, the most
    telling round open), with each recorded position's rejection-sampling numbers. ``meta`` is what
    :func:`result_from_json` returned (or :func:`run_meta`); without it, it is built from ``prompt`` and
    ``pair`` as :func:`result_to_json` would."""
    from .machine import machine_line
    from .viz import interesting_round, output_html, round_html

    meta = meta if meta is not None else run_meta(result, prompt=prompt, pair=pair)
    prompt = meta.get("prompt")
    st, sd = specials(meta, "target"), specials(meta, "drafter")
    models = meta.get("models") or {}
    pair_name = f"{models.get('target')}" + (f" ← {models.get('drafter')}" if models.get("drafter") else "")
    short = _short(models.get("target")) + (f" ← {_short(models['drafter'])}" if models.get("drafter") else "")
    title = title or f"hsd run: {result.algorithm} on {short}"
    settings = meta.get("settings") or result.settings
    shown = ("temperature", "top_k", "top_p", "lookahead", "max_new_tokens", "seed", "drafter_temperature",
             "draft_threshold", "noise", "device", "dtype")  # every setting that changes what a seed gives
    setting_text = ", ".join(f"{k} = {settings[k]}" for k in shown if k in settings and settings[k] is not None)
    commits = ", ".join(f"{role} commit {models[role + '_commit']}" for role in ("target", "drafter")
                        if models.get(role + "_commit"))
    try:
        machine = machine_line(meta["machine"])
    except (KeyError, TypeError):
        machine = ""
    v = meta.get("versions") or {}
    version_text = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    rows = [("models", pair_name + (f" ({commits})" if commits else "")), ("settings", setting_text),
            ("machine", machine), ("versions", version_text), ("saved", meta.get("saved", ""))]
    table = "".join(f"<tr><td>{_e(k)}</td><td>{_e(val)}</td></tr>" for k, val in rows if val)
    open_index = interesting_round(result.rounds) if result.rounds else None
    rounds = []
    shared = result.settings.get("noise") == "shared"
    for r in result.rounds:
        summary = (f"Round {r.index}: {len(r.proposed)} proposed, {r.n_accepted} accepted, "
                   f"{len(r.emitted)} emitted")
        view = round_html(r, algorithm=result.algorithm, special_drafter=sd, special_target=st, shared_noise=shared)
        rounds.append(f'<details{" open" if r.index == open_index else ""}><summary>{_e(summary)}</summary>'
                      f"{view}{_pictures_html(r)}</details>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body><h1>{_e(title)}</h1>
<div>{_summary_line(result)}</div>
<table class="hsd-meta">{table}</table>
<h2>Output</h2>
{output_html(result.rounds, special_text=st, prompt=prompt)}
<h2>Rounds</h2>
{"".join(rounds) or "<p>No rounds.</p>"}
<p class="hsd-meta">Saved by hsd {_e(__version__)} (format {FORMAT} version {VERSION}).</p>
</body></html>
"""
