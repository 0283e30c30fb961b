"""Property tests of the spec model the generator reads Kafka's JSON specs with
(``messages.spec``; Kafka's ``Versions``, ``FieldType`` and ``FieldSpec`` of its generator).

* A version range reads back from its own text; membership, iteration, emptiness and
  intersection behave as the set of versions it stands for.
* Field names: the snake_case attribute of a PascalCase name is a lower-case Python identifier,
  never a keyword, and distinct names of the specs stay distinct; camel_case changes only the
  first letter.
* Field types: ``[]T`` is an array of ``T``, a struct is whatever is neither a primitive nor an
  array, and a struct array names its struct.
* In every struct of every spec the field attributes are distinct, and a field is tagged only in
  versions where it is present.
"""

from __future__ import annotations

import keyword

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages.spec import (
    MAX_VERSION,
    NONE,
    PRIMITIVES,
    FieldSpec,
    FieldType,
    MessageSpec,
    SpecError,
    Versions,
    camel_case,
    load_all,
    snake_case,
)
from tests.properties import examples

SPECS = load_all()

versions = st.integers(0, 40)
ranges = st.builds(Versions, versions, versions) | st.builds(Versions, versions, st.just(MAX_VERSION))


def members(v: Versions) -> set[int]:
    return {n for n in range(0, 45) if n in v} | ({MAX_VERSION} if MAX_VERSION in v else set())


@settings(deadline=None, max_examples=examples(150))
@given(v=ranges)
def test_a_version_range_reads_back_from_its_text(v: Versions) -> None:
    parsed = Versions.parse(str(v))
    assert parsed == v or (v.empty and parsed == NONE)
    assert v.empty == (str(v) == "none") == (not members(v))
    if not v.empty and v.hi != MAX_VERSION:
        assert set(v) == members(v)


@settings(deadline=None, max_examples=examples(150))
@given(a=ranges, b=ranges, c=ranges)
def test_intersection_is_the_intersection_of_the_version_sets(a: Versions, b: Versions, c: Versions) -> None:
    assert members(a.intersect(b)) == members(a) & members(b)
    assert a.intersect(b) == b.intersect(a)
    assert a.intersect(b).intersect(c) == a.intersect(b.intersect(c))
    assert (a.intersect(b) == NONE) == (not members(a) & members(b))


@settings(deadline=None, max_examples=examples(100))
@given(lo=versions, hi=versions, spaces=st.sampled_from(["", " ", "  "]))
def test_kafka_version_text_forms(lo: int, hi: int, spaces: str) -> None:
    assert Versions.parse(f"{spaces}{lo}+{spaces}") == Versions(lo, MAX_VERSION)
    assert Versions.parse(f"{lo}-{hi}") == Versions(lo, hi)
    assert Versions.parse(f"{spaces}{lo}{spaces}") == Versions(lo, lo)
    assert Versions.parse(None) == Versions.parse("none") == NONE
    assert "x" not in Versions(lo, hi) and None not in Versions(lo, hi)  # only ints are versions


pascal_names = st.lists(
    st.sampled_from(["Topic", "Id", "Ids", "Partition", "KRaft", "Version", "Ms", "Uuid", "Is", "Leader",
                     "Epoch", "ISR", "Zk", "Broker", "Class", "For", "Self", "Api", "Key", "Log"]),
    min_size=1, max_size=4,
).map("".join)


@settings(deadline=None, max_examples=examples(150))
@given(name=pascal_names)
def test_snake_case_makes_a_plain_attribute_and_camel_case_a_json_key(name: str) -> None:
    attr = snake_case(name)
    assert attr.isidentifier() and attr == attr.lower() and not keyword.iskeyword(attr)
    assert attr not in ("self", "version") and "__" not in attr
    assert attr.replace("_", "") == name.lower()  # only underscores added, at word breaks or the end
    key = camel_case(name)
    assert key[0] == name[0].lower() and key[1:] == name[1:]


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_field_attributes_of_a_struct_are_distinct_and_tagged_only_where_present(spec: MessageSpec) -> None:
    # (nullableVersions may reach past versions, as Kafka's specs have it: DescribeConfigs'
    # Documentation is nullable from 0 and present from 3)
    valid = members(spec.valid_versions)
    for struct in spec.structs.values():
        attrs = [f.attr for f in struct.fields]
        assert len(attrs) == len(set(attrs)), struct.name
        for f in struct.fields:
            assert isinstance(f, FieldSpec)
            for n in valid:
                assert not f.tagged_in(n) or f.present_in(n), (struct.name, f.name, n)


@settings(deadline=None, max_examples=examples(100))
@given(element=st.sampled_from(sorted(PRIMITIVES)) | st.sampled_from(["Topic", "PartitionData", "Voter"]),
       array=st.booleans())
def test_field_types(element: str, array: bool) -> None:
    t = FieldType(("[]" if array else "") + element)
    assert t.is_array == array and str(t) == t.text
    primitive = element in PRIMITIVES
    if array:
        assert t.element == FieldType(element)
        assert t.is_struct_array == (not primitive) and not t.is_struct and not t.is_primitive
    else:
        assert t.is_primitive == primitive and t.is_struct == (not primitive)
        with pytest.raises(SpecError):
            _ = t.element
    if primitive:
        with pytest.raises(SpecError):
            _ = t.struct_name
    else:
        assert t.struct_name == element
