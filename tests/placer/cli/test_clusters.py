"""`placer clusters`."""

import json


def test_lists_presets_as_json(cli):
    r = cli("clusters", "--json")
    names = [c["name"] for c in json.loads(r.out)]
    assert r.code == 0 and {"2gpu", "4gpu", "8gpu", "4gpu-nvlink", "local"} <= set(names)


def test_one_preset(cli):
    r = cli("clusters", "local:4")
    assert r.code == 0 and len(json.loads(r.out)["devices"]) == 4


def test_unknown(cli):
    r = cli("clusters", "nope")
    assert r.code == 1 and "unknown cluster preset" in r.err


def test_table_aligns_the_local_pattern(cli):
    """``local:N`` is a row of the table, its columns under the others'."""
    r = cli("clusters")
    lines = r.out.splitlines()
    header, local_n = lines[0], next(line for line in lines if line.startswith("local:N"))
    assert local_n.index("N cpu-local") == header.index("devices")
    assert local_n.index("N logical CPU devices") == header.index("description")


def test_empty_name_is_no_preset(cli):
    r = cli("clusters", "")
    assert r.code == 1 and "unknown cluster preset" in r.err
