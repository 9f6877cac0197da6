"""Zip uploads, checked before anything reads them: a zipped SavedModel folder and a ``.keras`` file.

An archive is refused (422, or 413 when over a limit) before a byte is
extracted when it is not a zip, is encrypted, holds more than `MAX_MEMBERS`
entries, would inflate past the service's ``max_inflated_bytes`` (the sum of
its members' sizes: a zip bomb), or names a member outside the folder it is
extracted to (an absolute path, a ``..`` part, a backslash or drive letter,
a link), twice, or not at all (a SavedModel without ``saved_model.pb``, a
``.keras`` file without its config or weights). Python's zip reader then
yields no member longer than the size it declares (a member that inflates
further fails its CRC check), so extracting stays within the limit too.
"""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Literal

from placer.errors import PlacerError
from service.core.config import limit_named

ZIP_MAGIC = b"PK\x03\x04"
MAX_MEMBERS = 10_000
"""Most entries one archive may hold (a SavedModel has a handful; its variables are sharded in a few files)."""
SAVED_MODEL_PB = "saved_model.pb"
KERAS_MEMBERS = ("config.json", "model.weights.h5")

Kind = Literal["saved_model", "keras"]


class ArchiveTooLarge(Exception):
    """The archive would inflate past the limit (HTTP 413)."""


def is_zip(raw: bytes) -> bool:
    return raw[:4] == ZIP_MAGIC


def checked_members(raw: bytes, max_bytes: int, where: str = "upload") -> list[zipfile.ZipInfo]:
    """The archive's file members, after every check in the module docstring but the kind's own.

    Raises
    ------
    ArchiveTooLarge
        If its members' sizes add up to more than `max_bytes`.
    PlacerError
        If it is not a readable zip, is encrypted, has too many entries, or names a member unsafely or twice.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as e:
        raise PlacerError(f"{where}: not a readable zip archive ({e})") from None
    if len(infos) > MAX_MEMBERS:
        raise PlacerError(f"{where}: the archive holds {len(infos)} entries; at most {MAX_MEMBERS} are taken")
    total = 0
    seen: set[str] = set()
    files = []
    for info in infos:
        name = info.filename
        problem = _unsafe(name, info)
        if problem:
            raise PlacerError(f"{where}: archive member {name!r} {problem}; it must lie inside the archive's "
                              "folder")
        if info.flag_bits & 0x1:
            raise PlacerError(f"{where}: archive member {name!r} is encrypted")
        key = name.rstrip("/")
        if key in seen:
            raise PlacerError(f"{where}: archive member {name!r} appears twice")
        seen.add(key)
        if info.is_dir():
            continue
        total += info.file_size
        if total > max_bytes:
            raise ArchiveTooLarge(f"{where}: the archive inflates to more than {max_bytes} bytes "
                                  f"{limit_named('max_inflated_bytes')}")
        files.append(info)
    return files


def _unsafe(name: str, info: zipfile.ZipInfo) -> str | None:
    """Why extracting member `name` could write outside its folder, or None."""
    if not name or "\\" in name or "\x00" in name:
        return "has a backslash or an empty or NUL name"
    path = PurePosixPath(name)
    if path.is_absolute() or (path.parts and ":" in path.parts[0]):
        return "is an absolute path"
    if ".." in path.parts:
        return "has a '..' part"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "is a link"
    return None


def kind_of(members: list[zipfile.ZipInfo], where: str = "upload") -> tuple[Kind, str]:
    """What the archive holds: ``("keras", "")``, or ``("saved_model", FOLDER)`` with the folder inside the
    archive that holds ``saved_model.pb`` (``""`` at the top, or one top-level folder).

    Raises
    ------
    PlacerError
        If it holds neither, naming what is missing.
    """
    names = {m.filename for m in members}
    if set(KERAS_MEMBERS) <= names:
        return "keras", ""
    if SAVED_MODEL_PB in names:
        return "saved_model", ""
    folders = sorted(n[: -len(SAVED_MODEL_PB)] for n in names
                     if n.endswith("/" + SAVED_MODEL_PB) and n.count("/") == 1)
    if len(folders) == 1:
        return "saved_model", folders[0]
    if len(folders) > 1:
        raise PlacerError(f"{where}: the archive holds {len(folders)} SavedModels ({', '.join(folders)}); "
                          "upload one")
    raise PlacerError(f"{where}: the zip archive is neither a SavedModel (no {SAVED_MODEL_PB} at its top or in "
                      f"one top-level folder) nor a .keras file (no {' and '.join(KERAS_MEMBERS)})")


def extract(raw: bytes, members: list[zipfile.ZipInfo], dest: Path, max_bytes: int) -> None:
    """Write `members` (from `checked_members`) under `dest`, stopping past `max_bytes` in all.

    Raises
    ------
    ArchiveTooLarge
        If the members inflate past `max_bytes` after all.
    PlacerError
        If a member is corrupt (its data fails the CRC check).
    """
    written = 0
    root = dest.resolve()
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        for info in members:
            target = (dest / info.filename).resolve()
            if root not in target.parents:  # checked_members ensures it; a second look costs nothing
                raise PlacerError(f"upload: archive member {info.filename!r} lies outside the archive's folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as src, open(target, "wb") as out:
                    while chunk := src.read(1 << 20):
                        written += len(chunk)
                        if written > max_bytes:
                            raise ArchiveTooLarge(f"upload: the archive inflates to more than {max_bytes} bytes "
                                                  f"{limit_named('max_inflated_bytes')}")
                        out.write(chunk)
            except (zipfile.BadZipFile, zlib.error, EOFError) as e:
                raise PlacerError(f"upload: archive member {info.filename!r} is corrupt ({e})") from None

