"""Graph builders, validation and the rooted-spanning-tree (consensus possible) check."""
from __future__ import annotations

import json
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.errors import ConfigError
from consensus.graphs.topology import TOPOLOGIES, Graph, graph_from_config, make_graph


def hears(g: Graph) -> dict[int, set[int]]:
    return {i: set(g.in_neighbors(i)) for i in range(g.n)}


# ---- builders ---------------------------------------------------------------------------
def test_complete_everyone_hears_everyone_else():
    g = make_graph("complete", 4)
    assert not g.directed
    assert hears(g) == {i: set(range(4)) - {i} for i in range(4)}


def test_ring_undirected_and_directed():
    g = make_graph("ring", 5)
    assert hears(g) == {0: {1, 4}, 1: {0, 2}, 2: {1, 3}, 3: {2, 4}, 4: {3, 0}}
    d = make_graph("ring", 5, directed=True)
    assert d.directed
    assert hears(d) == {0: {4}, 1: {0}, 2: {1}, 3: {2}, 4: {3}}
    assert d.out_neighbors(4) == [0]


def test_ring_of_two_is_a_line():
    assert np.array_equal(make_graph("ring", 2).adj, make_graph("line", 2).adj)
    assert np.array_equal(make_graph("ring", 2, directed=True).adj, make_graph("line", 2, directed=True).adj)


def test_line_undirected_and_directed_chain():
    g = make_graph("line", 4)
    assert hears(g) == {0: {1}, 1: {0, 2}, 2: {1, 3}, 3: {2}}
    d = make_graph("line", 4, directed=True)
    assert hears(d) == {0: set(), 1: {0}, 2: {1}, 3: {2}}
    assert d.out_neighbors(0) == [1] and d.out_neighbors(3) == []


@pytest.mark.parametrize("center", [0, 2])
def test_star_center_hears_all_and_all_hear_center(center):
    g = make_graph("star", 4, center=center)
    others = set(range(4)) - {center}
    assert set(g.in_neighbors(center)) == others
    assert set(g.out_neighbors(center)) == others
    for i in others:
        assert g.in_neighbors(i) == [center]


def test_star_refuses_directed():
    with pytest.raises(ConfigError, match="leader_follower"):
        make_graph("star", 3, directed=True)


@pytest.mark.parametrize("leader", [0, 3])
def test_leader_follower(leader):
    g = make_graph("leader_follower", 4, leader=leader)
    assert g.directed
    assert g.in_neighbors(leader) == []
    assert set(g.out_neighbors(leader)) == set(range(4)) - {leader}
    for i in set(range(4)) - {leader}:
        assert g.in_neighbors(i) == [leader]
    assert g.roots() == [leader]
    ok, msg = g.consensus_check()
    assert ok and f"{{{leader}}}" in msg


def test_leader_follower_refuses_undirected():
    with pytest.raises(ConfigError, match="star"):
        make_graph("leader_follower", 3, directed=False)


def test_random_is_seeded_and_reproducible():
    a = make_graph("random", 12, seed=7, p=0.4)
    b = make_graph("random", 12, seed=7, p=0.4)
    c = make_graph("random", 12, seed=8, p=0.4)
    assert np.array_equal(a.adj, b.adj)
    assert not np.array_equal(a.adj, c.adj)
    assert np.array_equal(a.adj, a.adj.T) and not a.directed
    assert not a.adj.diagonal().any()


def test_random_directed_and_edge_probability():
    d = make_graph("random", 40, seed=1, p=0.3, directed=True)
    assert d.directed and not np.array_equal(d.adj, d.adj.T)
    frac = d.adj.sum() / (40 * 39)
    assert 0.25 < frac < 0.35
    assert make_graph("random", 5, seed=0, p=0.0).n_edges == 0
    assert np.array_equal(make_graph("random", 5, seed=0, p=1.0).adj, make_graph("complete", 5).adj)


def test_random_is_not_resampled_when_disconnected():
    g = make_graph("random", 6, seed=0, p=0.0)
    ok, msg = g.consensus_check()
    assert not ok and "impossible" in msg


# ---- custom matrices --------------------------------------------------------------------
def test_custom_from_list_json_and_yaml_strings():
    m = [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    a = make_graph("custom", 3, adjacency=m)
    b = make_graph("custom", 3, adjacency=json.dumps(m))
    c = make_graph("custom", 3, adjacency="- [0, 1, 0]\n- [1, 0, 1]\n- [0, 1, 0]\n")
    d = make_graph("custom", 3, adjacency=[[False, True, False], [True, False, True], [False, True, False]])
    assert a == b == c == d
    assert not a.directed
    assert hears(a) == {0: {1}, 1: {0, 2}, 2: {1}}


def test_custom_ignores_diagonal_and_infers_direction():
    g = make_graph("custom", 3, adjacency=[[1, 0, 0], [1, 1, 0], [0, 1, 1]])
    assert not g.adj.diagonal().any()
    assert g.directed
    assert hears(g) == {0: set(), 1: {0}, 2: {1}}
    assert make_graph("custom", 2, adjacency=[[0, 1], [1, 0]], directed=True).directed


@pytest.mark.parametrize("adjacency, pattern", [
    ([[0, 1], [1, 0]], r"2×2 but there are n=3"),
    ([[0, 1, 0], [1, 0, 1]], r"square"),
    ([[0, 1, 0], [1, 0], [0, 1, 0]], r"different lengths"),
    ([[0, 2, 0], [1, 0, 1], [0, 1, 0]], r"'adjacency'\[0\]\[1\] = 2"),
    ([[0, "x", 0], [1, 0, 1], [0, 1, 0]], r"'adjacency'\[0\]\[1\] = 'x'"),
    ("[[0, 1, 0], [1, 0", r"not valid JSON/YAML"),
    (None, r"needs an 'adjacency'"),
])
def test_custom_validation_errors(adjacency, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make_graph("custom", 3, adjacency=adjacency)


def test_custom_undirected_but_asymmetric_is_an_error():
    with pytest.raises(ConfigError, match=r"not symmetric \(adjacency\[0\]\[1\] = 1, adjacency\[1\]\[0\] = 0\)"):
        make_graph("custom", 3, adjacency=[[0, 1, 0], [0, 0, 1], [0, 1, 0]], directed=False)


@pytest.mark.parametrize("kwargs, pattern", [
    ({"name": "hypercube", "n": 3}, r"unknown topology 'hypercube'; valid topologies: complete, ring"),
    ({"name": "ring", "n": 1}, r"n must be >= 2, got 1"),
    ({"name": "ring", "n": 2.5}, r"n must be an integer"),
    ({"name": "random", "n": 3, "p": 1.5}, r"'p' must be a number in \[0, 1\]"),
    ({"name": "random", "n": 3, "p": -0.1}, r"'p'"),
    ({"name": "leader_follower", "n": 3, "leader": 3}, r"'leader' = 3 is out of range for n=3"),
    ({"name": "star", "n": 3, "center": -1}, r"'center' = -1 is out of range"),
    ({"name": "ring", "n": 3, "adjacency": [[0]]}, r"only used with topology 'custom'"),
])
def test_builder_errors_name_the_problem(kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make_graph(**kwargs)


# ---- reachability -----------------------------------------------------------------------
def test_two_disconnected_groups_have_no_rooted_spanning_tree():
    m = np.zeros((5, 5), int)
    for i, j in [(0, 1), (1, 2), (0, 2), (3, 4)]:
        m[i, j] = m[j, i] = 1
    g = make_graph("custom", 5, adjacency=m.tolist())
    assert not g.is_connected()
    assert not g.has_rooted_spanning_tree()
    assert g.roots() == []
    assert sorted(g.source_groups()) == [[0, 1, 2], [3, 4]]
    ok, msg = g.consensus_check()
    assert not ok
    assert "robots {3, 4} can never hear robots {0, 1, 2}" in msg and "impossible" in msg


def test_two_leaders_heard_by_one_follower_is_not_rooted():
    # robot 2 hears 0 and 1, but 0 and 1 hear nobody: two independent sources
    g = make_graph("custom", 3, adjacency=[[0, 0, 0], [0, 0, 0], [1, 1, 0]])
    assert g.directed and g.roots() == [] and not g.has_rooted_spanning_tree()
    assert sorted(g.source_groups()) == [[0], [1]]


def test_directed_line_is_rooted_but_not_strongly_connected():
    g = make_graph("line", 4, directed=True)
    assert g.has_rooted_spanning_tree() and g.roots() == [0]
    assert not g.is_connected()
    assert make_graph("ring", 4, directed=True).is_connected()


def test_roots_of_a_cycle_feeding_a_tail():
    # 0 <-> 1 form a cycle; 2 hears 1; 3 hears 2 → roots are the cycle {0, 1}
    g = make_graph("custom", 4, adjacency=[[0, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]])
    assert g.roots() == [0, 1]
    assert g.consensus_check()[0]


@pytest.mark.parametrize("name", [t for t in TOPOLOGIES if t not in ("random", "custom")])
def test_named_topologies_allow_consensus(name):
    assert make_graph(name, 6).consensus_check()[0]


def _bfs_roots(adj: np.ndarray) -> list[int]:
    """Reference: BFS along the information flow j -> i for adj[i, j]."""
    n = len(adj)
    roots = []
    for r in range(n):
        seen, todo = {r}, deque([r])
        while todo:
            u = todo.popleft()
            for v in range(n):
                if adj[v, u] and v not in seen:
                    seen.add(v)
                    todo.append(v)
        if len(seen) == n:
            roots.append(r)
    return roots


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 7).flatmap(lambda n: st.lists(st.lists(st.booleans(), min_size=n, max_size=n),
                                                    min_size=n, max_size=n)))
def test_roots_match_breadth_first_search(matrix):
    g = make_graph("custom", len(matrix), adjacency=matrix)
    assert g.roots() == _bfs_roots(g.adj)
    assert g.has_rooted_spanning_tree() == (len(g.source_groups()) == 1)
    if not g.directed:
        assert g.has_rooted_spanning_tree() == g.is_connected()


# ---- serialisation and config -----------------------------------------------------------
def test_to_dict_is_json_and_round_trips():
    g = make_graph("leader_follower", 3, leader=1)
    d = json.loads(json.dumps(g.to_dict()))
    assert d["adjacency"] == [[0, 1, 0], [0, 0, 0], [0, 1, 0]]
    assert d["edges"] == [[0, 1], [2, 1]]
    assert d["directed"] is True and d["n"] == 3
    assert Graph.from_dict(d) == g
    assert make_graph("line", 3).to_dict()["edges"] == [[0, 1], [1, 2]]


def test_graph_from_config():
    assert graph_from_config(None, 3) == make_graph("complete", 3)
    assert graph_from_config("ring", 4) == make_graph("ring", 4)
    g = graph_from_config({"topology": "custom", "adjacency": "[[0, 1], [0, 0]]"}, 2)
    assert g.directed and g.in_neighbors(0) == [1]
    assert graph_from_config({"topology": "random", "seed": 3, "p": 0.5}, 8) == make_graph("random", 8, seed=3)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['topolgy'\]"):
        graph_from_config({"topolgy": "ring"}, 3)
    with pytest.raises(ConfigError, match="'directed' must be"):
        graph_from_config({"topology": "ring", "directed": "yes"}, 3)


def test_graph_adjacency_is_read_only():
    g = make_graph("ring", 3)
    with pytest.raises(ValueError):
        g.adj[0, 1] = False
