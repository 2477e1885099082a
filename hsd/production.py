"""Take the choice to production (``python -m hsd production``): the vLLM and Transformers configuration of a
(target, drafter, algorithm, settings) chosen with hsd, and where each engine differs from what hsd measured.

:func:`production_config` is a pure function of the names, the algorithm, the sampling settings and a few
facts about the pair (:class:`PairFacts`: shared vocabulary or not, both ``config.vocab_size``, and the two
intersections: hsd's by bytes, and the engines' by token strings). It returns, per engine, a Python snippet,
the configuration as JSON (vLLM's ``speculative_config`` and ``SamplingParams``; Transformers' ``generate``
arguments and the drafter's generation-config fields), a ``vllm serve`` line, what the engine actually runs,
how that compares with hsd's algorithm (``match``), and plain notes. Which of the engines' algorithms an hsd
algorithm is comes from its :attr:`Algorithm.engine_equivalent <hsd.algorithms.contract.Algorithm>`; one the
engines lack (SLRS, or one registered for an experiment) gets the nearest configuration they offer, with the
match ``"none"``.

What was checked, and where (each parameter name below was read in the engine's own docs or source):

vLLM (its main branch):

* ``speculative_config`` keys ``method="draft_model"``, ``model``, ``num_speculative_tokens``,
  ``use_heterogeneous_vocab``, ``draft_sample_method`` (``"greedy"`` default, or ``"probabilistic"``):
  https://github.com/vllm-project/vllm/blob/main/vllm/config/speculative.py and
  https://github.com/vllm-project/vllm/blob/main/docs/features/speculative_decoding/configuration.md
  (rendered: https://docs.vllm.ai/en/latest/features/speculative_decoding/configuration/).
* Heterogeneous vocabularies: https://github.com/vllm-project/vllm/blob/main/docs/features/speculative_decoding/draft_model.md
  (rendered: https://docs.vllm.ai/en/latest/features/speculative_decoding/draft_model/), section "Draft Model
  Method with heterogeneous vocabs": ``use_heterogeneous_vocab: true`` enables TLI and "currently requires
  ``draft_sample_method='greedy'`` (the default). Probabilistic draft sampling is not yet supported". **The
  claim "vLLM's heterogeneous-vocabulary drafting is greedy-draft TLI only" holds**, and the source says why:
  in https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/llm_base_proposer.py,
  ``_greedy_sample`` masks the drafter's logits to the intersection and takes the argmax, and
  ``_sample_draft_tokens`` asserts that no draft probabilities exist with ``use_heterogeneous_vocab`` ("Config
  validation ensures draft_sample_method == 'greedy' when use_heterogeneous_vocab is True"); the
  ``draft_sample_method`` docstring says greedy drafts are treated as one-hot in rejection sampling. So at
  T > 0 vLLM is still lossless (a one-hot proposal accepted with probability p(x), the residual sampled
  otherwise) but accepts less than hsd's TLI, which samples its drafts from q'. VLLM PR #38174
  (https://github.com/vllm-project/vllm/pull/38174) added it.
* The intersection: https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/vocab_mapping.py
  matches ``get_vocab()`` token *strings* after replacing a leading space marker (found by encoding ``" a"``),
  not bytes: byte-fallback tokens (``<0x0A>``) and byte-level forms (``Ċ``) never match each other, so its
  intersection can be smaller than hsd's (by bytes). It also feeds the drafter the target's ids mapped one by
  one (a target token outside the intersection becomes the drafter's unk token), where hsd re-tokenizes the
  text for the drafter.
* No SLEM and no SLRS: the ``method`` values in ``vllm/config/speculative.py`` have neither (a SLEM proposer
  is proposed upstream, vLLM PR #45018).
* hsd's ``drafter_temperature`` and ``draft_threshold``: ``draft_sample_method="greedy"`` (argmax drafts, one-hot
  in rejection sampling) is hsd's ``drafter_temperature=0``; ``"probabilistic"`` samples the drafter with the
  request's own sampling settings (``_sample_draft_tokens`` in ``llm_base_proposer.py``), so no other drafter
  temperature has an equivalent. A draft model's drafts have a fixed length: ``num_speculative_tokens_per_batch_size``
  (by batch size) and ``enable_adaptive_verification`` (``method="dspark"`` only) are the dynamic options in
  ``vllm/config/speculative.py``; nothing ends a draft on the drafter's confidence, so ``draft_threshold`` has none.
* ``SamplingParams(temperature, top_p, top_k, seed, max_tokens)``:
  https://docs.vllm.ai/en/latest/api/vllm/sampling_params.html. ``top_k`` is left out when hsd's is 0 (off),
  since older vLLM versions rejected ``top_k=0`` (vLLM issue #17553) and its default is off.

Transformers 5.24.0 (the version installed here; read in its source):

* ``generate(assistant_model=..., tokenizer=..., assistant_tokenizer=...)`` and, on the drafter's
  ``generation_config``, ``num_assistant_tokens``, ``num_assistant_tokens_schedule``,
  ``assistant_confidence_threshold``: https://huggingface.co/docs/transformers/main/en/assisted_decoding
  ("Universal assisted decoding"), https://huggingface.co/docs/transformers/main/en/main_classes/text_generation,
  and ``transformers/generation/utils.py`` (``_get_candidate_generator``: with both tokenizers given,
  ``do_sample=True`` runs ``UniversalSpeculativeDecodingGenerator`` (TLI), ``do_sample=False``
  ``AssistedCandidateGeneratorDifferentTokenizers`` (SLEM); equal ``config.vocab_size`` plus an
  ``assistant_tokenizer`` raises ``ValueError``).
* ``GenerationConfig``'s default ``top_k`` is 50, so hsd's ``top_k=0`` (off) is passed explicitly.
* hsd's ``draft_threshold`` is the drafter's ``assistant_confidence_threshold`` (read in 5.25.0): above 0 it adds
  ``ConfidenceCriteria`` (``generation/stopping_criteria.py``) to the assistant's ``generate``, which ends a draft
  after a token whose probability, from the *processed* scores (after temperature, top-k, top-p), is below it;
  with scikit-learn installed, ``AssistedCandidateGenerator.update_candidate_strategy`` re-tunes it every round
  for a same-vocabulary assistant. There is no drafter temperature: the assistant drafts with a deep copy of
  ``generate()``'s own generation config (``AssistedCandidateGenerator.__init__``).
* Its TLI sampling is lossy in 5.24 with fast tokenizers: the pruned LM head's rows are scattered in the wrong
  order, so the ``q`` of the acceptance ratio is a permutation of the ``q`` sampled from (first-token TV 0.371
  against a noise floor of 0.089; docs/benchmarks.md, *Why Transformers' TLI is faster: it is not lossless*). It
  also prunes the drafter's LM head in place.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .algorithms import ALGORITHMS
from .errors import HsdError, IncompatiblePairError, InvalidSettingError
from .options import add_decoding_options

SOURCES = {
    "vllm": [
        "https://docs.vllm.ai/en/latest/features/speculative_decoding/draft_model/",
        "https://docs.vllm.ai/en/latest/features/speculative_decoding/configuration/",
        "https://github.com/vllm-project/vllm/blob/main/vllm/config/speculative.py",
        "https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/llm_base_proposer.py",
        "https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/vocab_mapping.py",
        "https://github.com/vllm-project/vllm/pull/38174",
    ],
    "transformers": [
        "https://huggingface.co/docs/transformers/main/en/assisted_decoding",
        "https://huggingface.co/docs/transformers/main/en/main_classes/text_generation",
        "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/generation/utils.py",
        "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/generation/candidate_generator.py",
    ],
}

#: how an engine's configuration compares with hsd's algorithm
MATCHES = {
    "same": "the same algorithm: same output distribution, and acceptance comparable with hsd's",
    "same distribution, less acceptance": "lossless like hsd, but a different proposal: expect lower acceptance "
                                          "than hsd measured",
    "same output, other algorithm": "the same (greedy) output, by another lossless algorithm: acceptance differs",
    "lossy": "the engine's implementation does not preserve the target's distribution",
    "none": "the engine has no equivalent; the configuration shown is the nearest it offers",
}


@dataclass
class PairFacts:
    """What the configuration depends on: ``None`` where it was not checked."""

    shared_vocabulary: bool | None = None
    target_vocab_size: int | None = None  # config.vocab_size (what Transformers compares)
    drafter_vocab_size: int | None = None
    byte_intersection: int | None = None  # hsd's: tokens with the same bytes
    string_intersection: int | None = None  # vLLM's: same token string after the space-marker swap


@dataclass
class EngineConfig:
    engine: str
    runs: str
    match: str
    python: str
    config: dict
    cli: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Production:
    target: str
    drafter: str | None
    algorithm: str
    settings: dict
    facts: PairFacts
    vllm: EngineConfig
    transformers: EngineConfig
    sources: dict = field(default_factory=lambda: SOURCES)

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------- facts

def _space_marker(tokenizer) -> tuple[str, ...]:
    """The leading-space marker of a tokenizer's token strings (``Ġ``, ``▁``, ...), found the way vLLM's
    vocabulary mapping finds it: the first token of ``" a"``, minus its ``a``."""
    try:
        ids = tokenizer.encode(" a", add_special_tokens=False)
        s = tokenizer.convert_ids_to_tokens(ids[0]) if ids else None
        if isinstance(s, str) and len(s) > 1 and s.endswith("a") and s[0] not in " \t":
            return (s[:-1],)
    except Exception:  # noqa: BLE001 - an odd tokenizer: fall back to both common markers
        pass
    return ("\u0120", "\u2581")


def string_intersection(target_tokenizer, drafter_tokenizer) -> int:
    """How many token strings the two vocabularies share once a leading space marker is read as a space:
    the intersection vLLM's ``use_heterogeneous_vocab`` (and Transformers' TLI translator) draft from."""
    def normalised(tok) -> set[str]:
        markers = _space_marker(tok)
        out = set()
        for s in tok.get_vocab():
            for m in markers:
                if s.startswith(m):
                    s = " " + s[len(m):]
                    break
            out.add(s)
        return out

    return len(normalised(target_tokenizer) & normalised(drafter_tokenizer))


def facts_of_pair(pair) -> PairFacts:
    """:class:`PairFacts` of a loaded :class:`hsd.Pair` (the app's)."""
    if pair.drafter is None:
        return PairFacts()
    pv = pair.vocab
    size = lambda m: getattr(getattr(m.model, "config", None), "vocab_size", None)  # noqa: E731
    return PairFacts(pv.shared, size(pair.target), size(pair.drafter), pv.intersection_size,
                     string_intersection(pair.target.tokenizer, pair.drafter.tokenizer))


def inspect_pair(target: str, drafter: str | None, *, trust_remote_code: bool = False,
                 target_revision: str | None = None, drafter_revision: str | None = None) -> PairFacts:
    """:class:`PairFacts` from the two tokenizers and configs alone (no weights are loaded)."""
    from transformers import AutoConfig, AutoTokenizer

    from .loading import _load_error, embedded_path
    from .vocab import PairVocab, Vocab

    def load(name, revision):
        path = str(embedded_path(name) or name)
        try:
            tok = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code)
        except Exception as exc:  # noqa: BLE001 - classified like the loader's own failures
            raise _load_error(name, exc, "tokenizer", revision) from None
        try:
            cfg = AutoConfig.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code)
        except Exception as exc:  # noqa: BLE001
            raise _load_error(name, exc, "model", revision) from None
        text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        return tok, getattr(text, "vocab_size", None)

    t_tok, t_size = load(target, target_revision)
    if drafter is None:
        return PairFacts(target_vocab_size=t_size)
    d_tok, d_size = load(drafter, drafter_revision)
    pv = PairVocab.build(Vocab.from_tokenizer(t_tok), Vocab.from_tokenizer(d_tok))
    return PairFacts(pv.shared, t_size, d_size, pv.intersection_size, string_intersection(t_tok, d_tok))


# --------------------------------------------------------------------------------------------- snippets

def _check(algorithm: str, drafter: str | None, temperature, top_k, top_p, lookahead, max_new_tokens,
           drafter_temperature=None, draft_threshold=0.0) -> None:
    from .generate import MAX_LOOKAHEAD, MAX_NEW_TOKENS, _check_int, check_draft_threshold
    from .sampling import Sampling

    if algorithm not in ALGORITHMS:
        raise InvalidSettingError(f"Unknown algorithm {algorithm!r}: choose one of {', '.join(ALGORITHMS)}.")
    if ALGORITHMS[algorithm].needs_drafter and not drafter:
        raise InvalidSettingError(f"algorithm={algorithm!r} needs a drafter: give drafter='<hub id or directory>'.")
    Sampling(temperature, top_k, top_p)
    if drafter_temperature is not None:
        try:
            Sampling(drafter_temperature, top_k, top_p)
        except InvalidSettingError as exc:
            raise InvalidSettingError(f"drafter_temperature: {exc}") from None
    check_draft_threshold(draft_threshold)
    _check_int("lookahead", lookahead, 1, MAX_LOOKAHEAD, "drafted tokens per round")
    _check_int("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS, "tokens to generate")


def _sampling_vllm(s: dict) -> dict:
    out = {"temperature": s["temperature"], "max_tokens": s["max_new_tokens"], "seed": s["seed"]}
    if s["temperature"] > 0:
        if s["top_p"] < 1.0:
            out["top_p"] = s["top_p"]
        if s["top_k"] > 0:
            out["top_k"] = s["top_k"]
    return out


def _sampling_hf(s: dict) -> dict:
    if s["temperature"] == 0:
        return {"do_sample": False, "max_new_tokens": s["max_new_tokens"]}
    # GenerationConfig's default top_k is 50: hsd's 0 (off) has to be said
    return {"do_sample": True, "temperature": s["temperature"], "top_k": s["top_k"], "top_p": s["top_p"],
            "max_new_tokens": s["max_new_tokens"]}


def _kw(d: dict, indent: str) -> str:
    return "".join(f"{indent}{k}={v!r},\n" for k, v in d.items())


def _own_drafter_temperature(s: dict) -> float | None:
    """hsd's drafter temperature where it differs from the target's (``None``: the drafter samples as the target)."""
    dt = s.get("drafter_temperature")
    return None if dt is None or dt == s["temperature"] else dt


def _threshold(algorithm: str, s: dict) -> float:
    """The draft threshold hsd runs ``algorithm`` with (0: a fixed lookahead; the algorithms without a dynamic
    lookahead ignore it)."""
    return s.get("draft_threshold", 0.0) if ALGORITHMS[algorithm].dynamic_lookahead else 0.0


def _ignored_threshold(algorithm: str, s: dict) -> list[str]:
    if not s.get("draft_threshold") or _threshold(algorithm, s) or not ALGORITHMS[algorithm].needs_drafter:
        return []
    takers = ", ".join(a.upper() for a, spec in ALGORITHMS.items() if spec.dynamic_lookahead)
    return [f"draft_threshold applies to {takers}: hsd's {algorithm} ignores it, and so does this configuration."]


def _vllm_drafting_notes(algorithm: str, s: dict, heterogeneous: bool) -> list[str]:
    """What vLLM offers for hsd's drafter temperature and draft threshold: greedy drafting, and no threshold."""
    notes = _ignored_threshold(algorithm, s)
    dt, theta = _own_drafter_temperature(s), _threshold(algorithm, s)
    if dt == 0:
        notes.append("drafter_temperature=0 (a greedy drafter) is vLLM's draft_sample_method='greedy' ("
                     + ("the only one with use_heterogeneous_vocab" if heterogeneous else "its default")
                     + "): the drafter's argmax, treated as one-hot in rejection sampling, as hsd's greedy drafter is.")
    elif dt is not None:
        notes.append("vLLM has no drafter temperature: it drafts the argmax ('greedy') or, without "
                     "use_heterogeneous_vocab, samples the drafter with the request's own settings ('probabilistic'); "
                     f"hsd's drafter temperature {dt:g} has no equivalent, so expect another acceptance_rate than hsd "
                     "measured (the output's distribution is the same).")
    if theta:
        notes.append(f"vLLM has no equivalent of hsd's draft_threshold={theta:g} (the dynamic lookahead) for a draft "
                     f"model: it drafts num_speculative_tokens={s['lookahead']} tokens every round "
                     "(num_speculative_tokens_per_batch_size chooses that number by batch size, not by the drafter's "
                     "confidence), so its drafts are longer, and more of them rejected, than hsd measured; the "
                     "output's distribution is the same.")
    return notes


def _vllm(target: str, drafter: str | None, algorithm: str, s: dict, f: PairFacts) -> EngineConfig:
    k, t = s["lookahead"], s["temperature"]
    a = ALGORITHMS[algorithm]
    greedy_drafter = _own_drafter_temperature(s) == 0
    sampling = _sampling_vllm(s)
    notes = []
    spec: dict | None = None
    if not a.needs_drafter:
        runs = "plain autoregressive decoding (no speculative_config)"
        match = "same" if a.engine_equivalent == "ar" else "none"
    elif f.shared_vocabulary:
        spec = {"method": "draft_model", "model": drafter, "num_speculative_tokens": k}
        if t > 0 and not greedy_drafter:
            spec["draft_sample_method"] = "probabilistic"
            notes.append("draft_sample_method='probabilistic' samples the drafts from the drafter's distribution "
                         "and tests p/q, as hsd's SD does; vLLM's default 'greedy' is lossless too but accepts less "
                         "at T > 0.")
        runs = "classic speculative decoding with a draft model (shared vocabulary)"
        match = "same"
        if a.engine_equivalent != "sd":
            notes.append(f"The vocabularies are shared, so {algorithm.upper()} reduces to SD: vLLM's plain draft "
                         "model is its equivalent.")
    else:
        spec = {"method": "draft_model", "model": drafter, "num_speculative_tokens": k,
                "use_heterogeneous_vocab": True}
        runs = "TLI with greedy drafting (use_heterogeneous_vocab: drafts are the argmax over the shared tokens)"
        if a.engine_equivalent == "tli":
            match = "same" if t == 0 or greedy_drafter else "same distribution, less acceptance"
            if match != "same":
                notes.append("vLLM drafts greedily even when sampling (probabilistic draft sampling is not supported "
                             "with use_heterogeneous_vocab): each draft is accepted with probability p(x) instead of "
                             "min(1, p/q'), so expect a lower acceptance_rate than hsd's TLI measured.")
        else:
            match = "none"
            notes.append(f"vLLM has no {a.long_name or algorithm.upper()}: its speculative methods for a drafter "
                         "with another vocabulary are only TLI with greedy drafts, shown here. Compare with hsd's tli "
                         "on this pair before choosing it.")
        if f.shared_vocabulary is None:
            notes.append("The vocabularies were not inspected: if they are the same, drop use_heterogeneous_vocab.")
        if f.string_intersection is not None:
            notes.append(f"vLLM intersects token strings (a leading space marker read as a space): "
                         f"{f.string_intersection:,} shared here, against {f.byte_intersection:,} byte strings in "
                         "hsd's TLI. Byte-fallback and byte-level forms of the same byte never match in vLLM.")
        notes.append("vLLM feeds the drafter the target's ids mapped one by one (a target token outside the "
                     "intersection becomes the drafter's unk token); hsd re-tokenizes the text for the drafter.")
    if spec is not None:
        notes += _vllm_drafting_notes(algorithm, s, bool(spec.get("use_heterogeneous_vocab")))
    if t > 0:
        notes.append("vLLM seeds per request (SamplingParams.seed): the same seed does not give hsd's sample.")
    llm_kw = {"model": target}
    if spec is not None:
        llm_kw["speculative_config"] = spec
    python = ("from vllm import LLM, SamplingParams\n\n"
              f"llm = LLM(\n{_kw(llm_kw, '    ')})\n"
              f"params = SamplingParams(\n{_kw(sampling, '    ')})\n"
              "outputs = llm.generate([prompt], params)\n"
              "print(outputs[0].outputs[0].text)\n")
    cli = f"vllm serve {target}" + (f" --speculative-config '{json.dumps(spec)}'" if spec else "")
    return EngineConfig("vLLM", runs, match, python, {"speculative_config": spec, "sampling_params": sampling},
                        cli, notes)


def _transformers_drafting_notes(algorithm: str, s: dict, f: PairFacts) -> list[str]:
    """Where Transformers' confidence threshold differs from hsd's draft threshold, and that it has no drafter
    temperature (read in Transformers 5.25.0's candidate_generator.py and stopping_criteria.py)."""
    notes = _ignored_threshold(algorithm, s)
    t, dt, theta = s["temperature"], _own_drafter_temperature(s), _threshold(algorithm, s)
    if theta and t > 0:
        notes.append("Transformers' ConfidenceCriteria reads the drafted token's probability after the sampling "
                     "settings (temperature, top-k, top-p); hsd's draft_threshold reads it at temperature 1.")
    if theta and f.shared_vocabulary:
        notes.append("With scikit-learn installed, Transformers re-tunes a same-vocabulary assistant's "
                     "assistant_confidence_threshold every round from a ROC curve of its past matches "
                     f"(AssistedCandidateGenerator.update_candidate_strategy): {theta:g} is only where it starts, "
                     "where hsd keeps it fixed.")
    if dt is not None:
        notes.append("Transformers has no drafter temperature: the assistant drafts with a copy of generate()'s own "
                     "generation_config (AssistedCandidateGenerator), "
                     + ("greedily" if t == 0 else f"at temperature {t:g}")
                     + f"; hsd's drafter temperature {dt:g} has no equivalent, so expect another acceptance_rate than "
                       "hsd measured.")
    return notes


def _transformers(target: str, drafter: str | None, algorithm: str, s: dict, f: PairFacts) -> EngineConfig:
    a = ALGORITHMS[algorithm]
    runs, match, notes, assistant_cfg, tokenizers = _transformers_route(algorithm, s, f)
    if a.needs_drafter:
        notes += _transformers_drafting_notes(algorithm, s, f)
    if s["temperature"] > 0:
        notes.append("Seed with torch.manual_seed(seed) before generate(): the draws differ from hsd's.")
    call = dict(_sampling_hf(s))
    code = _transformers_code(target, drafter, a.needs_drafter, s, call, assistant_cfg, tokenizers)
    config = {"generate_kwargs": {**({"assistant_model": drafter} if a.needs_drafter else {}),
                                  **({"tokenizer": target, "assistant_tokenizer": drafter} if tokenizers else {}),
                                  **call},
              "assistant_generation_config": assistant_cfg}
    return EngineConfig("Transformers 5.24", runs, match, code, config, None, notes)


def _transformers_route(algorithm: str, s: dict, f: PairFacts) -> tuple[str, str, list[str], dict, bool]:
    """What Transformers runs for hsd's ``algorithm`` at these settings: its name for it, how it matches hsd's
    (:data:`MATCHES`), the notes on where it differs, the assistant's generation_config, and whether it needs both
    tokenizers (different vocabularies)."""
    k, t = s["lookahead"], s["temperature"]
    a = ALGORITHMS[algorithm]
    equivalent, theta = a.engine_equivalent, _threshold(algorithm, s)
    if not a.needs_drafter:
        return "plain generate()", "same" if equivalent == "ar" else "none", [], {}, False
    assistant_cfg = {"num_assistant_tokens": k, "num_assistant_tokens_schedule": "constant",
                     "assistant_confidence_threshold": theta}
    if theta:
        notes = ["Draft length lives on the drafter's generation_config (num_assistant_tokens; passed to "
                 f"generate() it has no effect); 'constant' drafts up to {k} tokens per round, and "
                 f"assistant_confidence_threshold={theta:g} ends a draft after a token the assistant gives "
                 "less than that (Transformers' ConfidenceCriteria): hsd's draft_threshold."]
    else:
        notes = ["Draft length lives on the drafter's generation_config (num_assistant_tokens; passed to "
                 "generate() it has no effect); 'constant' and a confidence threshold of 0 draft exactly "
                 f"{k} tokens per round as hsd did (the defaults, 20 and 0.4, cut drafts short)."]
    if f.shared_vocabulary:
        if equivalent != "sd":
            notes.append(f"The vocabularies are shared, so {algorithm.upper()} reduces to SD: pass no tokenizers.")
        return ("assisted generation with a same-vocabulary assistant (speculative sampling when do_sample)", "same",
                notes, assistant_cfg, False)
    if t == 0:
        runs = "Universal Assisted Generation (SLEM: drafts decoded to text and re-encoded)"
        match = {"slem": "same", "tli": "same output, other algorithm"}.get(equivalent, "none")
    else:
        runs = "Universal Speculative Decoding (TLI, drafter sampled over the shared tokens)"
        match = "lossy" if equivalent == "tli" else "none"
        notes.append("Transformers 5.24's TLI sampling is lossy with fast tokenizers (its pruned LM head's rows "
                     "are scattered in the wrong order: first-token TV 0.371 against a noise floor of 0.089, "
                     "measured by this project with hsd's Lossless? check). Use it greedily, or "
                     "another engine, where the distribution matters.")
        notes.append("It also prunes the drafter's LM head in place: load a fresh drafter for other uses.")
    if equivalent == "slem" and t > 0:
        notes.append("Transformers runs SLEM only when greedy: with do_sample=True it switches to its TLI.")
    if equivalent == "tli" and t == 0:
        notes.append("Greedy TLI is not offered: do_sample=False runs SLEM, which gives the same greedy "
                     "output (both are lossless).")
    if equivalent is None:
        notes.append(f"Transformers has no {algorithm.upper()}; the configuration shown is what it runs for "
                     "these settings.")
    if f.target_vocab_size is not None and f.target_vocab_size == f.drafter_vocab_size:
        match = "none"
        notes.insert(0, f"Both configs have vocab_size {f.target_vocab_size}: Transformers then refuses "
                        "assistant_tokenizer (it treats equal sizes as one vocabulary), so it cannot run this "
                        "pair with different tokenizers at all.")
    return runs, match, notes, assistant_cfg, True


def _transformers_code(target: str, drafter: str | None, needs_drafter: bool, s: dict, call: dict,
                       assistant_cfg: dict, tokenizers: bool) -> str:
    """The Python that runs the configuration with Transformers, batch size 1."""
    lines = ["import torch", "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
             f"tokenizer = AutoTokenizer.from_pretrained({target!r})",
             f"model = AutoModelForCausalLM.from_pretrained({target!r})"]
    extra = ""
    if needs_drafter:
        lines += [f"assistant_model = AutoModelForCausalLM.from_pretrained({drafter!r})"]
        lines += [f"assistant_model.generation_config.{key} = {v!r}" for key, v in assistant_cfg.items()]
        extra = "    assistant_model=assistant_model,\n"
        if tokenizers:
            lines += [f"assistant_tokenizer = AutoTokenizer.from_pretrained({drafter!r})"]
            extra += "    tokenizer=tokenizer,\n    assistant_tokenizer=assistant_tokenizer,\n"
    lines += ["", "inputs = tokenizer(prompt, return_tensors='pt')  # batch size 1"]
    if s["temperature"] > 0:
        lines.append(f"torch.manual_seed({s['seed']})")
    lines.append(f"out = model.generate(\n    **inputs,\n{extra}{_kw(call, '    ')})")
    lines.append("print(tokenizer.decode(out[0, inputs['input_ids'].shape[1]:]))")
    return "\n".join(lines) + "\n"


def production_config(target: str, drafter: str | None, algorithm: str, *, temperature: float = 0.0, top_k: int = 0,
                      top_p: float = 1.0, lookahead: int = 5, max_new_tokens: int = 128, seed: int = 0,
                      drafter_temperature: float | None = None, draft_threshold: float = 0.0,
                      facts: PairFacts | None = None) -> Production:
    """The vLLM and Transformers configuration of hsd's ``algorithm`` at these settings (a pure function).

    ``facts`` (:func:`inspect_pair` or :func:`facts_of_pair`) decide between the shared- and the
    heterogeneous-vocabulary configurations; without them the heterogeneous one is given (or the shared one
    for ``sd``), with a note. ``sd`` on a pair whose vocabularies differ raises
    :class:`~hsd.errors.IncompatiblePairError`. ``drafter_temperature`` and ``draft_threshold`` are
    :func:`hsd.generate`'s: each engine's equivalent is configured where it has one (Transformers'
    ``assistant_confidence_threshold``; vLLM's greedy draft sampling for a drafter temperature of 0), and its
    notes say where it has none."""
    _check(algorithm, drafter, temperature, top_k, top_p, lookahead, max_new_tokens, drafter_temperature,
           draft_threshold)
    f = facts or PairFacts()
    if ALGORITHMS[algorithm].engine_equivalent == "sd":  # the engines' SD needs one vocabulary
        if f.shared_vocabulary is False:
            raise IncompatiblePairError(f"{algorithm} needs a drafter with the target's vocabulary, and these differ: "
                                        "choose slem or tli (what the engines offer for different vocabularies).")
        f = PairFacts(**{**asdict(f), "shared_vocabulary": True})
    s = dict(temperature=temperature, top_k=top_k, top_p=top_p, lookahead=lookahead, max_new_tokens=max_new_tokens,
             seed=seed, drafter_temperature=drafter_temperature, draft_threshold=draft_threshold)
    out = Production(target, drafter, algorithm, s, f, _vllm(target, drafter, algorithm, s, f),
                     _transformers(target, drafter, algorithm, s, f))
    if any(str(name).startswith("assets/") for name in (target, drafter) if name):
        for e in (out.vllm, out.transformers):
            e.notes.append("assets/... are hsd's embedded models: run from hsd's repository root (or give the "
                           "folders' absolute paths), or use your own Hub ids.")
    return out


def production_for_pair(pair, algorithm: str, **settings) -> Production:
    """:func:`production_config` for a loaded :class:`hsd.Pair` (names as loaded, facts from its vocabularies)."""
    return production_config(pair.target.name, pair.drafter.name if pair.drafter else None, algorithm,
                             facts=facts_of_pair(pair), **settings)


def format_production(p: Production, markdown: bool = False) -> str:
    """Both engines' configurations as text (or Markdown, for the app), with what each runs and its notes."""
    f = p.facts
    s = p.settings
    head = (f"hsd: {p.algorithm} on {p.target} <- {p.drafter}, temperature {s['temperature']:g}, top_k {s['top_k']}, "
            f"top_p {s['top_p']:g}, lookahead {s['lookahead']}, {s['max_new_tokens']} new tokens, seed {s['seed']}")
    if s.get("drafter_temperature") is not None:
        head += f", drafter temperature {s['drafter_temperature']:g}"
    if s.get("draft_threshold"):
        head += f", draft threshold {s['draft_threshold']:g}"
    if f.shared_vocabulary is not None:
        head += ("\nvocabulary: " + ("shared" if f.shared_vocabulary else "heterogeneous")
                 + (f"; config vocab_size {f.target_vocab_size} / {f.drafter_vocab_size}" if f.target_vocab_size else "")
                 + (f"; shared: {f.byte_intersection:,} byte strings (hsd), {f.string_intersection:,} token strings "
                    "(vLLM, Transformers)" if f.byte_intersection is not None else ""))
    out = [f"## {head}" if markdown else head]
    for e in (p.vllm, p.transformers):
        title = f"{e.engine}: {e.runs}"
        verdict = f"match: {e.match} ({MATCHES[e.match]})"
        code = e.python + (f"\n# server:\n# {e.cli}\n" if e.cli else "")
        if markdown:
            out += [f"### {title}", f"**{verdict}**", "", "```python", code.rstrip(), "```", ""]
            out += [f"- {n}" for n in e.notes]
        else:
            out += ["", f"=== {title}", verdict, "", code.rstrip(), ""]
            out += [f"note: {n}" for n in e.notes]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- CLI

def add_production_parser(sub) -> None:
    """``production``: print the vLLM and Transformers configuration of a choice (from :func:`hsd.cli.build_parser`)."""
    p = sub.add_parser("production", help="the vLLM and Transformers configuration that reproduces a pair, "
                                          "algorithm and settings, with where each engine differs from hsd")
    p.add_argument("--target", help="target: preset, Hub id or local directory (default: the embedded tiny-code target)")
    p.add_argument("--drafter", help="drafter: preset, Hub id or local directory (default: the embedded drafter)")
    p.add_argument("--algorithm", required=True, choices=list(ALGORITHMS))
    add_decoding_options(p, max_new_tokens=128)
    p.add_argument("--target-revision")
    p.add_argument("--drafter-revision")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--no-inspect", action="store_true", help="do not read the tokenizers (no download; the "
                   "shared-vocabulary check is then left to you)")
    p.add_argument("--markdown", action="store_true", help="print Markdown")
    p.add_argument("--json", type=Path, help="write the configurations as JSON")
    p.set_defaults(func=cmd_production)


def cmd_production(args) -> int:
    from .outfiles import check_output_file, write_output
    from .drafters import resolve_drafter, resolve_target

    check_output_file(args.json)
    target = resolve_target(args.target)
    drafter = resolve_drafter(args.drafter) if args.drafter else None
    if drafter is None and ALGORITHMS[args.algorithm].needs_drafter:
        if args.target:
            raise HsdError(f"--algorithm {args.algorithm} needs a --drafter with --target.")
        from .loading import DEFAULT_PRESET, EMBEDDED

        drafter = EMBEDDED[DEFAULT_PRESET][1]
    settings = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, lookahead=args.lookahead,
                    max_new_tokens=args.max_new_tokens, seed=args.seed, drafter_temperature=args.drafter_temperature,
                    draft_threshold=args.draft_threshold)
    _check(args.algorithm, drafter, **{k: v for k, v in settings.items() if k != "seed"})  # before any tokenizer loads
    facts = None if args.no_inspect else inspect_pair(
        target, drafter if ALGORITHMS[args.algorithm].needs_drafter else None, trust_remote_code=args.trust_remote_code,
        target_revision=args.target_revision, drafter_revision=args.drafter_revision)
    p = production_config(target, drafter if ALGORITHMS[args.algorithm].needs_drafter else None, args.algorithm,
                          facts=facts, **settings)
    print(format_production(p, markdown=args.markdown))
    if args.json:
        return write_output(args.json, json.dumps(p.to_dict(), indent=1))
    return 0
