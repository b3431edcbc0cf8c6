"""The whole LatencyTarget object, and errors that point at the field a person got wrong."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus

GROUP: Final = "tuning.latencytuner.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "tuning.latencytuner.io/v1alpha1"
KIND: Final = "LatencyTarget"
PLURAL = "latencytargets"
SINGULAR = "latencytarget"
SHORT_NAMES = ("lt",)


class InvalidLatencyTarget(ValueError):
    """A LatencyTarget manifest that does not validate; ``problems`` are "path: what" lines."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name = name
        self.problems = problems
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"LatencyTarget {name} is invalid:\n{lines}")


def describe_errors(error: ValidationError, prefix: str = "") -> list[str]:
    """One "path.to.field: message (got value)" line per pydantic error, in YAML spelling."""
    lines = []
    for item in error.errors():
        path = prefix
        for part in item["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = item["msg"].removeprefix("Value error, ")
        given = item.get("input")
        if item["type"] not in {"value_error", "missing"} and isinstance(given, str | int | float):
            message += f" (got {given!r})"
        lines.append(f"{path or '(top level)'}: {message}")
    return lines


class LatencyTarget(BaseModel):
    """A LatencyTarget object as the API server holds it."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True, frozen=True)

    api_version: Literal["tuning.latencytuner.io/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion"
    )
    kind: Literal["LatencyTarget"] = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: LatencyTargetSpec
    status: LatencyTargetStatus | None = None

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> LatencyTarget:
        """Validate a manifest (a dict from YAML or the API); raise ``InvalidLatencyTarget``
        whose message names every offending field, e.g. ``spec.objectives.ttft.percentile``."""
        metadata = manifest.get("metadata")
        name = str(metadata.get("name", "(unnamed)")) if isinstance(metadata, Mapping) else "?"
        try:
            return cls.model_validate(dict(manifest))
        except ValidationError as exc:
            raise InvalidLatencyTarget(name, describe_errors(exc)) from None

    def to_manifest(self) -> dict[str, Any]:
        """The object as a JSON/YAML-ready dict in camelCase, without unset (null) fields."""
        manifest: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": self.metadata,
            # The spec's own serializer keeps the nulls that mean "leave this knob alone".
            "spec": self.spec.model_dump(mode="json", by_alias=True),
        }
        if self.status is not None:
            manifest["status"] = self.status.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        return manifest
