"""A trained policy on disk: its weights as plain arrays and a card saying what it is.

Layout of a policy folder::

    policy.json     name, version, network sizes, how and on what it was trained
    weights.npz     one array per variable of `placer.rl.policy.PlacementPolicy`

A card may name other policy folders inside its own (``"pool": ["critical"]``):
policies trained on other groupings whose zero-shot answers are pooled with
this one's (`placer.rl.zero_shot`); they load with it (`SavedPolicy.pooled`).
Its ``"pool_groups": [64]`` pools each of these policies once more at each
such G (the features do not depend on the group count, and the granularity
that places a graph best differs from graph to graph).

Plain arrays rather than a TensorFlow checkpoint, so that placing a graph
(`placer.rl.zero_shot`) needs neither TensorFlow nor a trace: loading is a
``numpy.load``. Fine-tuning copies the arrays into a TensorFlow policy
(`assign_to`). The package ships one such folder (`SHIPPED_POLICY_DIR`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from placer.errors import PlacerError
from placer.fileio import read_json_file, write_atomic
from placer.rl.features import NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, NUM_LOAD_FEATURES
from placer.rl.run_folder import RACE_STATE_FILE, TRAINER_STATE_FILE

CARD = "policy.json"
WEIGHTS = "weights.npz"
FORMAT = 1
SHIPPED_POLICY_DIR = Path(__file__).resolve().parent.parent / "data" / "policy"

# Attribute paths of PlacementPolicy's variables (the numpy decoder reads them by these names).
VARIABLES = ("embed_w", "embed_b", "fwd.w", "fwd.b", "bwd.w", "bwd.b", "dev_w", "dev_b", "dev_slot", "go",
             "dec.w", "dec.b", "att_enc", "att_dec", "out_w", "out_b")
LOAD_VARIABLES = ("load_w",)
"""A load-aware policy's (`placer.rl.policy.PolicyConfig.load_aware`); they start at zero, so a policy without
them is the same network with them at zero."""


@dataclass
class SavedPolicy:
    """A policy's weights and card.

    Attributes
    ----------
    weights : ``{variable path: array}`` (see `VARIABLES`).
    card : ``name``, ``version``, ``hidden``, ``group_features``, ``device_features``,
        ``groups`` (G it was trained with), ``fine_tuned``, what training produced it, and
        ``sampling`` (the temperature best-of-K samples are drawn at, chosen on validation graphs by
        `placer.rl.sampling`; 1 when absent).
    path : the folder it was loaded from (None when built in memory).
    pooled : the policies its card's ``pool`` names, loaded from its subfolders.
    """

    weights: dict[str, np.ndarray]
    card: dict[str, Any]
    path: Path | None = None
    pooled: tuple["SavedPolicy", ...] = ()

    @property
    def members(self) -> tuple["SavedPolicy", ...]:
        """This policy, then those pooled with it."""
        return (self, *self.pooled)

    @property
    def name(self) -> str:
        return str(self.card.get("name", "unnamed"))

    @property
    def version(self) -> str:
        return str(self.card.get("version", "0"))

    @property
    def hidden(self) -> int:
        return int(self.card["hidden"])

    @property
    def load_aware(self) -> bool:
        """Whether its decoder reads the devices' load so far (`placer.rl.policy.PolicyConfig.load_aware`)."""
        return all(v in self.weights for v in LOAD_VARIABLES)

    @property
    def kind_groups(self) -> bool:
        """Whether it was trained on groups split by the device kind that runs their ops fastest
        (`placer.grouping.group_graph`'s ``split_kinds``): it places the same groups."""
        return bool(self.card.get("kind_groups", False))

    @property
    def balanced_groups(self) -> bool:
        """Whether it was trained on groups balanced by topological merges (`placer.grouping.group_graph`'s
        ``balanced``)."""
        return bool(self.card.get("balanced_groups", False))

    @property
    def critical_groups(self) -> bool:
        """Whether it was trained on groups that keep critical-path ops apart from the rest
        (`placer.grouping.group_graph`'s ``split_critical``)."""
        return bool(self.card.get("critical_groups", False))

    @property
    def groups(self) -> int:
        """G, the most groups it places a graph in: the G it was trained with, unless pooled at another
        (`at_groups`)."""
        return int(self.card.get("groups", 256))

    @property
    def trained_groups(self) -> int:
        """The G it was trained with."""
        return int(self.card.get("trained_groups", self.groups))

    def at_groups(self, groups: int) -> "SavedPolicy":
        """The same policy placing graphs in at most `groups` groups, as a pool member (its card's ``groups``
        changed, ``trained_groups`` added, and no pool of its own)."""
        card = {k: v for k, v in self.card.items() if k not in ("pool", "pool_groups")}
        return replace(self, card={**card, "groups": groups, "trained_groups": self.trained_groups}, pooled=())

    @property
    def sampling_temperature(self) -> float:
        """The softmax temperature zero-shot samples are drawn at (`placer.rl.zero_shot`)."""
        return float((self.card.get("sampling") or {}).get("temperature", 1.0))

    def describe(self) -> dict[str, Any]:
        """What a placement's meta says about the policy that made it."""
        return {"name": self.name, "version": self.version, "fine_tuned": bool(self.card.get("fine_tuned", False)),
                "hidden": self.hidden, "groups": self.groups,
                "trained_groups": self.trained_groups, "load_aware": self.load_aware,
                "kind_groups": self.kind_groups, "balanced_groups": self.balanced_groups,
                "critical_groups": self.critical_groups, "sampling_temperature": self.sampling_temperature,
                "trained_on": self.card.get("trained_on")}


def _variable(policy, path: str):
    obj = policy
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def weights_of(policy) -> dict[str, np.ndarray]:
    """The variables of a TensorFlow `PlacementPolicy` as arrays, by attribute path.

    Raises
    ------
    PlacerError
        If the policy has variables this format does not know (the network changed).
    """
    paths = VARIABLES + (LOAD_VARIABLES if policy.config.load_aware else ())
    weights = {path: _variable(policy, path).numpy() for path in paths}
    if len(policy.trainable_variables) != len(paths):
        raise PlacerError(f"the policy has {len(policy.trainable_variables)} variables; the saved-policy format "
                          f"knows {len(paths)}: update placer.rl.saved_policy")
    return weights


def assign_to(policy, saved: SavedPolicy) -> None:
    """Copy a saved policy's weights into a TensorFlow `PlacementPolicy` of the same sizes.

    A load-aware network takes a policy without load weights as it is (its load weights stay at zero:
    the same placements), which is how `placer pretrain --load-aware --init` starts from one.

    Raises
    ------
    PlacerError
        If a shape differs (e.g. another ``hidden``), or the policy is load-aware and the network is not.
    """
    if saved.load_aware and not policy.config.load_aware:
        raise PlacerError(f"policy {saved.name!r} is load-aware; this network is not")
    for path in VARIABLES + (LOAD_VARIABLES if saved.load_aware else ()):
        var = _variable(policy, path)
        value = saved.weights[path]
        if tuple(var.shape) != value.shape:
            raise PlacerError(f"policy {saved.name!r}: variable {path} has shape {value.shape}, the network "
                              f"{tuple(var.shape)} (trained with other sizes)")
        var.assign(value)


def save_policy(directory: str | Path, weights: dict[str, np.ndarray], card: dict[str, Any]) -> Path:
    """Write a policy folder: weights and card together, in one step.

    Both are written into a new sibling folder (``.NAME.new-PID``, with hard
    links to whatever else the folder holds, such as pooled policies), which
    then takes the folder's place in one atomic exchange (`_swap_in`, on Linux
    and macOS). So the folder holds the old pair or the new one at every
    moment, and a crash or a full disk at any point leaves one of them: never a
    card describing other weights (they were written one after the other, and a
    crash between the two left new weights under the old card).
    """
    directory = Path(directory)
    _tidy_up(directory)
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory.with_name(f".{directory.name}.new-{os.getpid()}")
    try:
        shutil.copytree(directory, staging, copy_function=_link_or_copy,
                        ignore=lambda folder, names: _replaced(directory, folder, names))
        with open(staging / WEIGHTS, "wb") as f:
            np.savez_compressed(f, **{k: np.asarray(v, dtype=np.float32) for k, v in weights.items()})
            f.flush()
            os.fsync(f.fileno())
        card = {"format": FORMAT, "group_features": NUM_GROUP_FEATURES, "device_features": NUM_DEVICE_FEATURES,
                **card}
        write_atomic(staging / CARD, (json.dumps(card, indent=1) + "\n").encode())
        _fsync_folder(staging)
        _swap_in(staging, directory)
        _fsync_folder(directory.parent)
    finally:
        if staging.exists():  # the old folder, swapped out; or the new one, when writing it failed
            shutil.rmtree(staging, ignore_errors=True)
    return directory


def _replaced(directory: Path, folder: str, names: list[str]) -> list[str]:
    """What `save_policy` does not carry over from the old folder: the pair it writes, and temporary files."""
    if Path(folder) != directory:
        return []
    return [n for n in names if n in (CARD, WEIGHTS) or n.startswith(".") or n == WEIGHTS + ".tmp.npz"]


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link to `src` (the old and new folders share the file), or a copy where links are refused."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _swap_in(staging: Path, directory: Path) -> None:
    """Put the folder `staging` where `directory` is; the old folder ends up at `staging`.

    An atomic exchange where the system has one (Linux ``renameat2`` with
    ``RENAME_EXCHANGE``, macOS ``renamex_np`` with ``RENAME_SWAP``); elsewhere
    two renames, between which the folder is briefly missing (a crash there
    leaves the old pair in ``.NAME.old-PID`` beside it).
    """
    if _exchange(staging, directory):
        return
    old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
    os.rename(directory, old)
    os.rename(staging, directory)
    os.rename(old, staging)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the paths `a` and `b` in one step; False (nothing done) where the system or file system cannot."""
    import ctypes
    import errno
    import sys

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if sys.platform.startswith("linux"):
            fn, head, tail = libc.renameat2, (-100,), (2,)  # AT_FDCWD, and RENAME_EXCHANGE
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            args = (*head, os.fsencode(a), *head, os.fsencode(b), *tail)
        elif sys.platform == "darwin":
            fn = libc.renamex_np  # RENAME_SWAP
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
            args = (os.fsencode(a), os.fsencode(b), 2)
        else:
            return False
    except (OSError, AttributeError):  # no such C library function (an old glibc, musl...)
        return False
    if fn(*args) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):  # this file system cannot
        return False
    raise OSError(err, os.strerror(err), str(b))


def _tidy_up(directory: Path) -> None:
    """Undo what an earlier `save_policy` left beside `directory` when it was killed: a new pair not yet
    swapped in is removed; an old pair swapped out is put back if `directory` is missing (between the two
    renames of `_swap_in`'s fallback), else removed."""
    for leftover in directory.parent.glob(f".{directory.name}.new-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in sorted(directory.parent.glob(f".{directory.name}.old-*"), key=lambda p: p.stat().st_mtime):
        if directory.exists():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            os.rename(leftover, directory)


def _fsync_folder(folder: Path) -> None:
    """Make the folder's entries durable (where folders can be opened: not on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


READ_ATTEMPTS = 3
"""How many times `load_policy` reads a folder that a save keeps replacing before it gives up."""


def load_policy(directory: str | Path | None = None) -> SavedPolicy:
    """Load a policy folder; None or ``"shipped"`` (as the CLI and the service name it) loads the policy
    shipped with the package.

    A folder that `save_policy` replaced while it was being read (a run
    exporting to it as the service loads it) is read again, so the card and
    the weights returned always come from one save, never one from each.

    Raises
    ------
    PlacerError
        If the folder is missing, is not a policy, or was made for other features.
    """
    directory = SHIPPED_POLICY_DIR if directory is None or directory == "shipped" else Path(directory)
    for _ in range(READ_ATTEMPTS):
        before = _folder_identity(directory)
        try:
            policy = _read_policy(directory)
        except PlacerError:
            if _folder_identity(directory) == before:
                raise
            continue  # replaced mid-read: what was missing or torn is read again from the new folder
        if _folder_identity(directory) == before:
            return policy
    raise PlacerError(f"{str(directory)!r} was replaced {READ_ATTEMPTS} times while being read (is a run "
                      "exporting to it?); try again")


def _folder_identity(directory: Path) -> tuple[int, int] | None:
    """Which folder is at `directory` now: `save_policy` puts a new one there on every save."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _read_policy(directory: Path) -> SavedPolicy:
    """One read of the folder: its card, its weights and its pool."""
    if not (directory / CARD).is_file() or not (directory / WEIGHTS).is_file():
        raise PlacerError(f"{str(directory)!r} is not a policy folder (needs {CARD} and {WEIGHTS}; "
                          "make one with `placer pretrain`)" + _what_it_is(directory))
    card = read_json_file(directory / CARD, "policy card")
    if isinstance(card, dict) and isinstance(card.get("format"), int) and card["format"] > FORMAT:
        raise PlacerError(f"{str(directory / CARD)!r}: policy card format {card['format']}; this version of placer "
                          f"reads format {FORMAT} (upgrade placer)")
    if not isinstance(card, dict) or card.get("format") != FORMAT or "hidden" not in card:
        raise PlacerError(f"{str(directory / CARD)!r}: not a policy card this version can read")
    _check_card(card, directory / CARD)
    if card.get("group_features") != NUM_GROUP_FEATURES or card.get("device_features") != NUM_DEVICE_FEATURES:
        raise PlacerError(f"policy {card.get('name')!r} was trained on {card.get('group_features')} group and "
                          f"{card.get('device_features')} device features; this version computes "
                          f"{NUM_GROUP_FEATURES} and {NUM_DEVICE_FEATURES}: pre-train it again")
    sampling = card.get("sampling") or {}
    t = sampling.get("temperature", 1.0) if isinstance(sampling, dict) else None
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise PlacerError(f"{str(directory / CARD)!r}: sampling.temperature must be a positive number, got {t!r}")
    try:
        # allow_pickle=False: a weights file holds plain arrays; a truncated or corrupt one raises BadZipFile,
        # EOFError or zlib.error (not OSError), so anything numpy raises here means "not readable"
        with np.load(directory / WEIGHTS, allow_pickle=False) as data:
            weights = {k: data[k].astype(np.float32) for k in data.files}
    except Exception as e:
        detail = "not a .npz archive" if "pickled" in str(e) else f"{type(e).__name__}: {e}"  # numpy's advice
        raise PlacerError(f"cannot read {str(directory / WEIGHTS)!r} (truncated or corrupt?): {detail}") from None
    missing = [v for v in VARIABLES if v not in weights]
    if missing:
        raise PlacerError(f"{str(directory / WEIGHTS)!r} lacks variables {missing}")
    weights = _with_every_load_feature(weights)
    _check_weights(weights, int(card["hidden"]), directory / WEIGHTS)
    policy = SavedPolicy(weights, card, directory)
    return replace(policy, pooled=_load_pool(directory, policy))


def _load_pool(directory: Path, policy: SavedPolicy) -> tuple[SavedPolicy, ...]:
    """The policies `policy`'s card pools: subfolders its ``pool`` names (themselves pooling nothing), then
    each of it and them at every G of its ``pool_groups``."""
    card = policy.card
    pool = card.get("pool") or []
    # ".." passes the Path(n).name test but names the parent: a pool naming its own folder recursed for ever
    if not isinstance(pool, list) or not all(isinstance(n, str) and n and n != ".." and Path(n).name == n
                                             for n in pool):
        raise PlacerError(f"{str(directory / CARD)!r}: pool must be a list of subfolder names, got {pool!r}")
    members = tuple(_read_policy(directory / n) for n in pool)  # replaced with the folder: `load_policy` checks
    if any(m.pooled for m in members):
        raise PlacerError(f"{str(directory / CARD)!r}: a pooled policy may not pool others")
    pool_groups = card.get("pool_groups") or []
    if not isinstance(pool_groups, list) or not all(
            isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in pool_groups):
        raise PlacerError(f"{str(directory / CARD)!r}: pool_groups must be a list of positive group counts, "
                          f"got {pool_groups!r}")
    at_other_groups = tuple(m.at_groups(g) for g in pool_groups for m in (policy, *members) if g != m.groups)
    return members + at_other_groups


def _what_it_is(directory: Path) -> str:
    """A hint when `directory` is a run folder rather than a policy: where its policy (if any) is."""
    if (directory / "policy" / CARD).is_file():
        return f"; it is a pre-training run: its policy is {str(directory / 'policy')!r}"
    if (directory / "pretrain_state.json").is_file():
        return "; it is a pre-training run that has not exported its policy yet (DIR/policy)"
    if (directory / TRAINER_STATE_FILE).is_file() or (directory / RACE_STATE_FILE).is_file():
        return "; it is a `placer train` run, which saves a placement (best_placement.json), not a policy"
    return ""


def _check_card(card: dict[str, Any], path: Path) -> None:
    """Refuse card fields of the wrong type: a hand-edited ``"hidden": "64"`` was an internal error, and
    ``"kind_groups": "no"`` grouped as if it said true."""
    for key in ("hidden", "groups", "trained_groups"):
        v = card.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PlacerError(f"{str(path)!r}: {key} must be a positive integer, got {v!r}")
    for key in ("fine_tuned", "kind_groups", "balanced_groups", "critical_groups"):
        if not isinstance(card.get(key, False), bool):
            raise PlacerError(f"{str(path)!r}: {key} must be true or false, got {card[key]!r}")


def _check_weights(weights: dict[str, np.ndarray], hidden: int, path: Path) -> None:
    """Refuse weights whose shapes do not fit the card's ``hidden`` and this version's features, or that are not
    finite: the NumPy forward pass failed on the first (an internal error) and placed everything on one device
    with NaN weights, silently."""
    H, F, D, L = hidden, NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, NUM_LOAD_FEATURES
    A = weights["att_dec"].shape[-1] if weights["att_dec"].ndim == 2 else -1  # attention width: any
    slots = weights["dev_slot"].shape[0] if weights["dev_slot"].ndim == 2 else -1  # devices it addresses: any
    expected = {"embed_w": (F, H), "embed_b": (H,), "fwd.w": (2 * H, 4 * H), "fwd.b": (4 * H,),
                "bwd.w": (2 * H, 4 * H), "bwd.b": (4 * H,), "dev_w": (D, H), "dev_b": (H,), "dev_slot": (slots, H),
                "go": (H,), "dec.w": (6 * H, 4 * H), "dec.b": (4 * H,), "att_enc": (2 * H, A), "att_dec": (H, A),
                "out_w": (3 * H, H), "out_b": (H,), "load_w": (L, H)}
    for name, shape in expected.items():
        if name in weights and weights[name].shape != shape:
            raise PlacerError(f"{str(path)!r}: {name} has shape {weights[name].shape}, expected {shape} "
                              f"(hidden {H} in the card)")
    if slots < 1:
        raise PlacerError(f"{str(path)!r}: dev_slot addresses no device")
    bad = [name for name, w in weights.items() if not np.isfinite(w).all()]
    if bad:
        raise PlacerError(f"{str(path)!r}: not finite (NaN or infinity) in {bad}")


def _with_every_load_feature(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A load-aware policy saved before later load features existed (v3: four of `NUM_LOAD_FEATURES`, v4 five) gets
    zero weights for them: it places as it did, and fine-tunes in today's network."""
    load_w = weights.get("load_w")
    if load_w is None or len(load_w) >= NUM_LOAD_FEATURES:
        return weights
    pad = np.zeros((NUM_LOAD_FEATURES - len(load_w),) + load_w.shape[1:], load_w.dtype)
    return {**weights, "load_w": np.concatenate([load_w, pad])}
