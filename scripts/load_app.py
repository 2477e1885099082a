"""Load test: N concurrent gradio_client clients x M runs against the app (not part of the default suite).

    python scripts/load_app.py                         # launches app.py in-process on the embedded pair
    python scripts/load_app.py --url http://host:7860  # an app already running (a Space, say)
    python scripts/load_app.py --target DIR --drafter DIR --clients 8 --runs 5

Each client samples (temperature 0.8) with its own seed. Reports errors (goal 0), latency percentiles,
and whether every seeded output equals the output of the same request run alone (goal: all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--target", default="assets/tiny-code/target")
    ap.add_argument("--drafter", default="assets/tiny-code/drafter")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--algorithms", default="slem,tli", help="cycled over the runs")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gradio_client import Client

    sys.path.insert(0, str(ROOT))
    from hsd import marks

    demo = None
    url = args.url
    if url is None:
        import app

        demo = app.build()
        _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    algorithms = args.algorithms.split(",")

    def request(client, seed: int, i: int):
        algorithm = algorithms[i % len(algorithms)]
        start = time.perf_counter()
        out = client.predict(args.target, args.drafter, algorithm, "def fibonacci(n):\n", 0.8, 0, 1.0, 5,
                             args.max_new_tokens, seed, "raw", "auto", "auto", True, api_name="/run")
        return (seed, algorithm), out[0], out[1], time.perf_counter() - start

    def worker(seed: int):
        client = Client(url, verbose=False)
        try:
            return [request(client, seed, i) for i in range(args.runs)]
        finally:
            client.close()

    try:
        with ThreadPoolExecutor(args.clients) as pool:
            results = [r for rs in pool.map(worker, range(args.clients)) for r in rs]
        errors = [(key, status) for key, status, _, _ in results if not marks.starts(status, "ok")]
        latencies = sorted(t for *_, t in results)
        reference = {}
        single = Client(url, verbose=False)
        for key, _, _, _ in results:
            if key not in reference:
                reference[key] = request(single, key[0], algorithms.index(key[1]))[2]
        single.close()
        same = sum(html == reference[key] for key, _, html, _ in results)
        q = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
        print(f"{len(results)} runs from {args.clients} concurrent clients: {len(errors)} errors")
        print(f"latency s: p50 {q[49]:.2f}  p90 {q[89]:.2f}  p99 {q[98]:.2f}  max {latencies[-1]:.2f}")
        print(f"seeded outputs equal to a single run: {same}/{len(results)}")
        for key, status in errors[:5]:
            print("error", key, status[:300])
        return 0 if not errors and same == len(results) else 1
    finally:
        if demo is not None:
            demo.close()


if __name__ == "__main__":
    raise SystemExit(main())
