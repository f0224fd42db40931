"""POST /v1/users/{user_id}/search: one search of one memory, without the agent or a model
answer (what a tool-using agent calls when it wants to do its own reasoning)."""

from __future__ import annotations

from fastapi import APIRouter

from apps.query_api.auth import AuthorizedUser
from apps.query_api.deps import Deps
from apps.query_api.ops.query import hit_json
from apps.query_api.routes.common import MODEL_ERROR, USER_ERRORS
from worldmm.memory.retrieval import search
from worldmm.wire.schemas import SearchRequest, SearchResponse

router = APIRouter(prefix="/v1/users/{user_id}", tags=["query"])


@router.post(
    "/search",
    response_model=SearchResponse,
    summary="Search one memory (episodic, semantic or visual)",
    description=(
        "One retrieval of the chosen memory, as the agent's rounds do it, with no answer. "
        "With `as_of`, only memory that existed at that time is searched."
    ),
    responses={**USER_ERRORS, **MODEL_ERROR},
)
async def search_route(user_id: AuthorizedUser, body: SearchRequest, deps: Deps) -> SearchResponse:
    result = await search(deps.retrieval(), body.memory_type, user_id, body.query, body.as_of)
    return SearchResponse(
        memory_type=result.memory_type,
        query=result.query,
        results=[hit_json(h, user_id) for h in result.hits],
        note=result.note,
    )
