"""POST /v1/users/{user_id}/search: one search of one memory, without the agent or a model
answer (what a tool-using agent calls when it wants to do its own reasoning)."""

from __future__ import annotations

from fastapi import APIRouter

from apps.query_api.auth import AuthorizedUser
from apps.query_api.deps import Deps
from apps.query_api.ops.query import frame_url
from apps.query_api.routes.common import USER_ERRORS
from worldmm.memory.retrieval import search
from worldmm.memory.retrieval.results import Hit
from worldmm.wire.schemas import ErrorOut, SearchRequest, SearchResponse

router = APIRouter(prefix="/v1/users/{user_id}", tags=["query"])


@router.post(
    "/search",
    response_model=SearchResponse,
    summary="Search one memory (episodic, semantic or visual)",
    description=(
        "One retrieval of the chosen memory, as the agent's rounds do it, with no answer. "
        "With `as_of`, only memory that existed at that time is searched."
    ),
    responses={
        **USER_ERRORS,
        502: {"model": ErrorOut, "description": "A model call failed; retry later"},
    },
)
async def search_route(user_id: AuthorizedUser, body: SearchRequest, deps: Deps) -> SearchResponse:
    result = await search(deps, body.memory_type, user_id, body.query, body.as_of)
    return SearchResponse(
        memory_type=result.memory_type,
        query=result.query,
        results=[_hit(h, user_id) for h in result.hits],
        note=result.note,
    )


def _hit(hit: Hit, user_id: str) -> dict:
    data = hit.model_dump(mode="json")
    if "key" in data:  # a frame: a URL the caller can fetch with the same key
        data["url"] = frame_url(user_id, data["key"])
    return data
