"""Exact minimum-cost flow for the planner's small network models, in pure Python with integer costs.

The caller builds a network, sends every unit of supply along its cheapest arc (a greedy start that is
already optimal for the imbalance it leaves) and gives node potentials that make every residual arc's
reduced cost non-negative. Successive shortest paths (Dijkstra over reduced costs) then move only what the
greedy start got wrong: excess at nodes whose outgoing bounds are exceeded, to nodes short of their lower
bounds. Integer costs make the optimum exact, so lexicographic objectives can be folded into one cost.
"""

from __future__ import annotations

import heapq


class FlowNetwork:
    """Nodes with supplies, arcs with bounds ``low <= flow <= high`` and an integer cost per unit."""

    def __init__(self) -> None:
        self.supply: list[int] = []
        self.potential: list[int] = []
        self.adjacency: list[list[int]] = []
        # Residual arcs in pairs: 2a is arc a forward, 2a + 1 its reverse.
        self.head: list[int] = []
        self.residual: list[int] = []
        self.cost: list[int] = []

    def node(self, supply: int = 0, potential: int = 0) -> int:
        """A new node; positive supply is produced there, negative supply consumed."""
        self.supply.append(supply)
        self.potential.append(potential)
        self.adjacency.append([])
        return len(self.supply) - 1

    def arc(self, tail: int, head: int, low: int, high: int, cost: int, flow: int) -> int:
        """A new arc carrying ``flow`` (within its bounds) to start with; returns its id."""
        index = len(self.head) // 2
        # Appends, not extend((a, b)): no tuple per arc (tens of thousands per model).
        self.head.append(head)
        self.head.append(tail)
        self.residual.append(high - flow)
        self.residual.append(flow - low)
        self.cost.append(cost)
        self.cost.append(-cost)
        forward = 2 * index
        self.adjacency[tail].append(forward)
        self.adjacency[head].append(forward + 1)
        if flow:  # most arcs start empty: no supply to rewrite (two boxed ints less, once compiled)
            self.supply[tail] -= flow
            self.supply[head] += flow
        return index

    def flow(self, arc: int, low: int = 0) -> int:
        """The flow an arc carries now (``low`` is the lower bound it was created with)."""
        return self.residual[2 * arc + 1] + low

    def solve(self) -> bool:
        """Route every remaining excess to the nodes short of flow at least cost; False if that is impossible.

        Requires non-negative reduced costs ``cost + potential[tail] - potential[head]`` on every residual arc.
        """
        excess = self.supply  # supply not yet routed: > 0 excess, < 0 deficit
        potential, adjacency, head, residual, cost = self.potential, self.adjacency, self.head, self.residual, self.cost
        sources = {v for v, amount in enumerate(excess) if amount > 0}
        heappush, heappop = heapq.heappush, heapq.heappop
        n = len(excess)
        while True:
            if not sources:
                return True
            # Lists indexed by node, not dicts: these networks are small and rebuilt per search. Distances are ints
            # (reduced costs are >= 0), -1 where none is known yet: no int/float comparison (slow compiled).
            # A settled node's distance d is stored as -2 - d: one list tells unknown (-1), tentative (>= 0) and
            # settled (<= -2) apart, one read per arc instead of two.
            distance = n * [-1]
            parent = n * [-1]
            order: list[int] = []
            # Entries are d * n + node, one int ordering exactly as the pair (d, node) would (0 <= node < n, floor
            # division for any d): cheaper to compare than tuples, and the nodes settle in the same order.
            heap = sorted(sources)
            for v in sources:
                distance[v] = 0
            target = -1
            d = 0
            while heap:
                key = heappop(heap)
                d = key // n  # not divmod(): a tuple per pop
                u = key - d * n
                if distance[u] < -1:
                    continue
                distance[u] = -2 - d
                order.append(u)
                if excess[u] < 0:
                    target = u
                    break
                base = d + potential[u]  # integers: the same sums in any order
                for a in adjacency[u]:
                    if residual[a] > 0:
                        v = head[a]
                        dv = distance[v]
                        if dv >= -1:
                            nd = base + cost[a] - potential[v]
                            if dv < 0 or nd < dv:
                                distance[v] = nd
                                parent[v] = a
                                heappush(heap, nd * n + v)
            if target < 0:
                return False
            # Raising every potential by min(distance, reach) keeps reduced costs non-negative; shifted by -reach,
            # only the settled nodes change.
            reach = d
            for v in order:
                potential[v] += -2 - distance[v] - reach
            amount = -excess[target]
            v = target
            while parent[v] >= 0:
                a = parent[v]
                amount = min(amount, residual[a])
                v = head[a ^ 1]
            amount = min(amount, excess[v])
            excess[v] -= amount
            if excess[v] == 0:
                sources.discard(v)
            excess[target] += amount
            v = target
            while parent[v] >= 0:
                a = parent[v]
                residual[a] -= amount
                residual[a ^ 1] += amount
                v = head[a ^ 1]

    def solve_in_phases(self) -> bool:
        """solve()'s optimum (possibly another of equal cost), one Dijkstra per phase instead of per path.

        Primal-dual: each phase settles every node as near as the nearest deficit, raises the potentials so that
        every shortest path to a deficit is made of zero reduced-cost arcs, then routes as much excess as a
        depth-first search finds along such arcs (any of them is a shortest path, so optimality is kept). For the
        large standby models, where one search per unit of excess costs seconds.
        """
        excess = self.supply
        potential, adjacency, head, residual, cost = self.potential, self.adjacency, self.head, self.residual, self.cost
        heappush, heappop = heapq.heappush, heapq.heappop
        n = len(excess)
        while True:
            sources = [v for v in range(n) if excess[v] > 0]
            if not sources:
                return True
            distance = n * [-1]  # as in solve(): -1 unknown, >= 0 tentative, -2 - d once settled at d
            order: list[int] = []
            heap = list(sources)  # d * n + node with d = 0, as in solve(); already sorted
            for v in sources:
                distance[v] = 0
            reach = -1  # the nearest deficit's distance, once one is settled
            # Nodes reached at the distance being settled (over an arc of zero reduced cost, most of them in a far
            # phase) wait on a stack instead of the heap: any order among equal distances settles the same
            # distances, and only they (not the order) reach the potentials and the passes.
            level: list[int] = []
            d = 0
            while heap or level:
                if level:
                    u = level.pop()
                else:
                    key = heappop(heap)
                    d = key // n
                    u = key - d * n
                    if distance[u] < -1:
                        continue
                    if 0 <= reach < d:
                        break  # every node as near as the nearest deficit is settled: the phase's shortest paths
                distance[u] = -2 - d
                order.append(u)
                if excess[u] < 0 and reach < 0:
                    reach = d
                base = d + potential[u]
                for a in adjacency[u]:
                    if residual[a] > 0:
                        v = head[a]
                        dv = distance[v]
                        if dv >= -1:
                            nd = base + cost[a] - potential[v]
                            if dv < 0 or nd < dv:
                                distance[v] = nd
                                if nd == d:
                                    level.append(v)
                                else:
                                    heappush(heap, nd * n + v)
            if reach < 0:
                return False
            short = 0  # deficit left on settled nodes: the only places a pass can route to
            done = n * [False]
            for v in order:
                potential[v] += -2 - distance[v] - reach
                done[v] = True
                if excess[v] < 0:
                    short -= excess[v]
            # A depth-first pass can give a node up only because the path it was on blocked it (zero-cost cycles):
            # passes repeat while they route something, cheaper than the next phase's Dijkstra finding the same.
            # Once no settled deficit is left nothing more can be routed: the pass stops, and no pass follows.
            hopeless = self._cannot_reach_deficit(order, done)
            while short > 0:
                routed = self._route_along_zero_arcs(sources, done, short, hopeless)
                if not routed:
                    break
                short -= routed
                sources = [v for v in sources if excess[v] > 0]

    def _cannot_reach_deficit(self, order: list[int], settled: list[bool]) -> list[bool]:
        """Per node, whether no path of zero reduced-cost residual arcs over settled nodes leads from it to a deficit
        (a search backwards from the settled deficits).

        Routing only adds reverse arcs between nodes of the path it used, which could already reach a deficit, so no
        node found here gains a way during the phase: the depth-first passes need not enter them. They would only
        have searched them to the end and given them up, so the passes route exactly what they did without this;
        in a phase whose deficit lies far away (most of the standby model's), that was most of the graph, twice.
        """
        excess, potential, adjacency = self.supply, self.potential, self.adjacency
        head, residual, cost = self.head, self.residual, self.cost
        hopeless = len(excess) * [True]
        stack = [v for v in order if excess[v] < 0]
        for v in stack:
            hopeless[v] = False
        while stack:
            v = stack.pop()
            pv = potential[v]
            for a in adjacency[v]:
                u = head[a]  # the residual arc a ^ 1 runs from u to v, at cost -cost[a]
                # zero reduced cost first: it rules out most arcs (a client's list holds every task that could come)
                if potential[u] - cost[a] == pv and hopeless[u] and settled[u] and residual[a ^ 1] > 0:
                    hopeless[u] = False
                    stack.append(u)
        return hopeless

    def _route_along_zero_arcs(self, sources: list[int], settled: list[bool], short: int, hopeless: list[bool]) -> int:
        """Send excess to deficits along residual arcs of zero reduced cost, by depth-first search (one phase);
        how much it routed.

        The search stays within the phase's settled nodes: beyond them lies nothing as near. A node it leaves
        without reaching a deficit is not tried again in this phase; the next phase's Dijkstra finds what that
        missed. ``short``: the deficit left on settled nodes; once that is met the other sources cannot route
        anything, so they are not searched. ``hopeless`` nodes (_cannot_reach_deficit) are given up from the start.
        """
        excess = self.supply
        potential, adjacency, head, residual, cost = self.potential, self.adjacency, self.head, self.residual, self.cost
        n = len(excess)
        pointer = n * [0]
        dead = list(hopeless)
        on_path = n * [False]
        routed = 0
        for s in sources:
            while excess[s] > 0 and not dead[s] and routed < short:
                path = [s]
                arcs: list[int] = []
                on_path[s] = True
                while path:
                    u = path[-1]
                    if excess[u] < 0:
                        break
                    edges = adjacency[u]
                    i = pointer[u]
                    nxt = -1
                    pu = potential[u]
                    end = len(edges)
                    while i < end:
                        a = edges[i]
                        if residual[a] > 0:
                            v = head[a]
                            if settled[v] and not dead[v] and not on_path[v] and cost[a] + pu - potential[v] == 0:
                                nxt = a
                                break
                        i += 1
                    pointer[u] = i
                    if nxt >= 0:
                        v = head[nxt]
                        path.append(v)
                        arcs.append(nxt)
                        on_path[v] = True
                    else:
                        dead[u] = True
                        on_path[u] = False
                        path.pop()
                        if arcs:
                            arcs.pop()
                            pointer[path[-1]] += 1
                for v in path:
                    on_path[v] = False
                if not path:
                    break
                t = path[-1]
                amount = min(excess[s], -excess[t])
                for a in arcs:
                    amount = min(amount, residual[a])
                for a in arcs:
                    residual[a] -= amount
                    residual[a ^ 1] += amount
                excess[s] -= amount
                excess[t] += amount
                routed += amount
        return routed
