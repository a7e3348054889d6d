"""Who may publish: the SROS2 keystore of a run, made without sros2 (``consensus security keystore``), and the
enclave of each of its processes (``consensus run --security``, ``security:=true``). No rclpy here.

The keystore has sros2's layout, so ``ros2 security`` and rcl read it as they read their own::

    KEYSTORE/public/ca.cert.pem             one CA (identity CA = permissions CA), EC P-256 as DDS-Security 9.3.1 asks
    KEYSTORE/private/ca.key.pem             its key: it never leaves the machine that made the keystore
    KEYSTORE/enclaves/governance.xml|.p7s   the domain's rules: authenticated participants only, everything encrypted
    KEYSTORE/enclaves/consensus/<who>/      one enclave: cert.pem, key.pem, identity_ca.cert.pem,
                                            permissions_ca.cert.pem, governance.p7s, permissions.xml|.p7s

``.p7s`` files are S/MIME detached signatures (PKCS#7, SHA-256) by the permissions CA, as sros2 makes them
(``openssl smime -verify`` checks them). Enclaves (``enclave_for``):

- ``/consensus/robot_<i>``: one robot's own process (namespace ``robot_<i>``). It may publish only its namespace's
  topics (DDS ``rt/robot_<i>/*`` and its nodes' service replies ``rr/robot_<i>/*``), plus what every ROS node
  publishes (``rt/rosout``, ``rt/parameter_events``, ``ros_discovery_info``) and the scenario-wide topics given with
  ``--publish``; it may read every topic.
- ``/consensus/fleet``: the ``/fleet`` process (``single_process:=true``): the same rule for all its robots' namespaces.
- ``/consensus/root``: every other process (sim, topology, recorder, nearby relay, bag recorder, llm_server, a
  scenario's root nodes, turtlesim): any topic except the robots' own outputs (state, target, planner records,
  cmd_vel), which only the robot's enclave may write.

A participant without the keystore's credentials is not admitted to the domain at all, and an enrolled one cannot
create a writer its permissions refuse: the middleware refuses, not our checks. That needs a DDS built with the
security plugins; ``security_plugins()`` looks for them in the Fast DDS library the run would load (the PyPI
wheels of Fast DDS 3.2 are built without them: docs/real-robots.md, "Security (SROS2)").
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import mmap
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from consensus import names
from consensus.errors import ConfigError
from consensus.extras import require

ENCLAVE_ROOT = "/consensus"
ROOT_ENCLAVE = f"{ENCLAVE_ROOT}/root"
FLEET_ENCLAVE = f"{ENCLAVE_ROOT}/fleet"
CA_NAME = "consensus keystore CA"
VALID_DAYS = 3650
DOMAINS = (0, 232)              # every ROS_DOMAIN_ID: one keystore serves any domain (a test's, a lab's)

#: the files rcl/rmw_security_common needs in an enclave directory
ENCLAVE_FILES = ("identity_ca.cert.pem", "cert.pem", "key.pem", "permissions_ca.cert.pem", "governance.p7s",
                 "permissions.p7s")
#: what every ROS 2 node publishes (logging, parameter events, rmw_fastrtps' graph topic)
ROS_INFRASTRUCTURE = ("rt/rosout", "rt/parameter_events", "ros_discovery_info")
#: a robot's own outputs: only its own enclave may write them (the root enclave is denied them)
ROBOT_OUTPUTS = tuple(t.name for t in (names.STATE, names.TARGET, names.PLANNER_REASONING, names.PLANNER_STATUS,
                                       names.CMD_VEL))
SECURITY_ENV = ("ROS_SECURITY_ENABLE", "ROS_SECURITY_STRATEGY", "ROS_SECURITY_KEYSTORE")
#: the string every Fast DDS built with -DSECURITY=ON carries (its authentication plugin's name)
FASTDDS_PLUGIN_MARK = b"builtin.PKI-DH"


def robot_enclave(robot_id: int) -> str:
    return f"{ENCLAVE_ROOT}/{names.namespace(robot_id)}"


def enclave_for(spec) -> str:
    """The enclave of a run's process (a ``consensus.runs.processes.ProcessSpec``): a robot's own process
    (namespace ``robot_<i>``) is ``/consensus/robot_<i>``, the ``/fleet`` process ``/consensus/fleet``, any other
    ``/consensus/root``."""
    ns = spec.namespace.strip("/")
    prefix = names.ROBOT_PREFIX
    if ns.startswith(prefix) and ns[len(prefix):].isdigit():
        return robot_enclave(int(ns[len(prefix):]))
    if not ns and spec.name == names.FLEET_NODE:
        return FLEET_ENCLAVE
    return ROOT_ENCLAVE


def enabled(env=None) -> bool:
    """ROS 2 security is on for the processes this one starts (rcl's rule: ``ROS_SECURITY_ENABLE=true``)."""
    return (os.environ if env is None else env).get("ROS_SECURITY_ENABLE", "").lower() == "true"


def enclave_args(spec, env=None) -> list[str]:
    """``--enclave ENCLAVE`` (inside ``--ros-args``) for ``spec`` when security is on, else nothing. rcl lets an
    exported ``ROS_SECURITY_ENCLAVE_OVERRIDE`` win over it."""
    return ["--enclave", enclave_for(spec)] if enabled(env) else []


# --- the permissions ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """One enclave's permissions, in DDS topic names (``rt/`` topics, ``rq/``/``rr/`` service requests and
    replies); ``deny_publish`` is checked before ``publish`` (the first matching rule decides)."""
    enclave: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = ()


def dds_topic(ros_topic: str) -> str:
    """The DDS name of an absolute ROS topic: ``/disaster/votes`` -> ``rt/disaster/votes``."""
    if not ros_topic.startswith("/") or ros_topic.rstrip("/") == "" or any(c in ros_topic for c in " *?[]"):
        raise ConfigError(f"--publish {ros_topic!r}: give an absolute ROS topic name such as /disaster/votes")
    return "rt" + ros_topic.rstrip("/")


def _own_namespaces(i: int, drivers: dict[int, str]) -> list[str]:
    """Robot ``i``'s namespaces: ``robot_<i>`` and its driver's (a robots map's entry), where the driver runs in
    the same enclave (the driver's command and pose topics)."""
    ns = [names.namespace(i)]
    if drivers.get(i, "").strip("/") and drivers[i].strip("/") != ns[0]:
        ns.append(drivers[i].strip("/"))
    return ns


def _robot_publish(robot_ids, extra: tuple[str, ...], drivers: dict[int, str]) -> tuple[str, ...]:
    own = []
    for i in robot_ids:
        for ns in _own_namespaces(i, drivers):
            own += [f"rt/{ns}/*", f"rr/{ns}/*"]
    return tuple(own) + ROS_INFRASTRUCTURE + tuple(dds_topic(t) for t in extra)


def _robot_subscribe(robot_ids, drivers: dict[int, str]) -> tuple[str, ...]:
    return ("rt/*", *(f"rq/{ns}/*" for i in robot_ids for ns in _own_namespaces(i, drivers)),
            "ros_discovery_info")


def grants(num_robots: int, *, single_process: bool = False, publish: tuple[str, ...] = (),
           drivers: dict[int, str] | None = None) -> list[Grant]:
    """The enclaves of a run of ``num_robots`` robots: the root enclave and one per robot (``single_process``:
    one ``/fleet`` enclave for all); ``publish``: absolute ROS topics every robot may publish besides its own namespace
    (a scenario's shared protocol topics, e.g. ``/disaster/votes``); ``drivers``: robot -> its driver's namespace
    (a robots map), which its enclave may publish in too."""
    drivers = drivers or {}
    if num_robots < 1:
        raise ConfigError(f"--robots {num_robots}: a keystore needs at least one robot")
    out = [Grant(ROOT_ENCLAVE, publish=("rt/*", "rq/*", "rr/*", "ros_discovery_info"),
                 subscribe=("rt/*", "rq/*", "rr/*", "ros_discovery_info"),
                 deny_publish=tuple(f"rt/{names.ROBOT_PREFIX}*/{t}" for t in ROBOT_OUTPUTS))]
    if single_process:
        ids = range(num_robots)
        fleet_node = names.FLEET_NODE
        out.append(Grant(FLEET_ENCLAVE, publish=_robot_publish(ids, publish, drivers) + (f"rr/{fleet_node}/*",),
                         subscribe=_robot_subscribe(ids, drivers) + (f"rq/{fleet_node}/*",)))
    else:
        out += [Grant(robot_enclave(i), publish=_robot_publish([i], publish, drivers),
                      subscribe=_robot_subscribe([i], drivers)) for i in range(num_robots)]
    return out


def _domains_xml(indent: str) -> str:
    lo, hi = DOMAINS
    return (f"{indent}<domains>\n{indent}  <id_range>\n{indent}    <min>{lo}</min>\n{indent}    <max>{hi}</max>\n"
            f"{indent}  </id_range>\n{indent}</domains>\n")


def _topics_xml(tag: str, topics, indent: str) -> str:
    body = "".join(f"{indent}    <topic>{t}</topic>\n" for t in topics)
    return f"{indent}<{tag}>\n{indent}  <topics>\n{body}{indent}  </topics>\n{indent}</{tag}>\n"


def _stamp(t: _dt.datetime) -> str:
    return t.astimezone(_dt.timezone.utc).replace(tzinfo=None, microsecond=0).isoformat()


def permissions_xml(grant: Grant, not_before: _dt.datetime, not_after: _dt.datetime) -> str:
    """The DDS-Security permissions document of ``grant`` (subject ``CN=<enclave>``, as sros2 writes it)."""
    rules = ""
    if grant.deny_publish:
        rules += ("      <deny_rule>\n" + _domains_xml("        ")
                  + _topics_xml("publish", grant.deny_publish, "        ") + "      </deny_rule>\n")
    rules += ("      <allow_rule>\n" + _domains_xml("        ") + _topics_xml("publish", grant.publish, "        ")
              + _topics_xml("subscribe", grant.subscribe, "        ") + "      </allow_rule>\n")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/'
            'omg_shared_ca_permissions.xsd">\n'
            "  <permissions>\n"
            f'    <grant name="{grant.enclave}">\n'
            f"      <subject_name>CN={grant.enclave}</subject_name>\n"
            f"      <validity>\n        <not_before>{_stamp(not_before)}</not_before>\n"
            f"        <not_after>{_stamp(not_after)}</not_after>\n      </validity>\n"
            f"{rules}"
            "      <default>DENY</default>\n"
            "    </grant>\n"
            "  </permissions>\n"
            "</dds>\n")


def governance_xml() -> str:
    """The domain's rules (sros2's defaults): no unauthenticated participant, join access control, discovery and
    liveliness encrypted, every message signed, every topic's data encrypted and read/write access-controlled."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/'
            'omg_shared_ca_governance.xsd">\n'
            "  <domain_access_rules>\n"
            "    <domain_rule>\n"
            + _domains_xml("      ") +
            "      <allow_unauthenticated_participants>false</allow_unauthenticated_participants>\n"
            "      <enable_join_access_control>true</enable_join_access_control>\n"
            "      <discovery_protection_kind>ENCRYPT</discovery_protection_kind>\n"
            "      <liveliness_protection_kind>ENCRYPT</liveliness_protection_kind>\n"
            "      <rtps_protection_kind>SIGN</rtps_protection_kind>\n"
            "      <topic_access_rules>\n"
            "        <topic_rule>\n"
            "          <topic_expression>*</topic_expression>\n"
            "          <enable_discovery_protection>true</enable_discovery_protection>\n"
            "          <enable_liveliness_protection>true</enable_liveliness_protection>\n"
            "          <enable_read_access_control>true</enable_read_access_control>\n"
            "          <enable_write_access_control>true</enable_write_access_control>\n"
            "          <metadata_protection_kind>ENCRYPT</metadata_protection_kind>\n"
            "          <data_protection_kind>ENCRYPT</data_protection_kind>\n"
            "        </topic_rule>\n"
            "      </topic_access_rules>\n"
            "    </domain_rule>\n"
            "  </domain_access_rules>\n"
            "</dds>\n")


# --- keys, certificates and signatures (the `cryptography` package) ---------------------------------------------


def _crypto():
    require("cryptography", "the SROS2 keystore (--security, consensus security)")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs7
    return x509, hashes, serialization, ec, pkcs7


def _key_and_cert(subject: str, *, ca_key=None, ca_cert=None, now: _dt.datetime):
    """A new P-256 key and its certificate ``CN=subject``: self-signed CA when ``ca_key`` is None."""
    x509, hashes, _, ec, _ = _crypto()
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, subject)])
    is_ca = ca_key is None
    builder = (x509.CertificateBuilder()
               .subject_name(name)
               .issuer_name(name if is_ca else ca_cert.subject)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - _dt.timedelta(days=1))      # a clock a little behind still accepts it
               .not_valid_after(now + _dt.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=is_ca, path_length=1 if is_ca else None), critical=is_ca))
    return key, builder.sign(key if is_ca else ca_key, hashes.SHA256())


def sign_smime(cert, key, data: bytes) -> bytes:
    """``data``'s S/MIME detached signature by ``cert``/``key`` (text/plain, SHA-256): what rmw reads as .p7s."""
    _, hashes, serialization, _, pkcs7 = _crypto()
    builder = pkcs7.PKCS7SignatureBuilder().set_data(data).add_signer(cert, key, hashes.SHA256())
    return builder.sign(serialization.Encoding.SMIME,
                        [pkcs7.PKCS7Options.Text, pkcs7.PKCS7Options.DetachedSignature])


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def enclave_dir(keystore: str | Path, enclave: str) -> Path:
    return Path(keystore) / "enclaves" / enclave.strip("/")


@dataclass
class Keystore:
    path: Path
    enclaves: list[str] = field(default_factory=list)
    created_ca: bool = False


def map_drivers(robots_file: str | Path | None) -> dict[int, str]:
    """Robot i -> the namespace of its driver, from a ``robots:`` map's enabled entries (robot i is the i-th)."""
    if not robots_file:
        return {}
    from consensus.robots.map import load_robots

    return {i: e.namespace for i, e in enumerate(load_robots(Path(robots_file).expanduser()).enabled)}


def create_keystore(path: str | Path, num_robots: int | None = None, *, single_process: bool = False,
                    publish: tuple[str, ...] = (), robots_file: str | Path | None = None) -> Keystore:
    """Make (or extend) the keystore at ``path`` for a run of ``num_robots`` robots (``grants``; with a
    ``robots_file``, its enabled robots, each enclave also holding its driver's namespace). An existing CA, and an
    enclave's existing key and certificate, are kept (robots already given their enclave keep working); governance
    and permissions are written and signed anew every time."""
    x509, _, serialization, _, _ = _crypto()
    path = Path(path)
    drivers = map_drivers(robots_file)
    if num_robots is None:
        num_robots = len(drivers)
    elif drivers and num_robots != len(drivers):
        raise ConfigError(f"--robots {num_robots}: the robots map {robots_file} has {len(drivers)} enabled robot(s)")
    enclave_grants = grants(num_robots, single_process=single_process, publish=tuple(publish), drivers=drivers)
    now = _dt.datetime.now(_dt.timezone.utc)
    public, private = path / "public", path / "private"
    ca_cert_path, ca_key_path = public / "ca.cert.pem", private / "ca.key.pem"
    created = not (ca_cert_path.is_file() and ca_key_path.is_file())
    if created:
        ca_key, ca_cert = _key_and_cert(CA_NAME, now=now)
        _write(ca_key_path, _pem_key(ca_key, serialization), private=True)
        _write(ca_cert_path, ca_cert.public_bytes(serialization.Encoding.PEM))
    else:
        ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
        ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
    os.chmod(private, 0o700)
    ca_pem = ca_cert_path.read_bytes()
    for role in ("identity_ca", "permissions_ca"):     # sros2's names for the two CAs (one here)
        _write(public / f"{role}.cert.pem", ca_pem)
        _write(private / f"{role}.key.pem", ca_key_path.read_bytes(), private=True)
    gov = governance_xml().encode()
    gov_p7s = sign_smime(ca_cert, ca_key, gov)
    _write(path / "enclaves" / "governance.xml", gov)
    _write(path / "enclaves" / "governance.p7s", gov_p7s)
    for grant in enclave_grants:
        d = enclave_dir(path, grant.enclave)
        cert_path, key_path = d / "cert.pem", d / "key.pem"
        if cert_path.is_file() and key_path.is_file():
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        else:
            key, cert = _key_and_cert(grant.enclave, ca_key=ca_key, ca_cert=ca_cert, now=now)
            _write(key_path, _pem_key(key, serialization), private=True)
            _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(d / "identity_ca.cert.pem", ca_pem)
        _write(d / "permissions_ca.cert.pem", ca_pem)
        _write(d / "governance.p7s", gov_p7s)
        perms = permissions_xml(grant, _cert_time(cert, "before"), _cert_time(cert, "after")).encode()
        _write(d / "permissions.xml", perms)
        _write(d / "permissions.p7s", sign_smime(ca_cert, ca_key, perms))
    return Keystore(path, [g.enclave for g in enclave_grants], created)


def _pem_key(key, serialization) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_time(cert, which: str) -> _dt.datetime:
    attr = f"not_valid_{which}_utc"
    if hasattr(cert, attr):
        return getattr(cert, attr)
    return getattr(cert, f"not_valid_{which}").replace(tzinfo=_dt.timezone.utc)


def missing_enclaves(keystore: str | Path, specs) -> dict[str, list[str]]:
    """Enclave -> the files it lacks, for every enclave the processes ``specs`` need (empty: all there)."""
    out: dict[str, list[str]] = {}
    for enclave in sorted({enclave_for(s) for s in specs}):
        d = enclave_dir(keystore, enclave)
        lacking = [f for f in ENCLAVE_FILES if not (d / f).is_file()]
        if lacking:
            out[enclave] = lacking
    return out


def check_keystore(keystore: str | Path, specs) -> None:
    """One ConfigError naming the enclaves (and files) of the run's processes that ``keystore`` lacks."""
    missing = missing_enclaves(keystore, specs)
    if missing:
        what = "; ".join(f"{e} ({', '.join(files)})" for e, files in missing.items())
        raise ConfigError(f"security: the keystore {keystore} lacks {what}: make it for this run with "
                          f"`consensus security keystore {keystore} --robots N [--single-process]`")


# --- does the middleware have the plugins? -----------------------------------------------------------------------


@dataclass(frozen=True)
class PluginCheck:
    available: bool | None       # None: this middleware is not one we know how to inspect
    library: Path | None
    reason: str


def _library_dirs() -> list[Path]:
    dirs = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    dirs.append(str(Path(sys.prefix) / "lib"))
    dirs += [str(Path(p) / "lib") for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    dirs += sorted(glob.glob("/opt/ros/*/lib"))
    seen, out = set(), []
    for d in dirs:
        if d not in seen and Path(d).is_dir():
            seen.add(d)
            out.append(Path(d))
    return out


def _contains(path: Path, needle: bytes) -> bool:
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(needle) >= 0


def security_plugins(rmw: str | None = None) -> PluginCheck:
    """Whether the DDS library the run's middleware loads carries the DDS-Security plugins (authentication
    PKI-DH, access control Permissions, cryptography AES-GCM-GMAC). Fast DDS (the default ``rmw_fastrtps_cpp``):
    its library must contain the plugin name ``builtin.PKI-DH``, which a build with ``-DSECURITY=OFF`` lacks;
    Cyclone DDS: ``libdds_security_auth.so`` must be installed."""
    rmw = rmw or os.environ.get("RMW_IMPLEMENTATION") or "rmw_fastrtps_cpp"
    dirs = _library_dirs()
    if rmw.startswith("rmw_fastrtps"):
        for d in dirs:
            for pattern in ("libfastdds.so*", "libfastrtps.so*"):
                for lib in sorted(d.glob(pattern)):
                    if lib.is_file():
                        if _contains(lib, FASTDDS_PLUGIN_MARK):
                            return PluginCheck(True, lib, f"{lib} has the DDS security plugins")
                        return PluginCheck(False, lib, f"{lib} is built without the DDS security plugins (no "
                                                       f"builtin.PKI-DH: Fast DDS built with -DSECURITY=OFF, as "
                                                       f"the PyPI wheels are)")
        return PluginCheck(False, None, f"no Fast DDS library (libfastdds.so) in {', '.join(map(str, dirs))}")
    if rmw.startswith("rmw_cyclonedds"):
        for d in dirs:
            lib = d / "libdds_security_auth.so"
            if lib.exists():
                return PluginCheck(True, lib, f"{lib} is installed")
        return PluginCheck(False, None, "Cyclone DDS without its security plugins (no libdds_security_auth.so)")
    return PluginCheck(None, None, f"{rmw}: not inspected; the middleware decides")


def security_env(keystore: str | Path) -> dict[str, str]:
    """What turns SROS2 on for every process started with it: enforced, with ``keystore``."""
    return {"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce",
            "ROS_SECURITY_KEYSTORE": str(Path(keystore).expanduser().resolve())}


def enable(keystore: str | Path | None, *, num_robots: int, single_process: bool, robots_file: str = "",
           say=print) -> dict[str, str]:
    """``consensus run --security`` / ``security:=true``: refuse (ConfigError) where the middleware lacks the
    plugins; use ``keystore`` (default: ``$ROS_SECURITY_KEYSTORE``), making it for ``num_robots`` robots if it does
    not exist yet (a ``robots_file``'s robots, with their drivers' namespaces); export the security variables to
    this process (so to every process it starts) and return them. Each process's enclave is checked against the
    keystore when the run's processes are known (``check_keystore``)."""
    check = security_plugins()
    if check.available is False:
        raise ConfigError(f"security: {check.reason}. A secured run needs a DDS with the security plugins: "
                          f"install ROS 2 from apt (docs/real-robots.md, 'Security (SROS2)')")
    keystore = keystore or os.environ.get("ROS_SECURITY_KEYSTORE")
    if not keystore:
        raise ConfigError("security: no keystore: give --keystore DIR (security:=true: keystore:=DIR) or export "
                          "ROS_SECURITY_KEYSTORE; make one with `consensus security keystore DIR --robots N`")
    keystore = Path(keystore).expanduser()
    if not keystore.exists():
        made = create_keystore(keystore, None if robots_file else num_robots, single_process=single_process,
                               robots_file=robots_file)
        say(f"security: made the keystore {keystore} ({', '.join(made.enclaves)})")
    env = security_env(keystore)
    os.environ.update(env)
    return env


# --- `consensus security keystore DIR --robots N [--single-process]` -----------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``consensus security``."""
    sub = p.add_subparsers(dest="security_action", required=True)
    ks = sub.add_parser("keystore", help="make (or extend) a run's SROS2 keystore",
                        description="Make the SROS2 keystore of a run: one CA, the signed governance, and one "
                                    "enclave per robot process (/consensus/robot_<i>; --single-process: "
                                    "/consensus/fleet) "
                                    "plus /consensus/root, each with its certificate, key and signed permissions "
                                    "(a robot publishes only in its own namespace).")
    ks.add_argument("dir", type=Path, help="keystore directory (ROS_SECURITY_KEYSTORE)")
    ks.add_argument("--robots", type=int, metavar="N", help="number of robots (default: a --robots-file's)")
    ks.add_argument("--robots-file", type=Path, metavar="MAP",
                    help="a robots: map: its enabled robots, each enclave also publishing in its driver's namespace")
    ks.add_argument("--single-process", action="store_true",
                    help="one /fleet process runs all robots (single_process:=true)")
    ks.add_argument("--fleet", action="store_true", help=argparse.SUPPRESS)     # the old name: refused in command
    ks.add_argument("--publish", action="append", default=[], metavar="TOPIC",
                    help="an absolute topic every robot may publish too (a scenario's shared protocol topic, e.g. "
                         "/disaster/votes); repeatable")
    sub.add_parser("check", help="say whether the DDS library has the security plugins")


def command(args: argparse.Namespace) -> int:
    if args.security_action == "check":
        check = security_plugins()
        print(check.reason)
        return 0 if check.available is not False else 1
    if args.robots is None and args.robots_file is None:
        raise ConfigError("consensus security keystore: give --robots N or --robots-file MAP")
    if args.fleet:
        raise ConfigError("consensus security keystore: --fleet is now --single-process (the process layout; "
                          "'fleet' names the group of robots)")
    made = create_keystore(args.dir, args.robots, single_process=args.single_process, publish=tuple(args.publish),
                           robots_file=args.robots_file)
    print(f"keystore: {made.path.resolve()} ({'new CA' if made.created_ca else 'its CA kept'})")
    for enclave in made.enclaves:
        print(f"  enclave: {enclave}")
    print(f"use: consensus run SCENARIO --security --keystore {made.path} (or ROS_SECURITY_KEYSTORE={made.path})")
    return 0

