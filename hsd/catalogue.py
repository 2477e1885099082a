"""The pairs hsd's front ends offer, in one list: the embedded pairs, and the Hub pairs with the size of each
model they need, what Timor et al.'s benchmark measured for them, and which a ZeroGPU Space loads at start-up.

The app's pair choice (:data:`GALLERY`), the note under it (:func:`pair_note`), the Space card's
``preload_from_hub`` (:func:`preload_hub_ids`, which ``README.md``'s front matter must equal), the models a
Space loads at start-up (:func:`startup_pairs`) and ZeroGPU's durations (:data:`HUB_MODELS`' sizes, so an
estimate needs no network) all read it. Adding a Hub pair: its models in :data:`HUB_MODELS`, one
:class:`HubPair` in :data:`HUB_PAIRS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .loading import EMBEDDED, embedded_path


@dataclass(frozen=True)
class HubModel:
    """A Hub model a catalogued pair needs: parameters and decoder layers, from its config and safetensors
    metadata."""

    id: str
    params: float
    layers: int


HUB_MODELS: dict[str, HubModel] = {m.id: m for m in (
    HubModel("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", 14.77e9, 48),
    HubModel("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.78e9, 28),
    HubModel("double7/vicuna-68m", 0.068e9, 2),
    HubModel("microsoft/phi-4", 14.66e9, 40),
    HubModel("Qwen/Qwen2.5-0.5B-Instruct", 0.494e9, 24),
    HubModel("codellama/CodeLlama-13b-Instruct-hf", 13.0e9, 40),
    HubModel("bigcode/tiny_starcoder_py", 0.164e9, 20),
    HubModel("google/gemma-2-9b-it", 9.24e9, 42),
    HubModel("google/gemma-2-2b-it", 2.61e9, 26),
    HubModel("meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 32),
    HubModel("Qwen/Qwen2.5-1.5B-Instruct", 1.54e9, 28),
    HubModel("HuggingFaceTB/SmolLM2-135M-Instruct", 0.135e9, 30),
)}


@dataclass(frozen=True)
class Measured:
    """One speedup over AR from Timor et al.'s benchmark (the hf-bench tables), in tokens per second, on the
    paper's hardware, with 512 new tokens."""

    algorithm: str  # "slem" (T = 0) and "tli" (T = 1) for different vocabularies, "sd" for a shared one
    temperature: float
    speedup: float
    data: str  # SCROLLS, CNN/DM or HumanEval
    hardware: str  # as the paper records it ("not recorded" where it did not)
    source: str = "paper"  # "paper": the benchmark's tables; otherwise where the number comes from

    def text(self) -> str:
        src = "" if self.source == "paper" else f", {self.source}"
        return f"{self.speedup:.2f}× with {self.algorithm.upper()} at T={self.temperature:g} ({self.data}, {self.hardware}{src})"


@dataclass(frozen=True)
class HubPair:
    """A Hub pair the app offers under ``label``: its models, what the paper measured for it, and whether a
    ZeroGPU Space loads it at start-up."""

    label: str
    target: str
    drafter: str
    preload: bool = False  # loaded at start-up on ZeroGPU and listed in README.md's preload_from_hub
    gated: bool = False  # needs an accepted licence and a token: cannot be preloaded
    measured: tuple[Measured, ...] = ()
    note: str = ""

    @property
    def sped_up(self) -> bool | None:
        """Whether the paper measured a speedup over AR for this pair (at some temperature); ``None`` if it
        measured nothing."""
        return any(m.speedup > 1.0 for m in self.measured) if self.measured else None

    def summary(self) -> str:
        """One Markdown line for the app: what the paper measured, and whether the Space preloads the pair."""
        if self.measured:
            faster = [m for m in self.measured if m.speedup > 1.0]
            slower = [m for m in self.measured if m.speedup <= 1.0]
            parts = []
            if faster:
                parts.append("measured faster than AR: " + "; ".join(m.text() for m in faster))
            if slower:
                parts.append("measured **slower** than AR: " + "; ".join(m.text() for m in slower))
            text = "Paper's benchmark: " + "; ".join(parts) + "."
        else:
            text = "Not measured in the paper."
        if self.note:
            text += f" {self.note}"
        if self.gated:
            text += " Gated: needs a token (an accepted licence and HF_TOKEN), so a Space does not preload it."
        elif self.preload:
            text += " Preloaded on the ZeroGPU Space."
        return text


_ADA = ("SCROLLS", "1× RTX 6000 Ada")  # the R1-Distill-Qwen-14B runs
_H100 = "1× H100"
#: the Hub pairs, in the order the app offers them. Preloaded: the paper's pairs that are not gated, whose weights
#: fit together (bf16) within a ZeroGPU Space's weight budget (hsd.durations.WEIGHTS_BUDGET) beside the embedded
#: pairs, one measured to speed up and its same-vocabulary control, sharing the target (14.8 + 0.07 + 1.8
#: billion parameters, 33 GB).
HUB_PAIRS: tuple[HubPair, ...] = (
    HubPair("DeepSeek-R1-Distill-Qwen-14B ← vicuna-68m (paper, reasoning)",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "double7/vicuna-68m", preload=True,
            measured=(Measured("slem", 0, 1.59, *_ADA), Measured("tli", 1, 1.59, *_ADA)),
            note="The 68M drafter beat the in-family 1.5B one on this target."),
    HubPair("DeepSeek-R1-Distill-Qwen-14B ← DeepSeek-R1-Distill-Qwen-1.5B (same-vocabulary control)",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", preload=True,
            measured=(Measured("sd", 0, 1.48, *_ADA), Measured("sd", 1, 1.50, *_ADA))),
    HubPair("phi-4 ← Qwen2.5-0.5B-Instruct (paper)", "microsoft/phi-4", "Qwen/Qwen2.5-0.5B-Instruct",
            measured=(Measured("slem", 0, 1.14, "SCROLLS", _H100), Measured("tli", 1, 1.62, "SCROLLS", _H100)),
            note="Not preloaded: with the 14B pair its 30 GB would pass the ZeroGPU weight budget."),
    HubPair("CodeLlama-13b-Instruct ← tiny_starcoder_py (paper, code)", "codellama/CodeLlama-13b-Instruct-hf",
            "bigcode/tiny_starcoder_py",
            measured=(Measured("slem", 0, 1.90, "HumanEval", "1× A6000",
                               "Hugging Face's UAG blog, Oct 2024; the paper's own run of this pair was discarded"),),
            note="Not preloaded (26 GB)."),
    HubPair("gemma-2-9b-it ← vicuna-68m (paper, text; gated: needs a token)", "google/gemma-2-9b-it",
            "double7/vicuna-68m", gated=True,
            measured=(Measured("slem", 0, 1.87, "SCROLLS", _H100), Measured("tli", 1, 2.04, "SCROLLS", _H100),
                      Measured("slem", 0, 1.39, "CNN/DM", _H100), Measured("tli", 1, 1.26, "CNN/DM", _H100),
                      Measured("slem", 0, 1.49, "HumanEval", _H100), Measured("tli", 1, 1.46, "HumanEval", _H100))),
    HubPair("gemma-2-9b-it ← gemma-2-2b-it (same-vocabulary control; gated: needs a token)", "google/gemma-2-9b-it",
            "google/gemma-2-2b-it", gated=True,
            measured=(Measured("sd", 0, 3.05, "SCROLLS", _H100), Measured("sd", 1, 2.49, "SCROLLS", _H100),
                      Measured("sd", 0, 0.92, "CNN/DM", _H100), Measured("sd", 1, 1.13, "CNN/DM", _H100))),
    # gated too (meta-llama); the label is the one the app's bad-drafter example names
    HubPair("Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)", "meta-llama/Llama-3.1-8B-Instruct",
            "Qwen/Qwen2.5-0.5B-Instruct", gated=True,
            measured=(Measured("slem", 0, 0.17, "HumanEval", "not recorded"),
                      Measured("tli", 1, 1.01, "HumanEval", "not recorded"),
                      Measured("slem", 0, 0.42, "CNN/DM", "not recorded"),
                      Measured("tli", 1, 0.87, "CNN/DM", "not recorded"))),
    HubPair("Qwen2.5-1.5B-Instruct ← SmolLM2-135M-Instruct (CPU classroom)", "Qwen/Qwen2.5-1.5B-Instruct",
            "HuggingFaceTB/SmolLM2-135M-Instruct", note="Small enough for a CPU Space."),
)
#: the embedded pairs' labels in the app, by their names in :data:`hsd.loading.EMBEDDED`
EMBEDDED_LABELS = {
    "tiny-code": "tiny-code (embedded, offline, CPU)",
    "tiny-code-bytes": "tiny-code-bytes (embedded target, byte-level drafter: SLRS at its cheapest)",
    "tiny-code-shared": "tiny-code-shared (embedded target, same-vocabulary drafter: classic SD)",
    "tiny-code-sampling": "tiny-code-sampling (embedded target, drafter trained on its distribution: TLI at T=1)",
}
CUSTOM = "Custom (type Hub ids or local directories)"
#: the pairs an interactive front end offers, label -> (target, drafter): the embedded ones first (they work
#: offline on a CPU), then the Hub pairs, then an empty pair for the user's own names
GALLERY: dict[str, tuple[str, str]] = {
    **{label: EMBEDDED[name] for name, label in EMBEDDED_LABELS.items()},
    **{p.label: (p.target, p.drafter) for p in HUB_PAIRS},
    CUSTOM: ("", ""),
}


def hub_pair(label: str) -> HubPair | None:
    """The :class:`HubPair` of a gallery label, ``None`` for the embedded pairs and the custom entry."""
    return next((p for p in HUB_PAIRS if p.label == label), None)


def pair_note(label: str) -> str:
    """What the app says under the pair choice: the paper's measurements of a Hub pair (:meth:`HubPair.summary`),
    or a line for the embedded pairs; ``""`` for the custom entry. (:func:`hsd.lab.pair_note` adds whether a Hub
    pair fits this machine.)"""
    pair = hub_pair(label)
    if pair is not None:
        return pair.summary()
    target = GALLERY.get(label, ("", ""))[0]
    if target and embedded_path(target) is not None:
        return "Embedded demo pair: works offline on a CPU; the paper did not measure it (see docs/embedded-pair.md)."
    return ""


def preload_hub_ids() -> list[str]:
    """The Hub models the preloaded pairs need, in order: exactly README.md's ``preload_from_hub``."""
    return list(dict.fromkeys(name for p in HUB_PAIRS if p.preload for name in (p.target, p.drafter) if name))


def startup_pairs(zerogpu: bool) -> dict[str, tuple[str, str]]:
    """The gallery entries to load at start-up: the embedded pairs everywhere, and on ZeroGPU the preloaded Hub
    pairs too (a CPU Space has 16 GB, too little for them)."""
    hub = {p.label for p in HUB_PAIRS if p.preload} if zerogpu else set()
    return {label: pair for label, pair in GALLERY.items()
            if pair[0] and (embedded_path(pair[0]) is not None or label in hub)}
