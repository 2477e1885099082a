"""hsd: lossless speculative decoding across different vocabularies (SLEM, TLI, SLRS, SD, AR).

    import hsd
    pair = hsd.load_pair()                      # the embedded tiny-code pair
    res = hsd.generate(pair, "def fib(n):", algorithm="slem", max_new_tokens=64)
    res.text, res.token_ids, res.rounds, res.metrics
    hsd.generate(pair, "def fib(n):", settings=hsd.Settings(temperature=0.7, seed=1))

"The spec" that docstrings cite by section ("spec §2 step 2") is docs/algorithms.md; docs/design.md says how hsd
implements it and why each algorithm is lossless.
"""

from . import threads  # first: the OpenMP defaults must be in the environment before torch loads
from .errors import (GatedModelError, HsdError, HubAuthError, IncompatiblePairError, InvalidSettingError,
                     ModelNotFoundError, NotAllowedError, NotCausalLMError, PromptError, RemoteCodeError, ResourceLimitError,
                     RevisionNotFoundError, TokenizerMissingError)
from .algorithms import ALGORITHMS, availability, register, unregister, usable_algorithms
from .algorithms.contract import Algorithm
from .generate import check_algorithm, generate, special_spans, stream
from .loading import PRESETS, Model, Pair, clear_cache, is_loaded, load_model, load_pair
from .metrics import Counts, Metrics
from .settings import Settings
from .trace import Emitted, Position, Result, Round, Span
from .vocab import PairVocab, Vocab

__all__ = [
    "GatedModelError", "HsdError", "HubAuthError", "RevisionNotFoundError", "IncompatiblePairError", "InvalidSettingError", "ModelNotFoundError",
    "NotAllowedError", "NotCausalLMError", "PromptError", "RemoteCodeError", "ResourceLimitError", "TokenizerMissingError", "check_algorithm", "generate",
    "special_spans", "stream", "PRESETS", "Model", "Pair", "clear_cache", "is_loaded", "load_model", "load_pair", "Emitted", "Position", "Result",
    "Round", "Span", "PairVocab", "Vocab", "ALGORITHMS", "Algorithm", "availability", "register", "unregister",
    "usable_algorithms", "Counts", "Metrics", "Settings",
]
__version__ = "0.1.0"
