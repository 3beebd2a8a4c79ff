"""Request and response models of the HTTP service (pydantic; imported only by :mod:`.app`).

The response models are fixed; :func:`request_model` builds the privatize request for one
server, so that the OpenAPI spec states its limits and the mechanisms it offers.
"""

# no "from __future__ import annotations": pydantic reads the annotations of the classes that
# request_model defines at run time, and they refer to its local names.
import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, field_validator, model_validator

from .catalog import MechanismSpec
from .config import INCLUDE_VALUES, ServiceConfig

__all__ = [
    "INCLUDE_VALUES",
    "request_model",
    "PrivatizeResponse",
    "MechanismsResponse",
    "CurveResponse",
    "ErrorResponse",
    "Health",
]

#: A parameter value in a request: a JSON scalar (the mechanism's parameter decides which fit).
def _json_scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number (NaN and Infinity are refused)")
    if isinstance(value, str) and len(value) > 64:
        raise ValueError("a string value has at most 64 characters")
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"must be a number, a string, true, false or null, got {'an array' if isinstance(value, list) else 'an object'}")
    return value


ParamValue = Annotated[
    Any,
    AfterValidator(_json_scalar),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 64}, {"type": "boolean"}, {"type": "null"}]}),
]


class GuaranteeModel(BaseModel):
    epsilon: float
    metric: str
    domain: str
    statement: str


class TextSummary(BaseModel):
    words: int
    changed: int


class Summary(BaseModel):
    words: int = Field(description="Words in all texts.")
    unknown: int = Field(description="Out-of-vocabulary words (privatized as UNK, or dropped).")
    changed: int = Field(description="Output words that differ from the input word.")
    changed_fraction: float = Field(description="changed / words (0 when there are no words).")


class Segment(BaseModel):
    text: str
    word: bool
    changed: bool


class PrivatizeResponse(BaseModel):
    """The privatized texts and their guarantee (safe to release); input-dependent fields only
    when the request's ``include`` asked for them (they must stay with the texts' owner)."""

    texts: list[str] = Field(description="The privatized texts (covered by the guarantee).")
    mechanism: str
    epsilon: float = Field(description="The ε used (chosen from the target when max_n_w was given).")
    params: dict[str, float] = Field(description="The parameters set by the request (others at the mechanism's defaults).")
    max_n_w: float | None = None
    guarantee: GuaranteeModel
    summary: Summary | None = Field(default=None, description="Only with include 'summary'. Input-dependent: stays with the texts' owner.")
    per_text: list[TextSummary] | None = Field(default=None, description="Only with include 'summary'. Input-dependent: stays with the texts' owner.")
    segments: list[list[Segment]] | None = Field(default=None, description="Only with include 'segments' (or details). Input-dependent: stays with the texts' owner.")
    release_id: str | None = Field(default=None, description="Only when the server keeps a ledger (deniable serve --ledger): the id of this release's row.")


class ParamInfo(BaseModel):
    name: str
    type: str = Field(description="JSON type of the value: number, integer, string or boolean.")
    nullable: bool = Field(description="null is accepted (and means the default).")
    default: Any = Field(description="The value used when a request does not set it (for a fixed parameter: always).")
    description: str
    settable: bool = Field(description="A request may set it in params; otherwise the server always uses the default.")


class MechanismInfo(BaseModel):
    name: str
    description: str
    served: bool = Field(description="This server privatizes with it; if false, reason says why not.")
    reason: str | None = Field(default=None, description="Why the mechanism is not served (null when it is).")
    notes: str | None = Field(default=None, description="How it is served, where that differs from the library's full use.")
    params: list[ParamInfo] = Field(description="Its constructor parameters with JSON values; only the settable ones may be sent.")
    epsilon_range: list[float]
    suggested_epsilons: list[float]
    on_device: bool = Field(description="A bundle for the in-browser runtime is available (GET /v1/bundles/brr).")
    targets: bool = Field(description="max_n_w targets can be resolved for this mechanism (calibration data available).")


class MechanismsResponse(BaseModel):
    mechanisms: list[MechanismInfo]
    default_mechanism: str = Field(description="The mechanism of a request that names none.")
    privacy_targets: bool = Field(description="Whether this installation supports max_n_w targets at all (see each mechanism's targets).")
    limits: dict[str, float]


class CurveResponse(BaseModel):
    mechanism: str
    params: dict[str, float]
    epsilons: list[float]
    median: list[float]
    worst: list[float]
    worst_word: list[str] | None = None
    source: str


class ErrorDetail(BaseModel):
    status: int
    code: str
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: str
    version: str


def _params_description(specs: dict[str, MechanismSpec]) -> str:
    settable = "; ".join(f"{n}: {', '.join(s.settable) or 'none'}" for n, s in specs.items())
    return (
        "Mechanism parameters, by name (GET /v1/mechanisms lists each mechanism's, with type, default and whether a request "
        f"may set it). Settable here: {settable}. Numbers; null leaves an optional one at its default. Any other name is a 422 "
        "naming it and the valid ones."
    )


def request_model(cfg: ServiceConfig, specs: dict[str, MechanismSpec], default: str) -> type[BaseModel]:
    """The ``POST /v1/privatize`` body for this server: its limits, the mechanisms it serves
    (``specs``, by name) and the mechanism of a request that names none (``default``)."""
    names = tuple(specs)
    MechanismName = Literal[names]  # type: ignore[valid-type]
    IncludeName = Literal[INCLUDE_VALUES]  # type: ignore[valid-type]
    Text = Annotated[str, StringConstraints(max_length=cfg.max_text_chars)]
    UserKey = Annotated[str, StringConstraints(min_length=1, max_length=256)] | Annotated[int, Field(ge=-(2**63), lt=2**63)]

    class PrivatizeRequest(BaseModel):
        """Texts to privatize word by word with one mechanism at one ε (or privacy target)."""

        model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{"texts": ["Meet me at the station at noon"], "mechanism": default, "epsilon": 20.0}]})

        texts: list[Text] = Field(min_length=1, max_length=cfg.max_texts, description=f"1 to {cfg.max_texts} texts, each at most {cfg.max_text_chars} characters, {cfg.max_total_chars} in all.")
        mechanism: MechanismName = Field(default=default, description="Mechanism name (GET /v1/mechanisms).")
        epsilon: Annotated[float | None, Field(ge=cfg.min_epsilon, le=cfg.max_epsilon, allow_inf_nan=False)] = Field(
            default=None, description=f"Privacy parameter ε in [{cfg.min_epsilon:g}, {cfg.max_epsilon:g}]; give this or max_n_w."
        )
        max_n_w: Annotated[float | None, Field(gt=0.0, lt=1.0, allow_inf_nan=False)] = Field(
            default=None, description="Privacy target: the largest ε whose worst-case N_w (probability a word is kept) stays below this; needs calibration data."
        )
        params: dict[str, ParamValue] = Field(default_factory=dict, max_length=32, description=_params_description(specs))
        seed: Annotated[int | None, Field(ge=0, lt=2**63)] = Field(default=None, description="Seed for reproducible output (predictable: for experiments only)." if cfg.allow_seed else "Not accepted by this server.")
        oov: Literal["unk", "drop"] = Field(default="unk", description="Out-of-vocabulary words: privatized as the UNK point, or dropped (never copied).")
        case: Literal["preserve", "lower"] = Field(default="preserve", description="Output words take the input's case pattern, or stay lower case.")
        include: Annotated[list[IncludeName], Field(max_length=len(INCLUDE_VALUES) * 2)] = Field(
            default_factory=list,
            description="Input-dependent data to add to the response (none by default): 'summary' (the summary and per_text counts of "
            "unknown and changed words) and 'segments' (each output as pieces marking the changed words). These are not covered by "
            "the privacy guarantee (an unchanged flag next to its output word is the input word): they must stay with the texts' owner.",
        )
        details: bool = Field(default=False, description="Same as adding 'segments' to include (input-dependent; stays with the texts' owner).")
        users: Annotated[list[UserKey] | None, Field(max_length=cfg.max_texts)] = Field(
            default=None,
            description="Only when the server keeps a ledger: one user key per text (a string or an integer), for the ledger's totals and budget "
            "per user key. Stored as given or as a keyed hash; never returned.",
        )

        @field_validator("texts")
        @classmethod
        def _texts(cls, v: list[str]) -> list[str]:
            return _check_texts(v, cfg.max_total_chars)

        @model_validator(mode="after")
        def _one_privacy_level(self) -> "PrivatizeRequest":
            if (self.epsilon is None) == (self.max_n_w is None):
                raise ValueError("give exactly one of epsilon and max_n_w")
            if self.seed is not None and not cfg.allow_seed:
                raise ValueError("this server does not accept seeds")
            return self

        def wants(self, what: str) -> bool:
            return what in self.include or (what == "segments" and self.details)

    return PrivatizeRequest


def _check_texts(texts: list[str], max_total_chars: int) -> list[str]:
    total = 0
    for i, t in enumerate(texts):
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"text {i} is not valid Unicode (lone surrogate)") from None
        total += len(t)
    if total > max_total_chars:
        raise ValueError(f"the texts have {total} characters in all, more than the limit of {max_total_chars}; split the batch")
    return texts
