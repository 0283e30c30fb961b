"""Field-by-field comparison of two Kafka-format message specs (raw parsed JSON).

Used to hold kwire's ``messages/specs/*.json`` against the specs inside a pinned Kafka release's
jars (see compat/jarspecs.py). It deliberately does not use kwire's own spec parser, so that a
bug there cannot hide a difference here.

What is compared, after normalising representation only (``"tag": "0"`` and ``"tag": 0`` are the
same to Kafka's generator, as are ``"default": -1`` and ``"default": "-1"``; a missing
``ignorable`` is ``false``; a missing ``nullableVersions`` is ``none``):

* the message: ``apiKey``, ``type``, ``name``, ``validVersions``, ``flexibleVersions``,
  ``listeners``, ``latestVersionUnstable``, ``deprecatedVersions`` and any other key;
* every field, recursively, in wire order: ``name``, ``type``, ``versions``,
  ``nullableVersions``, ``taggedVersions``, ``tag``, ``default``, ``ignorable``, ``mapKey``,
  ``entityType``, ``zeroCopy``, ``flexibleVersions``, nested ``fields`` and any other key;
* ``commonStructs``, by name, the same way.

Only ``about`` is ignored: it is prose, and kwire's files carry their own descriptions.

With ``restrict=True`` every version range (of fields, nullability, tagging, flexibility) is first
cut down to the versions both specs support, and fields that exist in none of them are dropped; the
message's ``validVersions`` themselves are still compared in full. That is how an older release is
checked: everything it shares with kwire must agree, and what kwire adds in newer versions is
reported once, as the difference in ``validVersions``. Fields are paired by position, so a field
renamed between releases shows up as a difference of its ``name`` (and :func:`field_renames`
gives the pairing to translate Kafka JSON between the two).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_VERSION = 0x7FFF
EMPTY = (1, 0)

Range = tuple[int, int]


def parse_versions(text: Any) -> Range:
    """A spec version range (``"3"``, ``"0-12"``, ``"9+"``, ``"none"``) as inclusive
    ``(lo, hi)``; ``(1, 0)`` is empty."""
    if text is None:
        return EMPTY
    text = str(text).strip()
    if text == "none" or text == "":
        return EMPTY
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-", 1)
        return (int(lo), int(hi))
    return (int(text), int(text))


def intersect(a: Range, b: Range) -> Range:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else EMPTY


def format_versions(r: Range) -> str:
    if r[0] > r[1]:
        return "none"
    if r[1] == MAX_VERSION:
        return f"{r[0]}+"
    return str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}"


def _text(value: Any) -> str | None:
    """A default as Kafka's generator sees it: JSON booleans and numbers by their text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Difference:
    """One disagreement: ``path`` is ``""`` for the message itself, else the field path in
    kwire's names (``Topics/Partitions/ReplicaEpoch``; ``commonStructs/<Name>/...`` inside a
    common struct); ``key`` is the spec property; ``ours`` and ``theirs`` its two values."""

    spec: str
    path: str
    key: str
    ours: Any
    theirs: Any

    def __str__(self) -> str:
        where = f"{self.spec}/{self.path}" if self.path else self.spec
        return f"{where} {self.key}: kwire={self.ours!r} kafka={self.theirs!r}"


_VERSION_KEYS = ("versions", "nullableVersions", "taggedVersions")
_BOOL_KEYS = ("ignorable", "mapKey", "zeroCopy")
_FIELD_KEYS = ("name", "type", *_VERSION_KEYS, "tag", "default", *_BOOL_KEYS, "entityType",
               "flexibleVersions")
_IGNORED = frozenset({"about"})


def _normal_field(f: dict[str, Any], window: Range) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": f.get("name"),
        "type": f.get("type"),
        "tag": None if f.get("tag") is None else int(f["tag"]),
        "default": _text(f.get("default")),
        "entityType": f.get("entityType"),
    }
    for key in _VERSION_KEYS:
        out[key] = format_versions(intersect(parse_versions(f.get(key)), window))
    for key in _BOOL_KEYS:
        out[key] = bool(f.get(key, False))
    flexible = f.get("flexibleVersions")
    out["flexibleVersions"] = (
        None if flexible is None else format_versions(intersect(parse_versions(flexible), window))
    )
    for key, value in f.items():
        if key not in out and key not in _IGNORED and key != "fields":
            out[key] = value
    return out


def _live(fields: list[dict[str, Any]], window: Range) -> list[dict[str, Any]]:
    return [f for f in fields if intersect(parse_versions(f.get("versions")), window) != EMPTY]


def _compare_fields(spec: str, prefix: str, ours: list[dict[str, Any]],
                    theirs: list[dict[str, Any]], window: Range,
                    out: list[Difference], renames: dict[str, str]) -> None:
    ours, theirs = _live(ours, window), _live(theirs, window)
    if len(ours) != len(theirs):
        out.append(Difference(spec, prefix.rstrip("/"), "fields",
                              [f.get("name") for f in ours], [f.get("name") for f in theirs]))
        return
    for a, b in zip(ours, theirs, strict=True):
        path = f"{prefix}{a.get('name')}"
        na, nb = _normal_field(a, window), _normal_field(b, window)
        for key in [*_FIELD_KEYS, *sorted((set(na) | set(nb)) - set(_FIELD_KEYS))]:
            if na.get(key) != nb.get(key):
                out.append(Difference(spec, path, key, na.get(key), nb.get(key)))
        if a.get("name") != b.get("name"):
            renames[path] = b.get("name")
        _compare_fields(spec, path + "/", a.get("fields", []), b.get("fields", []), window,
                        out, renames)


def compare_specs(ours: dict[str, Any], theirs: dict[str, Any], *,
                  restrict: bool) -> tuple[list[Difference], dict[str, str]]:
    """Every difference between two parsed specs, and the renamed fields (path in kwire's
    names -> Kafka's name). See the module docstring for ``restrict``."""
    spec = str(ours.get("name"))
    out: list[Difference] = []
    renames: dict[str, str] = {}
    valid_ours = parse_versions(ours.get("validVersions"))
    valid_theirs = parse_versions(theirs.get("validVersions"))
    window = intersect(valid_ours, valid_theirs) if restrict else (0, MAX_VERSION)

    top_keys = ("apiKey", "type", "name", "validVersions", "flexibleVersions", "listeners",
                "latestVersionUnstable", "deprecatedVersions")

    def top(d: dict[str, Any], key: str) -> Any:
        if key == "flexibleVersions":
            return format_versions(intersect(parse_versions(d.get(key)), window))
        if key == "validVersions":
            return format_versions(parse_versions(d.get(key)))
        if key == "latestVersionUnstable":
            return bool(d.get(key, False))
        return d.get(key)

    extra = sorted((set(ours) | set(theirs)) - set(top_keys) - _IGNORED
                   - {"fields", "commonStructs"})
    for key in [*top_keys, *extra]:
        a, b = top(ours, key), top(theirs, key)
        if a != b:
            out.append(Difference(spec, "", key, a, b))

    _compare_fields(spec, "", ours.get("fields", []), theirs.get("fields", []), window, out,
                    renames)

    structs_ours = {s["name"]: s for s in ours.get("commonStructs", [])}
    structs_theirs = {s["name"]: s for s in theirs.get("commonStructs", [])}
    if sorted(structs_ours) != sorted(structs_theirs):
        out.append(Difference(spec, "commonStructs", "names",
                              sorted(structs_ours), sorted(structs_theirs)))
    for name in sorted(set(structs_ours) & set(structs_theirs)):
        a, b = structs_ours[name], structs_theirs[name]
        va = format_versions(intersect(parse_versions(a.get("versions")), window))
        vb = format_versions(intersect(parse_versions(b.get("versions")), window))
        if va != vb:
            out.append(Difference(spec, f"commonStructs/{name}", "versions", va, vb))
        _compare_fields(spec, f"commonStructs/{name}/", a.get("fields", []),
                        b.get("fields", []), window, out, renames)
    return out, renames


def raw_differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Every difference between two parsed spec files as they are, key by key, ignoring only
    ``about``: the check for a release the specs were taken from verbatim."""
    out: list[str] = []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted((set(ours) | set(theirs)) - _IGNORED):
            where = f"{path}.{key}" if path else key
            if key not in ours:
                out.append(f"{where}: missing in kwire (kafka={theirs[key]!r})")
            elif key not in theirs:
                out.append(f"{where}: missing in kafka (kwire={ours[key]!r})")
            else:
                out += raw_differences(ours[key], theirs[key], where)
    elif isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            out.append(f"{path}: {len(ours)} entries in kwire, {len(theirs)} in kafka")
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            label = a.get("name", i) if isinstance(a, dict) else i
            out += raw_differences(a, b, f"{path}[{label}]")
    elif type(ours) is not type(theirs) or ours != theirs:
        out.append(f"{path}: kwire={ours!r} kafka={theirs!r}")
    return out


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def translate_json(data: Any, spec: dict[str, Any], renames: dict[str, str], *,
                   blank_records: bool = False) -> Any:
    """Kafka JSON written with ``spec``'s field names, re-keyed with the other release's names
    (``renames`` from :func:`compare_specs`). With ``blank_records``, every non-null ``records``
    value becomes ``""``: Kafka's ``JsonConverter.write`` never serialises record contents, it
    writes an empty binary node in their place (``recordsSizeInBytes`` instead when asked not to
    serialise records). Other values are left as they are."""
    if not renames and not blank_records:
        return data
    common = {s["name"]: s for s in spec.get("commonStructs", [])}

    def struct(obj: Any, fields: list[dict[str, Any]], prefix: str) -> Any:
        if not isinstance(obj, dict):
            return obj
        out = dict(obj)
        for f in fields:
            key = _camel(f["name"])
            if key not in obj:
                continue
            path = prefix + f["name"]
            value = obj[key]
            element = f["type"][2:] if f["type"].startswith("[]") else f["type"]
            if f.get("fields"):
                sub_fields, sub_prefix = f["fields"], path + "/"
            elif element in common:
                sub_fields = common[element]["fields"]
                sub_prefix = f"commonStructs/{element}/"
            else:
                sub_fields = []
            if sub_fields and value is not None:
                if isinstance(value, list):
                    value = [struct(v, sub_fields, sub_prefix) for v in value]
                else:
                    value = struct(value, sub_fields, sub_prefix)
            elif blank_records and f["type"] == "records" and value is not None:
                value = ""
            del out[key]
            out[_camel(renames.get(path, f["name"]))] = value
        return out

    return struct(data, spec.get("fields", []), "")
