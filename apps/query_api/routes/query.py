"""Questions over one user's memory: POST .../query runs the retrieval agent; POST .../search
is one search of one memory, without the agent or a model answer (what a tool-using agent
calls when it wants to do its own reasoning)."""

from __future__ import annotations

from apps.query_api.auth import UserIdPath, user_router
from apps.query_api.deps import Deps
from apps.query_api.ops.query import hit_json, run_query
from apps.query_api.routes.common import MODEL_ERROR, USER_ERRORS
from worldmm.memory.retrieval import search
from worldmm.wire.schemas import QueryRequest, QueryResponse, SearchRequest, SearchResponse

router = user_router(tags=["query"], responses={**USER_ERRORS, **MODEL_ERROR})


@router.post(
    "/query",
    summary="Ask a question about the past",
    description=(
        "Runs the retrieval agent: up to `max_rounds` searches of episodic, semantic or "
        "visual memory, then an answer from everything found: the short answer first, then "
        "the evidence in plain words. The reply carries the rounds, the segments (with time "
        "ranges, transcript, each retrieval lane's rank and score, and the drill-down "
        "context), semantic facts and frame URLs the answer rests on. With `choices` (2 to 8 "
        "options) the answer picks one and `choice` gives its letter and index. With `as_of`, "
        "only memory that existed at that time is used."
    ),
)
async def query(user_id: UserIdPath, body: QueryRequest, deps: Deps) -> QueryResponse:
    return await run_query(deps, user_id, body)


@router.post(
    "/search",
    summary="Search one memory (episodic, semantic or visual)",
    description=(
        "One retrieval of the chosen memory, as the agent's rounds do it, with no answer. "
        "With `as_of`, only memory that existed at that time is searched."
    ),
)
async def search_route(user_id: UserIdPath, body: SearchRequest, deps: Deps) -> SearchResponse:
    result = await search(deps, body.memory_type, user_id, body.query, body.as_of)
    return SearchResponse(
        memory_type=result.memory_type,
        query=result.query,
        results=[hit_json(h, user_id) for h in result.hits],
        note=result.note,
    )
