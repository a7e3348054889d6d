"""Declared ROS parameters <-> a scenario config (``consensus.settings``).

``declare_config(node, cls, runtime, uses)`` declares the fields of a config class that a node reads as its
parameters (descriptors from each field's documented meaning and range, read-only unless the node applies a change)
and returns the validated config; the fields it does not declare still take the run's values from the node's
parameter overrides, so one ``/**:`` params file configures every node and the values are validated by the same code
as the CLI's.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Iterable

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from consensus.errors import ConfigError

_LIST_TYPES = {str: Parameter.Type.STRING_ARRAY, float: Parameter.Type.DOUBLE_ARRAY,
               int: Parameter.Type.INTEGER_ARRAY, bool: Parameter.Type.BOOL_ARRAY}


def descriptor(name: str, doc: str, bounds: tuple | None, runtime: bool, kind: type) -> ParameterDescriptor:
    """The ROS descriptor of config field ``name``: its documented meaning, its range (where the config declares
    one) and read-only unless a running node applies a change of it."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange

    when = "changeable at run time" if runtime else "read-only: set at start (params file, launch argument)"
    desc = ParameterDescriptor(description=f"{doc or name} ({when})", read_only=not runtime)
    if bounds is not None and kind in (int, float):
        lo, hi = bounds
        desc.additional_constraints = f"{lo:g} <= {name} <= {hi:g}"
        if kind is float:
            desc.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
        else:
            desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=1)]
    return desc


def config_descriptors(cls: type, runtime: Iterable[str] = ()) -> dict[str, ParameterDescriptor]:
    """Every field of the config class ``cls`` -> its ROS descriptor (``descriptor``, named by its nested ROS name,
    ``consensus.settings.ros_names``) from the field's metadata (``settings.param``): its doc and unit
    (``field_help``) and its bounds, the one source the CLI, launch arguments and studies check too, so a node never
    refuses a value that ``consensus run`` accepted."""
    from consensus.settings import field_help, ros_names

    types, ros = cls.field_types(), ros_names(cls)
    ranges, runtime = cls.field_ranges(), set(runtime)
    return {f.name: descriptor(ros[f.name], field_help(cls, f.name), ranges.get(f.name), f.name in runtime,
                               types[f.name]) for f in dataclasses.fields(cls)}


def declared_fields(cls: type, groups: Iterable[str] | None, uses: Iterable[str] | None,
                    runtime: Iterable[str] = ()) -> set[str]:
    """The fields a node declares as parameters: every field of its ``groups`` (``consensus.settings.field_group``),
    the single fields of other groups it ``uses``, and its ``runtime`` ones; every field when it names neither."""
    from consensus.settings import field_group

    names = [f.name for f in dataclasses.fields(cls)]
    if groups is None and uses is None:
        return set(names)
    groups = set(groups or ())
    known = {field_group(cls, n) for n in names}
    if groups - known:
        raise ValueError(f"{cls.__name__} has no group(s) {', '.join(sorted(groups - known))}")
    wanted = set(uses or ()) | set(runtime)
    if wanted - set(names):
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(sorted(wanted - set(names)))}")
    return wanted | {n for n in names if field_group(cls, n) in groups}


def declare_config(node: Node, cls: type, runtime: Iterable[str] = (), uses: Iterable[str] | None = None,
                   groups: Iterable[str] | None = None):
    """Declare the fields of the config dataclass ``cls`` (a ``consensus.settings.FlatParams``) that ``node`` reads
    (``declared_fields``: its ``groups``, plus single fields it ``uses`` and its ``runtime`` ones; default: every
    field) as its parameters, nested by group (``control.kp``: ``consensus.settings.ros_names``), defaults from the
    dataclass (an empty list typed by the field's annotation), descriptors from the fields' metadata (doc, unit,
    bounds: ``config_descriptors``), every parameter read-only except ``runtime`` (the ones this node applies when
    they change: its ``add_on_set_parameters_callback``, which reads them with ``changed_fields``); and return the
    validated config. ``ros2 param set`` of a read-only parameter is refused with the reason, and ``ros2 param list``
    shows the groups the node uses. A field the node does not declare still takes this node's value from the
    parameters file or ``-p`` (rclpy's parameter overrides of the node), so the whole config (and a manifest written
    from it) is the run's. A flat name (``kp``, the name before the groups) is still read, with one warning; given
    besides the nested one (an old file layered over a new one), the flat value wins, as the layer on top."""
    from consensus.settings import flat_names_in, renamed_hint, ros_names

    values: dict = {}
    types, ros = cls.field_types(), ros_names(cls)
    descriptors = config_descriptors(cls, runtime)
    declared = declared_fields(cls, groups, uses, runtime)
    overrides = getattr(node, "_parameter_overrides", {}) or {}
    renamed = cls.renamed_fields()
    old = next((k for k in overrides if k in renamed), None)
    if old is not None:
        new = renamed[old]
        raise ConfigError(f"node '{node.get_fully_qualified_name()}' parameters: '{old}' is now called "
                          f"'{ros.get(new, new)}' (one meaning per word across scenarios)")
    flat = flat_names_in(cls, [k for k in overrides if k not in ros.values()])
    if flat:
        node.get_logger().warning(renamed_hint(cls, flat))
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        name = ros[f.name]
        # both: an old flat file layered over a new nested one (--params-file new --params-file old): the flat one
        # is the layer on top, as it was before the groups
        given = overrides.get(f.name) if f.name in flat else overrides.get(name)
        if f.name in flat and f.name in declared:      # declared by its nested name, typed by the default as always
            overrides[name] = Parameter(name, value=given.value)
        if f.name not in declared:
            value = default if given is None else given.value
            values[f.name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
            continue
        desc = descriptors[f.name]
        if not node.has_parameter(name):
            try:
                if isinstance(default, list) and not default:
                    (item,) = typing.get_args(types[f.name]) or (str,)
                    node.declare_parameter(name, _LIST_TYPES[item], desc)
                else:
                    node.declare_parameter(name, default, desc)
            except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
                # a params-file or -p value outside the declared range, or of the wrong type: bad input, one line
                raise ConfigError(f"node '{node.get_fully_qualified_name()}' parameters: {name}: "
                                  f"{' '.join(str(exc).split())}") from None
        try:
            value = node.get_parameter(name).value
        except ParameterUninitializedException:
            value = default
        values[f.name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
    return cls.from_dict(values, source=f"node '{node.get_fully_qualified_name()}' parameters")


def changed_fields(cls: type, params, allowed: Iterable[str]) -> dict:
    """The changes of a parameter callback (``Parameter``s by their ROS names) as config fields -> values, only the
    ``allowed`` fields (a node's runtime ones)."""
    from consensus.settings import fields_of_ros

    field_of, allowed = fields_of_ros(cls), set(allowed)
    return {field_of[p.name]: p.value for p in params if field_of.get(p.name) in allowed}
