"""Two checkouts of blasdx in one run: bench_gpu.py from each, in alternating rounds
(base, this, base, this, ...), each in a fresh process with that checkout first on
PYTHONPATH; prints the median of each batched and block-GEMM case and this/base.

    git archive REV blasdx templates benchmarks examples | (mkdir .old && tar -x -C .old)
    python benchmarks/compare_versions.py .old [--rounds 2] [--gib 1.0]

Each round runs the whole bench_gpu.py of its checkout (which checks every case against
float64 before timing it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run(root: Path, gib: float, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(root / "benchmarks" / "bench_gpu.py"), "--gib", str(gib), "--out", str(out)],
                   check=True, env=env, cwd=root / "benchmarks", stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base", help="a checkout (blasdx, templates, benchmarks, examples) to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--out", default=None, help="write every round's results here as JSON")
    args = parser.parse_args()
    versions = {"base": Path(args.base).resolve(), "this": HERE}
    results: dict[str, list[dict]] = {label: [] for label in versions}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for label, root in versions.items():
                results[label].append(run(root, args.gib, Path(tmp) / f"{label}{i}.json"))
                print(f"round {i + 1} {label} done", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    copy = statistics.median(r["copy GB/s"] for rs in results.values() for r in rs)
    print(f"{results['this'][0]['device']}; copy {copy:.0f} GB/s; medians of {args.rounds} alternating rounds")

    def medians(section: str, metric: str) -> dict[str, dict[str, float]]:
        table: dict[str, dict[str, list[float]]] = {}
        for label, rounds in results.items():
            for r in rounds:
                for row in r[section]:
                    table.setdefault(row["case"], {}).setdefault(label, []).append(row[metric])
        return {case: {label: statistics.median(v) for label, v in by.items()} for case, by in table.items()}

    worst = 1.0
    for section, metric, unit in (("batched", "GB/s", "GB/s"), ("block", "TFLOP/s", "TFLOP/s"),
                                  ("fusion", "ms", "ms")):
        print(f"{section:30} {'base ' + unit:>14} {'this ' + unit:>14} {'this/base':>9}")
        for case, m in medians(section, metric).items():
            ratio = m["this"] / m["base"] if metric != "ms" else m["base"] / m["this"]
            worst = min(worst, ratio)
            print(f"{case:30} {m['base']:14.1f} {m['this']:14.1f} {ratio:9.3f}")
    host = {label: statistics.median(r["host"]["execute us"] for r in rs) for label, rs in results.items()}
    print(f"host overhead: base {host['base']:.1f} us, this {host['this']:.1f} us per execute()")
    print(f"slowest case this/base (speed): {worst:.3f}")


if __name__ == "__main__":
    main()
