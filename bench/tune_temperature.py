"""Choose a saved policy's zero-shot sampling temperature on the corpus's validation graphs.

`placer pretrain` does this itself when its budget is spent; this script does
it for a policy made before it did (the shipped one), with the same function
(`placer.rl.sampling.choose_temperature`) on the same graphs (the manifest's
validation split, on the clusters the policy was trained on). Prints the
sweep and writes nothing, unless:

``--write`` stores the choice (the card's ``sampling`` entry) in the
policy.json of the folder ``--policy`` names; the weights are left as they
are. The shipped policy (the default ``--policy``, placer/data/policy/ and
the policies inside it), which the package installs and ``placer place
--method zero_shot`` uses, is written only with ``--write --write-shipped``;
``--write`` alone refuses it before the sweep. Try a copy first:

    .venv/bin/python -m bench.tune_temperature                                  # the sweep alone
    cp -r placer/data/policy /tmp/policy && .venv/bin/python -m bench.tune_temperature --policy /tmp/policy --write
    .venv/bin/python -m bench.tune_temperature --write --write-shipped           # the shipped card
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]

from placer import presets  # noqa: E402
from placer.cli.common import check_at_least, run_script  # noqa: E402
from placer.errors import PlacerError  # noqa: E402
from placer.fileio import read_json_file, write_atomic  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.rl import pretrain  # noqa: E402
from placer.rl.sampling import choose_temperature  # noqa: E402
from placer.rl.saved_policy import CARD, SHIPPED_POLICY_DIR, load_policy  # noqa: E402
from placer.rl.zero_shot import DEFAULT_SAMPLES  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="shipped", help="policy folder (default: the shipped policy)")
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "graphs"))
    parser.add_argument("--cluster", nargs="+", default=None,
                        help="clusters (default: those the policy was trained on)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true",
                        help=f"store the chosen temperature in {CARD} of the --policy folder (not the shipped "
                             "policy's without --write-shipped)")
    parser.add_argument("--write-shipped", action="store_true",
                        help=f"with --write: the --policy is the shipped one, and its {CARD} (in "
                             "placer/data/policy/) is to be rewritten")
    return parser.parse_args(argv)


def policy_folder(policy: str) -> Path:
    """The folder `policy` (a --policy value) names: ``shipped`` is the shipped policy's."""
    return SHIPPED_POLICY_DIR if policy == "shipped" else Path(policy)


def is_shipped(folder: Path) -> bool:
    """Whether `folder` is the shipped policy or one inside it (its pool's)."""
    shipped = SHIPPED_POLICY_DIR.resolve()
    return folder.resolve() == shipped or shipped in folder.resolve().parents


def check_args(args: argparse.Namespace) -> None:
    """A PlacerError for settings no run can have, and for a --write it should not do, before the sweep."""
    check_at_least(args, "samples")
    if args.write_shipped and not args.write:
        raise PlacerError("--write-shipped only goes with --write (it writes the shipped policy's card)")
    if not args.write:
        return
    folder = policy_folder(args.policy)
    if is_shipped(folder) and not args.write_shipped:
        raise PlacerError(f"--write would rewrite the shipped policy's card ({folder / CARD}), which the package "
                          "installs: give --policy a copy, or add --write-shipped to mean it")
    if args.write_shipped and not is_shipped(folder):
        raise PlacerError(f"--write-shipped is for the shipped policy, not --policy {args.policy}: drop it")
    if (folder / CARD).is_file() and not os.access(folder / CARD, os.W_OK):
        raise PlacerError(f"--write: {str(folder / CARD)!r} is not writable")


def main() -> int:
    args = parse_args()
    check_args(args)
    policy = load_policy(args.policy)
    folder, manifest = pretrain.read_manifest(args.corpus)
    trained_on = policy.card.get("trained_on") or {}
    if not trained_on.get("teachers") or not (args.cluster or trained_on.get("clusters")):
        raise PlacerError(f"the card of policy {args.policy!r} does not say which teachers (and clusters, when "
                          "--cluster is not given) it was trained with")
    entries = pretrain.validation_entries(manifest)
    leaked = sorted(set(trained_on.get("graphs", [])) & {e["name"] for e in entries})
    if leaked:
        raise PlacerError(f"the policy was trained on validation graphs {leaked}")
    clusters = [presets.get(c) for c in (args.cluster or trained_on["clusters"])]
    t0 = time.perf_counter()
    envs = [pretrain.make_environment(load_graph(folder / e["path"]), c, policy.groups,
                                      tuple(trained_on["teachers"]), kind_groups=policy.kind_groups,
                                      balanced_groups=policy.balanced_groups,
                                      critical_groups=policy.critical_groups)
            for e in entries for c in clusters]
    print(f"{len(envs)} validation environments ({time.perf_counter() - t0:.0f} s to build)", flush=True)
    t0 = time.perf_counter()
    sampling = choose_temperature(policy, envs, samples=args.samples, seed=args.seed)
    for t, r in sampling["geomean_ratio_to_teacher"].items():
        print(f"  temperature {t:>4}: best of greedy + {args.samples} samples {r:.4f}x the teachers")
    print(f"chosen: temperature {sampling['temperature']:g} ({time.perf_counter() - t0:.0f} s)")
    if args.write:  # the card alone, as it is on disk, but for its sampling entry: the weights stay as they are
        card = policy_folder(args.policy) / CARD
        write_atomic(card, (json.dumps({**read_json_file(card, "policy card"), "sampling": sampling}, indent=1)
                            + "\n").encode())
        print(f"written to {card}")
    return 0


if __name__ == "__main__":
    run_script(main, "tune_temperature", "nothing was written: run it again")
