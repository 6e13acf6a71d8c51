"""Two graph envs over a hidden undirected graph: ShortestPath (BFS with queue tools) and
ConnectedComponents (union-find tools).

Both configs hold ``"nodes"`` (n, nodes are ``0..n - 1``) and ``"edges"`` (``[[u, v], ...]``,
``u != v``; a repeated edge is allowed and changes nothing). The edges are the hidden data.

* **ShortestPath** (config adds ``"source"`` and ``"target"``): ``Observe`` shows n, the
  source and the target; ``GetNeighbors(node)``, ``SetDistance(node, distance)``,
  ``GetDistance(node)``, ``Enqueue(node)`` and ``Dequeue()`` work the BFS the tools keep. The
  answer is the fewest edges from source to target, or -1 if the target is unreachable. The
  oracle runs a full BFS from the source and reads the target's distance: ``4 * c + 3``
  calls when the source's component has c nodes.
* **ConnectedComponents**: ``Observe`` shows n and the number of edges; ``GetEdge(index)``
  reads an edge, ``Union(a, b)`` joins two sets of the union-find the tools keep and
  ``Find(node)`` gives a node's root. The answer is the number of connected components. The
  oracle unions every edge, then finds every node's root: ``2 * edges + nodes + 2`` calls.

Sizes (nodes): ShortestPath easy 5..7, medium 12..20, hard 40..50; ConnectedComponents easy
5..7, medium 12..20, hard 40..60, with ``nodes // 2 .. nodes - 1`` random edges.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, ClassVar

import numpy as np

from xpgym.core.tools.decorator import ToolError, tool
from xpgym.envs.toolgym.base import ToolGymEnv, check_index, draw_length, item_at
from xpgym.envs.toolgym.hidden_list import check_int_pairs

__all__ = [
    "COMPONENT_SIZES",
    "PATH_SIZES",
    "ConnectedComponentsEnv",
    "ShortestPathEnv",
    "bfs_distance",
    "count_components",
]

PATH_SIZES: dict[str, tuple[int, int]] = {"easy": (5, 7), "medium": (12, 20), "hard": (40, 50)}
"""ShortestPath: inclusive bounds of the number of nodes per difficulty."""
COMPONENT_SIZES: dict[str, tuple[int, int]] = {
    "easy": (5, 7),
    "medium": (12, 20),
    "hard": (40, 60),
}
"""ConnectedComponents: inclusive bounds of the number of nodes per difficulty."""
_MAX_NODES = 500


def _adjacency(nodes: int, edges: list[list[int]]) -> list[list[int]]:
    """Sorted neighbour lists without repeats."""
    neighbours: list[set[int]] = [set() for _ in range(nodes)]
    for u, v in edges:
        neighbours[u].add(v)
        neighbours[v].add(u)
    return [sorted(n) for n in neighbours]


def bfs_distance(nodes: int, edges: list[list[int]], source: int, target: int) -> int:
    """Fewest edges from `source` to `target` by breadth-first search, -1 if unreachable."""
    adjacency = _adjacency(nodes, edges)
    distance = {source: 0}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for neighbour in adjacency[node]:
            if neighbour not in distance:
                distance[neighbour] = distance[node] + 1
                queue.append(neighbour)
    return distance.get(target, -1)


def count_components(nodes: int, edges: list[list[int]]) -> int:
    """Number of connected components, by union-find (path halving)."""
    parent = list(range(nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    components = nodes
    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
            components -= 1
    return components


def _check_graph(config: dict[str, Any]) -> tuple[int, list[list[int]]]:
    """The config's node count and edges, checked (`ValueError` naming the problem)."""
    nodes, edges = config["nodes"], config["edges"]
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= _MAX_NODES:
        raise ValueError(f"'nodes' must be an int in 1..{_MAX_NODES}")
    check_int_pairs(edges, "edges", min_length=0, max_length=4 * _MAX_NODES, low=0, high=nodes - 1)
    for u, v in edges:
        if u == v:
            raise ValueError(f"edge {[u, v]!r} is a loop: an edge joins two different nodes")
    return nodes, edges


def _random_edges(rng: np.random.Generator, members: list[int], extra: int) -> list[list[int]]:
    """A random spanning tree over `members` plus `extra` random edges among them."""
    edges = [[members[i], members[int(rng.integers(0, i))]] for i in range(1, len(members))]
    for _ in range(extra if len(members) > 1 else 0):
        u, v = rng.choice(members, size=2, replace=False)
        edges.append([int(u), int(v)])
    return edges


class ShortestPathEnv(ToolGymEnv):
    """Find the fewest edges between two nodes of a hidden graph, with BFS tools."""

    name: ClassVar[str] = "ShortestPath"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The fewest edges from source to target, or -1 if unreachable."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """PATH_SIZES[difficulty] nodes; in one config of five the graph has a second
        component (at most half the nodes) that the target may fall in."""
        nodes = draw_length(rng, PATH_SIZES[difficulty])
        order = [int(x) for x in rng.permutation(nodes)]
        split = nodes - int(rng.integers(1, nodes // 2 + 1)) if rng.random() < 0.2 else nodes
        edges = [
            *_random_edges(rng, order[:split], nodes // 4),
            *_random_edges(rng, order[split:], 0),
        ]
        source = order[0]
        target = order[int(rng.integers(1, nodes))]
        return {"nodes": nodes, "edges": edges, "source": source, "target": target}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state: ``{"distance": [None] * n, "queue": []}``."""
        nodes, _ = _check_graph(config)
        for key in ("source", "target"):
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < nodes:
                raise ValueError(f"'{key}' must be a node in 0..{nodes - 1}")
        return {"distance": [None] * nodes, "queue": []}

    def visible(self) -> dict[str, Any]:
        """The number of nodes, the source and the target."""
        config = self.config
        return {"nodes": config["nodes"], "source": config["source"], "target": config["target"]}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden undirected graph has nodes 0..n-1. Find the fewest edges on a path from "
            "the source node to the target node, or -1 if no path exists. Submit it with Done."
        )

    def reference_answer(self) -> int:
        """`bfs_distance` from the source to the target."""
        config = self.config
        return bfs_distance(config["nodes"], config["edges"], config["source"], config["target"])

    @tool
    def get_neighbors(self, node: int) -> str:
        """The neighbours of a node, as a sorted list.

        Args:
            node: The node, 0 <= node < n.
        """
        return item_at(_adjacency(self.config["nodes"], self.config["edges"]), node, "node")

    @tool
    def set_distance(self, node: int, distance: int) -> str:
        """Record a node's distance from the source.

        Args:
            node: The node, 0 <= node < n.
            distance: The distance to record.
        """
        check_index(node, self.config["nodes"], "node")
        self.state["distance"][node] = distance
        return f"distance[{node}] = {distance}"

    @tool
    def get_distance(self, node: int) -> str:
        """A node's recorded distance (null if none was recorded).

        Args:
            node: The node, 0 <= node < n.
        """
        return item_at(self.state["distance"], node, "node")

    @tool
    def enqueue(self, node: int) -> str:
        """Add a node at the back of the queue; returns the queue's length.

        Args:
            node: The node, 0 <= node < n.
        """
        check_index(node, self.config["nodes"], "node")
        self.state["queue"].append(node)
        return json.dumps(len(self.state["queue"]))

    @tool
    def dequeue(self) -> str:
        """Remove and return the node at the front of the queue."""
        if not self.state["queue"]:
            raise ToolError("the queue is empty")
        return json.dumps(self.state["queue"].pop(0))

    def oracle(self) -> None:
        """Breadth-first search from the source; the target's recorded distance is the answer."""
        seen = json.loads(self.call("Observe"))
        source, target = seen["source"], seen["target"]
        distance = {source: 0}
        self.call("SetDistance", node=source, distance=0)
        waiting = int(self.call("Enqueue", node=source))
        while waiting:
            node = int(self.call("Dequeue"))
            waiting -= 1
            for neighbour in json.loads(self.call("GetNeighbors", node=node)):
                if neighbour not in distance:
                    distance[neighbour] = distance[node] + 1
                    self.call("SetDistance", node=neighbour, distance=distance[neighbour])
                    waiting = int(self.call("Enqueue", node=neighbour))
        found = json.loads(self.call("GetDistance", node=target))
        self.call("Done", answer=-1 if found is None else found)


class ConnectedComponentsEnv(ToolGymEnv):
    """Count the connected components of a hidden graph with union-find tools."""

    name: ClassVar[str] = "ConnectedComponents"
    answer_type: ClassVar[Any] = int
    answer_doc: ClassVar[str] = "The number of connected components."

    @classmethod
    def generate_config(cls, rng: np.random.Generator, difficulty: str) -> dict[str, Any]:
        """COMPONENT_SIZES[difficulty] nodes and ``nodes // 2 .. nodes - 1`` random edges."""
        nodes = draw_length(rng, COMPONENT_SIZES[difficulty])
        edges = [
            [int(u), int(v)]
            for u, v in (
                rng.choice(nodes, size=2, replace=False)
                for _ in range(int(rng.integers(nodes // 2, nodes)))
            )
        ]
        return {"nodes": nodes, "edges": edges}

    def initial_state(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check the config; the state is the union-find forest ``{"parent": [0, 1, ...]}``."""
        nodes, _ = _check_graph(config)
        return {"parent": list(range(nodes))}

    def visible(self) -> dict[str, Any]:
        """The numbers of nodes and edges."""
        return {"nodes": self.config["nodes"], "edges": len(self.config["edges"])}

    def statement(self) -> str:
        """The task in two sentences."""
        return (
            "A hidden undirected graph has nodes 0..n-1 and a list of edges. Find how many "
            "connected components it has (an isolated node is a component). Submit the count "
            "with Done."
        )

    def reference_answer(self) -> int:
        """`count_components` of the graph."""
        return count_components(self.config["nodes"], self.config["edges"])

    def _root(self, node: int) -> int:
        """`node`'s root, compressing the path behind it."""
        parent = self.state["parent"]
        check_index(node, len(parent), "node")
        root = node
        while parent[root] != root:
            root = parent[root]
        while parent[node] != root:
            parent[node], node = root, parent[node]
        return root

    @tool
    def get_edge(self, index: int) -> str:
        """Read an edge of the graph as [u, v].

        Args:
            index: The edge's position in the edge list, 0-based.
        """
        return item_at(self.config["edges"], index)

    @tool
    def find(self, node: int) -> str:
        """The root of the set holding a node (each node starts in its own set).

        Args:
            node: The node, 0 <= node < n.
        """
        return json.dumps(self._root(node))

    @tool
    def union(self, a: int, b: int) -> str:
        """Join the sets of two nodes; returns true if they were separate, false otherwise.

        Args:
            a: A node.
            b: Another node.
        """
        root_a, root_b = self._root(a), self._root(b)
        if root_a != root_b:
            self.state["parent"][max(root_a, root_b)] = min(root_a, root_b)
        return json.dumps(root_a != root_b)

    def oracle(self) -> None:
        """Union the ends of every edge, then count the distinct roots."""
        seen = json.loads(self.call("Observe"))
        for index in range(seen["edges"]):
            u, v = json.loads(self.call("GetEdge", index=index))
            self.call("Union", a=u, b=v)
        roots = {int(self.call("Find", node=node)) for node in range(seen["nodes"])}
        self.call("Done", answer=len(roots))
