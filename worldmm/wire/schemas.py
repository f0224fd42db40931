"""Request and response bodies of the query API (the wire contract, documented in OpenAPI)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from worldmm.localtime import DEFAULT_ZONE, ZoneName
from worldmm.models import MAX_CHOICES, MIN_CHOICES, MemoryType, choice_texts

# The same characters the ingest path accepts in ids (worldmm.models.SAFE_ID_RE), so every
# user that can stream can be queried and blob prefixes stay safe path segments.
USER_ID_PATTERN = r"^[A-Za-z0-9_.@-]{1,128}$"
MAX_QUESTION_CHARS = 2000
MAX_CHOICE_CHARS = 500
MAX_NOTE_CHARS = 4000
MAX_PAGE = 500
DEFAULT_PAGE = 100

UserId = Annotated[
    str,
    Field(
        pattern=USER_ID_PATTERN,
        description="1-128 characters of A-Z a-z 0-9 _ . @ - (not '.' or '..').",
        examples=["alice"],
    ),
]


# A day inside what a datetime holds, at both ends: window arithmetic (a note's 30 s before
# ``at``, a day's bounds) on any accepted time stays representable.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def in_range(value: datetime) -> datetime:
    """An input time, unchanged; ValueError (a 422) when it is outside EARLIEST..LATEST, also
    when its offset carries it past what a datetime holds (year 1 at +23:59 is year 0)."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        raise ValueError(
            f"time out of range: between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} UTC"
        )
    return value


# Every time the API takes: ISO 8601 with an offset (a naive time is refused), in range.
Instant = Annotated[AwareDatetime, AfterValidator(in_range)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _storable(value: str) -> str:
    """PostgreSQL text holds neither NUL nor lone surrogates: refuse them here (422) rather
    than fail at the insert (500)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return _storable(value.strip())


# --- users -----------------------------------------------------------------------------
class CreateUserRequest(_Body):
    user_id: UserId
    timezone: ZoneName | None = Field(
        default=None,
        description=f"The wearer's IANA time zone (default {DEFAULT_ZONE}): where "
        "'yesterday afternoon' and the answers' clock times are read.",
    )

    @field_validator("user_id")
    @classmethod
    def _no_dots(cls, v: str) -> str:
        if v in (".", ".."):
            raise ValueError("'.' and '..' are not user ids")
        return v

    def profile(self) -> dict[str, object]:
        """The profile fields given (the rest keep their defaults)."""
        return self.model_dump(exclude={"user_id"}, exclude_none=True)


class CreateUserResponse(BaseModel):
    user_id: str
    api_key: str = Field(description="The user's bearer key. Shown once; only a hash is kept.")
    timezone: str = Field(description="The user's IANA time zone.")


class UserProfileOut(BaseModel):
    """What ``GET /v1/users/{user_id}`` returns; stored times are UTC, the zone is applied
    where the wearer reads or says a time."""

    user_id: str
    timezone: str = Field(description="The wearer's IANA time zone, e.g. 'Asia/Tokyo'.")
    created_at: AwareDatetime
    retention_days: int | None = Field(
        default=None,
        description="Days frames and audio are kept (null: the deployment's default); text "
        "memory stays.",
    )
    face_blur: bool = Field(default=True, description="Bystanders' faces blurred in frames.")


class ProfileUpdate(_Body):
    """``PATCH /v1/users/{user_id}``: the fields to change; those left out stay."""

    timezone: ZoneName | None = Field(default=None, description="A new IANA time zone.")
    retention_days: int | None = Field(
        default=None,
        ge=1,
        le=36_500,
        description="Days frames and audio are kept; an explicit null returns to the "
        "deployment's default.",
    )
    face_blur: bool | None = Field(
        default=None, description="false: opt out of bystander face blurring (recorded)."
    )

    @model_validator(mode="after")
    def _something(self) -> ProfileUpdate:
        if not self.changes():
            raise ValueError(
                f"give at least one field to change: {', '.join(type(self).model_fields)}"
            )
        return self

    def changes(self) -> dict[str, object]:
        out = self.model_dump(exclude_none=True)
        if "retention_days" in self.model_fields_set:  # null is a change: back to the default
            out["retention_days"] = self.retention_days
        return out


class WhoAmI(BaseModel):
    user_id: str | None = Field(description="The user this key belongs to; null for the admin key.")
    admin: bool


class PurgeResponse(BaseModel):
    user_id: str
    rows_deleted: dict[str, int] = Field(description="Rows removed per table.")
    blobs_deleted: int
    cache_keys_deleted: int


# --- query -----------------------------------------------------------------------------
class QueryRequest(_Body):
    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="A question about the past."
    )
    choices: list[Annotated[str, Field(min_length=1, max_length=MAX_CHOICE_CHARS)]] | None = Field(
        default=None,
        min_length=MIN_CHOICES,
        max_length=MAX_CHOICES,
        description=(
            f"{MIN_CHOICES} to {MAX_CHOICES} non-blank multiple-choice options, lettered A, B, "
            "... by position (a leading 'B. ' on the second one is dropped). The answer then "
            "picks one, and the reply's `choice` says which."
        ),
        examples=[["coffee", "green tea", "water", "juice"]],
    )
    as_of: Instant | None = Field(
        default=None,
        description="Answer only from memory that existed at this time (ISO 8601 with zone).",
    )
    max_rounds: int | None = Field(
        default=None,
        ge=1,
        description="Retrieval rounds (1 to the server's WORLDMM_AGENT_MAX_ROUNDS).",
    )

    _question = field_validator("question")(_not_blank)

    @field_validator("choices")
    @classmethod
    def _choices_storable(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        choice_texts(v)  # a blank option is refused here, with its letter
        return [_storable(c) for c in v]


class RoundOut(BaseModel):
    memory_type: MemoryType
    query: str
    results: list[dict[str, Any]] = Field(
        description="Hits of this search: segments, semantic triples or frames."
    )
    note: str | None = Field(default=None, description="Why results are missing or degraded.")
    repeated: bool = Field(default=False, description="Same search as an earlier round.")


class LaneOut(BaseModel):
    rank: int = Field(description="1-based rank the lane gave the segment.")
    score: float = Field(description="The lane's own score (not comparable across lanes).")


class EvidenceOut(BaseModel):
    segment_id: int
    scale: int
    start: AwareDatetime = Field(description="On the wearer's clock (ISO 8601 with offset).")
    end: AwareDatetime
    when: str | None = Field(
        default=None,
        description="The start as the wearer says it, e.g. 'yesterday at 15:02'.",
        examples=["yesterday at 15:02"],
    )
    text: str = Field(description="The caption (30 s) or summary (coarser scales).")
    transcript: str | None = Field(default=None, description="What was said in the window.")
    score: float | None = Field(default=None, description="The fused retrieval score.")
    lanes: dict[str, LaneOut] = Field(
        default_factory=dict,
        description="Each retrieval lane's rank and score behind the fused score.",
    )
    context: str | None = Field(
        default=None, description="The coarser summary a drill-down came from."
    )
    context_segment_id: int | None = Field(
        default=None, description="The coarser segment a drill-down came from."
    )
    input_lost: bool = Field(
        default=False,
        description="Lost input overlaps the window: input may be missing here (the "
        "segment's `input_lost` says which).",
    )


class CitedOut(BaseModel):
    segment_id: int = Field(description="The cited segment, one of `evidence`.")
    start: AwareDatetime = Field(description="Start of its window.")
    end: AwareDatetime = Field(description="End of its window.")


class ChoiceOut(BaseModel):
    letter: str = Field(description="The chosen option's letter, A for the first.")
    index: int = Field(description="0-based position of the chosen option in `choices`.")
    text: str = Field(description="The chosen option, without a letter.")
    evidence_segment_ids: list[int] = Field(description="Segments the choice rests on.")
    guess: bool = Field(description="True when nothing retrieved supported any option.")


class TripleOut(BaseModel):
    triple_id: int
    subject: str
    predicate: str
    object: str
    valid_from: AwareDatetime | None = None
    invalidated_at: AwareDatetime | None = None


class QueryResponse(BaseModel):
    answer: str = Field(
        description="The short answer first, then the evidence it rests on, in plain words."
    )
    choice: ChoiceOut | None = Field(
        default=None, description="The option picked, when the question came with choices."
    )
    provider: str = Field(description="Which model provider answered, e.g. 'offline'.")
    as_of: AwareDatetime | None = None
    asked_at: AwareDatetime | None = Field(
        default=None,
        description="The moment the question was read at (its as_of, else when it was asked), "
        "on the wearer's clock: its time words and the memory it saw are relative to it.",
    )
    timezone: str | None = Field(default=None, description="The wearer's zone it was read in.")
    stopped: str = Field(
        description="Why the search ended: answer, max_rounds, parse_error or model_error."
    )
    rounds: list[RoundOut]
    evidence: list[EvidenceOut] = Field(description="Episodic segments the answer drew on.")
    cited: list[CitedOut] = Field(
        default_factory=list,
        description="The windows the answer comes from (the evidence it cites), in order.",
    )
    triples: list[TripleOut] = Field(default_factory=list, description="Semantic facts used.")
    frames: list[str] = Field(description="URLs of the frames retrieved (JPEG).")


class SearchRequest(_Body):
    memory_type: MemoryType = Field(description="episodic, semantic or visual.")
    query: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, description="What to look for.")
    as_of: Instant | None = Field(
        default=None, description="Search only memory that existed at this time."
    )

    _query = field_validator("query")(_not_blank)


class SearchResponse(BaseModel):
    memory_type: MemoryType
    query: str
    results: list[dict[str, Any]] = Field(
        description="Segments, semantic triples or frames (with a url), best first; their "
        "times on the wearer's clock."
    )
    note: str | None = Field(default=None, description="Why results are missing or degraded.")
    asked_at: AwareDatetime | None = Field(
        default=None, description="The moment the query was read at, on the wearer's clock."
    )
    timezone: str | None = Field(default=None, description="The wearer's zone.")


# --- reading memory --------------------------------------------------------------------
class InputGapOut(BaseModel):
    """Input the broker lost whose capture-time span overlaps a window: the window may be
    missing captures (which, nobody can say: the records are gone)."""

    reason: str = Field(
        description="How the broker lost it: 'log_end_below_position', "
        "'earliest_above_position' or 'offsets_reused'."
    )
    topic: str
    partition: int
    first_offset: int
    end_offset: int = Field(description="Exclusive.")
    records: int = Field(description="Records lost on that partition (any wearer's).")
    span_start: AwareDatetime | None = Field(
        description="Earliest capture time the lost records may have; null: unbounded."
    )
    span_end: AwareDatetime = Field(description="Latest capture time they may have.")


class SegmentOut(BaseModel):
    id: int
    scale: int
    start: AwareDatetime
    end: AwareDatetime
    partial: bool
    session_id: str | None = None
    caption: str | None = None
    transcript: str | None = None
    parent_segment_id: int | None = None
    processing_status: str
    visual_status: str
    note: bool = Field(description="True for an explicit 'remember this' note.")
    degraded: str | None = Field(
        None,
        description="Why this window was captioned without the vision call "
        "('daily_token_budget': the user's daily token budget was spent); null when it was not.",
    )
    importance: float | None = Field(
        default=None,
        description="How much the moment matters, 0 (routine) to 1 (critical); null for "
        "segments built before importance existed.",
    )
    importance_source: str | None = Field(
        default=None,
        description="Who rated it: 'model' (the caption or merge model), 'estimate' (speech, "
        "names, novelty) or 'note' (an explicit note).",
    )
    recall_count: int = Field(
        default=0, description="Answers (and notes, several counts each) that recalled it."
    )
    last_recalled_at: AwareDatetime | None = Field(default=None, description="Its latest recall.")
    input_lost: list[InputGapOut] = Field(
        default_factory=list,
        description="Lost input overlapping this window: when not empty, input may be "
        "missing here.",
    )


class SegmentPage(BaseModel):
    items: list[SegmentOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null at end.")


class FrameOut(BaseModel):
    key: str
    ts: AwareDatetime
    session_id: str | None = None
    seq: int | None = None
    url: str


class FramePage(BaseModel):
    items: list[FrameOut]
    next_cursor: str | None


class SemanticFactOut(BaseModel):
    id: int
    subject: str
    predicate: str
    object: str
    valid_from: AwareDatetime
    invalidated_at: AwareDatetime | None = None
    replaced_by: int | None = None
    origin: str
    evidence_segment_ids: list[int]


class SemanticList(BaseModel):
    items: list[SemanticFactOut]


# --- writing memory --------------------------------------------------------------------
class RememberRequest(_Body):
    text: str = Field(min_length=1, max_length=MAX_NOTE_CHARS, description="What to remember.")
    at: Instant | None = Field(default=None, description="When it was true (default: now).")

    _text = field_validator("text")(_not_blank)


class RememberResponse(BaseModel):
    segment_id: int = Field(description="The note holding this memory.")
    merged_into: int | None = Field(
        default=None,
        description="Set (to segment_id) when the note repeated a recent note of the user "
        "(text embedding cosine at or above the merge threshold): that note was recalled "
        "instead of a new one stored. Null when a new note was stored.",
    )
    start: AwareDatetime
    end: AwareDatetime
    entities: list[str]
    episodic_triples: list[list[str]]
    semantic_triples: list[list[str]]
    construction: str = Field(description="Which code built the memory (shared or local).")


class ForgetResponse(BaseModel):
    user_id: str
    start: AwareDatetime
    end: AwareDatetime
    rows_deleted: dict[str, int]
    blobs_deleted: int


# --- privacy -------------------------------------------------------------------------------
class PauseRequest(_Body):
    """A privacy pause (or its end) for a capture session."""

    session_id: UserId | None = Field(
        default=None, description="The capture session (default: the user's latest one)."
    )
    at: AwareDatetime | None = Field(default=None, description="When it takes effect (now).")


class PauseResponse(BaseModel):
    user_id: str
    session_id: str
    event: str = Field(description="pause or resume")
    at: AwareDatetime


# --- health ----------------------------------------------------------------------------
class UsageTotalsOut(BaseModel):
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = Field(description="Of prompt_tokens, served from the prompt cache.")
    reasoning_tokens: int = Field(
        default=0,
        description="Of completion_tokens, spent reasoning (billed as output; the role's "
        "reasoning effort sets how many).",
    )
    total_tokens: int = Field(description="prompt_tokens + completion_tokens.")
    cost: float | None = Field(
        description="Estimated from the price table (see `prices`); null when it does not "
        "list a model used."
    )


class RoleUsageOut(UsageTotalsOut):
    role: str
    model: str
    dispatch: str = Field(
        description="direct, flex (the flex tier) or batch (the Batch API): the last two at "
        "the lower price."
    )


class DayUsageOut(UsageTotalsOut):
    day: AwareDatetime = Field(description="Midnight UTC of the day.")


class BudgetOut(BaseModel):
    daily_tokens: int = Field(description="WORLDMM_LLM_USER_DAILY_TOKEN_BUDGET.")
    used_today: int = Field(description="Tokens recorded today (UTC) so far.")
    remaining_today: int


class PricesOut(BaseModel):
    as_of: str = Field(description="Date of the price table the costs come from.")
    currency: str


class UsageReport(BaseModel):
    user_id: str
    start: AwareDatetime
    end: AwareDatetime
    total: UsageTotalsOut
    by_role: list[RoleUsageOut] = Field(description="Per role, model and dispatch mode.")
    by_day: list[DayUsageOut] = Field(description="Per UTC day, oldest first.")
    degraded_windows: int = Field(
        description="30 s windows in the range captioned without the vision call (budget)."
    )
    budget: BudgetOut | None = Field(description="The daily token budget; null when none.")
    prices: PricesOut


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    checks: dict[str, str] = Field(description="Each dependency: 'ok' or why it failed.")


class ErrorOut(BaseModel):
    detail: str
