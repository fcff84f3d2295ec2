"""Parsing and applying `x-openclaw-input-discriminator` annotations."""

from __future__ import annotations

import pytest

from service.api_files.discriminator import (
    DISCRIMINATOR_KEY,
    read_output_variants,
    select_output_schema,
)
from service.api_files.errors import InvalidDiscriminatorError

LIST = {"type": "object", "properties": {"items": {"type": "array"}}, "additionalProperties": False}
STATUS = {"type": "object", "properties": {"ready": {"type": "boolean"}}, "additionalProperties": False}


def annotated(annotation: object, union: str = "anyOf", branches: object = None) -> dict:
    """An output schema with the given annotation."""
    return {union: [LIST, STATUS] if branches is None else branches, DISCRIMINATOR_KEY: annotation}


VALID = {"version": 1, "inputProperty": "action", "mapping": {"list": 0, "status": 1}}


def test_no_annotation_gives_none():
    """Schemas without the annotation (or no schema) have no variants."""
    assert read_output_variants(None) is None
    assert read_output_variants({"anyOf": [LIST]}) is None


@pytest.mark.parametrize("union", ["anyOf", "oneOf"])
def test_valid_annotation_is_parsed(union):
    """A v1 annotation yields the property, mapping and branches."""
    variants = read_output_variants(annotated(VALID, union))
    assert variants is not None
    assert variants.input_property == "action"
    assert dict(variants.mapping) == {"list": 0, "status": 1}
    assert variants.branches == (LIST, STATUS)


MALFORMED = [
    ("not an object", "must be an object"),
    ({**VALID, "version": 2}, "version must be 1"),
    ({**VALID, "version": True}, "version must be 1"),
    ({**VALID, "version": "1"}, "version must be 1"),
    ({"inputProperty": "action", "mapping": {"list": 0}}, "version must be 1"),
    ({**VALID, "inputProperty": ""}, "inputProperty"),
    ({**VALID, "inputProperty": 3}, "inputProperty"),
    ({**VALID, "mapping": {}}, "mapping must not be empty"),
    ({**VALID, "mapping": [0, 1]}, "mapping must be an object"),
    ({**VALID, "mapping": {"list": 2}}, "out of range"),
    ({**VALID, "mapping": {"list": -1}}, "out of range"),
    ({**VALID, "mapping": {"list": 1.0}}, "must be an integer"),
    ({**VALID, "mapping": {"list": "0"}}, "must be an integer"),
    ({**VALID, "mapping": {"list": False}}, "must be an integer"),
    ({**VALID, "extra": 1}, "unsupported keys: extra"),
]


@pytest.mark.parametrize(("annotation", "message"), MALFORMED)
def test_malformed_annotations_are_rejected(annotation, message):
    """Bad version, property, mapping or index raise with a message naming the problem."""
    with pytest.raises(InvalidDiscriminatorError, match=message) as caught:
        read_output_variants(annotated(annotation))
    assert str(caught.value).startswith(DISCRIMINATOR_KEY)


def test_annotation_without_a_root_union_is_rejected():
    """The annotation needs exactly one non-empty root anyOf/oneOf of schema objects."""
    with pytest.raises(InvalidDiscriminatorError, match="requires a root anyOf or oneOf"):
        read_output_variants({"type": "object", DISCRIMINATOR_KEY: VALID})
    with pytest.raises(InvalidDiscriminatorError, match="found both"):
        read_output_variants({"anyOf": [LIST, STATUS], "oneOf": [LIST, STATUS], DISCRIMINATOR_KEY: VALID})
    with pytest.raises(InvalidDiscriminatorError, match="non-empty"):
        read_output_variants(annotated({**VALID, "mapping": {"a": 0}}, branches=[]))
    with pytest.raises(InvalidDiscriminatorError, match="branch 1"):
        read_output_variants(annotated(VALID, branches=[LIST, "nope"]))


def test_select_narrows_to_the_mapped_branch():
    """A mapped selector narrows the root to its branch; the root's keywords stay."""
    schema = {**annotated(VALID), "$defs": {"x": {}}}
    variants = read_output_variants(schema)
    narrowed = select_output_schema(schema, variants, {"action": "status"})
    assert narrowed["allOf"] == [{"$ref": "#/anyOf/1"}]
    assert narrowed["$defs"] == {"x": {}}
    assert "allOf" not in schema


@pytest.mark.parametrize("tool_input", [{}, {"action": "other"}, {"action": 1}, None, "list"])
def test_select_keeps_whole_schema_for_missing_or_unmapped(tool_input):
    """Missing, unmapped or non-string selectors keep the whole schema."""
    schema = annotated(VALID)
    assert select_output_schema(schema, read_output_variants(schema), tool_input) is schema


def test_select_without_variants_is_identity():
    """Without an annotation the schema is returned unchanged."""
    assert select_output_schema(LIST, None, {"action": "list"}) is LIST
