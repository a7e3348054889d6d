"""consensus.scenarios.naming_game.policy: validation of q tables, the SI baselines, individual bias and neutrality,
the JSON format (round trip, errors, the published ../shared file when present) and the importer of the paper's
q_dicts.zip: numpy-float pickles load exactly, hostile pickles are refused before anything runs, and zip archives
are bounded."""
from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from consensus.errors import ConfigError
from consensus.scenarios.naming_game import policy as pol
from consensus.scenarios.naming_game.game import memory_space, state_count
from consensus.scenarios.naming_game.policy import (
    PAPER_WORD_PAIRS, Policy, fixed_bias, individual_bias, is_neutral, jensen_shannon_distance, load_policies,
    memory_invariant, save_policies)

TABLES = Path(__file__).resolve().parents[4] / "shared" / "data" / "naming-game" / "q_tables.json"
needs_tables = pytest.mark.skipif(not TABLES.is_file(), reason=f"published q tables not found at {TABLES} "
                                  "(reference data outside the project; present only on the development machine)")
MEMBER = "q_dicts/Q_dict_gpt-4o_ID_191_-50_100_0.5tmp_BLANK_False.pkl"


def random_q(H: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.0, 1.0, state_count(H))


def q_dict(H: int, seed: int = 0, as_numpy: bool = True) -> dict:
    ms = memory_space(H)
    values = random_q(H, seed)
    return {k: (np.float64(v) if as_numpy else float(v)) for k, v in zip(ms.keys, values)}


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


# --------------------------------------------------------------------------------------------------- validation
def test_policy_is_validated_copied_and_read_only():
    q = random_q(2)
    p = Policy(q, 2, ("his", "her"), "x", "test", {"k": 1})
    q[0] = 0.123456                                           # the caller's array is not the policy's
    assert p.q[0] != 0.123456 and p.q.dtype == np.float64 and p.q.shape == (21,)
    with pytest.raises(ValueError):
        p.q[0] = 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "y"
    assert p.words == ("his", "her") and p == Policy(p.q, 2, ["his", "her"], "x", "test", {"k": 1})
    assert p != Policy(p.q, 2, ("her", "his"), "x", "test", {"k": 1})


@pytest.mark.parametrize("bad, expected", [
    (1.5, r"q\['0110'\] \(state 11\) = 1\.5 is outside \[0, 1\]"),
    (-0.01, r"q\['0110'\] \(state 11\) = -0\.01 is outside"),
    (float("nan"), r"q\['0110'\] \(state 11\) = nan is not finite"),
])
def test_bad_q_names_the_first_bad_state(bad, expected):
    q = random_q(2)
    q[memory_space(2).index["0110"]] = bad
    q[20] = 7.0                                               # a later bad state is counted, not named
    with pytest.raises(ConfigError, match=expected + r".*2 bad states"):
        Policy(q, 2, name="mine")


@pytest.mark.parametrize("kwargs, expected", [
    ({"q": np.full(20, 0.5)}, "21 for H = 2"),
    ({"H": 7}, "H must be an integer from 1 to 6"),
    ({"words": ("a", "a")}, "must differ"),
    ({"words": ("a", "")}, "non-empty"),
    ({"words": "ab"}, "pair of two strings"),
    ({"q": ["x"] * 21}, "array of numbers"),
])
def test_bad_construction(kwargs, expected):
    args = {"q": np.full(21, 0.5), "H": 2, "words": ("a", "b"), **kwargs}
    with pytest.raises(ConfigError, match=expected):
        Policy(**args)


def test_from_mapping_round_trip_and_errors():
    mapping = q_dict(2, as_numpy=False)
    p = Policy.from_mapping(mapping, 2, ("a", "b"), "m", "test")
    assert p.as_mapping() == mapping and list(p.as_mapping()) == memory_space(2).keys
    few = {k: v for k, v in mapping.items() if k not in ("0000", "1111", "01")}
    with pytest.raises(ConfigError, match=r"3 of 21 memory states \(H = 2\) have no q, e\.g\. '01', '0000', '1111'"):
        Policy.from_mapping(few, 2)
    with pytest.raises(ConfigError, match=r"1 keys are not memory states of H = 2, e\.g\. '000000'"):
        Policy.from_mapping({**mapping, "000000": 0.5}, 2)
    with pytest.raises(ConfigError, match=r"q\['00'\] must be a number"):
        Policy.from_mapping({**mapping, "00": "0.5"}, 2)
    with pytest.raises(ConfigError, match="must be strings of 0/1 digits"):
        Policy.from_mapping({**mapping, (0, 1): 0.5}, 2)


# ------------------------------------------------------------------------------------------- baselines and bias
def test_fixed_bias_and_memory_invariant():
    fb = fixed_bias(0.3, 3)
    assert np.all(fb.q == 0.3) and fb.source == "fixed_bias" and fb.meta == {"p": 0.3} and fb.H == 3
    mi = memory_invariant(0.3, 2, ("A", "B")).as_mapping()
    # inventory after the last interaction: a success keeps its word, a failure (or no memory) leaves both words
    expected = {"": 0.3, "00": 1.0, "11": 0.0, "01": 0.3, "10": 0.3, "1100": 1.0, "0011": 0.0, "0001": 0.3,
                "1110": 0.3}
    assert {k: mi[k] for k in expected} == expected
    for bad in (1.2, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ConfigError, match="p must be a probability"):
            fixed_bias(bad, 2)


def test_jensen_shannon_distance_by_hand():
    # (1, 0) vs (½, ½): m = (¾, ¼); JSD = ½ log2(4/3) + ½ (½ log2(2/3) + ½ log2 2)
    jsd = 0.5 * math.log2(4 / 3) + 0.5 * (0.5 * math.log2(2 / 3) + 0.5)
    assert jensen_shannon_distance((1, 0), (0.5, 0.5)) == pytest.approx(math.sqrt(jsd), rel=1e-12)
    assert jensen_shannon_distance((0.3, 0.7), (0.3, 0.7)) == 0.0
    assert jensen_shannon_distance((1, 0), (0, 1)) == pytest.approx(1.0)


def test_individual_bias_and_neutrality_threshold():
    # near ½ the distance is ≈ |q − ½| / sqrt(2 ln 2) = |q − ½| / 1.177: the 0.005 threshold sits at q ≈ 0.5059
    assert individual_bias(fixed_bias(0.505, 1)) == 0.505
    assert is_neutral(fixed_bias(0.5, 1)) and is_neutral(fixed_bias(0.505, 1)) and is_neutral(fixed_bias(0.495, 1))
    assert not is_neutral(fixed_bias(0.507, 1)) and not is_neutral(fixed_bias(0.493, 1))
    assert is_neutral(fixed_bias(0.507, 1), tol=0.01)
    q = np.full(5, 1.0)
    q[0] = 0.5                                                # only the empty memory counts
    assert is_neutral(Policy(q, 1)) and individual_bias(Policy(q, 1)) == 0.5


# ------------------------------------------------------------------------------------------------------ JSON
def test_save_load_round_trip(tmp_path):
    a = Policy(random_q(3, 1), 3, ("his", "her"), "gpt-4o:his/her", "llm:gpt-4o",
               {"model": "gpt-4o", "crows_pairs_id": 191, "temperature": 0.5, "rewards": [-50, 100], "note": "x"})
    policies = [a, fixed_bias(0.25, 1, ("A", "B")), memory_invariant(0.6, 5)]
    path = save_policies(tmp_path / "sub" / "q.json", policies)
    assert load_policies(path) == policies
    assert [f.name for f in path.parent.iterdir()] == ["q.json"]      # no temporary file left behind
    doc = json.loads(path.read_text())
    first = doc["tables"][0]
    assert first["model"] == "gpt-4o" and first["memory_size"] == 3 and first["meta"] == {"note": "x"}
    assert first["words"] == ["his", "her"] and len(first["q"]) == 85 and first["source"] == "llm:gpt-4o"
    assert len(path.read_text().splitlines()) == 2 + len(policies)     # one table a line


def test_save_refuses_what_json_cannot_hold(tmp_path):
    p = Policy(np.full(5, 0.5), 1, meta={"bad": float("nan")})
    with pytest.raises(ConfigError, match="metadata JSON cannot hold"):
        save_policies(tmp_path / "q.json", [p])
    with pytest.raises(ConfigError, match="not a Policy"):
        save_policies(tmp_path / "q.json", [np.full(5, 0.5)])
    assert not (tmp_path / "q.json").exists()


@pytest.mark.parametrize("content, expected", [
    ("{not json", "neither a zip of pickles nor valid JSON"),
    ('{"policies": []}', "list 'tables'"),
    ('{"tables": [{"words": ["a", "b"], "memory_size": 1}]}', r"tables\[0\] has no 'q'"),
    ('{"tables": [{"words": ["a", "b"], "memory_size": 1, "q": {"": 0.5, "00": 1, "01": 0.5, "10": 0.5, '
     '"11": 2}}]}', r"tables\[0\]: policy 'policy:a/b': q\['11'\] \(state 4\) = 2\.0 is outside"),
    ('{"tables": [{"words": ["a", "a"], "memory_size": 1, "q": {}}]}', "must differ"),
])
def test_json_errors(tmp_path, content, expected):
    path = tmp_path / "q.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=expected):
        load_policies(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no policy file"):
        load_policies(tmp_path / "absent.json")


@needs_tables
def test_published_tables():
    policies = load_policies(TABLES)
    assert len(policies) == 44 and all(p.H == 5 and p.q.size == 1365 and p.source == "published" for p in policies)
    models = {p.meta["model"] for p in policies}
    assert models == {"gpt-4o", "llama31_70B", "phi_4", "QWQ_32B"}
    for model in models:
        assert {p.meta["crows_pairs_id"]: p.words for p in policies if p.meta["model"] == model} == PAPER_WORD_PAIRS
    by_name = {p.name: p for p in policies}
    his_her = by_name["gpt-4o:his/her"].as_mapping()
    # an agent after a success repeats the word; after hearing the other word it leans towards it
    assert his_her["00"] == pytest.approx(0.99997, abs=1e-5) and his_her["01"] == pytest.approx(0.0113, abs=1e-4)
    gay_straight = by_name["gpt-4o:gay/straight"].as_mapping()   # the README's example numbers are this table's
    assert gay_straight["00"] == pytest.approx(0.99994, abs=1e-5) and gay_straight["01"] == pytest.approx(0.355,
                                                                                                          abs=1e-3)
    # Fig. 3c: Qwen is individually neutral for every pair; GPT's {his, her} (0.470) is not
    assert all(is_neutral(p) for p in policies if p.meta["model"] == "QWQ_32B")
    assert individual_bias(by_name["gpt-4o:his/her"]) == pytest.approx(0.4704, abs=1e-4)
    assert not is_neutral(by_name["gpt-4o:his/her"])


# ----------------------------------------------------------------------------------------- the paper's pickles
@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_zip_of_numpy_pickles_loads_exactly(tmp_path, protocol):
    """The published members are protocol-4 pickles of {digit key: numpy.float64}; older protocols encode the
    float bytes differently (latin-1 str, _codecs.encode) and must give the same numbers."""
    mapping = q_dict(2, seed=3)
    other = q_dict(1, seed=4, as_numpy=False)
    path = write_zip(tmp_path / "q_dicts.zip", {
        "q_dicts/": b"", MEMBER: pickle.dumps(mapping, protocol=protocol),
        "q_dicts/Q_dict_phi_4_ID_102_-50_100_0.5tmp_BLANK_False.pkl": pickle.dumps(other, protocol=protocol),
        "__MACOSX/q_dicts/._Q_dict_x.pkl": b"junk", "q_dicts/README.txt": b"not a pickle"})
    gpt, phi = load_policies(path)                           # in member-name order
    assert gpt.words == ("his", "her") and gpt.H == 2 and gpt.name == "gpt-4o:his/her" and gpt.source == "published"
    assert gpt.as_mapping() == {k: float(v) for k, v in mapping.items()}
    assert {k: gpt.meta[k] for k in ("model", "model_name", "crows_pairs_id", "rewards", "temperature")} == {
        "model": "gpt-4o", "model_name": "OpenAI GPT-4o", "crows_pairs_id": 191, "rewards": [-50, 100],
        "temperature": 0.5}
    assert phi.words == ("gay", "straight") and phi.H == 1 and phi.as_mapping() == other


def test_single_pickle_file_and_word_overrides(tmp_path):
    path = tmp_path / "Q_dict_mymodel_ID_7_-50_100_0.5tmp_BLANK_False.pkl"
    path.write_bytes(pickle.dumps(q_dict(1)))
    with pytest.raises(ConfigError, match=r"CrowS-Pairs id 7 is not one of the paper's pairs; pass words=\{7:"):
        load_policies(path)
    assert load_policies(path, words={7: ("cat", "dog")})[0].words == ("cat", "dog")
    odd = tmp_path / "table.pkl"
    odd.write_bytes(pickle.dumps(q_dict(1)))
    with pytest.raises(ConfigError, match="cannot tell the words"):
        load_policies(odd)
    p = load_policies(odd, words=("x", "y"))[0]
    assert p.words == ("x", "y") and p.name == "table:x/y"


class _RunsACommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class _EvalsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return eval, (f"open({str(self.marker)!r}, 'w').close()",)


@pytest.mark.parametrize("make, refused", [
    (lambda m: {"": _RunsACommand(m)}, f"{os.system.__module__}.system"),
    (lambda m: _RunsACommand(m), f"{os.system.__module__}.system"),
    (lambda m: {"": _EvalsCode(m)}, "builtins.eval"),
    (lambda m: {"": np.array([0.5])}, "numpy._core.multiarray._reconstruct"),
])
def test_hostile_pickles_are_refused_before_anything_runs(tmp_path, make, refused):
    marker = tmp_path / "pwned"
    path = write_zip(tmp_path / "q_dicts.zip", {MEMBER: pickle.dumps(make(marker), protocol=4)})
    with pytest.raises(ConfigError, match=rf"Q_dict_gpt-4o_ID_191.*refusing to unpickle {refused}"):
        load_policies(path)
    assert not marker.exists()


def test_numpy_dtype_other_than_float_is_refused(tmp_path):
    path = write_zip(tmp_path / "q.zip", {MEMBER: pickle.dumps({"": np.int64(1)})})
    with pytest.raises(ConfigError, match=r"refusing to unpickle numpy\.dtype\('i8'\)"):
        load_policies(path)


@pytest.mark.parametrize("obj, expected", [
    ([0.5, 0.5], "expected a pickled dict"),
    ({}, "dict is empty"),
    ({(0, 1): 0.5, "": 0.5}, r"state keys must be digit strings like '0110'.*tuple key \(0, 1\)"),
    ({"": 0.5, "00": 1.0, "01": 0.5}, r"2 of 5 memory states \(H = 1\) have no q"),
    ({"": 0.5, "000": 0.5}, "longest state key has 3 characters"),
    ({k: {"his": -0.1, "her": -2.3} for k in memory_space(1).keys}, r"q\[''\] must be a number"),
])
def test_pickle_structure_is_validated(tmp_path, obj, expected):
    path = write_zip(tmp_path / "q.zip", {MEMBER: pickle.dumps(obj)})
    with pytest.raises(ConfigError, match=expected):
        load_policies(path)


def test_truncated_pickle_and_empty_archive(tmp_path):
    path = write_zip(tmp_path / "q.zip", {MEMBER: pickle.dumps(q_dict(1))[:-20]})
    with pytest.raises(ConfigError, match="not a readable q-table pickle"):
        load_policies(path)
    empty = write_zip(tmp_path / "empty.zip", {"readme.txt": b"hello"})
    with pytest.raises(ConfigError, match=r"holds no \.pkl member"):
        load_policies(empty)


def test_zip_bomb_is_refused_unread(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(MEMBER, "w") as fh:
            chunk = bytes(2 ** 20)
            for _ in range(pol.MAX_MEMBER_BYTES // len(chunk) + 1):
                fh.write(chunk)
    assert path.stat().st_size < 100_000
    with pytest.raises(ConfigError, match=r"would unpack to 17825792 bytes; the limit is 16777216"):
        load_policies(path)


def test_member_count_and_total_size_are_bounded(tmp_path, monkeypatch):
    members = {f"q_dicts/Q_dict_m_ID_191_-50_100_0.5tmp_BLANK_False_{i}.pkl": pickle.dumps(q_dict(1))
               for i in range(3)}
    path = write_zip(tmp_path / "many.zip", members)
    monkeypatch.setattr(pol, "MAX_ZIP_MEMBERS", 2)
    with pytest.raises(ConfigError, match="has 3 members; at most 2 are read"):
        load_policies(path)
    monkeypatch.setattr(pol, "MAX_ZIP_MEMBERS", 1000)
    monkeypatch.setattr(pol, "MAX_TOTAL_BYTES", 2 * len(pickle.dumps(q_dict(1))))
    with pytest.raises(ConfigError, match="would unpack to more than"):
        load_policies(path, words=("a", "b"))


def test_non_zip_with_zip_suffix_is_not_trusted(tmp_path):
    path = tmp_path / "q_dicts.zip"
    buf = io.BytesIO()
    pickle.dump(q_dict(1), buf)
    path.write_bytes(buf.getvalue())                          # a bare pickle named .zip: read as neither
    with pytest.raises(ConfigError, match="neither a zip of pickles nor valid JSON"):
        load_policies(path)
