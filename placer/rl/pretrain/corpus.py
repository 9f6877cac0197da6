"""The corpus a run trains on: its manifest and its splits (train, validation, held-out families).

A manifest (``python -m corpus.make_corpus`` writes one) lists graphs with a name,
a family, a split and a path. Training takes the "train" split minus held-out
families; validation graphs, of families neither trained on nor held out,
choose the exported checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from placer.errors import PlacerError
from placer.fileio import read_json_file


def read_manifest(corpus: str | Path) -> tuple[Path, dict[str, Any]]:
    """The corpus folder and its manifest (``corpus`` may name the folder or its manifest.json).

    Raises
    ------
    PlacerError
        If there is no readable manifest or it lists no graph.
    """
    path = Path(corpus)
    if path.is_dir():
        path = path / "manifest.json"
    if not path.is_file():
        raise PlacerError(f"no corpus manifest at {str(path)!r} (make one with `python -m corpus.make_corpus`)")
    manifest = read_json_file(path, "corpus manifest")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("graphs"), list) or not manifest["graphs"]:
        raise PlacerError(f"{str(path)!r}: a corpus manifest needs a non-empty 'graphs' list")
    for e in manifest["graphs"]:
        if not isinstance(e, dict) or not {"name", "family", "split", "path"} <= set(e):
            raise PlacerError(f"{str(path)!r}: every graph entry needs name, family, split and path")
    return path.parent, manifest


def training_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's training graphs: split "train" and family not held out.

    Raises
    ------
    PlacerError
        If a graph marked "train" belongs to a held-out family (the split would leak).
    """
    heldout = set(manifest.get("heldout_families", []))
    train = [e for e in manifest["graphs"] if e["split"] == "train"]
    leaked = [e["name"] for e in train if e["family"] in heldout]
    if leaked:
        raise PlacerError(f"corpus manifest lists graphs of held-out families for training: {leaked}")
    if not train:
        raise PlacerError("the corpus has no training graph")
    return train


def chosen_entries(entries: list[dict[str, Any]], names: list[str] | None) -> list[dict[str, Any]]:
    """The training `entries` that `names` name, in the manifest's order (all of them when `names` is None).

    Raises
    ------
    PlacerError
        If a name is not one of the training graphs (unknown, or of the validation or held-out split).
    """
    if names is None:
        return entries
    known = {e["name"] for e in entries}
    missing = [n for n in dict.fromkeys(names) if n not in known]
    if missing:
        raise PlacerError(f"--graphs: {missing[0]!r} is not a training graph of the corpus"
                          + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                          + "; validation and held-out graphs are never trained on")
    chosen = set(names)
    return [e for e in entries if e["name"] in chosen]


def validation_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's validation graphs (split "validation"); they choose the exported checkpoint.

    Raises
    ------
    PlacerError
        If a validation graph's family is trained on or held out (the choice would not be of unseen graphs,
        or would leak the held-out ones).
    """
    train = {e["family"] for e in manifest["graphs"] if e["split"] == "train"}
    heldout = set(manifest.get("heldout_families", []))
    val = [e for e in manifest["graphs"] if e["split"] == "validation"]
    bad = [e["name"] for e in val if e["family"] in train | heldout]
    if bad:
        raise PlacerError(f"corpus manifest lists validation graphs of trained or held-out families: {bad}")
    return val
