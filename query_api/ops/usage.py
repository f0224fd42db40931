"""One user's model usage over a time range: totals, per role and per day, priced."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from worldmm.deps import Deps
from worldmm.llm.prices import PriceTable, prices_for
from worldmm.llm.usage_ledger import day_start
from worldmm.store.llm_usage import UsageRow, degraded_windows, usage_rows
from worldmm.wire.schemas import (
    BudgetOut,
    DayUsageOut,
    PricesOut,
    RoleUsageOut,
    UsageReport,
    UsageTotalsOut,
)

MAX_SPAN = timedelta(days=366)


class BadRange(ValueError):
    """A usage range that is empty, reversed or longer than a year."""


def usage_range(start: datetime | None, end: datetime | None, now: datetime) -> tuple:
    """[start, end): by default from midnight UTC today to now."""
    end = (end or now).astimezone(UTC)
    start = (start or day_start(min(end, now))).astimezone(UTC)
    if start >= end:
        raise BadRange("'start' must be before 'end'")
    if end - start > MAX_SPAN:
        raise BadRange(f"a usage range spans at most {MAX_SPAN.days} days")
    return start, end


def _totals(rows: Iterable[UsageRow], prices: PriceTable) -> dict:
    calls = prompt = completion = cached = reasoning = 0
    cost: float | None = 0.0
    for r in rows:
        calls, prompt = calls + r.calls, prompt + r.prompt_tokens
        completion, cached = completion + r.completion_tokens, cached + r.cached_tokens
        reasoning += r.reasoning_tokens
        priced = prices.cost(
            r.model, r.prompt_tokens, r.cached_tokens, r.completion_tokens, r.dispatch
        )
        cost = None if cost is None or priced is None else cost + priced
    return {
        "calls": calls,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "reasoning_tokens": reasoning,
        "total_tokens": prompt + completion,
        "cost": None if cost is None else round(cost, 9),
    }


def _grouped(rows: list[UsageRow], key) -> dict:
    groups: dict = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def usage_report(
    deps: Deps, user_id: str, start: datetime | None, end: datetime | None
) -> UsageReport:
    """The report of ``GET /v1/users/{user_id}/usage`` (blocking: run it in a thread)."""
    now = datetime.now(UTC)
    start, end = usage_range(start, end, now)
    prices = prices_for(deps.settings)
    deps.usage.flush()  # what this process recorded is in the report
    with deps.db.connection() as conn:
        rows = usage_rows(conn, user_id, start, end)
        degraded = degraded_windows(conn, user_id, start, end)
    by_role = _grouped(rows, lambda r: (r.role, r.model, r.dispatch))
    roles = [
        RoleUsageOut(role=role, model=model, dispatch=dispatch, **_totals(group, prices))
        for (role, model, dispatch), group in by_role.items()
    ]
    roles.sort(key=lambda r: (-r.total_tokens, r.role))
    budget = None
    if deps.settings.llm_user_daily_token_budget > 0:
        limit = deps.settings.llm_user_daily_token_budget
        used = deps.usage.used_today(user_id)
        budget = BudgetOut(
            daily_tokens=limit, used_today=used, remaining_today=max(0, limit - used)
        )
    return UsageReport(
        user_id=user_id,
        start=start,
        end=end,
        total=UsageTotalsOut(**_totals(rows, prices)),
        by_role=roles,
        by_day=[
            DayUsageOut(day=day, **_totals(group, prices))
            for day, group in _grouped(rows, lambda r: r.day).items()
        ],
        degraded_windows=degraded,
        budget=budget,
        prices=PricesOut(as_of=prices.as_of.isoformat(), currency=prices.currency),
    )
