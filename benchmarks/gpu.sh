#!/usr/bin/env bash
# The same benchmark as docs/benchmarks.md, on one CUDA GPU, in under 8 minutes, installing nothing.
#
#   bash benchmarks/gpu.sh                                  # the embedded tiny-code pair
#   TARGET=/path/or/hub-id DRAFTER=/path/or/hub-id PROMPTS=summarize bash benchmarks/gpu.sh
#
# Hub ids must already be in the Hugging Face cache: the Hub is never contacted (HF_HUB_OFFLINE=1), pip is
# never called. Each step has its own time limit (230 + 130 + 60 s of work, 10 s grace each to
# write results after the interrupt, plus start-up), so the
# whole script stays under 8 minutes even when a step is cut short; a cut step still leaves what it wrote.
# Results: $OUT_DIR (default bench-out/gpu): table/ (bench), scale/ (per-token time vs length), advice.json.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_NO_INDEX=1 TOKENIZERS_PARALLELISM=false
OUT_DIR=${OUT_DIR:-bench-out/gpu}
DEVICE=${DEVICE:-cuda}
PROMPTS=${PROMPTS:-code}
if [[ -n "${TARGET:-}" ]]; then PAIR=(--target "$TARGET" --drafter "${DRAFTER:?set DRAFTER too}"); else PAIR=(--preset tiny-code); fi
mkdir -p "$OUT_DIR"

python - <<'EOF' || exit 1
import importlib, sys
import torch
missing = [m for m in ("transformers", "plotly") if importlib.util.find_spec(m) is None]
print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}", end="")
print(f", GPU: {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "")
if missing:
    print(f"missing packages (nothing will be installed): {missing}; figures need plotly, PNGs need kaleido")
if "transformers" in missing:
    sys.exit(1)
EOF

step() {  # step SECONDS NAME ARGS...: run one hsd command under a time limit, keep going if it fails
    local limit=$1 name=$2; shift 2
    echo "== $name (limit ${limit}s)"
    timeout --signal=INT --kill-after=10 "$limit" python -m hsd "$@" || echo "== $name ended with status $? (124 = time limit)"
}

step 230 "table: AR, SLEM, TLI and Transformers' peer at T=0 and T=1" \
    bench "${PAIR[@]}" --device "$DEVICE" --prompts "$PROMPTS" --num-prompts 8 --max-new-tokens 128 \
    --lookahead 5 --warmups 2 --repeats 3 --temperatures 0 1 --out "$OUT_DIR/table"
step 130 "scale: per-token time vs max new tokens and prompt length" \
    bench "${PAIR[@]}" --device "$DEVICE" --prompts "$PROMPTS" --num-prompts 1 --max-new-tokens 64 \
    --warmups 1 --repeats 2 --temperatures 0 --no-peer --scale --scale-new-tokens 64 128 256 512 \
    --scale-prompt-tokens 16 64 256 512 --out "$OUT_DIR/scale"
step 60 "advise: predicted speedup per algorithm and lookahead" \
    advise "${PAIR[@]}" --device "$DEVICE" --prompts "$PROMPTS" --num-prompts 4 --max-new-tokens 64 \
    --json "$OUT_DIR/advice.json"
echo "results in $OUT_DIR"
