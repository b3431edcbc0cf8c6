"""Model bases shared by spec and status: camelCase on the wire, snake_case in Python.

Spec models are strict (a typo is an error that names the field and suggests the spelling);
status models are lenient (a status written by an older or newer operator must still load).
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)


def camel(name: str) -> str:
    """``max_num_seqs`` -> ``maxNumSeqs``; ``e2e_seconds`` -> ``e2eSeconds`` (unlike pydantic's
    ``to_camel``, which writes ``e2ESeconds``)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class SpecModel(BaseModel):
    """A part of a user-written spec: strict, immutable, camelCase in YAML."""

    model_config = ConfigDict(
        alias_generator=camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,  # .inf and .nan parse as YAML floats; no bound can hold them
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_fields(cls, data: Any) -> Any:
        # extra="forbid" alone says "Extra inputs are not permitted"; a user with a typo
        # deserves the field's name and the spelling we expected.
        if isinstance(data, dict):
            aliases = [field.alias or name for name, field in cls.model_fields.items()]
            known = set(aliases) | set(cls.model_fields)
            unknown = [key for key in data if key not in known]
            if unknown:
                raise ValueError("; ".join(_unknown_field_text(str(k), aliases) for k in unknown))
        return data

    @model_serializer(mode="wrap")
    def _drop_nulls_that_mean_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A null whose default is null says nothing and is dropped; a null whose default is a
        # value ("maxNumSeqs: null" = leave it alone) means something and must survive a dump.
        data = handler(self)
        if isinstance(data, dict):
            for name, field in type(self).model_fields.items():
                if field.default is None and field.default_factory is None:
                    for key in (name, field.alias):
                        if key in data and data[key] is None:
                            del data[key]
        return data


def _unknown_field_text(key: str, aliases: list[str]) -> str:
    close = difflib.get_close_matches(key, aliases, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(aliases)}"
    return f"unknown field {key!r} ({hint})"


class StatusModel(BaseModel):
    """A part of the status the operator writes: immutable, camelCase, unknown keys ignored."""

    model_config = ConfigDict(
        alias_generator=camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="ignore",
        frozen=True,
        use_attribute_docstrings=True,
    )
