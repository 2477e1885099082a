import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: intra-op threads only add synchronisation


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: longer than the default suite allows; run with -m slow")


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    """Two tiny models saved like Hub checkpoints: byte-level BPE target, SentencePiece-style drafter."""
    from builders import bytelevel_tokenizer, sentencepiece_tokenizer, tiny_llama

    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, tok, seed, layers in [("target", bytelevel_tokenizer(), 0, 2), ("drafter", sentencepiece_tokenizer(), 1, 1)]:
        model = tiny_llama(tok, seed, layers=layers)
        model.generation_config.eos_token_id = tok.eos_token_id
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = str(root / name)
    return out
