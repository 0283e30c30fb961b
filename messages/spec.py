"""The model of a Kafka-format JSON message spec (the schema language of Kafka's ``generator``
module: MessageSpec, FieldSpec, FieldType, Versions).

A spec file describes one message: ``{"apiKey", "type", "name", "validVersions",
"flexibleVersions", "fields": [...], "commonStructs": [...]}``. A field is ``{"name", "type",
"versions", "nullableVersions", "taggedVersions", "tag", "default", "ignorable", "mapKey",
"entityType", "zeroCopy", "flexibleVersions", "fields", "about"}``. Types are the primitives
``bool int8 int16 int32 int64 uint16 uint32 float64 string bytes records uuid``, a struct name, or
``[]`` followed by either.

Raises :class:`SpecError` for a spec that Kafka's generator would refuse in the ways kwire
depends on (unknown types, tags outside flexible versions, undefined structs).
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

SPEC_DIR = Path(__file__).with_name("specs")

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64",
     "string", "bytes", "records", "uuid"}
)
FIXED_SIZES = {
    "bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
    "float64": 8, "uuid": 16,
}
MAX_VERSION = 0x7FFF


class SpecError(ValueError):
    """A malformed or unsupported message spec."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``lo > hi`` is the empty range ("none")."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NONE

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(range(self.lo, self.hi + 1))


NONE = Versions(1, 0)


@dataclass(frozen=True)
class FieldType:
    """A field's type: a primitive, a struct, or an array of either."""

    text: str

    @property
    def is_array(self) -> bool:
        return self.text.startswith("[]")

    @property
    def element(self) -> FieldType:
        if not self.is_array:
            raise SpecError(f"{self.text} is not an array type")
        return FieldType(self.text[2:])

    @property
    def is_primitive(self) -> bool:
        return self.text in PRIMITIVES

    @property
    def is_struct(self) -> bool:
        return not self.is_array and not self.is_primitive

    @property
    def is_struct_array(self) -> bool:
        return self.is_array and self.element.is_struct

    @property
    def struct_name(self) -> str:
        t = self.element if self.is_array else self
        if not t.is_struct:
            raise SpecError(f"{self.text} does not name a struct")
        return t.text

    def __str__(self) -> str:
        return self.text


def snake_case(name: str) -> str:
    """Kafka's PascalCase field name as a Python attribute: ``KRaftVersion`` -> ``kraft_version``,
    ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    name = name.replace("KRaft", "Kraft")
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) or s in {"self", "version"} else s


def camel_case(name: str) -> str:
    """The key of a field in Kafka's JSON form (JsonConverter): the name with its first letter
    lower-cased."""
    return name[:1].lower() + name[1:]


@dataclass
class FieldSpec:
    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions = NONE
    tagged_versions: Versions = NONE
    tag: int | None = None
    default: str | None = None
    ignorable: bool = False
    map_key: bool = False
    entity_type: str | None = None
    zero_copy: bool = False
    flexible_versions: Versions | None = None
    fields: list[FieldSpec] = field(default_factory=list)
    about: str = ""

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def json_name(self) -> str:
        return camel_case(self.name)

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def tagged_in(self, version: int) -> bool:
        return version in self.tagged_versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    @property
    def ever_nullable(self) -> bool:
        return not self.nullable_versions.empty

    @property
    def default_is_null(self) -> bool:
        return self.default == "null"


@dataclass
class StructSpec:
    """A struct: the top-level message, an inline struct of a field, or a common struct."""

    name: str
    versions: Versions
    fields: list[FieldSpec]
    is_top_level: bool = False


@dataclass
class MessageSpec:
    name: str
    type: str
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    api_key: int | None = None
    about: str = ""
    listeners: list[str] = field(default_factory=list)
    latest_version_unstable: bool = False
    common_structs: list[StructSpec] = field(default_factory=list)
    path: Path | None = None

    @property
    def module_name(self) -> str:
        return snake_case(self.name).rstrip("_")

    def flexible_in(self, version: int) -> bool:
        return version in self.flexible_versions

    @cached_property
    def structs(self) -> dict[str, StructSpec]:
        """Every struct of the message by name: the top level first, then inline structs in
        depth-first order, then common structs."""
        out: dict[str, StructSpec] = {
            self.name: StructSpec(self.name, self.valid_versions, self.fields, True)
        }
        common = {s.name: s for s in self.common_structs}

        def visit(fields: list[FieldSpec]) -> None:
            for f in fields:
                t = f.type.element if f.type.is_array else f.type
                if not t.is_struct:
                    if f.fields:
                        raise SpecError(f"{self.name}.{f.name}: a {f.type} field has fields")
                    continue
                if f.fields:
                    if t.text in out or t.text in common:
                        raise SpecError(f"{self.name}: struct {t.text} defined twice")
                    out[t.text] = StructSpec(t.text, f.versions, f.fields)
                    visit(f.fields)
                elif t.text not in common:
                    raise SpecError(f"{self.name}.{f.name}: undefined struct {t.text}")

        visit(self.fields)
        for s in self.common_structs:
            out[s.name] = s
            visit(s.fields)
        return out


def _default_text(value: object) -> str | None:
    """A spec default as Kafka's generator reads it: JSON booleans and numbers as their text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _field(d: dict, ctx: str) -> FieldSpec:
    try:
        name = d["name"]
        f = FieldSpec(
            name=name,
            type=FieldType(d["type"]),
            versions=Versions.parse(d["versions"]),
            nullable_versions=Versions.parse(d.get("nullableVersions")),
            tagged_versions=Versions.parse(d.get("taggedVersions")),
            tag=d.get("tag"),
            default=_default_text(d.get("default")),
            ignorable=bool(d.get("ignorable", False)),
            map_key=bool(d.get("mapKey", False)),
            entity_type=d.get("entityType"),
            zero_copy=bool(d.get("zeroCopy", False)),
            flexible_versions=(
                Versions.parse(d["flexibleVersions"]) if "flexibleVersions" in d else None
            ),
            fields=[_field(x, f"{ctx}.{name}") for x in d.get("fields", [])],
            about=d.get("about", ""),
        )
    except KeyError as exc:
        raise SpecError(f"{ctx}: field without {exc}") from exc
    t = f.type.element if f.type.is_array else f.type
    if not t.is_primitive and not re.fullmatch(r"[A-Z][A-Za-z0-9]*", t.text):
        raise SpecError(f"{ctx}.{name}: unknown type {f.type}")
    if (f.tag is None) != f.tagged_versions.empty:
        raise SpecError(f"{ctx}.{name}: a tag needs taggedVersions and the reverse")
    return f


def parse_spec(data: dict, path: Path | None = None) -> MessageSpec:
    """Build a MessageSpec from the parsed JSON of a spec file."""
    name = data["name"]
    spec = MessageSpec(
        name=name,
        type=data["type"],
        valid_versions=Versions.parse(data["validVersions"]),
        flexible_versions=Versions.parse(data.get("flexibleVersions")),
        fields=[_field(x, name) for x in data["fields"]],
        api_key=data.get("apiKey"),
        about=data.get("about", ""),
        listeners=list(data.get("listeners", [])),
        latest_version_unstable=bool(data.get("latestVersionUnstable", False)),
        common_structs=[
            StructSpec(s["name"], Versions.parse(s["versions"]),
                       [_field(x, f"{name}.{s['name']}") for x in s["fields"]])
            for s in data.get("commonStructs", [])
        ],
        path=path,
    )
    for struct in spec.structs.values():
        tags: set[int] = set()
        for f in struct.fields:
            if f.tag is None:
                continue
            if f.tag in tags:
                raise SpecError(f"{name}.{struct.name}: tag {f.tag} used twice")
            tags.add(f.tag)
            outside = [v for v in f.tagged_versions if v in spec.valid_versions
                       and not spec.flexible_in(v)]
            if outside:
                raise SpecError(f"{name}.{f.name}: tagged in non-flexible versions {outside}")
    return spec


def load_spec(path: Path) -> MessageSpec:
    return parse_spec(json.loads(path.read_text(encoding="utf-8")), path)


def load_all(spec_dir: Path = SPEC_DIR) -> list[MessageSpec]:
    """Every spec in ``spec_dir``, sorted by name."""
    return [load_spec(p) for p in sorted(spec_dir.glob("*.json"))]
