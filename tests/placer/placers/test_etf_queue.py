"""`placer.placers.etf_queue`: a device column's ready ops give the pair a scan of all of them gives."""

import random

from placer.placers.etf_queue import ColumnQueue


def scan(ops, value, neg_level, topo, free, room, roomiest, pinned, unit, need, device, exclude):
    """The least (est, -level, topo_rank, column, op) by looking at every op, as the scheduler did."""
    keys = []
    for j in ops:
        p = pinned[unit[j]]
        if j == exclude or (p >= 0 and p != device) or (p < 0 and not roomiest and need[j] > room):
            continue
        keys.append((max(value[j], free), neg_level[j], topo[j], 0, j))
    return min(keys, default=None)


def test_the_queue_gives_the_scans_op_through_new_values_pins_room_and_starts():
    """Random steps: values change (a new version), units get pinned here or elsewhere, the room
    shrinks and grows, the device's free time grows, ops leave; after each, `best` equals the scan."""
    rng = random.Random(0)
    for trial in range(30):
        n, units = 40, 12
        unit = [rng.randrange(units) for _ in range(n)]
        pinned = [-1] * units
        version = [0] * n
        need = [float(rng.choice([1, 2, 4, 8])) for _ in range(n)]
        neg_level = [-float(rng.randrange(5)) for _ in range(n)]
        topo = rng.sample(range(n), n)
        value = [float(rng.randrange(10)) for _ in range(n)]
        q = ColumnQueue(0, 3, version, pinned, unit, need)
        free = 0.0
        ready = set(range(n))
        for j in ready:
            q.push(value[j], neg_level[j], topo[j], j, free)
        for _ in range(60):
            move = rng.randrange(5)
            j = rng.randrange(n)
            if move == 0 and j in ready:  # a new value
                version[j] += 1
                value[j] = float(rng.randrange(15))
                q.push(value[j], neg_level[j], topo[j], j, free)
            elif move == 1 and pinned[unit[j]] < 0:  # its unit pinned here (pushed again) or elsewhere
                pinned[unit[j]] = rng.choice([3, 5])
                for i in ready:
                    if unit[i] == unit[j]:
                        version[i] += 1
                        if pinned[unit[j]] == 3:
                            q.push(value[i], neg_level[i], topo[i], i, free)
            elif move == 2 and j in ready:  # it starts
                ready.discard(j)
                version[j] += 1
            elif move == 3:
                free += rng.randrange(3)
            room = float(rng.choice([0, 1, 3, 8]))
            roomiest = rng.random() < 0.2
            exclude = rng.choice([-1, j])
            want = scan(ready, value, neg_level, topo, free, room, roomiest, pinned, unit, need, 3, exclude)
            assert q.best(free, room, roomiest, exclude) == want, (trial, move)
