"""`service.archives`: zip uploads refused before anything is extracted, and extracted within the limit."""

import io
import stat
import zipfile

import pytest

from placer.errors import PlacerError
from service import archives


def zipped(*members: tuple[str, bytes], link: str | None = None, encrypt_last: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name == link:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, data)
    raw = bytearray(buf.getvalue())
    if encrypt_last:  # zipfile writes no encrypted member: set the flag in the last central directory entry
        raw[raw.rfind(b"PK\x01\x02") + 8] |= 0x1
    return bytes(raw)


SAVED = [("m/saved_model.pb", b"pb"), ("m/variables/variables.index", b"ix")]


def test_a_saved_model_in_one_top_folder_is_found_and_extracted_inside_dest(tmp_path):
    raw = zipped(*SAVED)
    members = archives.checked_members(raw, 1000)
    assert archives.kind_of(members) == ("saved_model", "m/")
    archives.extract(raw, members, tmp_path, 1000)
    assert (tmp_path / "m" / "variables" / "variables.index").read_bytes() == b"ix"


def test_a_keras_file_is_told_from_a_saved_model():
    members = archives.checked_members(zipped(("config.json", b"{}"), ("model.weights.h5", b"h5"),
                                              ("metadata.json", b"{}")), 1000)
    assert archives.kind_of(members) == ("keras", "")


@pytest.mark.parametrize("name, problem", [
    ("../evil", "has a '..' part"),
    ("m/../../evil", "has a '..' part"),
    ("/etc/passwd", "is an absolute path"),
    ("C:/x", "is an absolute path"),
    ("m\\..\\x", "backslash"),
])
def test_members_outside_the_folder_are_refused(name, problem):
    with pytest.raises(PlacerError, match=problem):
        archives.checked_members(zipped(*SAVED, (name, b"x")), 1000)


def test_links_encrypted_and_repeated_members_are_refused():
    with pytest.raises(PlacerError, match="is a link"):
        archives.checked_members(zipped(*SAVED, ("m/l", b"/etc/passwd"), link="m/l"), 1000)
    with pytest.raises(PlacerError, match="is encrypted"):
        archives.checked_members(zipped(*SAVED, ("m/e", b"x"), encrypt_last=True), 1000)
    with pytest.raises(PlacerError, match="appears twice"):
        archives.checked_members(zipped(*SAVED, ("m/saved_model.pb", b"again")), 1000)


def test_a_zip_bomb_is_refused_from_its_declared_sizes():
    bomb = zipped(*SAVED, ("m/zeros", b"\0" * 10_000_000))
    assert len(bomb) < 20_000
    with pytest.raises(archives.ArchiveTooLarge, match="max_inflated_bytes"):
        archives.checked_members(bomb, 1_000_000)


def test_a_member_that_inflates_past_its_declared_size_fails(tmp_path):
    """A lying header: the reader yields no more than declared, then the CRC check fails."""
    raw = bytearray(zipped(*SAVED, ("m/big", b"\0" * 100_000)))
    members = archives.checked_members(bytes(raw), 10**6)
    for m in members:
        if m.filename == "m/big":
            m.file_size = 10  # as a header declaring 10 bytes would say
    with pytest.raises(PlacerError, match="corrupt"):
        archives.extract(bytes(raw), members, tmp_path, 10**6)
    assert (tmp_path / "m" / "big").stat().st_size <= 10


@pytest.mark.parametrize("raw, message", [
    (b"PK\x03\x04 truncated", "not a readable zip archive"),
    (zipped(("m/variables/variables.index", b"ix")), "neither a SavedModel .* nor a .keras file"),
    (zipped(("config.json", b"{}")), "neither a SavedModel"),
    (zipped(("a/saved_model.pb", b""), ("b/saved_model.pb", b"")), "holds 2 SavedModels"),
])
def test_archives_missing_what_they_need_are_refused(raw, message):
    with pytest.raises(PlacerError, match=message):
        archives.kind_of(archives.checked_members(raw, 1000))


def test_too_many_members(monkeypatch):
    monkeypatch.setattr(archives, "MAX_MEMBERS", 3)
    with pytest.raises(PlacerError, match="holds 4 entries; at most 3"):
        archives.checked_members(zipped(*SAVED, ("m/a", b""), ("m/b", b"")), 1000)
