"""A tiny synthetic EgoLife-format data set written into a temp dir (never the real data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.egolife.data import Question

DAY1 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)


def clip(video: str, lines: list[tuple[int, int, str, str]]) -> dict:
    return {
        "video_file": video,
        "data": [{"start": s, "end": e, "text": t, "type": k} for s, e, t, k in lines],
    }


def write_sync_dir(root: Path) -> Path:
    """Two windows on DAY1 (11:00:00 and 11:00:30) and one on DAY2 (09:00:00)."""
    sync = root / "sync"
    sync.mkdir(parents=True)
    day1 = [
        clip(
            "DAY1_A1_JAKE_11000000.mp4",
            [
                (110001, 110003, "I put the red kettle on the stove.", "caption"),
                (110004, 110006, "Shure: Who wants tea?", "transcript"),
            ],
        ),
        clip(
            "DAY1_A1_JAKE_11003000.mp4",
            [
                (110031, 110033, "I open the laptop on the desk.", "caption"),
                (110035, 110036, "Jake: Let's check the schedule.", "transcript"),
            ],
        ),
    ]
    day2 = [
        clip(
            "DAY2_A1_JAKE_09000000.mp4",
            [
                (90001, 90005, "I water the plants by the window.", "caption"),
            ],
        )
    ]
    (sync / "A1_JAKE_DAY1_11000000.json").write_text(json.dumps(day1))
    (sync / "A1_JAKE_DAY2_09000000.json").write_text(json.dumps(day2))
    return sync


def question(
    qid: str, q: str, query: tuple[str, str], target: dict, qtype: str = "EventRecall"
) -> dict:
    return {
        "ID": qid,
        "type": qtype,
        "question": q,
        "choice_a": "On the stove",
        "choice_b": "On the desk",
        "choice_c": "",
        "choice_d": "",
        "answer": "A",
        "query_time": {"date": query[0], "time": query[1]},
        "target_time": target,
    }


def write_questions(root: Path) -> Path:
    path = root / "questions.json"
    path.write_text(
        json.dumps(
            [
                question(
                    "1",
                    "Where did I put the kettle?",
                    ("DAY1", "11010000"),
                    {"date": "DAY1", "time": "11000200"},
                ),
                question(
                    "2",
                    "What did I open to check the schedule?",
                    ("DAY1", "11010000"),
                    {"date": "DAY1", "time": "11003400"},
                    qtype="TaskMaster",
                ),
                question(
                    "3",
                    "What did I water?",
                    ("DAY2", "09100000"),
                    {"date": "Day2", "time_list": ["09000200"]},
                    qtype="HabitInsight",
                ),
            ]
        )
    )
    return path


def asked_question(i: int, day: int, kind: str) -> Question:
    """Question ``i`` of type ``kind``, asked on ``day`` at 9 + ``i`` h (its target then)."""
    asked = DAY1 + timedelta(days=day - 1, hours=i)
    return Question(
        id=f"q{i}",
        type=kind,
        question=f"Question {i}?",
        choices={"A": "yes", "B": "no"},
        answer="A",
        query_time=asked,
        targets=[asked],
    )
