"""Are a bench report's sampled outputs distributed like the target's? Mean target log-probability per row.

    python scripts/pair/target_logprob.py bench-out/cpu/table/report.json

A lossless sampler at temperature 1 (top_k 0, top_p 1) emits tokens whose expected target log-probability
is the same as plain sampling's (minus the target's entropy along its own samples); a sampler that leans
towards the drafter emits tokens the target finds less likely. Rows of one temperature are compared with
their AR row; the standard error is over tokens. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from hsd.generate import encode_prompt  # noqa: E402
from hsd.bench import load_prompts  # noqa: E402
from hsd.loading import load_pair  # noqa: E402


@torch.inference_mode()
def token_logprobs(model, prompt_ids: list[int], tokens: list[int], temperature: float) -> list[float]:
    ids = torch.tensor([prompt_ids + tokens])
    logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float() / temperature
    return torch.log_softmax(logits, -1)[torch.arange(len(tokens)), torch.tensor(tokens)].tolist()


def main(path: str) -> None:
    report = json.loads(Path(path).read_text())
    pair = load_pair(report["pair"]["target"], None, device="cpu")
    prompts = load_prompts(report["config"]["prompts"], report["config"]["num_prompts"])
    prompt_ids = [encode_prompt(pair.target, p, None)[0] for p in prompts]
    rows: dict[tuple, list[float]] = {}
    for p in report["per_prompt"]:
        if p["temperature"] > 0 and p["token_ids"]:
            lp = token_logprobs(pair.target.model, prompt_ids[p["prompt"]], p["token_ids"], p["temperature"])
            rows.setdefault((p["temperature"], p["row"]), []).extend(lp)
    print("T     row        tokens  mean target log-prob  (± s.e.)")
    for (t, row), lp in sorted(rows.items()):
        se = statistics.stdev(lp) / len(lp) ** 0.5
        print(f"{t:<5g} {row:10s} {len(lp):6d}  {statistics.mean(lp):8.3f}  ± {se:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
