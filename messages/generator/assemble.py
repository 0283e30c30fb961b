"""Module assembly for :mod:`messages.generator`: the source of one generated codec module
(imports, classes, bound ``Struct`` methods, writers, readers, version tables) and of the
registry of every message class."""

from __future__ import annotations

from messages.generator.classes import class_source, json_fields
from messages.generator.common import BOUND_PREFIX, ModuleContext, banner, range_source
from messages.generator.reader import Reader
from messages.generator.writer import Writer
from messages.spec import MessageSpec, StructSpec


def struct_versions(spec: MessageSpec) -> dict[str, list[int]]:
    """The message versions at which each struct is reachable."""
    out: dict[str, set[int]] = {name: set() for name in spec.structs}
    out[spec.name] = set(spec.valid_versions)

    def walk(struct: StructSpec, version: int) -> None:
        for f in struct.fields:
            if not f.present_in(version):
                continue
            t = f.type.element if f.type.is_array else f.type
            if t.is_struct:
                if version not in out[t.text]:
                    out[t.text].add(version)
                    walk(spec.structs[t.text], version)

    for v in spec.valid_versions:
        walk(spec.structs[spec.name], v)
    return {k: sorted(vs) for k, vs in out.items()}
def generate_module(spec: MessageSpec) -> str:
    """The source of the codec module of ``spec``: its classes (children first), the
    ``Struct`` objects and bound methods, a writer and a reader per struct and version
    (identical versions share one function) and the version tables. Raises SpecError for a
    spec it cannot encode."""
    mod = ModuleContext(spec)
    structs = spec.structs
    reach = struct_versions(spec)
    # Structs are defined children first so that default factories resolve.
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for f in structs[name].fields:
            t = f.type.element if f.type.is_array else f.type
            if t.is_struct and t.text != name:
                visit(t.text)
        order.append(name)

    for name in structs:
        visit(name)

    class_lines: list[str] = []
    for name in order:
        class_lines += class_source(spec, structs[name])

    fn_lines: list[str] = []
    tables: list[str] = []
    for name in order:
        struct = structs[name]
        writers: dict[int, str] = {}
        readers: dict[int, str] = {}
        seen_w: dict[str, str] = {}
        seen_r: dict[str, str] = {}
        for v in reach[name]:
            wbody = "\n".join(Writer(mod, struct, v).build())
            rbody = "\n".join(Reader(mod, v).build(struct))
            wname = seen_w.get(wbody)
            if wname is None:
                wname = f"_w_{name}_{v}"
                seen_w[wbody] = wname
                fn_lines += ["", "", f"def {wname}(o: {name}, out: bytearray) -> None:", wbody]
            else:
                fn_lines += [f"_w_{name}_{v} = {wname}"]
            rname = seen_r.get(rbody)
            if rname is None:
                rname = f"_r_{name}_{v}"
                seen_r[rbody] = rname
                fn_lines += ["", "", f"def {rname}(buf: Any, pos: int) -> tuple[{name}, int]:",
                             rbody]
            else:
                fn_lines += [f"_r_{name}_{v} = {rname}"]
            writers[v] = f"_w_{name}_{v}"
            readers[v] = f"_r_{name}_{v}"
        versions = reach[name]
        lo, hi = (versions[0], versions[-1]) if versions else (0, -1)
        tables += [
            "",
            f"{name}.SPEC_NAME = {spec.name!r}",
            f"{name}.LOWEST_VERSION = {lo}",
            f"{name}.HIGHEST_VERSION = {hi}",
            f"{name}._WRITERS = {{" + ", ".join(f"{v}: {w}" for v, w in writers.items()) + "}",
            f"{name}._READERS = {{" + ", ".join(f"{v}: {r}" for v, r in readers.items()) + "}",
            json_fields(spec, struct),
        ]
    top = spec.name
    tables += [
        f"{top}.API_KEY = {spec.api_key!r}",
        "",
        f"MESSAGE_TYPE = {spec.type!r}",
        f"VALID_VERSIONS = {range_source(spec.valid_versions)}",
        f"FLEXIBLE_VERSIONS = {range_source(spec.flexible_versions)}",
    ]
    defaults = [
        f"_DEF_{name} = {name}()" for name in order if name != top
    ]

    header = [
        banner(spec).rstrip("\n"),
        f'"""Codec of {spec.name} ({spec.type}'
        + (f", api key {spec.api_key}" if spec.api_key is not None else "")
        + f", versions {spec.valid_versions}, flexible {spec.flexible_versions})."
        + (f"\n\n{spec.about}\n" if spec.about else "")
        + '"""',
        "",
        "from __future__ import annotations",
        "",
        "from struct import Struct",
        "from struct import pack as _pack",
        "from struct import unpack_from as _unpack_from",
        "from typing import Any",
        "",
        "from kwire.uuid import ZERO_UUID, Uuid",
        "from kwire.uuid import intern_uuid as _ui",
        "from kwire.wire import INT32 as _I32",
        "from kwire.wire import DecodeError, EncodeError, RecordsRegion",
        "from kwire.wire import read_bytes as _rb",
        "from kwire.wire import read_compact_bytes as _rcb",
        "from kwire.wire import read_compact_nullable_bytes as _rcbn",
        "from kwire.wire import read_nullable_bytes as _rbn",
        "from kwire.wire import read_nullable_string as _rsn",
        "from kwire.wire import read_records as _rrec",
        "from kwire.wire import read_string as _rs",
        "from kwire.wire import read_tagged_header as _rtag",
        "from kwire.wire import read_unknown_tagged as _read_unknown_tagged",
        "from kwire.wire import read_uvarint as _ruv",
        "from kwire.wire import write_bytes as _wb",
        "from kwire.wire import write_compact_bytes as _wcb",
        "from kwire.wire import write_compact_nullable_bytes as _wcbn",
        "from kwire.wire import write_compact_nullable_string as _wcsn",
        "from kwire.wire import write_compact_string as _wcs",
        "from kwire.wire import write_nullable_bytes as _wbn",
        "from kwire.wire import write_nullable_string as _wsn",
        "from kwire.wire import write_records as _wrec",
        "from kwire.wire import write_string as _ws",
        "from kwire.wire import write_tagged as _write_tagged",
        "from kwire.wire import write_uvarint as _wuv",
        "from messages.runtime import FACTORY as _FACTORY",
        "from messages.runtime import JsonField, Message",
        "",
        f"__all__ = {[*order[::-1]]!r}",
    ]
    packers = [f"{name} = Struct({fmt!r})" for fmt, name in mod.struct_names.items()]
    for kind in BOUND_PREFIX:
        packers += [f"{alias} = {name}.{method}" for (name, method), alias in mod.bound.items()
                    if method == kind]
    # Readers make objects without __init__ (every slot is stored).
    packers += ["_new = object.__new__"]
    parts = header + class_lines + ["", ""] + defaults + packers + fn_lines + tables
    return "\n".join(parts) + "\n"


def generate_registry(specs: list[MessageSpec]) -> str:
    """The source of ``messages/generated/registry.py``: every message class by spec name,
    requests, responses and metadata records by API key, and each spec's flexible versions."""
    lines = [
        "# Generated by `python -m messages.generator` from messages/specs/*.json.",
        "# Do not edit by hand: change the specs and regenerate (`make generate`).",
        '"""Every generated message class, by spec name and by API key."""',
        "",
        "from __future__ import annotations",
        "",
        "from messages.runtime import Message",
        "",
    ]
    for s in specs:
        lines.append(f"from messages.generated.{s.module_name} import {s.name}")
    lines += ["", "BY_NAME: dict[str, type[Message]] = {"]
    lines += [f"    {s.name!r}: {s.name}," for s in specs]
    lines += ["}", ""]
    for kind, var in (("request", "REQUESTS"), ("response", "RESPONSES"),
                      ("metadata", "METADATA_RECORDS")):
        lines.append(f"{var}: dict[int, type[Message]] = {{")
        for s in sorted(specs, key=lambda s: s.api_key if s.api_key is not None else -1):
            if s.type == kind and s.api_key is not None:
                lines.append(f"    {s.api_key}: {s.name},")
        lines += ["}", ""]
    lines.append("FLEXIBLE_VERSIONS: dict[str, tuple[int, int]] = {")
    for s in specs:
        lines.append(f"    {s.name!r}: ({s.flexible_versions.lo}, {s.flexible_versions.hi}),")
    lines.append("}")
    return "\n".join(lines) + "\n"
