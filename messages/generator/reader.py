"""The readers of :mod:`messages.generator`: per struct and version, one function that decodes
the struct and every struct nested in it inline (see :class:`Reader`)."""

from __future__ import annotations

from messages.generator.common import (
    STRUCT_CODES,
    ModuleContext,
    default_expr,
    flexible_for,
    layout,
)
from messages.spec import FIXED_SIZES, FieldSpec, SpecError, StructSpec

FIXED_RUN_MIN_ELEMENTS = 4
"""Arrays of fixed-layout structs with at least this many elements are decoded with one
``iter_unpack`` (:meth:`Reader._fixed_run`); a shorter run costs more to set up than it saves."""


class Reader:
    """The reader of one struct at one version, as the body of a single function.

    Nested structs (struct fields and the elements of struct arrays) are decoded inline, in the
    parent's code and loops: an element costs no call and no ``(obj, pos)`` tuple. Objects are
    made with ``_new(Cls)`` (``object.__new__``, skipping the generated ``__init__``) and filled
    by slot stores; a run of fixed-width fields is one ``Struct.unpack_from`` stored straight into
    the slots and, when the run closes a flexible struct, it also takes the tagged-field count.
    Locals of a nested struct carry its depth (``o1``, ``n1``, ``tn1``, ...) so that inner code
    never clobbers the enclosing struct's.
    """

    def __init__(self, mod: ModuleContext, version: int):
        self.mod = mod
        self.spec = mod.spec
        self.version = version
        self.body: list[str] = []
        self.stack: list[str] = []
        self.uses_decode = False  # a compact string is read: the prologue sets ``isb``

    def emit(self, line: str, indent: int) -> None:
        """Append one line of the body, indented ``indent`` levels of four spaces."""
        self.body.append("    " * indent + line)

    def build(self, struct: StructSpec) -> list[str]:
        """The lines of the body of ``(buf, pos) -> (struct object, pos after it)`` that
        decodes ``struct``; raises SpecError for a struct that contains itself."""
        self.emit("blen = len(buf)", 1)
        self._struct(struct, 0, 1, "blen")
        self.emit("return o0, pos", 1)
        if self.uses_decode:
            # bytes and bytearray slices decode with .decode(), cheaper than str(slice, 'utf-8');
            # a memoryview slice has no .decode()
            self.body.insert(1, "    isb = type(buf) is not memoryview")
        return self.body

    def _struct(self, struct: StructSpec, depth: int, ind: int, limit: str) -> None:
        """Code that decodes ``struct`` at ``pos`` into the local ``o{depth}``."""
        if struct.name in self.stack:
            raise SpecError(f"{self.spec.name}: struct {struct.name} contains itself")
        self.stack.append(struct.name)
        v = self.version
        o = f"o{depth}"
        self.emit(f"{o} = _new({struct.name})", ind)
        self._defaults(struct, o, ind)
        group: list[FieldSpec] = []
        tagged: list[FieldSpec] = []
        for f in struct.fields:
            if not f.present_in(v):
                continue
            if f.tagged_in(v):
                tagged.append(f)
            elif f.type.text in FIXED_SIZES:
                group.append(f)
            else:
                self._unpack(group, o, ind)
                group = []
                self._value(f, f"{o}.{f.attr}", depth, ind, limit)
        if self.spec.flexible_in(v):
            count = f"tn{depth}"
            if group:
                self._unpack(group, o, ind, count)
            else:
                self.emit(f"{count} = buf[pos]", ind)
                self.emit("pos += 1", ind)
            self._tagged(struct, tagged, depth, ind, limit)
        else:
            self._unpack(group, o, ind)
            self.emit(f"{o}.unknown_tagged_fields = ()", ind)
        self.stack.pop()

    def _fixed_layout(self, name: str) -> tuple[list[FieldSpec], str, int] | None:
        """``(fields, format, size)`` when every field of struct ``name`` on the wire at this
        version (tagged ones aside) is fixed-width: then an element without tagged fields is
        exactly ``size`` bytes, its tagged-field count (flexible versions) the last one."""
        v = self.version
        fields = [f for f in self.spec.structs[name].fields
                  if f.present_in(v) and not f.tagged_in(v)]
        if not fields or any(f.type.text not in FIXED_SIZES for f in fields):
            return None
        fmt, size = layout(fields, self.spec.flexible_in(v))
        return fields, fmt, size

    def _fixed_run(
        self, name: str, layout: tuple[list[FieldSpec], str, int], n: str, a: str, depth: int,
        ind: int,
    ) -> None:
        """Decode the leading elements of an array of fixed-layout structs with one
        ``iter_unpack``, up to the first element that carries tagged fields (its size is then
        unknown): the caller's element loop decodes the rest, from ``pos``. Below
        FIXED_RUN_MIN_ELEMENTS elements the run is not worth the slice and iterator."""
        fields, fmt, size = layout
        flexible = self.spec.flexible_in(self.version)
        o = f"o{depth}"
        self.emit(f"if {n} >= {FIXED_RUN_MIN_ELEMENTS}:", ind)
        i = ind + 1
        run = f"{self.mod.method(fmt, 'iter_unpack')}(buf[pos:pos + {n} * {size}])"
        self.emit(f"for t{depth} in {run}:", i)
        if flexible:
            self.emit(f"if t{depth}[-1]:", i + 1)
            self.emit("break", i + 2)
        self.emit(f"{o} = _new({name})", i + 1)
        self._defaults(self.spec.structs[name], o, i + 1)
        self._store(fields, o, f"t{depth}", "_" if flexible else None, i + 1)
        self.emit(f"{o}.unknown_tagged_fields = ()", i + 1)
        self.emit(f"{a}.append({o})", i + 1)
        self.emit(f"pos += {size} * len({a})", i)

    def _unpack(self, group: list[FieldSpec], o: str, ind: int, count: str | None = None) -> None:
        """One ``unpack_from`` for a run of fixed-width fields, plus the tagged-field count byte
        of a flexible struct when ``count`` names its local."""
        if not group:
            return
        fmt, size = layout(group, count is not None)
        self._store(group, o, f"{self.mod.method(fmt, 'unpack_from')}(buf, pos)", count, ind)
        self.emit(f"pos += {size}", ind)

    def _store(
        self, fields: list[FieldSpec], o: str, source: str, count: str | None, ind: int
    ) -> None:
        """``<slots of fields>[, count] = source`` for a tuple of fixed-width values; a uuid goes
        through a local and the table of interned ids."""
        targets: list[str] = []
        uuids: list[str] = []
        for f in fields:
            if f.type.text == "uuid":
                tmp = f"u{len(uuids)}"
                uuids.append(f"{o}.{f.attr} = _ui({tmp})")
                targets.append(tmp)
            else:
                targets.append(f"{o}.{f.attr}")
        if count is not None:
            targets.append(count)
        lhs = ", ".join(targets) + ("," if len(targets) == 1 else "")
        self.emit(f"{lhs} = {source}", ind)
        for line in uuids:
            self.emit(line, ind)

    def _defaults(self, struct: StructSpec, o: str, ind: int) -> None:
        """Store the default of every field that is not on the wire at this version (absent, or
        tagged: a tagged value read later replaces it)."""
        v = self.version
        for f in struct.fields:
            if not f.present_in(v) or f.tagged_in(v):
                self.emit(f"{o}.{f.attr} = {default_expr(self.spec, f)}", ind)

    def _tagged(
        self, struct: StructSpec, tagged: list[FieldSpec], depth: int, ind: int, limit: str
    ) -> None:
        """The tagged-field section, its count already in ``tn{depth}`` and ``pos`` past it.
        An empty section (the usual case) costs one test."""
        v = self.version
        o, count = f"o{depth}", f"tn{depth}"
        self.emit(f"if {count}:", ind)
        if all(f.tag is None for f in struct.fields):
            # No field of this struct is ever tagged: every tag is preserved as unknown.
            self.emit(f"{o}.unknown_tagged_fields, pos = _read_unknown_tagged(buf, pos - 1)",
                      ind + 1)
            self.emit("else:", ind)
            self.emit(f"{o}.unknown_tagged_fields = ()", ind + 1)
            return
        tag, size, end, unknown = f"tag{depth}", f"size{depth}", f"end{depth}", f"uk{depth}"
        i = ind + 1
        self.emit(f"if {count} >= 0x80:", i)
        self.emit(f"{count}, pos = _ruv(buf, pos - 1)", i + 1)
        self.emit(f"{unknown} = []", i)
        self.emit(f"for _ in range({count}):", i)
        self.emit(f"{tag}, {size}, pos = _rtag(buf, pos)", i + 1)
        self.emit(f"{end} = pos + {size}", i + 1)
        kw = "if"
        for f in sorted(tagged, key=lambda x: x.tag or 0):
            self.emit(f"{kw} {tag} == {f.tag}:", i + 1)
            self._value(f, f"{o}.{f.attr}", depth, i + 2, end, force_flexible=True)
            self.emit(f"if pos != {end}:", i + 2)
            self.emit(
                f"raise DecodeError('tagged field {f.name} has ' + str({size}) + ' bytes "
                f"but its value took ' + str(pos - {end} + {size}))",
                i + 3,
            )
            kw = "elif"
        other_tags = sorted(
            {f.tag for f in struct.fields if f.tag is not None} - {f.tag for f in tagged}
        )
        if other_tags:
            cond = f"{tag} == {other_tags[0]}" if len(other_tags) == 1 else \
                f"{tag} in {tuple(other_tags)!r}"
            self.emit(f"{kw} {cond}:", i + 1)
            self.emit(
                f"raise DecodeError('tag ' + str({tag}) + ' is not valid for version {v} "
                f"of {struct.name}')",
                i + 2,
            )
            kw = "elif"
        j = i + 1
        if kw == "elif":
            self.emit("else:", i + 1)
            j = i + 2
        self.emit(f"{unknown}.append(({tag}, bytes(buf[pos:{end}])))", j)
        self.emit(f"pos = {end}", j)
        self.emit(f"{o}.unknown_tagged_fields = tuple({unknown})", i)
        self.emit("else:", ind)
        self.emit(f"{o}.unknown_tagged_fields = ()", ind + 1)

    def _value(
        self, f: FieldSpec, target: str, depth: int, ind: int, limit: str,
        force_flexible: bool = False,
    ) -> None:
        v = self.version
        flex = force_flexible or flexible_for(self.spec, f, v)
        nullable = f.nullable_in(v)
        t = f.type
        if t.is_array:
            d = depth + 1
            n, a = f"n{d}", f"a{d}"
            el = t.element
            fixed = self._fixed_layout(el.text) if el.is_struct else None
            min_size = fixed[2] if fixed else FIXED_SIZES.get(el.text, 1)
            if flex:
                self.emit(f"{n} = buf[pos] - 1", ind)
                self.emit("pos += 1", ind)
                self.emit(f"if {n} >= 0x7f:", ind)
                self.emit(f"{n}, pos = _ruv(buf, pos - 1)", ind + 1)
                self.emit(f"{n} -= 1", ind + 1)
            else:
                self.emit(f"{n}, = _I32.unpack_from(buf, pos)", ind)
                self.emit("pos += 4", ind)
            self.emit(f"if {n} < 0:", ind)
            if nullable:
                self.emit(f"{target} = None", ind + 1)
            else:
                self.emit(f"raise DecodeError('non-nullable array {f.name} is null')", ind + 1)
            self.emit("else:", ind)
            self.emit(f"if {n} * {min_size} > {limit} - pos:", ind + 1)
            self.emit(
                f"raise DecodeError('array {f.name} of ' + str({n}) + ' elements overruns "
                "the buffer')",
                ind + 2,
            )
            if el.is_struct:
                self.emit(f"{target} = {a} = []", ind + 1)
                loop = f"for _ in range({n}):"
                if fixed:
                    self._fixed_run(el.text, fixed, n, a, d, ind + 1)
                    loop = f"for _ in range({n} - len({a})):"
                self.emit(loop, ind + 1)
                self._struct(self.spec.structs[el.text], d, ind + 2, limit)
                self.emit(f"{a}.append(o{d})", ind + 2)
            elif el.text in FIXED_SIZES and el.text != "uuid":
                code = STRUCT_CODES[el.text]
                self.emit(f"{target} = list(_unpack_from('>%d{code}' % {n}, buf, pos))",
                          ind + 1)
                self.emit(f"pos += {n} * {FIXED_SIZES[el.text]}", ind + 1)
            else:
                self.emit(f"{target} = {a} = []", ind + 1)
                self.emit(f"for _ in range({n}):", ind + 1)
                self._scalar(el.text, "x", ind + 2, flex, False, f.name)
                self.emit(f"{a}.append(x)", ind + 2)
            return
        if t.is_struct:
            d = depth + 1
            if nullable:
                self.emit("if buf[pos] == 0xff:", ind)
                self.emit("pos += 1", ind + 1)
                self.emit(f"{target} = None", ind + 1)
                self.emit("else:", ind)
                self.emit("pos += 1", ind + 1)
                self._struct(self.spec.structs[t.text], d, ind + 1, limit)
                self.emit(f"{target} = o{d}", ind + 1)
            else:
                self._struct(self.spec.structs[t.text], d, ind, limit)
                self.emit(f"{target} = o{d}", ind)
            return
        self._scalar(t.text, target, ind, flex, nullable, f.name)

    def _scalar(
        self, kind: str, target: str, ind: int, flex: bool, nullable: bool, name: str
    ) -> None:
        if kind in FIXED_SIZES:
            fmt = ">" + STRUCT_CODES[kind]
            if kind == "uuid":
                self.emit(f"u0, = {self.mod.method(fmt, 'unpack_from')}(buf, pos)", ind)
                self.emit(f"{target} = _ui(u0)", ind)
            else:
                self.emit(f"{target}, = {self.mod.method(fmt, 'unpack_from')}(buf, pos)", ind)
            self.emit(f"pos += {FIXED_SIZES[kind]}", ind)
            return
        if kind == "string" and flex:
            self.emit("sn = buf[pos]", ind)
            self.emit("pos += 1", ind)
            self.emit("if sn >= 0x80:", ind)
            self.emit("sn, pos = _ruv(buf, pos - 1)", ind + 1)
            self.emit("if sn == 0:", ind)
            if nullable:
                self.emit(f"{target} = None", ind + 1)
            else:
                self.emit(f"raise DecodeError('non-nullable string {name} is null')", ind + 1)
            self.emit("else:", ind)
            self.emit("se = pos + sn - 1", ind + 1)
            self.emit("if sn > 0x8000 or se > blen:", ind + 1)
            self.emit(f"raise DecodeError('string {name} of ' + str(sn - 1) + ' bytes overruns')",
                      ind + 2)
            self.emit(f"{target} = buf[pos:se].decode() if isb else str(buf[pos:se], 'utf-8')",
                      ind + 1)
            self.uses_decode = True
            self.emit("pos = se", ind + 1)
            return
        if kind == "records":
            self.emit(f"{target}, pos = _rrec(buf, pos, {flex}, {nullable})", ind)
            return
        if kind == "string":
            fn = "_rs"
        elif kind == "bytes":
            fn = "_rcb" if flex else "_rb"
        else:
            raise SpecError(f"cannot read {kind}")
        self.emit(f"{target}, pos = {fn}{'n' if nullable else ''}(buf, pos)", ind)
