"""The exceptions hsd raises for bad input. Every message says what to do next.

The CLI prints them and exits with status 2; the app shows them to the user who caused them.
"""


class HsdError(Exception):
    """Base class: a problem with the user's input or environment, not a bug in hsd."""


class InvalidSettingError(HsdError, ValueError):
    """A decoding setting is out of range (temperature, top_k, top_p, lookahead, max_new_tokens...)."""


class ModelNotFoundError(HsdError):
    """A model id is neither a local directory nor reachable on the Hugging Face Hub."""


class GatedModelError(HsdError):
    """The model exists on the Hub but needs an accepted licence and an access token."""


class RevisionNotFoundError(ModelNotFoundError):
    """The model exists on the Hub but the pinned ``revision`` (branch, tag or commit) does not."""


class HubAuthError(HsdError):
    """The Hub refused the access token: invalid, expired or revoked (401), or without access (403)."""


class NotCausalLMError(HsdError):
    """The model loads but is not a causal (decoder-only) language model."""


class RemoteCodeError(HsdError):
    """The model needs its repository's own Python code, and ``trust_remote_code`` is off."""


class NotAllowedError(HsdError):
    """A public app refuses this model location or setting (see hsd/policy.py: the operator's allow-lists)."""


class TokenizerMissingError(HsdError):
    """The model has no tokenizer that transformers can load."""


class PromptError(HsdError, ValueError):
    """The prompt is empty, too long for the target's context, or malformed."""


class IncompatiblePairError(HsdError):
    """The algorithm cannot run on this target/drafter pair (e.g. `sd` on different vocabularies)."""


class ResourceLimitError(HsdError):
    """A run would exceed an explicit cost limit (SLRS paths, memory...)."""
