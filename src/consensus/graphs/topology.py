"""Communication graphs: who may hear whom.

Convention (paper 1, Algorithm 1): ``adj[i, j] = True`` means robot ``i`` knows
(hears) robot ``j``'s state. Information therefore flows from ``j`` to ``i``
along every edge. The diagonal is always False (a robot always knows its own
state; that is not an edge).

Builders (``make_graph``):

* ``complete``  every robot hears every other robot (undirected).
* ``ring``      robot i hears i-1 and i+1 (mod n). ``directed=True``: i hears only
                i-1 (mod n), a directed cycle. For n = 2 a ring is the same as a line.
* ``star``      the ``center`` robot hears everyone and everyone hears the center.
                Always undirected; use ``leader_follower`` for a directed star.
* ``line``      chain 0 - 1 - ... - n-1. ``directed=True``: i hears only i-1, so
                robot 0 is the only root (paper 1, Fig. 9b generalised).
* ``leader_follower``  directed by definition: the ``leader`` robot hears nobody,
                every other robot hears the leader and only the leader (paper 1, Fig. 9a).
* ``random``    Erdős–Rényi G(n, p) from ``numpy.random.default_rng(seed)``;
                undirected unless ``directed=True`` (then every ordered pair is
                drawn independently). It is never resampled: a graph on which
                consensus is impossible is reported by ``Graph.consensus_check``.
* ``custom``    an explicit n×n 0/1 (or bool) matrix, given as nested lists or as a
                JSON/YAML string. Self-loops on the diagonal are ignored.

Consensus of a linear (or averaging-like) protocol is possible iff the graph has a
rooted (directed) spanning tree: some robot whose state reaches every other robot
along the information flow. For undirected graphs that is plain connectivity.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from numbers import Integral, Real
from typing import Any

import numpy as np
import yaml

from consensus.errors import ConfigError

log = logging.getLogger(__name__)

TOPOLOGIES = ("complete", "ring", "star", "line", "leader_follower", "random", "custom")

#: keys accepted by ``graph_from_config``
CONFIG_KEYS = ("topology", "directed", "seed", "p", "adjacency", "leader", "center")


def _fmt_set(nodes: list[int]) -> str:
    return "{" + ", ".join(str(i) for i in nodes) + "}"


@dataclass(frozen=True, eq=False)
class Graph:
    """A communication graph on ``n`` robots (see the module docstring for the convention)."""

    name: str
    n: int
    directed: bool
    adj: np.ndarray  # (n, n) bool, adj[i, j] = i hears j

    def __post_init__(self) -> None:
        adj = np.array(self.adj, dtype=bool, copy=True)
        if adj.shape != (self.n, self.n):
            raise ConfigError(
                f"graph '{self.name}': adjacency must have shape ({self.n}, {self.n}), got {adj.shape}")
        np.fill_diagonal(adj, False)
        if not self.directed and not np.array_equal(adj, adj.T):
            raise ConfigError(f"graph '{self.name}': marked undirected but the adjacency is not symmetric")
        adj.setflags(write=False)
        object.__setattr__(self, "adj", adj)
        object.__setattr__(self, "_in", tuple([int(j) for j in np.flatnonzero(row)] for row in adj))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return (self.name, self.n, self.directed) == (other.name, other.n, other.directed) and bool(
            np.array_equal(self.adj, other.adj))

    def __hash__(self) -> int:
        return hash((self.name, self.n, self.directed, self.adj.tobytes()))

    # ---- neighbourhoods -------------------------------------------------------------
    def in_neighbors(self, i: int) -> list[int]:
        """Robots whose state robot ``i`` hears (``j`` with ``adj[i, j]``)."""
        return list(self._in[i])

    def out_neighbors(self, i: int) -> list[int]:
        """Robots that hear robot ``i`` (``k`` with ``adj[k, i]``)."""
        return [int(k) for k in np.flatnonzero(self.adj[:, i])]

    @property
    def n_edges(self) -> int:
        """Number of edges: unordered pairs if undirected, ordered pairs if directed."""
        m = int(self.adj.sum())
        return m if self.directed else m // 2

    # ---- reachability ---------------------------------------------------------------
    @cached_property
    def _reach(self) -> np.ndarray:
        """``R[u, v]``: u's state reaches v along the information flow (reflexive)."""
        flow = self.adj.T.astype(np.float64)  # flow[u, v] = v hears u
        reach = (flow + np.eye(self.n)) > 0
        while True:
            r = reach.astype(np.float64)
            nxt = (r @ r) > 0
            if np.array_equal(nxt, reach):
                break
            reach = nxt
        reach.setflags(write=False)
        return reach

    def roots(self) -> list[int]:
        """Robots whose state reaches every other robot (roots of a spanning tree)."""
        return [int(u) for u in np.flatnonzero(self._reach.all(axis=1))]

    def has_rooted_spanning_tree(self) -> bool:
        """True iff some robot's state reaches everyone along the heard-by edges."""
        return bool(self._reach.all(axis=1).any())

    def is_connected(self) -> bool:
        """Undirected: connected. Directed: strongly connected (every robot is a root)."""
        return bool(self._reach.all())

    def source_groups(self) -> list[list[int]]:
        """Strongly connected groups that hear nobody outside themselves.

        Exactly one such group exists iff the graph has a rooted spanning tree (that
        group is then the set of roots); several groups can never agree in general.
        """
        reach = self._reach
        mutual = reach & reach.T
        # v is in a source group iff everyone who reaches v is also reached by v
        is_source = ~(reach & ~reach.T).any(axis=0)
        groups: list[list[int]] = []
        seen: set[int] = set()
        for v in range(self.n):
            if is_source[v] and v not in seen:
                g = [int(u) for u in np.flatnonzero(mutual[v])]
                seen.update(g)
                groups.append(g)
        return groups

    def consensus_check(self) -> tuple[bool, str]:
        """(possible, message). Consensus is possible iff a rooted spanning tree exists."""
        kind = "directed" if self.directed else "undirected"
        roots = self.roots()
        if roots:
            if len(roots) == self.n:
                how = "strongly connected" if self.directed else "connected"
                return True, f"graph '{self.name}' ({kind}, n={self.n}) is {how}; consensus is possible"
            return True, (f"graph '{self.name}' ({kind}, n={self.n}) has a rooted spanning tree with root "
                          f"robots {_fmt_set(roots)}; consensus is possible")
        groups = self.source_groups()
        first, second = groups[0], groups[1]
        listed = ", ".join(_fmt_set(g) for g in groups)
        return False, (f"graph '{self.name}' ({kind}, n={self.n}) has no rooted spanning tree: robots "
                       f"{_fmt_set(second)} can never hear robots {_fmt_set(first)}; {len(groups)} groups hear "
                       f"nobody outside themselves ({listed}); consensus is impossible")

    # ---- serialisation --------------------------------------------------------------
    def edges(self) -> list[tuple[int, int]]:
        """Edges as ``(i, j)`` with ``adj[i, j]`` ("i hears j"); undirected graphs list each pair once (i < j)."""
        ii, jj = np.nonzero(self.adj)
        return [(int(i), int(j)) for i, j in zip(ii, jj) if self.directed or i < j]

    def to_dict(self) -> dict:
        """JSON-able description: name, n, directed, adjacency (0/1 lists), edges ([i, j] = i hears j)."""
        return {
            "name": self.name,
            "n": self.n,
            "directed": self.directed,
            "adjacency": self.adj.astype(int).tolist(),
            "edges": [list(e) for e in self.edges()],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Graph:
        """Inverse of ``to_dict`` (``edges`` is ignored; the adjacency is authoritative)."""
        try:
            name, n, directed, adjacency = d["name"], d["n"], d["directed"], d["adjacency"]
        except (KeyError, TypeError) as e:
            raise ConfigError(f"graph record needs keys name, n, directed, adjacency: missing {e}") from None
        n = _check_n(n)
        return cls(name=str(name), n=n, directed=bool(directed), adj=_parse_adjacency(adjacency, n))


# ---- validation helpers ------------------------------------------------------------------
def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, Integral):
        raise ConfigError(f"graph: number of robots n must be an integer, got {n!r}")
    if n < 2:
        raise ConfigError(f"graph: number of robots n must be >= 2, got {n}")
    return int(n)


def _check_index(value: Any, n: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigError(f"graph: '{field}' must be an integer robot index, got {value!r}")
    if not 0 <= value < n:
        raise ConfigError(f"graph: '{field}' = {value} is out of range for n={n} robots (valid: 0..{n - 1})")
    return int(value)


def _parse_adjacency(adjacency: Any, n: int) -> np.ndarray:
    """Nested lists / array / JSON-or-YAML string of 0/1 or bools → (n, n) bool, diagonal False."""
    if isinstance(adjacency, str):
        try:
            adjacency = yaml.safe_load(adjacency)
        except yaml.YAMLError as e:
            raise ConfigError(f"graph: 'adjacency' string is not valid JSON/YAML: {e}") from None
    if isinstance(adjacency, (list, tuple)) and all(isinstance(r, (list, tuple)) for r in adjacency) \
            and len({len(r) for r in adjacency}) > 1:
        raise ConfigError(f"graph: 'adjacency' must be an n×n matrix (n={n}); its rows have different lengths "
                          f"{[len(r) for r in adjacency]}")
    arr = np.array(adjacency, dtype=object)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ConfigError(f"graph: 'adjacency' must be a square n×n matrix (n={n}), got shape {arr.shape}")
    if arr.shape != (n, n):
        raise ConfigError(f"graph: 'adjacency' is {arr.shape[0]}×{arr.shape[1]} but there are n={n} robots")
    out = np.zeros((n, n), dtype=bool)
    for (i, j), v in np.ndenumerate(arr):
        if isinstance(v, (bool, np.bool_)):
            out[i, j] = bool(v)
        elif isinstance(v, Real) and v in (0, 1):
            out[i, j] = v == 1
        else:
            raise ConfigError(f"graph: 'adjacency'[{i}][{j}] = {v!r}; entries must be 0/1 or true/false")
    if out.diagonal().any():
        log.info("graph: ignoring self-loops on the adjacency diagonal at robots %s",
                 [int(i) for i in np.flatnonzero(out.diagonal())])
    np.fill_diagonal(out, False)
    return out


# ---- builders ----------------------------------------------------------------------------
def make_graph(name: str, n: int, *, directed: bool | None = None, seed: int | None = None, p: float = 0.5,
               adjacency: Any = None, leader: int = 0, center: int = 0) -> Graph:
    """Build a named topology on ``n`` robots (see the module docstring). Raises ``ConfigError`` on bad input."""
    if not isinstance(name, str) or name.strip().lower() not in TOPOLOGIES:
        raise ConfigError(f"graph: unknown topology {name!r}; valid topologies: {', '.join(TOPOLOGIES)}")
    name = name.strip().lower()
    n = _check_n(n)
    if directed is not None and not isinstance(directed, (bool, np.bool_)):
        raise ConfigError(f"graph: 'directed' must be true, false or null, got {directed!r}")
    if adjacency is not None and name != "custom":
        raise ConfigError(f"graph: 'adjacency' is only used with topology 'custom', not '{name}'")
    adj = np.zeros((n, n), dtype=bool)
    idx = np.arange(n)

    if name == "complete":
        adj[:] = True
        is_directed = bool(directed)
    elif name in ("ring", "line"):
        is_directed = bool(directed)
        adj[idx[1:], idx[1:] - 1] = True          # i hears i-1
        if name == "ring" and n >= 3:
            adj[0, n - 1] = True
        if not is_directed:
            adj |= adj.T
    elif name == "star":
        if directed:
            raise ConfigError("graph: topology 'star' is undirected; use 'leader_follower' for a directed star")
        c = _check_index(center, n, "center")
        adj[c, :] = True
        adj[:, c] = True
        is_directed = False
    elif name == "leader_follower":
        if directed is False:
            raise ConfigError("graph: topology 'leader_follower' is directed; use 'star' for the undirected version")
        ldr = _check_index(leader, n, "leader")
        adj[:, ldr] = True                        # everyone hears the leader, the leader hears nobody
        is_directed = True
    elif name == "random":
        if isinstance(p, bool) or not isinstance(p, Real) or not 0.0 <= float(p) <= 1.0:
            raise ConfigError(f"graph: edge probability 'p' must be a number in [0, 1], got {p!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0):
            raise ConfigError(f"graph: 'seed' must be a non-negative integer or null, got {seed!r}")
        rng = np.random.default_rng(seed)
        draw = rng.random((n, n)) < float(p)
        is_directed = bool(directed)
        adj = draw if is_directed else np.triu(draw, 1) | np.triu(draw, 1).T
    else:  # custom
        if adjacency is None:
            raise ConfigError("graph: topology 'custom' needs an 'adjacency' matrix (n×n of 0/1)")
        adj = _parse_adjacency(adjacency, n)
        symmetric = bool(np.array_equal(adj, adj.T))
        if directed is False and not symmetric:
            i, j = (int(v) for v in np.argwhere(adj != adj.T)[0])
            raise ConfigError(f"graph: 'directed' is false but the custom adjacency is not symmetric "
                              f"(adjacency[{i}][{j}] = {int(adj[i, j])}, adjacency[{j}][{i}] = {int(adj[j, i])})")
        is_directed = (not symmetric) if directed is None else bool(directed)

    np.fill_diagonal(adj, False)
    return Graph(name=name, n=n, directed=is_directed, adj=adj)


def graph_from_config(d: dict | str | None, n: int) -> Graph:
    """Build a graph from a config mapping (keys: ``CONFIG_KEYS``); a bare string is a topology name.

    ``None`` or ``{}`` gives the complete graph (paper 1's default). Unknown keys raise ``ConfigError``.
    """
    if d is None:
        d = {}
    elif isinstance(d, str):
        d = {"topology": d}
    if not isinstance(d, dict):
        raise ConfigError(f"graph: config must be a mapping or a topology name, got {type(d).__name__}")
    unknown = sorted(str(k) for k in d if k not in CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"graph: unknown key(s) {unknown}; valid keys: {', '.join(CONFIG_KEYS)}")
    return make_graph(
        d.get("topology", "complete"), n,
        directed=d.get("directed"),
        seed=d.get("seed"),
        p=d.get("p", 0.5),
        adjacency=d.get("adjacency"),
        leader=d.get("leader", 0),
        center=d.get("center", 0),
    )
