"""Choose a saved policy's zero-shot sampling temperature on the corpus's validation graphs.

`placer pretrain` does this itself when its budget is spent; this script does
it for a policy made before it did (the shipped one), with the same function
(`placer.rl.sampling.choose_temperature`) on the same graphs (the manifest's
validation split, on the clusters the policy was trained on). Prints the
sweep; ``--write`` stores the choice in the policy's card.

    .venv/bin/python bench/tune_temperature.py --policy placer/data/policy --write
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from placer import presets  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.rl import pretrain  # noqa: E402
from placer.rl.sampling import choose_temperature  # noqa: E402
from placer.rl.saved_policy import load_policy, save_policy  # noqa: E402
from placer.rl.zero_shot import DEFAULT_SAMPLES  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=str(ROOT / "placer" / "data" / "policy"))
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "graphs"))
    parser.add_argument("--cluster", nargs="+", default=None,
                        help="clusters (default: those the policy was trained on)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="store the chosen temperature in the policy's card")
    args = parser.parse_args()

    policy = load_policy(args.policy)
    folder, manifest = pretrain.read_manifest(args.corpus)
    trained = set((policy.card.get("trained_on") or {}).get("graphs", []))
    entries = pretrain.validation_entries(manifest)
    leaked = sorted(trained & {e["name"] for e in entries})
    if leaked:
        raise SystemExit(f"the policy was trained on validation graphs {leaked}")
    clusters = [presets.get(c) for c in (args.cluster or policy.card["trained_on"]["clusters"])]
    t0 = time.perf_counter()
    envs = [pretrain.make_environment(load_graph(folder / e["path"]), c, policy.groups,
                                      tuple(policy.card["trained_on"]["teachers"]), kind_groups=policy.kind_groups,
                                      balanced_groups=policy.balanced_groups,
                                      critical_groups=policy.critical_groups)
            for e in entries for c in clusters]
    print(f"{len(envs)} validation environments ({time.perf_counter() - t0:.0f} s to build)", flush=True)
    t0 = time.perf_counter()
    sampling = choose_temperature(policy, envs, samples=args.samples, seed=args.seed)
    for t, r in sampling["geomean_ratio_to_teacher"].items():
        print(f"  temperature {t:>4}: best of greedy + {args.samples} samples {r:.4f}x the teachers")
    print(f"chosen: temperature {sampling['temperature']:g} ({time.perf_counter() - t0:.0f} s)")
    if args.write:
        save_policy(args.policy, policy.weights, {**policy.card, "sampling": sampling})
        print(f"written to {args.policy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
