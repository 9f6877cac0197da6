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
