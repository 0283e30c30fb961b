"""Hypothesis strategies that build random messages valid at one version, from the spec model.

A field the version lacks keeps its default; nulls appear only where the version allows them;
tagged fields are sometimes left at their default (and so not written); flexible versions get
random unknown tagged fields with tags the version does not define.
"""

from __future__ import annotations

import importlib
from typing import Any

from hypothesis import strategies as st

from kwire.uuid import Uuid
from messages.runtime import Message
from messages.spec import INT_RANGES, FieldSpec, MessageSpec, StructSpec


def message_class(spec: MessageSpec, struct_name: str | None = None) -> type[Message]:
    module = importlib.import_module(f"messages.generated.{spec.module_name}")
    return getattr(module, struct_name or spec.name)  # type: ignore[no-any-return]


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return st.text(max_size=24)
    if kind in ("bytes", "records"):
        return st.binary(max_size=48)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16).map(Uuid)
    raise AssertionError(kind)


def _field_value(spec: MessageSpec, f: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    t = f.type
    if t.is_array:
        el = t.element
        elems = (struct_strategy(spec, spec.structs[el.text], version) if el.is_struct
                 else _scalar(el.text))
        value: st.SearchStrategy[Any] = st.lists(elems, max_size=3)
    elif t.is_struct:
        value = struct_strategy(spec, spec.structs[t.text], version)
    else:
        value = _scalar(t.text)
    if f.nullable_in(version):
        value = st.one_of(st.none(), value)
    return value


def struct_strategy(spec: MessageSpec, struct: StructSpec, version: int) -> st.SearchStrategy[Any]:
    cls = message_class(spec, struct.name)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in struct.fields:
        if not f.present_in(version):
            continue
        value = _field_value(spec, f, version)
        if f.tagged_in(version):
            value = st.one_of(st.just(_default_of(cls, f.attr)), value)
        kwargs[f.attr] = value
    if spec.flexible_in(version):
        known = {f.tag for f in struct.fields if f.tag is not None}
        tags = st.lists(
            st.integers(0, 40).filter(lambda tag: tag not in known), unique=True, max_size=2
        )
        kwargs["unknown_tagged_fields"] = tags.flatmap(
            lambda ts: st.tuples(*[st.tuples(st.just(t), st.binary(max_size=8)) for t in sorted(ts)])
        )
    return st.builds(cls, **kwargs)


def _default_of(cls: type[Message], attr: str) -> Any:
    return getattr(cls(), attr)


def message_strategy(spec: MessageSpec, version: int) -> st.SearchStrategy[Any]:
    return struct_strategy(spec, spec.structs[spec.name], version)
