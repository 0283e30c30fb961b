"""The classes of :mod:`messages.generator`: a struct's slotted class with the methods
``@dataclass(slots=True)`` would add, written out, and its table of JSON fields."""

from __future__ import annotations

from messages.generator.common import annotation, default_expr, range_source
from messages.spec import MessageSpec, StructSpec


def class_source(spec: MessageSpec, struct: StructSpec) -> list[str]:
    """A slotted class with the ``__init__``, ``__eq__`` and ``__hash__ = None`` that
    ``@dataclass(slots=True)`` would make, written out: a dataclass compiles those methods from
    text each time its module is imported, which was a third of a kwire process's start-up.
    A field whose default is a new list or struct takes ``_FACTORY`` as its default argument and
    gets a fresh object when it is left out (``field(default_factory=...)``)."""
    lines = ["", "", f"class {struct.name}(Message):"]
    about = spec.about if struct.is_top_level else ""
    if struct.is_top_level:
        doc = f"{spec.name}: {about}" if about else spec.name
        key = f", api key {spec.api_key}" if spec.api_key is not None else ""
        lines.append(
            f'    """{doc}\n\n    Versions {spec.valid_versions}{key}; flexible versions '
            f'{spec.flexible_versions}.\n    """'
        )
    else:
        lines.append(f'    """The {struct.name} struct of {spec.name}."""')
    names = [f.attr for f in struct.fields] + ["unknown_tagged_fields"]
    lines += ["", f"    __slots__ = {tuple(names)!r}", ""]
    params, body = [], []
    for f in struct.fields:
        ann = annotation(f)
        d = default_expr(spec, f)
        comment = f"  # {f.about}" if f.about else ""
        lines.append(f"    {f.attr}: {ann}{comment}")
        if d == "[]" or (f.type.is_struct and d != "None"):
            fresh = "[]" if d == "[]" else f"{f.type.text}()"
            params.append(f"        {f.attr}: {ann} = _FACTORY,")
            body.append(f"        self.{f.attr} = {fresh} if {f.attr} is _FACTORY else {f.attr}")
        else:
            params.append(f"        {f.attr}: {ann} = {d},")
            body.append(f"        self.{f.attr} = {f.attr}")
    lines.append("    unknown_tagged_fields: tuple[tuple[int, bytes], ...]")
    params.append("        unknown_tagged_fields: tuple[tuple[int, bytes], ...] = (),")
    body.append("        self.unknown_tagged_fields = unknown_tagged_fields")
    mine = ", ".join(f"self.{n}" for n in names)
    theirs = ", ".join(f"o.{n}" for n in names)
    lines += [
        "",
        "    def __init__(",
        "        self,",
        *params,
        "    ) -> None:",
        *body,
        "",
        "    def __eq__(self, other: object) -> bool:",
        "        if other.__class__ is not self.__class__:",
        "            return NotImplemented",
        "        o: Any = other",
        f"        return ({mine},) == ({theirs},)",
        "",
        "    __hash__ = None  # type: ignore[assignment]",
    ]
    return lines + _repr_source(struct)


def _repr_source(struct: StructSpec) -> list[str]:
    """``__repr__`` with the dataclass repr's text (the fields but the unknown tags), without
    the recursion guard the dataclass wraps it in: a message is a tree, and the guard's
    bookkeeping costs more than the formatting."""
    parts = [f'f"{f.attr}={{self.{f.attr}!r}}' for f in struct.fields]
    body = [f'{part}, "' for part in parts[:-1]] + [f'{part}"' for part in parts[-1:]]
    return [
        "",
        "    def __repr__(self) -> str:",
        "        return (",
        '            f"{self.__class__.__qualname__}("',
        *(f"            {line}" for line in body),
        '            ")"',
        "        )",
    ]


def json_fields(spec: MessageSpec, struct: StructSpec) -> str:
    """The statement that sets ``<struct>._FIELDS`` to one ``JsonField`` per field (attribute,
    JSON name, kind, versions, nullable and tagged versions, default factory, element type),
    which ``messages.runtime`` uses for the JSON form of a message."""
    rows = []
    for f in struct.fields:
        t = f.type
        if t.is_array:
            kind = "array"
            el = t.element
            element = el.text if el.is_struct else repr(el.text)
        elif t.is_struct:
            kind, element = "struct", t.text
        else:
            kind, element = t.text, "None"
        d = default_expr(spec, f)
        if d == "[]":
            factory = "list"
        elif t.is_struct and d != "None":
            factory = t.text
        else:
            factory = f"lambda: {d}"
        rows.append(
            f"    JsonField({f.attr!r}, {f.json_name!r}, {kind!r}, {range_source(f.versions)}, "
            f"{range_source(f.nullable_versions)}, {range_source(f.tagged_versions)}, {factory}, {element}),"
        )
    return f"{struct.name}._FIELDS = (\n" + "\n".join(rows) + "\n)" if rows else \
        f"{struct.name}._FIELDS = ()"
