"""The writers of :mod:`messages.generator`: per struct and version, one straight-line function
that appends the struct's encoding to a ``bytearray`` (Kafka's ``MessageDataGenerator`` write
rules, see :mod:`messages.generator`)."""

from __future__ import annotations

from messages.generator.common import (
    STRUCT_CODES,
    ModuleContext,
    default_compare,
    flexible_for,
    layout,
)
from messages.spec import FIXED_SIZES, FieldSpec, SpecError, StructSpec


class Writer:
    """The writer of one struct at one version, as the body of a single function
    ``(o, out: bytearray) -> None``: fixed-width runs are one ``Struct.pack``, a nested struct
    is a call to its own writer, and a field the version lacks must hold its default unless
    it is ignorable (else ``EncodeError``, Kafka's ``UnsupportedVersionException``)."""

    def __init__(self, mod: ModuleContext, struct: StructSpec, version: int):
        self.mod = mod
        self.spec = mod.spec
        self.struct = struct
        self.version = version
        self.flexible = self.spec.flexible_in(version)
        self.body: list[str] = []
        self.depth = 0

    def emit(self, line: str, indent: int = 1) -> None:
        """Append one line of the body, indented ``indent`` levels of four spaces."""
        self.body.append("    " * indent + line)

    def build(self) -> list[str]:
        """The lines of the function body (``pass`` when the struct writes nothing)."""
        v = self.version
        group: list[FieldSpec] = []
        tagged: list[FieldSpec] = []
        for f in self.struct.fields:
            if not f.present_in(v):
                self._flush(group)
                group = []
                if not f.ignorable:
                    self.emit(f"if o.{f.attr} != {default_compare(self.spec, f)}:")
                    self.emit(
                        f"raise EncodeError('attempted to write a non-default {f.name} "
                        f"at version {v} of {self.struct.name}')",
                        2,
                    )
                continue
            if f.tagged_in(v):
                tagged.append(f)
                continue
            if f.type.text in FIXED_SIZES:
                group.append(f)
                continue
            self._flush(group)
            group = []
            self._write_value(f, f"o.{f.attr}", "out", 1, v)
        self._flush(group)
        if self.flexible:
            # Every tag a field of the struct has at any version: an unknown field may use none
            # of them (Kafka's generated write passes them to RawTaggedFieldWriter.writeRawTags,
            # which throws).
            tags = sorted({f.tag for f in self.struct.fields if f.tag is not None})
            defined = ", {" + ", ".join(map(str, tags)) + "}" if tags else ""
            if not tagged:
                self.emit("if o.unknown_tagged_fields:")
                self.emit(f"_write_tagged(out, [], o.unknown_tagged_fields{defined})", 2)
                self.emit("else:")
                self.emit("out.append(0)", 2)
            else:
                self.emit("tf = []")
                for f in sorted(tagged, key=lambda x: x.tag or 0):
                    self.emit(f"if o.{f.attr} != {default_compare(self.spec, f)}:")
                    self.emit("b = bytearray()", 2)
                    self._write_value(f, f"o.{f.attr}", "b", 2, v, force_flexible=True)
                    self.emit(f"tf.append(({f.tag}, bytes(b)))", 2)
                self.emit("if tf or o.unknown_tagged_fields:")
                self.emit(f"_write_tagged(out, tf, o.unknown_tagged_fields{defined})", 2)
                self.emit("else:")
                self.emit("out.append(0)", 2)
        if not self.body:
            self.emit("pass")
        return self.body

    def _flush(self, group: list[FieldSpec]) -> None:
        if not group:
            return
        fmt, _ = layout(group)
        args = ", ".join(f"o.{f.attr}" for f in group)
        self.emit(f"out += {self.mod.method(fmt, 'pack')}({args})")

    def _write_value(
        self, f: FieldSpec, expr: str, out: str, ind: int, v: int, force_flexible: bool = False
    ) -> None:
        flex = force_flexible or flexible_for(self.spec, f, v)
        nullable = f.nullable_in(v)
        t = f.type
        if t.is_array:
            self.depth += 1
            a, e = f"a{self.depth}", f"e{self.depth}"
            self.emit(f"{a} = {expr}", ind)
            self.emit(f"if {a} is None:", ind)
            if nullable:
                self.emit(f"{out}.append(0)" if flex else f"{out} += b'\\xff\\xff\\xff\\xff'", ind + 1)
            else:
                self.emit(f"raise EncodeError('{f.name} is not nullable at version {v}')", ind + 1)
            self.emit("else:", ind)
            if flex:
                # a count below 127 is one byte: no call
                n = f"n{self.depth}"
                self.emit(f"{n} = len({a}) + 1", ind + 1)
                self.emit(f"if {n} < 0x80:", ind + 1)
                self.emit(f"{out}.append({n})", ind + 2)
                self.emit("else:", ind + 1)
                self.emit(f"_wuv({out}, {n})", ind + 2)
            else:
                self.emit(f"{out} += _I32.pack(len({a}))", ind + 1)
            el = t.element
            if el.is_struct:
                fn = f"_w_{el.text}_{v}"
                self.emit(f"for {e} in {a}:", ind + 1)
                self.emit(f"{fn}({e}, {out})", ind + 2)
            elif el.text in FIXED_SIZES and el.text != "uuid":
                code = STRUCT_CODES[el.text]
                self.emit(f"{out} += _pack('>%d{code}' % len({a}), *{a})", ind + 1)
            else:
                self.emit(f"for {e} in {a}:", ind + 1)
                self._write_scalar(el.text, e, out, ind + 2, flex, False, f.name, v)
            self.depth -= 1
            return
        if t.is_struct:
            fn = f"_w_{t.text}_{v}"
            if nullable:
                self.emit(f"if {expr} is None:", ind)
                self.emit(f"{out} += b'\\xff'", ind + 1)
                self.emit("else:", ind)
                self.emit(f"{out} += b'\\x01'", ind + 1)
                self.emit(f"{fn}({expr}, {out})", ind + 1)
            else:
                self.emit(f"{fn}({expr}, {out})", ind)
            return
        self._write_scalar(t.text, expr, out, ind, flex, nullable, f.name, v)

    def _write_scalar(
        self, kind: str, expr: str, out: str, ind: int, flex: bool, nullable: bool,
        name: str, v: int,
    ) -> None:
        if kind in FIXED_SIZES:
            fmt = ">" + STRUCT_CODES[kind]
            self.emit(f"{out} += {self.mod.method(fmt, 'pack')}({expr})", ind)
            return
        if kind == "records":
            call = f"_wrec({out}, {expr}, {flex})"  # writes a null itself
        elif kind in ("string", "bytes"):
            base = ("_wcs" if flex else "_ws") if kind == "string" else ("_wcb" if flex else "_wb")
            call = f"{base}{'n' if nullable else ''}({out}, {expr})"
        else:
            raise SpecError(f"cannot write {kind}")
        if not nullable:
            self.emit(f"if {expr} is None:", ind)
            self.emit(f"raise EncodeError('{name} is not nullable at version {v}')", ind + 1)
        self.emit(call, ind)
