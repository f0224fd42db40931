"""Questions over one user's memory: POST .../query runs the retrieval agent; POST .../search
is one search of one memory, without the agent or a model answer (what a tool-using agent
calls when it wants to do its own reasoning)."""

from __future__ import annotations

from query_api.auth import UserIdPath, user_router
from query_api.depends import AppDeps, Recalls
from query_api.ops.query import hit_json, run_query
from query_api.routes.common import MODEL_ERROR, USER_ERRORS
from worldmm.memory.retrieval import search
from worldmm.memory.retrieval.question_time import question_time
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
        "options) the answer picks one and `choice` gives its letter and index. The question "
        "is read at `as_of`, or without it at the moment it is asked, in the user's time zone: "
        "'yesterday afternoon' or 'the last time' mean that, and only memory that existed "
        "then is used. Times in the reply are on the user's clock (`asked_at`, `timezone`)."
    ),
)
async def query(
    user_id: UserIdPath, body: QueryRequest, deps: AppDeps, recalls: Recalls
) -> QueryResponse:
    return await run_query(deps, user_id, body, recalls=recalls)


@router.post(
    "/search",
    summary="Search one memory (episodic, semantic or visual)",
    description=(
        "One retrieval of the chosen memory, as the agent's rounds do it, with no answer. "
        "The query's time words are read at `as_of`, or at the moment it is asked, in the "
        "user's time zone, and only memory that existed then is searched."
    ),
)
async def search_route(user_id: UserIdPath, body: SearchRequest, deps: AppDeps) -> SearchResponse:
    asked = await question_time(deps, user_id, body.as_of)
    result = await search(deps, body.memory_type, user_id, body.query, asked.at, tz=asked.tz)
    return SearchResponse(
        memory_type=result.memory_type,
        query=result.query,
        results=[hit_json(h, user_id) for h in result.in_zone(asked.tz).hits],
        note=result.note,
        asked_at=asked.local,
        timezone=asked.zone_name,
    )
