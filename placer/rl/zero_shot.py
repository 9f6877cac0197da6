"""Zero-shot placement: a pre-trained policy places a graph it has never seen, with no training.

Group the graph, compute its size-free features, run the policy's forward
pass (`placer.rl.numpy_policy`, no TensorFlow) and expand the groups' devices
to ops. Two decodings:

- greedy (``samples=0``): the most likely device for every group; the same
  graph, cluster and policy always give the same placement;
- best-of-K (``samples=K``): the greedy placement plus K sampled ones, all
  scored in one batch by the simulator, the fastest that fits returned
  (seeded, so also repeatable). Samples are drawn at the policy's sampling
  temperature (its card's ``sampling``, chosen on validation graphs by
  `placer.rl.sampling`): a confident policy's samples at temperature 1 are
  mostly the greedy placement again.

A policy with pooled policies (`placer.rl.saved_policy.SavedPolicy.pooled`;
the shipped one pools its main policy with members trained on critical-path
groups, on convolutional graphs and on sequence models, and all four again at
64 groups, its card's ``pool`` and ``pool_groups``: eight members) answers with
the fastest of its members' placements, each member grouping the graph as it
was trained to. The K samples are drawn in two rounds: `EXPLORE_SHARE` of
them split evenly among the members, the rest by the member whose placement
was fastest after the first round (which member suits a graph is what the
first round tells; a lone member's samples are then not diluted by the
others'). Greedy decoding is the fastest of the members' greedy placements,
still repeatable.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from placer.cluster import Cluster, machine_of
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.rl.features import DecodeContext, decode_context, device_features, group_features
from placer.grouping import Grouping, group_graph_fitting
from placer.rl.numpy_policy import decode
from placer.rl.saved_policy import SavedPolicy
from placer.simulator import Simulator

MAX_SAMPLES = 1024
DEFAULT_SAMPLES = 256
"""K of the service's instant answer and of a fine-tune's start, shared among a pool's members. The answer's
time grows with K (every sample is decoded and simulated, in one batch with the members' greedy placements),
and K is as large as keeps a 10k-op graph near the one-second target on two cores (measured in
docs/pretrained-policy.md). Bigger graphs get fewer by default (`default_samples`)."""
SAMPLED_OPS = DEFAULT_SAMPLES * 24_576
"""The most ops the default samples simulate in all (K x the graph's ops): a graph of up to 24,576 ops gets
`DEFAULT_SAMPLES`, a bigger one fewer, so that the answer for 100k ops stays within the scale target's 3 s
on two cores; there each sample costs tens of milliseconds, and the greedy placement alone about 2 s
(docs/experiments/rl-defaults.md)."""
MIN_DEFAULT_SAMPLES = 16
EXPLORE_SHARE = 0.25
"""The share of a pool's K samples split evenly among its members; the rest go to the member answering fastest
after them. Chosen on the pairs that are not the test set: the validation graphs on the presets and on two
clusters no member trained on (docs/experiments/pretrained-policy.md, "Samples in two rounds")."""


def default_samples(num_ops: int) -> int:
    """K of the default best-of-K for a graph of `num_ops` ops: `DEFAULT_SAMPLES`, fewer past `SAMPLED_OPS`
    (at least `MIN_DEFAULT_SAMPLES`). An explicit K is always taken as given."""
    return int(min(DEFAULT_SAMPLES, max(MIN_DEFAULT_SAMPLES, SAMPLED_OPS // max(int(num_ops), 1))))


def place_zero_shot(graph: OpGraph, cluster: Cluster, policy: SavedPolicy, *, samples: int = 0, seed: int = 0,
                    groups: int | None = None, method: str = "rl", steer: bool = False) -> Placement:
    """Place `graph` on `cluster` with a trained policy, without training.

    Parameters
    ----------
    graph, cluster : what to place, and where.
    policy : a saved policy (`placer.rl.saved_policy.load_policy`); with pooled policies
        (`SavedPolicy.pooled`) each member places the graph on its own groups, with its share of the
        first round's samples (`pool_shares` of `exploring_samples`); the fastest member then draws the
        rest, and the fastest of all their placements is the answer.
    samples : 0 for greedy decoding; K > 0 for the best of greedy plus K samples.
    seed : seeds the samples.
    groups : G, the most groups, for every member (default: each member's own G).
    method : the placement's ``method`` field.
    steer : also let the policy's placements steer HEFT and CPOP op by op (`placer.rl.steering`), and answer
        the fastest; ``meta.steered`` says what it gave.

    Returns
    -------
    Placement
        Scored by the simulator; ``meta`` holds the policy that placed it (name, version,
        fine-tuned or not; ``pool`` and ``pool_member`` with pooled policies), the decoding, the K and
        seed of the candidates the answer is one of (``member_samples``, ``member_seed``:
        `candidate_placements` of the member gives them again), the group count and the seconds spent.

    Raises
    ------
    PlacerError
        On a bad `samples`, or a cluster with more devices than the policy can address.
    """
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or not 0 <= samples <= MAX_SAMPLES:
        raise PlacerError(f"rl: samples must be an integer from 0 (greedy) to {MAX_SAMPLES}, got {samples!r}")
    for member in policy.members:
        max_devices = member.weights["dev_slot"].shape[0]
        if len(cluster) > max_devices:
            raise PlacerError(f"cluster {cluster.name!r} has {len(cluster)} devices; the policy handles at most "
                              f"{max_devices}")
    if on_one_machine(cluster, policy):
        return _place_on_one_node(graph, cluster, policy, samples=samples, seed=seed, groups=groups, method=method,
                                  steer=steer)
    return _place_on_all(graph, cluster, policy, samples=samples, seed=seed, groups=groups, method=method,
                         steer=steer)[0]


def _place_on_all(graph: OpGraph, cluster: Cluster, policy: SavedPolicy, *, samples: int, seed: int,
                  groups: int | None, method: str, steer: bool = False) -> tuple[Placement, np.ndarray]:
    """`place_zero_shot` over all of `cluster`'s devices, and the policy's own answer (device per op): with
    `steer` the placement may be a steered schedule instead."""
    t0 = time.perf_counter()
    sim = Simulator(graph, cluster)
    first_round = exploring_samples(policy, samples)
    shares = pool_shares(policy, first_round, seed)
    keys = [(groups or m.groups, m.kind_groups, m.balanced_groups, m.critical_groups, m.load_aware)
            for m, _, _ in shares]  # members that group alike (the critical-path members) share one grouping
    made: dict[tuple, tuple] = {}
    candidates: list[np.ndarray] = [np.zeros(0)] * len(shares)
    scored: dict[tuple, Future] = {}
    screen = Screen(sim)
    grouping_seconds = 0.0
    # a grouping's candidates are simulated (compiled code, without the GIL) while the next is grouped and decoded
    with ThreadPoolExecutor(max_workers=1) as simulator_thread:
        for key in dict.fromkeys(keys):
            members = [j for j, key_j in enumerate(keys) if key_j == key]
            tg = time.perf_counter()
            made[key] = grouped(graph, cluster, sim, shares[members[0]][0], groups)
            grouping_seconds += time.perf_counter() - tg
            grouping, feats, devs, context = made[key]
            for j in members:
                member, k, member_seed = shares[j]
                candidates[j] = candidate_placements(member, feats, devs, k, member_seed, context)
            if samples > 0 or len(shares) > 1:
                scored[key] = simulator_thread.submit(screen.scores, grouping, [candidates[j] for j in members])
        scores = {key: future.result() for key, future in scored.items()}
    answers = []  # per member: (grouping, candidates, step times, oom)
    for key, c in zip(keys, candidates):
        step_time, oom = scores[key].pop(0) if scores else (np.zeros(1), np.zeros(1, dtype=bool))
        answers.append((made[key][0], c, step_time, oom))
    best = [fastest(step_time, oom) for _, _, step_time, oom in answers]  # each member's answer
    j = fastest(np.array([step_time[k] for (_, _, step_time, _), k in zip(answers, best)]),
                np.array([oom[k] for (_, _, _, oom), k in zip(answers, best)]))  # the fastest of them
    grouping, candidates, step_time, oom = answers[j]
    k, (member, member_samples, member_seed) = best[j], shares[j]
    rest = samples - first_round
    if rest > 0:  # the second round: the rest of the samples, drawn by the member answering fastest
        _, feats, devs, context = made[keys[j]]
        second_seed = seed + len(shares)  # after the first round's seeds
        more = candidate_placements(member, feats, devs, rest, second_seed, context)
        more_time, more_oom = screen.scores(grouping, [more])[0]
        answers.append((grouping, more, more_time, more_oom))
        m = fastest(more_time, more_oom)
        if (more_oom[m], more_time[m]) < (oom[k], step_time[k]):
            candidates, k, member_samples, member_seed = more, m, rest, second_seed
    chosen = "greedy" if k == 0 else f"sample {k - 1} of {member_samples}"
    t2 = time.perf_counter()
    own = assignment = grouping.expand(candidates[k])
    steered = None
    if steer:
        from placer.rl.steering import DEPTHS, steer as steered_by

        assignment, steered = steered_by(graph, cluster, sim, proposals(answers, own, max(DEPTHS)))
    placement = Placement.from_assignment(graph, cluster, assignment, method)
    placement = sim.evaluate(placement)
    decoding = ("greedy" if samples == 0 else
                f"best of greedy + {member_samples} samples at temperature {member.sampling_temperature:g} "
                f"(seed {member_seed})")
    if len(shares) > 1:
        decoding += (f" (the fastest of {len(shares)} pooled policies' greedy placements)" if samples == 0 else
                     f", the fastest of {len(shares)} pooled policies' answers ({samples} samples in all"
                     + (f", the last {rest} by the fastest after the first {first_round})" if rest > 0 else ")"))
    placement.meta.update({
        "policy": member.describe(), "decoding": decoding, "chosen": chosen, "groups": grouping.num_groups,
        "member_samples": int(member_samples), "member_seed": int(member_seed),
        "training_steps": 0,
        "seconds": {"grouping_and_features": grouping_seconds, "decoding": t2 - t0 - grouping_seconds,
                    "total": time.perf_counter() - t0},
    })
    if policy.pooled:
        placement.meta.update({"pool": [f"{m.name} v{m.version} ({m.groups} groups)" for m in policy.members],
                               "pool_member": j})
    if steered is not None:
        placement.meta["steered"] = steered
        placement.meta["seconds"]["total"] = time.perf_counter() - t0
    return placement, own


def proposals(answers: list[tuple[Grouping, np.ndarray, np.ndarray, np.ndarray]], answer: np.ndarray,
              count: int) -> list[np.ndarray]:
    """`answer` (device per op), then other placements of `answers` (``(grouping, placements of its groups,
    step times, oom)`` per member and round), `count` distinct ones in all, as `placer.rl.steering.steer` takes
    them: each member's first, then each one's second, and so on, so that the members' different ideas propose
    devices (one member's samples are much alike). A member's placements come by the step times the `Screen`
    left them: those it simulated to the end by step time, then those it cut short as slower than the fastest
    so far (most of them; their time is ``inf``) in the order drawn, greedy first."""
    from placer.rl.steering import distinct

    ranked = [np.lexsort((t, o)) for _, _, t, o in answers]
    picks = [(j, ranked[j][r]) for r in range(2 * count) for j in range(len(answers)) if r < len(ranked[j])]
    # twice as many as needed: duplicates (a confident policy samples its greedy placement again) are dropped
    return distinct([answer] + [answers[j][0].expand(answers[j][1][k]) for j, k in picks[:2 * count]], count)


def on_one_machine(cluster: Cluster, policy: SavedPolicy) -> bool:
    """Whether `place_zero_shot` places on one machine of `cluster` first: it has several machines
    (`Cluster.nodes`), more devices than any cluster `policy` trained on, machines no bigger than those, and
    the one chosen has more than one device."""
    nodes = cluster.nodes()
    if len(nodes) < 2:
        return False
    trained = trained_devices(policy)
    return len(cluster) > trained >= max(len(n) for n in nodes) and len(_chosen_machine(cluster, nodes)) > 1


def _chosen_machine(cluster: Cluster, nodes: list[list[int]]) -> list[int]:
    """The machine with the most GPU FLOP/s, the first among equals."""
    return max(nodes, key=lambda n: sum(cluster.devices[i].peak_flops for i in n if cluster.devices[i].kind == "gpu"))


def trained_devices(policy: SavedPolicy) -> int:
    """The most devices of any cluster a member trained on (the presets its card names): device slots past
    that were never trained. Unbounded when the cards name none."""
    from placer import presets

    names = {c for m in policy.members for c in (m.card.get("trained_on") or {}).get("clusters") or []}
    sizes = [len(presets.get(c)) for c in sorted(names) if presets.is_preset(c)]
    return max(sizes) if sizes else sys.maxsize


def _place_on_one_node(graph: OpGraph, cluster: Cluster, policy: SavedPolicy, *, samples: int, seed: int,
                       groups: int | None, method: str, steer: bool = False) -> Placement:
    """Zero-shot placement on a cluster of several machines, more devices than the policy trained on.

    The policy places the graph on one machine (the one with the most GPU FLOP/s, the first among equals),
    whose devices it reads as a cluster it knows; on devices past the ones it trained on it places worse
    than that (docs/experiments/pretrained-policy.md, "Two machines"). When the machines are alike, the
    same placement is also folded over all of them: a k-way METIS cut of the graph, each part on its machine's
    devices as the one-machine placement has them. The faster of the two on the whole cluster is the answer;
    when both run out of memory (a graph too big for one machine), the placement on all the devices is made
    too, and the one that fits is the answer.
    """
    t0 = time.perf_counter()
    nodes = cluster.nodes()
    node = _chosen_machine(cluster, nodes)
    machine = cluster.restricted(node)
    # with steer, the steered answer on the machine and the policy's own beside it: steering is judged on the
    # whole cluster, folded or not, where the faster on one machine may not be the faster
    one, own = _place_on_all(graph, machine, policy, samples=samples, seed=seed, groups=groups, method=method,
                             steer=steer)
    locals_ = [own] + ([np.array([machine.index[one.devices[op.name]] for op in graph.ops], dtype=np.int64)]
                       if steer else [])
    candidates, made = [], []  # made: (which of `locals_`, folded)
    for j, local in enumerate(locals_):
        candidates.append(np.asarray(node, dtype=np.int64)[local])
        made.append((j, False))
        if _alike(cluster, nodes):
            candidates.append(_folded(graph, cluster, nodes, local))
            made.append((j, True))
    sim = Simulator(graph, cluster)
    res = sim.run_batch(np.stack(candidates))
    k = fastest(res.step_time, res.oom)
    if res.oom[k]:  # too big for one machine, however folded: the devices of all of them
        whole = _place_on_all(graph, cluster, policy, samples=samples, seed=seed, groups=groups, method=method,
                              steer=steer)[0]
        if not whole.oom or whole.step_time < res.step_time[k]:
            return whole
    folded = made[k][1]
    placement = sim.evaluate(Placement.from_assignment(graph, cluster, candidates[k], method))
    placement.meta.update({key: value for key, value in one.meta.items() if key != "steered"})
    placement.meta.update({
        "machine": machine_of(cluster.devices[node[0]].name),
        "spread": ("one machine's placement folded over the machines alike by a METIS cut" if folded
                   else "on one machine"),
        "seconds": {**one.meta["seconds"], "total": time.perf_counter() - t0},
    })
    if steer:  # its schedules were timed on the machine; the answer and the unsteered one on the whole cluster
        rows = [i for i, (j, _) in enumerate(made) if j == 0]
        unsteered = rows[fastest(res.step_time[rows], res.oom[rows])]
        placement.meta["steered"] = {**one.meta["steered"], "schedules_on": placement.meta["machine"],
                                     "unsteered_step_time": float(res.step_time[unsteered]),
                                     "chosen": one.meta["steered"]["chosen"] if made[k][0] == 1 else None}
    return placement


def _alike(cluster: Cluster, nodes: list[list[int]]) -> bool:
    """Whether every machine has the same devices in the same order (kind, speed, memory)."""
    def spec(n):
        return [(cluster.devices[i].kind, cluster.devices[i].peak_flops, cluster.devices[i].memory_bytes) for i in n]
    return all(spec(n) == spec(nodes[0]) for n in nodes[1:])


def _folded(graph: OpGraph, cluster: Cluster, nodes: list[list[int]], local: np.ndarray) -> np.ndarray:
    """`local` (a device index within a machine per op) repeated on every machine, each taking the ops of its
    part of a METIS cut of the graph that balances GPU compute and cuts the fewest bytes."""
    from placer.placers.common import Problem
    from placer.placers.metis import partition_units

    problem = Problem.build(graph, cluster)
    gpus = [i for i, d in enumerate(cluster.devices) if d.kind == "gpu"] or list(range(len(cluster)))
    unit_cost = np.bincount(problem.unit, weights=problem.times[:, gpus].min(axis=1), minlength=problem.num_units)
    machine_of = np.zeros(problem.num_units, dtype=np.int64)
    if problem.num_units >= len(nodes):  # METIS makes no empty part
        machine_of = partition_units(problem, len(nodes), unit_cost)[1]
    return np.asarray(nodes, dtype=np.int64)[machine_of[problem.unit], local]


def exploring_samples(policy: SavedPolicy, samples: int) -> int:
    """How many of K samples a policy's members share in the first round: all of K without a pool,
    `EXPLORE_SHARE` of it with one (at least one per member)."""
    if not policy.pooled or samples == 0:
        return samples
    return min(samples, max(len(policy.members), round(samples * EXPLORE_SHARE)))


def pool_shares(policy: SavedPolicy, samples: int, seed: int) -> list[tuple[SavedPolicy, int, int]]:
    """``(member, samples, seed)`` for each of a policy's members: the K samples split evenly (the first
    members take the remainder), member j's seeded ``seed + j``. A policy without a pool keeps all of K."""
    m = len(policy.members)
    return [(member, samples // m + (j < samples % m), seed + j) for j, member in enumerate(policy.members)]


def grouped(graph: OpGraph, cluster: Cluster, sim: Simulator, policy: SavedPolicy, groups: int | None = None
            ) -> tuple[Grouping, np.ndarray, np.ndarray, DecodeContext | None]:
    """The groups `policy` places `graph` in (as it was trained to group), and what it reads of them:
    ``(grouping, group features, device features, decode context or None)``; on more groups than asked
    where the graph's tensors are too big for so few (`group_graph_fitting`)."""
    grouping = group_graph_fitting(graph, cluster, groups or policy.groups, sim.times,
                                   split_kinds=policy.kind_groups, balanced=policy.balanced_groups,
                                   split_critical=policy.critical_groups)
    context = decode_context(graph, cluster, grouping, sim.times) if policy.load_aware else None
    return grouping, group_features(graph, cluster, grouping, sim.times), device_features(cluster), context


class Screen:
    """Step times of candidate placements, screened against the fastest so far: a candidate sure to be
    slower than a placement already simulated that fits in memory is not simulated to its end
    (`Simulator.run_batch`'s cutoff; its step time is then ``inf``), so the fastest is found, the same one,
    for less work. Used from one thread at a time (one grouping's candidates after another's)."""

    def __init__(self, sim: Simulator):
        self.sim = sim
        self.cutoff = np.inf  # the step time of the fastest placement so far that fits

    def scores(self, grouping: Grouping, candidates: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(step time, oom)`` of each row of each array of placements of `grouping`'s groups, first rows
        (the greedy placements) first, so that they set the cutoff for the rest; each distinct placement
        is simulated once (a confident policy samples its greedy placement again; members that group
        alike may propose the same placement)."""
        rows, inverse = np.unique(np.concatenate(candidates), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        cut = np.cumsum([len(c) for c in candidates])[:-1]
        first = np.zeros(len(rows), dtype=bool)
        first[inverse[np.concatenate([[0], cut])]] = True
        step_time, oom = np.empty(len(rows)), np.empty(len(rows), dtype=bool)
        for which in (first, ~first):
            if which.any():
                res = self.sim.run_batch(grouping.expand(rows[which]), cutoff=self.cutoff)
                step_time[which], oom[which] = res.step_time, res.oom
                fits = res.step_time[~res.oom]
                self.cutoff = min(self.cutoff, fits.min(initial=np.inf))
        return [(step_time[ix], oom[ix]) for ix in np.split(inverse, cut)]


def candidate_placements(policy: SavedPolicy, group_feats: np.ndarray, device_feats: np.ndarray, samples: int,
                         seed: int, context: DecodeContext | None = None) -> np.ndarray:
    """Placements of groups to choose among ``[1 + samples, G]``: the greedy one, then `samples` seeded samples.

    Shared by the zero-shot answer and a fine-tune's start, so both choose among the same placements.
    Samples are drawn at ``policy.sampling_temperature``; `context` is needed by a load-aware policy.
    """
    if samples == 0:
        return decode(policy.weights, group_feats, device_feats, 1, greedy=True, context=context)[0]
    return decode(policy.weights, group_feats, device_feats, 1 + samples, greedy=False,
                  rng=np.random.default_rng(seed), temperature=policy.sampling_temperature, context=context,
                  greedy_rows=1)[0]


def fastest(step_time: np.ndarray, oom: np.ndarray) -> int:
    """Index of the fastest placement that fits in memory (of the fastest overall when none fits)."""
    return int(np.lexsort((step_time, oom))[0])
