"""Bodies of the key and audit routes (admin): the wire contract, documented in OpenAPI."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from worldmm.wire.schemas import _storable


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="What the key is for (e.g. 'phone', 'mcp'); shown in listings.",
    )

    @field_validator("name")
    @classmethod
    def _name_storable(cls, v: str | None) -> str | None:
        return None if v is None else _storable(v)


class KeyOut(BaseModel):
    key_id: int
    user_id: str
    prefix: str = Field(description="The key's first characters: enough to recognise it.")
    name: str | None = None
    created_at: AwareDatetime
    revoked_at: AwareDatetime | None = None
    replaced_by: int | None = Field(default=None, description="The key that rotated this one.")


class KeyCreated(KeyOut):
    api_key: str = Field(description="The bearer key. Shown once; only a hash is kept.")


class KeyList(BaseModel):
    items: list[KeyOut]


class AuditOut(BaseModel):
    id: int
    at: AwareDatetime
    actor: str
    action: str = Field(description="user.create, user.purge, key.create, key.rotate, ...")
    user_id: str | None = None
    key_id: int | None = None
    detail: dict[str, Any]


class AuditPage(BaseModel):
    items: list[AuditOut]
    next_before: int | None = Field(description="Pass as ?before= for older records.")
