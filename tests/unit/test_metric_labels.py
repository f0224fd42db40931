"""Per-user metric labels are bounded: a stream of new user ids cannot grow a process's
/metrics without limit (issue #42); past the first users, their tokens count as '_other'."""

from __future__ import annotations

from datetime import UTC, datetime

from worldmm import metrics
from worldmm.llm.usage_ledger import UsageRecord, count


def test_user_token_series_stop_growing_at_the_bound(monkeypatch):
    monkeypatch.setattr(metrics, "USER_LABEL", metrics.BoundedLabel(3))
    for i in range(10):
        count(
            UsageRecord(
                at=datetime.now(UTC), user_id=f"flood-{i}", role="agent", model="m",
                provider="offline", dispatch="direct", prompt_tokens=5, completion_tokens=2,
            )
        )  # fmt: skip
    users = {
        s.labels["user_id"]
        for m in metrics.USER_TOKENS.collect()
        for s in m.samples
        if s.labels["user_id"].startswith("flood-") or s.labels["user_id"] == "_other"
    }
    assert users == {"flood-0", "flood-1", "flood-2", "_other"}
    assert metrics.USER_LABEL("flood-1") == "flood-1"  # a user seen keeps their series


def test_the_bound_holds_for_the_processes_default_label():
    assert isinstance(metrics.USER_LABEL, metrics.BoundedLabel)
    assert metrics.USER_LABEL.limit == metrics.USER_SERIES
