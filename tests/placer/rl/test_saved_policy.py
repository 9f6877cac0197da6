"""Loading a policy folder: a damaged or mistaken one is refused with one line naming the problem."""

import json
import shutil

import numpy as np
import pytest

from placer.errors import PlacerError
from placer.rl.saved_policy import SHIPPED_POLICY_DIR, load_policy


def single_policy(tmp_path, card_changes=None, weights=None):
    """A copy of the shipped policy folder without its pool, with `card_changes` and `weights` (name -> array)."""
    folder = tmp_path / "policy"
    folder.mkdir(parents=True)
    shutil.copy(SHIPPED_POLICY_DIR / "weights.npz", folder)
    card = json.loads((SHIPPED_POLICY_DIR / "policy.json").read_text())
    card = {k: v for k, v in card.items() if k not in ("pool", "pool_groups")}
    (folder / "policy.json").write_text(json.dumps({**card, **(card_changes or {})}))
    if weights:
        with np.load(folder / "weights.npz") as data:
            arrays = {k: data[k] for k in data.files}
        np.savez(folder / "weights.npz", **{**arrays, **weights})
    return folder


def test_a_copy_of_the_shipped_policy_loads(tmp_path):
    assert load_policy(single_policy(tmp_path)).name == "placer-zero-shot"


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04", b"\x00garbage" * 100])
def test_an_empty_or_corrupt_weights_file_is_refused(tmp_path, content):
    folder = single_policy(tmp_path)
    (folder / "weights.npz").write_bytes(content)
    with pytest.raises(PlacerError, match="cannot read .*weights.npz.*truncated or corrupt") as e:
        load_policy(folder)
    assert "allow_pickle" not in str(e.value)  # not numpy's advice to load it unsafely


def test_a_truncated_weights_file_is_refused(tmp_path):
    folder = single_policy(tmp_path)
    data = (folder / "weights.npz").read_bytes()
    (folder / "weights.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(PlacerError, match="truncated or corrupt"):
        load_policy(folder)


def test_weights_of_the_wrong_shape_are_refused(tmp_path):
    with np.load(SHIPPED_POLICY_DIR / "weights.npz") as data:
        embed_w = data["embed_w"][:20]
    with pytest.raises(PlacerError, match=r"embed_w has shape \(20, 64\), expected \(27, 64\)"):
        load_policy(single_policy(tmp_path, weights={"embed_w": embed_w}))


def test_a_card_whose_hidden_disagrees_with_the_weights_is_refused(tmp_path):
    with pytest.raises(PlacerError, match="hidden 32 in the card"):
        load_policy(single_policy(tmp_path, {"hidden": 32}))


def test_weights_that_are_not_finite_are_refused(tmp_path):
    with np.load(SHIPPED_POLICY_DIR / "weights.npz") as data:
        out_w = data["out_w"].copy()
    out_w[0, 0] = np.nan
    with pytest.raises(PlacerError, match=r"not finite .* \['out_w'\]"):
        load_policy(single_policy(tmp_path, weights={"out_w": out_w}))


@pytest.mark.parametrize("changes, message", [
    ({"hidden": "64"}, "hidden must be a positive integer"),
    ({"groups": "x"}, "groups must be a positive integer"),
    ({"groups": 0}, "groups must be a positive integer"),
    ({"kind_groups": "no"}, "kind_groups must be true or false"),
    ({"fine_tuned": 1}, "fine_tuned must be true or false"),
])
def test_card_fields_of_the_wrong_type_are_refused(tmp_path, changes, message):
    with pytest.raises(PlacerError, match=message):
        load_policy(single_policy(tmp_path, changes))


def test_a_card_from_a_later_format_says_to_upgrade(tmp_path):
    with pytest.raises(PlacerError, match="format 2; this version of placer reads format 1"):
        load_policy(single_policy(tmp_path, {"format": 2}))


def test_a_pool_naming_the_parent_folder_is_refused_not_recursed(tmp_path):
    folder = single_policy(tmp_path, {"pool": ["sub"]})
    shutil.copytree(single_policy(tmp_path / "x", {"pool": [".."]}), folder / "sub")
    with pytest.raises(PlacerError, match="pool must be a list of subfolder names"):
        load_policy(folder)


def test_run_folders_are_told_apart_from_policies(tmp_path):
    pretrain_run = tmp_path / "pt"
    shutil.copytree(single_policy(tmp_path), pretrain_run / "policy")
    with pytest.raises(PlacerError, match="pre-training run: its policy is .*pt/policy"):
        load_policy(pretrain_run)
    train_run = tmp_path / "train"
    train_run.mkdir()
    (train_run / "trainer_state.json").write_text("{}")
    with pytest.raises(PlacerError, match="a `placer train` run"):
        load_policy(train_run)


def _saved(folder, name, scale):
    """`save_policy` of the shipped weights times `scale`, under card name `name`."""
    from placer.rl.saved_policy import save_policy

    shipped = load_policy(SHIPPED_POLICY_DIR)
    card = {k: v for k, v in shipped.card.items() if k not in ("pool", "pool_groups")}
    return save_policy(folder, {k: w * scale for k, w in shipped.weights.items()}, {**card, "name": name})


def test_a_save_killed_between_weights_and_card_leaves_the_old_pair(tmp_path):
    """A process killed after writing the new weights, before their card, left them under the old card;
    now the folder keeps the old pair, and the next save clears what the killed one left."""
    import os
    import signal
    import subprocess
    import sys

    folder = tmp_path / "policy"
    _saved(folder, "old", 1.0)
    crash = (f"import os, signal\n"
             f"from placer.rl import saved_policy\n"
             f"from tests.placer.rl.test_saved_policy import _saved\n"
             f"saved_policy.write_atomic = lambda path, data: os.kill(os.getpid(), signal.SIGKILL)  # the card\n"
             f"_saved({str(folder)!r}, 'new', 2.0)\n")
    proc = subprocess.run([sys.executable, "-c", crash], cwd=os.getcwd(), capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    policy = load_policy(folder)
    shipped = load_policy(SHIPPED_POLICY_DIR)
    assert policy.name == "old"
    assert all(np.array_equal(policy.weights[k], shipped.weights[k]) for k in shipped.weights)
    _saved(folder, "new", 2.0)
    policy = load_policy(folder)
    assert policy.name == "new"
    assert all(np.array_equal(policy.weights[k], 2.0 * shipped.weights[k]) for k in shipped.weights)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
    assert sorted(p.name for p in folder.iterdir()) == ["policy.json", "weights.npz"]


def test_a_save_keeps_what_else_the_folder_holds(tmp_path):
    """Pooled policies in subfolders are carried over to the folder that takes the old one's place."""
    folder = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY_DIR, folder)
    pooled = {p.name for p in folder.iterdir() if p.is_dir()}
    card = json.loads((folder / "policy.json").read_text())
    shipped = load_policy(folder)
    from placer.rl.saved_policy import save_policy

    save_policy(folder, shipped.weights, {**card, "version": "next"})
    again = load_policy(folder)
    assert again.version == "next" and {p.name for p in folder.iterdir() if p.is_dir()} == pooled
    assert [m.name for m in again.members] == [m.name for m in shipped.members]


def test_without_an_atomic_exchange_two_renames_swap_and_a_crash_between_them_is_undone(tmp_path, monkeypatch):
    """Where the system cannot exchange two folders, the old one is renamed away first; a save killed before
    the new one took its place left the folder missing, and the next save puts the old one back first."""
    from placer.rl import saved_policy

    monkeypatch.setattr(saved_policy, "_exchange", lambda a, b: False)
    folder = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY_DIR, folder)
    card = json.loads((folder / "policy.json").read_text())
    weights = load_policy(folder).weights
    saved_policy.save_policy(folder, weights, {**card, "version": "next"})
    assert load_policy(folder).version == "next" and sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
    folder.rename(tmp_path / ".policy.old-123")  # killed between the two renames
    saved_policy.save_policy(folder, weights, {**card, "version": "after"})
    again = load_policy(folder)
    assert again.version == "after" and len(again.members) == len(load_policy(SHIPPED_POLICY_DIR).members)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def _saving_while_read(monkeypatch, folder, times: int):
    """Make the next `times` reads of a card trigger a save of a new version (2x, 3x... the shipped weights)
    before the weights are read: a run exporting to the folder the service is loading."""
    from placer.rl import saved_policy

    check, saves = saved_policy._check_card, []

    def check_then_save(card, path):
        check(card, path)
        if path.parent == folder and len(saves) < times:  # (not the shipped policy `_saved` reads)
            saves.append(len(saves) + 2)
            _saved(folder, f"v{saves[-1]}", float(saves[-1]))

    monkeypatch.setattr(saved_policy, "_check_card", check_then_save)
    return saves


def test_a_folder_replaced_while_being_read_is_read_again_never_mixing_two_saves(tmp_path, monkeypatch):
    """The card was read from one save and the weights from the next: the old name over new weights."""
    folder = tmp_path / "policy"
    _saved(folder, "v1", 1.0)
    shipped = load_policy(SHIPPED_POLICY_DIR)
    _saving_while_read(monkeypatch, folder, times=1)
    policy = load_policy(folder)
    assert policy.name == "v2"
    assert all(np.array_equal(policy.weights[k], 2.0 * shipped.weights[k]) for k in shipped.weights)


def test_a_folder_replaced_at_every_read_is_refused_with_a_reason(tmp_path, monkeypatch):
    from placer.rl.saved_policy import READ_ATTEMPTS

    folder = tmp_path / "policy"
    _saved(folder, "v1", 1.0)
    _saving_while_read(monkeypatch, folder, times=READ_ATTEMPTS)
    with pytest.raises(PlacerError, match=f"replaced {READ_ATTEMPTS} times while being read"):
        load_policy(folder)
