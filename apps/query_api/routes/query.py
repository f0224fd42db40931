"""POST /v1/users/{user_id}/query: the retrieval agent over one user's memory."""

from __future__ import annotations

from fastapi import APIRouter

from apps.query_api.auth import AuthorizedUser
from apps.query_api.deps import Deps
from apps.query_api.ops.query import run_query
from apps.query_api.routes.common import MODEL_ERROR, USER_ERRORS
from worldmm.wire.schemas import QueryRequest, QueryResponse

router = APIRouter(prefix="/v1/users/{user_id}", tags=["query"])


@router.post(
    "/query",
    response_model=QueryResponse,
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
    responses={**USER_ERRORS, **MODEL_ERROR},
)
async def query(user_id: AuthorizedUser, body: QueryRequest, deps: Deps) -> QueryResponse:
    return await run_query(deps, user_id, body)
