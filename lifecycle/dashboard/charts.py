"""Server-rendered SVG charts: pure geometry from numbers, drawn by templates/dashboard/chart.svg.

No chart library and no JavaScript: the page works without a build step. Labels are plain
strings the template escapes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

WIDTH, HEIGHT = 480, 220
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 14, 46


@dataclass
class Rect:
    x: float
    y: float
    width: float
    height: float
    tip: str
    css: str = ""


@dataclass
class Text:
    x: float
    y: float
    text: str
    anchor: str = "middle"
    css: str = ""


@dataclass
class Line:
    points: str
    css: str = ""


@dataclass
class Chart:
    title: str
    width: int = WIDTH
    height: int = HEIGHT
    rects: list[Rect] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    axes: list[tuple[float, float, float, float]] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    empty: bool = False


def columns(title: str, items: list[tuple[str, float]], *, name: str, unit: str = "", css: str = "") -> Chart:
    """Vertical bars, one per item, the value above each; `name` says what is counted (in each bar's tooltip)."""
    return stacked(title, [(label, [value]) for label, value in items], names=[name], css=[css], unit=unit)


def stacked(title: str, items: list[tuple[str, list[float]]], *, names: list[str], css: list[str],
            unit: str = "") -> Chart:
    """Vertical bars made of segments (e.g. within SLA / breached), bottom to top in `names` order."""
    items = [(label, [float(v or 0) for v in values]) for label, values in items]
    chart = Chart(title, legend=list(zip(names, css, strict=True)) if len(names) > 1 else [])
    top = max((sum(values) for _, values in items), default=0)
    chart.empty = top == 0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(items), 1)
    for i, (label, values) in enumerate(items):
        x, base = LEFT + i * slot + slot * 0.15, HEIGHT - BOTTOM
        for value, name, style in zip(values, names, css, strict=True):
            h = plot_h * value / top if top else 0
            if h > 0:
                chart.rects.append(Rect(x, base - h, slot * 0.7, h, f"{label} — {name}: {_num(value)}{unit}", style))
            base -= h
        chart.texts.append(Text(x + slot * 0.35, base - 4, _num(sum(values))))
        chart.texts.append(Text(x + slot * 0.35, HEIGHT - BOTTOM + 14, _short(label, slot)))
    chart.axes.append((LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, HEIGHT - BOTTOM))
    return chart


def bars(title: str, items: list[tuple[str, float]], *, unit: str = "", css: str = "") -> Chart:
    """Horizontal bars with their labels on the left: long names (states, roles, requirements) stay readable."""
    row, label_w = 22, 170
    items = [(label, float(value or 0)) for label, value in items]
    chart = Chart(title, height=TOP + row * max(len(items), 1) + 8)
    top = max((v for _, v in items), default=0)
    chart.empty = top == 0
    for i, (label, value) in enumerate(items):
        y = TOP + i * row
        w = (WIDTH - label_w - 70) * value / top if top else 0
        chart.texts.append(Text(label_w - 6, y + 14, _short(label, label_w), anchor="end"))
        if value:
            chart.rects.append(Rect(label_w, y + 3, max(w, 1), row - 6, f"{label}: {_num(value)}{unit}", css))
        chart.texts.append(Text(label_w + w + 4, y + 14, f"{_num(value)}{unit}", anchor="start"))
    return chart


def lines(title: str, x_labels: list[str], series: dict[str, list[float]], css: list[str]) -> Chart:
    """One polyline per series over the same x axis (days), with dots that carry the exact value."""
    chart = Chart(title, legend=list(zip(series, css, strict=True)))
    series = {name: [float(v or 0) for v in values] for name, values in series.items()}
    top = max((v for values in series.values() for v in values), default=0)
    chart.empty = top == 0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(x_labels) - 1, 1)
    for (name, values), style in zip(series.items(), css, strict=True):
        points = [(LEFT + i * step, HEIGHT - BOTTOM - (plot_h * v / top if top else 0)) for i, v in enumerate(values)]
        chart.lines.append(Line(" ".join(f"{x:.1f},{y:.1f}" for x, y in points), style))
        chart.rects += [Rect(x - 2.5, y - 2.5, 5, 5, f"{x_labels[i]} — {name}: {_num(values[i])}", f"{style} dot")
                        for i, (x, y) in enumerate(points)]
    every = max(len(x_labels) // 7, 1)
    chart.texts += [Text(LEFT + i * step, HEIGHT - BOTTOM + 14, label) for i, label in enumerate(x_labels) if i % every == 0]
    chart.texts.append(Text(LEFT - 6, TOP + 8, _num(top), anchor="end"))
    chart.axes += [(LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, HEIGHT - BOTTOM), (LEFT, TOP, LEFT, HEIGHT - BOTTOM)]
    return chart


def _num(value: float) -> str:
    if value >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _short(label: str, room: float) -> str:
    fits = max(int(room / 6.5), 4)
    return label if len(label) <= fits else label[: fits - 1] + "…"
