"""The benchmark figure: overall hit@1 / hit@3 / tIoU per method, and hit@3 per question type."""

from __future__ import annotations

from pathlib import Path

from bench import harness

METRICS = ("hit@1", "hit@3", "tiou", "accuracy")
COLOURS = {
    "worldmm": "#1f77b4",
    "worldmm-live": "#17becf",
    "lane-lexical": "#9ecae1",
    "lane-dense": "#6baed6",
    "lane-graph": "#4292c6",
    "lane-entity": "#3182bd",
    "fused-no-graph": "#2171b5",
    "fused-no-drill": "#08519c",
    "bm25": "#ff7f0e",
    "dense": "#2ca02c",
    "random": "#7f7f7f",
}


def days_label(days: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    runs: list[list[int]] = []
    for d in sorted(days):
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


def _bars(ax, groups: list[str], methods: list[str], value) -> None:
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        xs = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(groups))]
        ys = [value(method, g) or 0.0 for g in groups]  # None: not measured for the method
        bars = ax.bar(xs, ys, width, label=method, color=COLOURS.get(method))
        ax.bar_label(bars, fmt="%.2f", fontsize=5, padding=1, rotation=90)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)


def plot_report(report: dict, path: Path) -> Path:
    """Draw the report's ``methods`` block to ``path`` (PNG)."""
    plt = harness.pyplot()
    methods = list(report["methods"])
    types = sorted({t for m in methods for t in report["methods"][m]["by_type"]})
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(16, 5.5), gridspec_kw={"width_ratios": [1.2, 1.7]}
    )
    _bars(
        left, list(METRICS), methods, lambda m, metric: report["methods"][m]["overall"].get(metric)
    )
    left.set_title(f"overall ({report['questions']} questions)")
    left.legend(loc="upper left", fontsize=7, ncols=2)

    def by_type(m: str, t: str) -> float | None:
        return report["methods"][m]["by_type"].get(t, {}).get("hit@3")

    _bars(right, types, [m for m in methods if m != "random"], by_type)
    counts = {t: report["methods"][methods[0]]["by_type"].get(t, {}).get("n", 0) for t in types}
    right.set_xticks(range(len(types)), [f"{t}\n(n={counts[t]})" for t in types], fontsize=8)
    right.set_title("hit@3 by question type")
    fig.suptitle(
        f"EgoLife A1_JAKE retrieval — day(s) {days_label(report.get('days') or [])}, "
        f"{report.get('windows', '?')} windows of 30 s"
    )
    return harness.save_figure(fig, path)
