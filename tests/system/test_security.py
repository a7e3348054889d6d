"""Who may publish (issue 28, part 4): the SROS2 keystore ``consensus security keystore`` makes, the enclave each
process runs in, and what the middleware does with them.

The pinned wheels' case (docs/real-robots.md, "Security (SROS2)"): rcl honours ROS_SECURITY_ENABLE, _STRATEGY,
_KEYSTORE and _ENCLAVE_OVERRIDE, but the Fast DDS library of the PyPI wheels is built without the DDS security
plugins, so rmw_fastrtps refuses to create a secured node (fail-closed) and ``--security`` is refused up front. The
test that a stranger's messages never reach a robot runs where the plugins exist (an apt ROS 2) and skips here with
that reason; its harness is shown to count a stranger's messages when security is off.

Run as a script (``python tests/system/test_security.py ROLE ...``) this file is the ROS nodes of those tests.
"""
from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HONEST_X, PLAIN_X, OTHER_ROBOT_X, ROOT_X = 1.0, 1000.0, 2000.0, 3000.0
ENOUGH = 50                   # honest messages the listener waits for (strangers publish all along)
#: with security, the honest messages that end the count: about 6 s at the robot's 50 Hz, two of Fast DDS's 3 s
#: participant announcement periods, so a stranger that missed the first burst of discovery had its second chance
SECURED_ENOUGH = 300


# --- the nodes (run as a script; rclpy is imported only there) ---------------------------------------------------


def _node(role: str, value: float) -> int:
    """``listen VALUE``: count /robot_0/state by x until VALUE honest ones (``listen_both``: and one other);
    ``honest``/``stranger VALUE``: publish x = VALUE as robot_0 / as a root-namespace stranger."""
    import rclpy
    from geometry_msgs.msg import PointStamped

    from consensus import names
    from consensus.ros import qos

    rclpy.init(args=sys.argv)
    try:
        if role in ("listen", "listen_both"):
            node = rclpy.create_node("listener")
            counts: dict[str, int] = {}

            def heard(msg) -> None:
                key = str(round(msg.point.x))
                counts[key] = counts.get(key, 0) + 1

            node.create_subscription(PointStamped, "/" + names.STATE.of(0), heard, qos.profile(names.STATE))
            print("LISTENING", flush=True)
            honest = str(round(HONEST_X))
            while counts.get(honest, 0) < value or (role == "listen_both" and len(counts) < 2):
                rclpy.spin_once(node, timeout_sec=0.5)
            print("DONE " + json.dumps(counts), flush=True)
            return 0
        ns, name = ("robot_0", "agent") if role == "honest" else ("", "stranger")
        node = rclpy.create_node(name, namespace=ns)
        try:
            pub = node.create_publisher(PointStamped, "/" + names.STATE.of(0), qos.profile(names.STATE))
        except Exception as exc:  # noqa: BLE001 - a refused writer is this role's expected outcome
            print(f"REFUSED {type(exc).__name__}: {exc}", flush=True)
            return 3
        print("PUBLISHING", flush=True)
        msg = PointStamped()
        msg.header.frame_id = names.WORLD_FRAME
        msg.point.x, msg.point.y = value, value
        while True:
            pub.publish(msg)
            rclpy.spin_once(node, timeout_sec=0.02 if role == "honest" else 0.005)
    finally:
        if rclpy.ok():
            rclpy.shutdown()


if __name__ == "__main__":
    sys.exit(_node(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-")
                   else 0.0))


# --- the tests ----------------------------------------------------------------------------------------------------

import pytest  # noqa: E402

from consensus.errors import ConfigError  # noqa: E402
from consensus.runs import security  # noqa: E402
from consensus.runs.processes import ProcessSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_security_env(monkeypatch):
    """The security variables unset, and restored after the test whatever ``security.enable`` exported."""
    for key in (*security.SECURITY_ENV, "ROS_SECURITY_ENCLAVE_OVERRIDE"):
        monkeypatch.setenv(key, "unset")
        monkeypatch.delenv(key)
    return monkeypatch


def _grant(keystore: Path, enclave: str) -> ET.Element:
    root = ET.parse(security.enclave_dir(keystore, enclave) / "permissions.xml").getroot()
    grants = root.findall("permissions/grant")
    assert len(grants) == 1
    return grants[0]


def _decides(grant: ET.Element, action: str, topic: str) -> bool:
    """DDS-Security's reading of a grant: the first rule (in document order) with a matching topic expression
    decides; none matching: the grant's default."""
    for rule in grant:
        if rule.tag not in ("allow_rule", "deny_rule"):
            continue
        for expr in rule.findall(f"{action}/topics/topic"):
            if fnmatch.fnmatchcase(topic, expr.text):
                return rule.tag == "allow_rule"
    return grant.findtext("default") == "ALLOW"


def test_every_enclave_has_rcls_files_and_a_certificate_that_chains_to_the_ca(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    made = security.create_keystore(tmp_path / "ks", 3)
    assert made.enclaves == ["/consensus/root", "/consensus/robot_0", "/consensus/robot_1", "/consensus/robot_2"]
    ca = x509.load_pem_x509_certificate((tmp_path / "ks/public/ca.cert.pem").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for enclave in made.enclaves:
        d = security.enclave_dir(tmp_path / "ks", enclave)
        assert all((d / f).is_file() for f in security.ENCLAVE_FILES), enclave
        cert = x509.load_pem_x509_certificate((d / "cert.pem").read_bytes())
        cert.verify_directly_issued_by(ca)              # raises unless the CA signed it
        assert cert.subject.rfc4514_string() == f"CN={enclave}"
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        key = serialization.load_pem_private_key((d / "key.pem").read_bytes(), None)
        assert key.public_key().public_numbers() == cert.public_key().public_numbers()
        assert (d / "key.pem").stat().st_mode & 0o077 == 0          # a private key is the owner's alone
        assert _grant(tmp_path / "ks", enclave).findtext("subject_name") == f"CN={enclave}"
    stranger_ca = security.create_keystore(tmp_path / "other", 1)
    other = x509.load_pem_x509_certificate((tmp_path / "other/public/ca.cert.pem").read_bytes())
    with pytest.raises(Exception):                     # another keystore's CA did not sign ours
        x509.load_pem_x509_certificate(
            (security.enclave_dir(tmp_path / "ks", "/consensus/robot_0") / "cert.pem").read_bytes()
        ).verify_directly_issued_by(other)
    assert stranger_ca.created_ca


def test_robot_i_may_publish_only_its_own_namespace(tmp_path):
    security.create_keystore(tmp_path, 12)
    for i in (0, 1, 11):
        grant = _grant(tmp_path, f"/consensus/robot_{i}")
        assert grant.findtext("default") == "DENY"
        own = {f"rt/robot_{i}/*", f"rr/robot_{i}/*"}
        published = {t.text for t in grant.findall("allow_rule/publish/topics/topic")}
        assert published == own | set(security.ROS_INFRASTRUCTURE)
        for topic in ("state", "cmd_vel", "target", "planner/status", "odom"):
            assert _decides(grant, "publish", f"rt/robot_{i}/{topic}")
            for j in (0, 1, 10, 11):
                if j != i:           # robot_1 may not write robot_10's or robot_11's topics (no prefix trap)
                    assert not _decides(grant, "publish", f"rt/robot_{j}/{topic}"), (i, j, topic)
        for topic in ("rt/topology/graph", "rt/clock", "rt/estop", "rt/tf", "rt/health"):
            assert not _decides(grant, "publish", topic)
        assert _decides(grant, "subscribe", "rt/robot_5/state")          # it hears the others
        assert _decides(grant, "subscribe", f"rq/robot_{i}/agent/get_parametersRequest")


def test_the_root_enclave_cannot_write_a_robots_own_outputs(tmp_path):
    security.create_keystore(tmp_path, 2)
    grant = _grant(tmp_path, "/consensus/root")
    assert [r.tag for r in grant if r.tag.endswith("_rule")] == ["deny_rule", "allow_rule"]    # deny decides first
    for topic in ("odom", "neighbors", "neighbor_targets", "nearby", "disaster/vote_request"):
        assert _decides(grant, "publish", f"rt/robot_0/{topic}")          # the sim, topology, relay, aggregator
    for topic in ("state", "target", "planner/reasoning", "planner/status", "cmd_vel"):
        assert not _decides(grant, "publish", f"rt/robot_0/{topic}")
        assert not _decides(grant, "publish", f"rt/robot_17/{topic}")
    assert _decides(grant, "publish", "rt/topology/graph") and _decides(grant, "publish", "rt/clock")


def test_fleet_is_one_enclave_for_all_its_robots_and_publish_adds_shared_topics(tmp_path):
    made = security.create_keystore(tmp_path, 3, single_process=True, publish=("/disaster/votes",))
    assert made.enclaves == ["/consensus/root", "/consensus/fleet"]
    assert not security.enclave_dir(tmp_path, "/consensus/robot_0").exists()
    grant = _grant(tmp_path, "/consensus/fleet")
    for i in range(3):
        assert _decides(grant, "publish", f"rt/robot_{i}/state")
    assert not _decides(grant, "publish", "rt/robot_3/state")
    assert _decides(grant, "publish", "rt/disaster/votes") and not _decides(grant, "publish", "rt/disaster/state")
    assert _decides(grant, "publish", "rr/fleet/get_parametersReply")
    with pytest.raises(ConfigError, match="absolute"):
        security.create_keystore(tmp_path / "bad", 1, publish=("votes",))
    assert not (tmp_path / "bad").exists()


def test_extending_a_keystore_keeps_its_ca_and_the_robots_keys(tmp_path):
    first = security.create_keystore(tmp_path, 2)
    ca = (tmp_path / "public/ca.cert.pem").read_bytes()
    key0 = (security.enclave_dir(tmp_path, "/consensus/robot_0") / "key.pem").read_bytes()
    second = security.create_keystore(tmp_path, 4)
    assert first.created_ca and not second.created_ca
    assert (tmp_path / "public/ca.cert.pem").read_bytes() == ca
    assert (security.enclave_dir(tmp_path, "/consensus/robot_0") / "key.pem").read_bytes() == key0
    assert "/consensus/robot_3" in second.enclaves


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_governance_and_permissions_signatures_verify_with_openssl(tmp_path):
    security.create_keystore(tmp_path, 2)
    ca = tmp_path / "public" / "ca.cert.pem"
    signed = [tmp_path / "enclaves" / "governance.p7s"] + [
        security.enclave_dir(tmp_path, e) / f for e in ("/consensus/root", "/consensus/robot_1")
        for f in ("governance.p7s", "permissions.p7s")]
    for p7s in signed:
        out = tmp_path / "content.txt"
        res = subprocess.run(["openssl", "smime", "-verify", "-text", "-in", str(p7s), "-CAfile", str(ca),
                              "-out", str(out)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        xml = p7s.with_suffix(".xml") if p7s.name == "permissions.p7s" else tmp_path / "enclaves/governance.xml"
        assert out.read_bytes().replace(b"\r\n", b"\n") == xml.read_bytes()
    # a permissions document changed after signing (robot_1 granting itself robot_0's topics) does not verify
    p7s = security.enclave_dir(tmp_path, "/consensus/robot_1") / "permissions.p7s"
    forged = tmp_path / "forged.p7s"
    forged.write_bytes(p7s.read_bytes().replace(b"rt/robot_1/*", b"rt/robot_*/*"))
    assert forged.read_bytes() != p7s.read_bytes()
    res = subprocess.run(["openssl", "smime", "-verify", "-in", str(forged), "-CAfile", str(ca), "-out", os.devnull],
                         capture_output=True, text=True)
    assert res.returncode != 0


def test_each_process_gets_its_enclave_only_when_security_is_on(no_security_env, tmp_path):
    from consensus.runs.ros_runner import ros_args

    specs = [ProcessSpec("robot", "agent", namespace="robot_3"), ProcessSpec("fleet_exe", "fleet"),
             ProcessSpec("sim", "sim"), ProcessSpec("turtlesim_node", "turtlesim", package="turtlesim")]
    assert [security.enclave_for(s) for s in specs] == \
        ["/consensus/robot_3", "/consensus/fleet", "/consensus/root", "/consensus/root"]
    assert "--enclave" not in ros_args(specs[0], tmp_path / "params.yaml")
    no_security_env.setenv("ROS_SECURITY_ENABLE", "true")
    for spec in specs:
        args = ros_args(spec, tmp_path / "params.yaml")
        assert args[0] == "--ros-args"
        assert args[args.index("--enclave") + 1] == security.enclave_for(spec)


def test_the_runner_refuses_a_keystore_without_a_processs_enclave(no_security_env, tmp_path):
    from consensus.runs.ros_runner import run_processes

    security.create_keystore(tmp_path / "ks", 2)
    no_security_env.setenv("ROS_SECURITY_ENABLE", "true")
    no_security_env.setenv("ROS_SECURITY_KEYSTORE", str(tmp_path / "ks"))
    specs = [ProcessSpec("sim", "sim")] + [ProcessSpec("robot", "agent", namespace=f"robot_{i}") for i in range(3)]
    with pytest.raises(ConfigError, match="/consensus/robot_2") as err:
        run_processes(specs, tmp_path / "params.yaml", tmp_path / "run")
    assert "robot_0" not in str(err.value) and not (tmp_path / "run").exists()       # nothing started


def test_plugin_check_reads_the_fast_dds_library_the_run_loads(no_security_env, tmp_path):
    with_plugins, without = tmp_path / "with", tmp_path / "without"
    for d, body in ((with_plugins, b"\0ELF...builtin.PKI-DH\0..."), (without, b"\0ELF...TCP only\0")):
        d.mkdir()
        (d / "libfastdds.so.3.2").write_bytes(body)
    no_security_env.setenv("LD_LIBRARY_PATH", str(with_plugins))
    check = security.security_plugins("rmw_fastrtps_cpp")
    assert check.available and check.library == with_plugins / "libfastdds.so.3.2"
    no_security_env.setenv("LD_LIBRARY_PATH", str(without))
    check = security.security_plugins("rmw_fastrtps_cpp")
    assert check.available is False and "builtin.PKI-DH" in check.reason
    assert security.security_plugins("rmw_connextdds").available is None


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "consensus.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def _pinned_case():
    check = security.security_plugins()
    if check.available:
        pytest.skip(f"this DDS has the security plugins ({check.reason}): the pinned wheels' case does not hold")
    return check


def test_security_flag_is_refused_up_front_where_the_plugins_are_missing(no_security_env, tmp_path):
    check = _pinned_case()
    res = _cli("run", "aggregation", "--robots", "2", "--planner", "average", "--security", "--keystore",
               str(tmp_path / "ks"), "--out", str(tmp_path / "run"))
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("consensus: error:")]
    assert len(errors) == 1 and check.reason in errors[0] and "real-robots.md" in errors[0], res.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "ks").exists()
    res = _cli("security", "check")
    assert res.returncode == 1 and check.reason in res.stdout


def _node_env(keystore: Path | None, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROS_SECURITY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    if keystore is not None:
        env.update(security.security_env(keystore))
    env.update(extra)
    return env


def _start(role: str, value: float, keystore: Path | None, enclave: str | None, **extra: str) -> subprocess.Popen:
    cmd = [sys.executable, __file__, role, str(value)] + (["--ros-args", "--enclave", enclave] if enclave else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_node_env(keystore, **extra), start_new_session=True)


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


@pytest.mark.ros
def test_rcl_honours_the_security_variables_and_the_pinned_wheels_fail_closed(tmp_path):
    """rcl finds the enclave (--enclave, or ROS_SECURITY_ENCLAVE_OVERRIDE over it) in ROS_SECURITY_KEYSTORE and
    enforces ROS_SECURITY_STRATEGY; the wheels' rmw_fastrtps then refuses to create the secured node at all: no
    process runs unsecured while the run believes it is secured."""
    _pinned_case()
    ks = tmp_path / "ks"
    security.create_keystore(ks, 2)

    def run(enclave: str, **extra: str) -> subprocess.CompletedProcess:
        """The node's output until it publishes (then it is stopped) or exits."""
        p = _start("honest", HONEST_X, ks, enclave, **extra)
        lines: list[str] = []
        try:
            deadline = time.monotonic() + 60               # only against a hang
            while time.monotonic() < deadline and not (lines and lines[-1].startswith("PUBLISHING")):
                line = p.stdout.readline()
                if not line and p.poll() is not None:
                    break
                lines.append(line)
        finally:
            _stop([p])
        return subprocess.CompletedProcess(p.args, p.returncode, "".join(lines))

    res = run("/consensus/robot_0")
    assert res.returncode != 0 and "PUBLISHING" not in res.stdout
    assert f"Found security directory: {ks.resolve()}/enclaves/consensus/robot_0" in res.stdout
    assert "doesn't have the security libraries" in res.stdout and "-DSECURITY=ON" in res.stdout
    res = run("/consensus/robot_0", ROS_SECURITY_ENCLAVE_OVERRIDE="/consensus/robot_1")
    assert f"{ks.resolve()}/enclaves/consensus/robot_1" in res.stdout and res.returncode != 0
    res = run("/consensus/robot_7")                                   # Enforce: no enclave, no node
    assert res.returncode != 0 and "robot_7' does not exist" in res.stdout
    res = run("/consensus/robot_7", ROS_SECURITY_STRATEGY="Permissive")     # Permissive: runs unsecured
    assert "PUBLISHING" in res.stdout


def _listen(procs: list, listener: subprocess.Popen) -> dict:
    """The listener's counts once it heard ENOUGH honest messages (a deadline only against a hang)."""
    try:
        out, _ = listener.communicate(timeout=180)
    finally:
        _stop(procs + [listener])
    done = [line for line in out.splitlines() if line.startswith("DONE ")]
    assert done, out
    return {float(k): n for k, n in json.loads(done[-1][5:]).items()}


def _first(p: subprocess.Popen, *starts: str) -> str:
    """The first line of ``p``'s output that starts with one of ``starts`` ("" if it exits first)."""
    deadline = time.monotonic() + 60                # only against a hang
    line = ""
    while time.monotonic() < deadline and not line.startswith(starts):
        line = p.stdout.readline()
        if not line and p.poll() is not None:
            break
    return line


def _publishing(p: subprocess.Popen) -> str:
    """A stranger's first word: PUBLISHING, or REFUSED when its writer was refused."""
    return _first(p, "PUBLISHING", "REFUSED")


def _listener(keystore: Path | None, enclave: str | None, role: str, honest: int) -> subprocess.Popen:
    """The subscriber, started first (its subscription exists before any publisher does)."""
    p = _start(role, honest, keystore, enclave)
    assert _first(p, "LISTENING").startswith("LISTENING")
    return p


@pytest.mark.ros
def test_without_security_a_strangers_states_reach_the_robots(no_security_env):
    """The harness of the next test, with security off: the stranger's states arrive beside the robot's own (the
    spoofing of issue 28). The subscriber starts first, then the stranger, then (once the stranger publishes) the
    robot; the count ends when ENOUGH of the robot's states and one of the stranger's have arrived."""
    listener = _listener(None, None, "listen_both", ENOUGH)
    stranger = _start("stranger", PLAIN_X, None, None)
    assert _publishing(stranger).startswith("PUBLISHING")
    honest = _start("honest", HONEST_X, None, None)
    counts = _listen([stranger, honest], listener)
    assert counts[HONEST_X] >= ENOUGH and counts.get(PLAIN_X, 0) > 0


@pytest.mark.ros
def test_with_security_a_strangers_states_never_reach_the_robots(tmp_path, no_security_env):
    """Enrolled nodes talk; a participant without the keystore's credentials, one with robot_1's enclave and one
    with the root enclave publish on /robot_0/state all along, and the subscriber counts none of their messages."""
    check = security.security_plugins()
    if not check.available:
        pytest.skip(f"the DDS security plugins are not here: {check.reason}; docs/real-robots.md, "
                    f"'Security (SROS2)', has the apt ROS 2 path where this test runs")
    ks = tmp_path / "ks"
    security.create_keystore(ks, 2)
    listener = _listener(ks, "/consensus/root", "listen", SECURED_ENOUGH)
    plain = _start("stranger", PLAIN_X, None, None)                              # no credentials at all
    other = _start("stranger", OTHER_ROBOT_X, ks, "/consensus/robot_1")          # another robot's enclave
    root = _start("stranger", ROOT_X, ks, "/consensus/root")                     # the infrastructure's enclave
    assert _publishing(plain).startswith("PUBLISHING")
    for p in (other, root):
        assert _publishing(p).startswith(("PUBLISHING", "REFUSED"))      # refused writer, or one nobody matches
    honest = _start("honest", HONEST_X, ks, "/consensus/robot_0")
    counts = _listen([plain, other, root, honest], listener)
    assert counts.get(HONEST_X, 0) >= SECURED_ENOUGH
    assert counts.get(PLAIN_X, 0) == 0 and counts.get(OTHER_ROBOT_X, 0) == 0 and counts.get(ROOT_X, 0) == 0, counts


@pytest.mark.needs("ros2_launch")
def test_launch_argument_security_puts_every_node_in_its_enclave(no_security_env, monkeypatch, tmp_path):
    from launch.substitutions import TextSubstitution
    from launch.utilities import perform_substitutions
    from launch_ros.actions import Node

    from support.ros2_tools import launch_run, node_info

    with pytest.raises(ConfigError, match="security:=maybe"):
        launch_run("aggregation.launch.py", monkeypatch, security="maybe", output_dir=tmp_path / "refused")
    if not security.security_plugins().available:
        with pytest.raises(ConfigError, match="builtin.PKI-DH"):      # the pinned wheels: refused up front
            launch_run("aggregation.launch.py", monkeypatch, security="true", keystore=tmp_path / "ks0",
                       output_dir=tmp_path / "refused")
        assert not (tmp_path / "ks0").exists() and not (tmp_path / "refused").exists()
    # the wiring, as on a DDS with the plugins
    monkeypatch.setattr(security, "security_plugins", lambda rmw=None: security.PluginCheck(True, None, "here"))
    context, actions = launch_run("aggregation.launch.py", monkeypatch, num_robots=2, single_process="false",
                                  planner="average", security="true", keystore=tmp_path / "ks",
                                  output_dir=tmp_path / "run")
    assert os.environ["ROS_SECURITY_ENABLE"] == "true" and os.environ["ROS_SECURITY_STRATEGY"] == "Enforce"
    assert os.environ["ROS_SECURITY_KEYSTORE"] == str((tmp_path / "ks").resolve())
    enclaves = {}
    for node in (a for a in actions if isinstance(a, Node)):
        cmd = [perform_substitutions(context, part) for part in node.cmd
               if all(isinstance(sub, TextSubstitution) for sub in part)]    # (not the ros-args of the launch)
        enclaves[node_info(node)["name"]] = cmd[cmd.index("--enclave") + 1]
    assert enclaves == {"/sim": "/consensus/root", "/topology": "/consensus/root",
                        "/robot_0/agent": "/consensus/robot_0", "/robot_1/agent": "/consensus/robot_1",
                        "/recorder": "/consensus/root", "/bag_recorder": "/consensus/root"}
    assert security.missing_enclaves(tmp_path / "ks", []) == {}          # made for the run, since it was missing
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["security"]["keystore"] == str((tmp_path / "ks").resolve())
