#!/usr/bin/env bash
# The CPU measurements in docs/benchmarks.md, on the embedded tiny-code pair (about 20-30 minutes on a
# busy 2-core machine). One torch thread: the tiny models gain nothing from more, and a shared machine
# gives steadier numbers with one.
#
#   bash benchmarks/cpu.sh            # results in bench-out/cpu/{table,scale,advise-check}
# (advise-check runs `python -m hsd advise` on prompts 0-3, then bench per lookahead on prompts 4-11)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT_DIR=${OUT_DIR:-bench-out/cpu}
COMMON=(--preset tiny-code --device cpu --threads 1 --prompts code)

python -m hsd bench "${COMMON[@]}" --num-prompts 8 --max-new-tokens 128 --lookahead 5 --warmups 1 --repeats 3 \
    --temperatures 0 1 --out "$OUT_DIR/table"
python -m hsd bench "${COMMON[@]}" --num-prompts 1 --max-new-tokens 64 --warmups 1 --repeats 2 --temperatures 0 \
    --no-peer --scale --scale-new-tokens 64 128 256 512 1024 --scale-prompt-tokens 16 64 256 512 --out "$OUT_DIR/scale"
python benchmarks/advise_check.py --preset tiny-code --device cpu --threads 1 --prompts code --lookaheads 1 3 5 8 12 \
    --num-prompts 8 --max-new-tokens 128 --repeats 2 --out "$OUT_DIR/advise-check"
