"""The example DAG of the HEFT paper (Topcuoglu, Hariri and Wu 2002, Fig. 2), as an OpGraph.

The paper gives a cost per *edge*; our graphs give a transfer time per op
output. Each edge i -> j therefore becomes i -> relay -> j, where the relay
is a zero-time op colocated with i whose ``transfer_time`` is the edge's
cost: it is free on i's device and costs exactly c_ij to any other one,
which is the paper's communication model.
"""

from __future__ import annotations

from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph

# computation cost of task i on processors P1, P2, P3 (Table 1 of the paper)
HEFT_COSTS = {
    1: (14, 16, 9), 2: (13, 19, 18), 3: (11, 13, 19), 4: (13, 8, 17), 5: (12, 13, 10),
    6: (13, 16, 9), 7: (7, 15, 11), 8: (5, 11, 14), 9: (18, 12, 20), 10: (21, 7, 16),
}
# edge (i, j): communication cost (Fig. 2)
HEFT_EDGES = {
    (1, 2): 18, (1, 3): 12, (1, 4): 9, (1, 5): 11, (1, 6): 14, (2, 8): 19, (2, 9): 16,
    (3, 7): 23, (4, 8): 27, (4, 9): 23, (5, 9): 13, (6, 8): 15, (7, 10): 17, (8, 10): 11, (9, 10): 13,
}
HEFT_MAKESPAN = 80  # the schedule length the paper reports for HEFT (Fig. 3a)
CPOP_MAKESPAN = 86  # and for CPOP (Fig. 3b)
KINDS = ("p1", "p2", "p3")


def heft_paper_graph() -> OpGraph:
    """Tasks n1..n10 first (so ties fall in the paper's order), then one relay per edge."""
    preds: dict[int, list[str]] = {i: [] for i in HEFT_COSTS}
    relays = []
    for (i, j), c in HEFT_EDGES.items():
        relay = f"e{i}_{j}"
        preds[j].append(relay)
        relays.append(Op(relay, "Relay", [f"n{i}"], cost={k: 0.0 for k in KINDS},
                         colocation=f"n{i}", transfer_time=float(c)))
    tasks = [
        Op(f"n{i}", "Task", preds[i], cost=dict(zip(KINDS, map(float, HEFT_COSTS[i]))),
           colocation=f"n{i}", transfer_time=0.0)
        for i in HEFT_COSTS
    ]
    return OpGraph("heft-paper", tasks + relays)


def heft_paper_cluster() -> Cluster:
    """Three processors of distinct kinds; transfers cost what the graph says."""
    devices = [Device(f"P{k + 1}", kind, 1e12, 1e12, 1e12) for k, kind in enumerate(KINDS)]
    return Cluster("heft-paper", devices, default_link=Link(1.0, 0.0))
