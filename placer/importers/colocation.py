"""TensorFlow's colocation constraints as OpGraph colocation keys.

TensorFlow's placer puts together (a) ops whose ``_class`` attribute names
``loc:@other``, and (b) every op that takes a resource handle or a reference
(a variable) as input with the op that produced it: a variable, its reads,
its assigns and its optimizer updates share a device. We union both kinds
of pair and give every group of two or more ops one key: the name of the
variable in the group if there is one, else the group's first op.
"""

from __future__ import annotations

from typing import Any, Iterable

_VARIABLE_TYPES = {"VarHandleOp", "VariableV2", "Variable"}


def _is_handle(dtype: Any) -> bool:
    """True for resource handles and TF1 reference types (both pin consumers)."""
    return dtype.base_dtype.name == "resource" or dtype._is_ref_dtype


def colocation_keys(nodes: Iterable, folded: set[str], parsed: dict, dtypes: dict,
                    variables: dict) -> dict[str, str]:
    """Colocation key of each kept op in a group of two or more.

    Parameters
    ----------
    nodes : the GraphDef's NodeDefs, in graph order.
    folded : names of nodes folded away (they take part in no group).
    parsed : ``{name: ([(producer, output index)], [control producers])}``.
    dtypes : ``{name: [output dtypes]}`` from the imported tf.Graph.
    variables : names of resource placeholders that stand for variables.
    """
    nodes = [n for n in nodes if n.name not in folded]
    parent = {n.name: n.name for n in nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra

    for n in nodes:
        if "_class" in n.attr:
            for loc in n.attr["_class"].list.s:
                target = loc.decode("utf-8", "replace")
                if target.startswith("loc:@") and target[5:] in parent:
                    union(n.name, target[5:])
        for src, k in parsed[n.name][0]:
            if src in parent and k < len(dtypes[src]) and _is_handle(dtypes[src][k]):
                union(n.name, src)

    members: dict[str, list] = {}
    for n in nodes:
        members.setdefault(find(n.name), []).append(n)
    keys: dict[str, str] = {}
    for group in members.values():
        if len(group) < 2:
            continue
        var = next((n for n in group if n.op in _VARIABLE_TYPES or n.name in variables), group[0])
        for n in group:
            keys[n.name] = var.name
    return keys
