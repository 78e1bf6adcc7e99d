"""Request and response bodies; they also make the OpenAPI schema at ``/openapi.json``.

Answers are built as plain dicts by the same code as the Python API (``textorch.tagging.answer``) and sent
as they are; the response models here document them without re-validating every answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class TagRequest(BaseModel):
    """Either raw ``texts`` (tokenised by the server) or pre-tokenised ``sequences``."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] | None = Field(default=None, description="Raw texts; entities get character offsets.")
    sequences: list[list[str | list[str]]] | None = Field(
        default=None,
        description="Token sequences; a token is a string or [token, feature, ...] with the model's "
        "feature count (see GET /models). Entities get token offsets and each text its labels.",
    )

    @model_validator(mode="after")
    def _one_input(self) -> "TagRequest":
        if (self.texts is None) == (self.sequences is None):
            raise ValueError("give exactly one of 'texts' or 'sequences'")
        return self


class ClassifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(description="Texts to classify.")


class Entity(BaseModel):
    text: str
    class_: str = Field(alias="class")
    score: float
    beginOffset: int | None = None
    endOffset: int | None = Field(default=None, description="Exclusive: text[beginOffset:endOffset].")
    beginToken: int | None = None
    endToken: int | None = Field(default=None, description="Exclusive token index.")


class TaggedText(BaseModel):
    text: str
    entities: list[Entity]
    labels: list[str] | None = Field(default=None, description="Per-token labels (pre-tokenised input only).")


class TagResponse(BaseModel):
    """DeLFT's tagging JSON."""

    software: str
    version: str
    model: str
    date: str
    runtime: float = Field(description="Seconds from receiving the request to answering it.")
    texts: list[TaggedText]


class Classification(BaseModel):
    text: str
    scores: dict[str, float] = Field(description="Probability of each class.")
    labels: list[str] = Field(description="The predicted class, or every class over its threshold (multi-label).")


class ClassifyResponse(BaseModel):
    """The JSON of ``textorch cls classify``."""

    software: str
    version: str
    model: str
    date: str
    runtime: float
    classes: list[str]
    multi_label: bool
    classifications: list[Classification]


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    kind: str
    architecture: str
    labels: list[str]
    device: str
    engine: str


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class HealthResponse(BaseModel):
    status: str
    version: str
    models: list[str]
    batching: dict[str, Any]


class ErrorResponse(BaseModel):
    detail: str
