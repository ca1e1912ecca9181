"""Every figure's look, in one place: one colour and one marker per method (`ttc compare`,
`ttc report` and the paper's figures alike), titles wrapped to the figure's width, lines that
stay visible where they coincide, and a plot file refused before any work if matplotlib cannot
write it.

Coinciding lines are common here: every method shares the warm-up, and a matched-budget `unif`
or a method that stops gaining sits on a flat line under another one. Each line therefore has
its own marker, and line j of n is drawn shifted by a fixed few points (display space, so the
data are not changed; the figure says so), which keeps equal lines side by side.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ttc.engine._util._nofollow import open_file
from ttc.engine.contract._config import PRESETS
from ttc.engine.contract._errors import ConfigError

# matplotlib's tab10, written out: the palette is known without importing matplotlib.
_TAB10 = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    # tab20b's darkest shades: past tab10's ten, for the field's baselines and free labels.
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "p", "h", "<", ">", "8", "H", "d", "*")
# Line j of n is shifted by (j - (n - 1) / 2) steps, in points: down, and right on a round axis
# (across a rising line, which coverage lines are, and apart from a flat one).
NUDGE_Y_PT = 1.5
NUDGE_X_PT = 4.0
_TITLE_SIZE = 9.0


@dataclass(frozen=True, slots=True)
class MethodStyle:
    """How a method looks in every figure: a colour (hex) and a matplotlib marker."""

    color: str
    marker: str


# The presets in their order; anything else (a label that names no preset) takes one of the
# colours the presets leave free.
METHOD_STYLES: Mapping[str, MethodStyle] = MappingProxyType(
    {m: MethodStyle(_TAB10[i], _MARKERS[i]) for i, m in enumerate(PRESETS)}
)


def method_style(method: str) -> MethodStyle:
    """The colour and marker of `method` in every figure."""
    style = METHOD_STYLES.get(method)
    if style is not None:
        return style
    free = len(_TAB10) - len(PRESETS)
    i = len(PRESETS) + zlib.crc32(method.encode()) % free
    return MethodStyle(_TAB10[i], _MARKERS[i])


@dataclass(frozen=True, slots=True)
class PlotLine:
    """One line of a figure: its legend label, the method it is coloured as, its points, and
    optionally a shaded band (low, high) per point."""

    label: str
    method: str
    xs: Sequence[float]
    ys: Sequence[float]
    band: Sequence[tuple[float, float]] | None = None
    linestyle: str = "-"


def plot_formats() -> tuple[str, ...]:
    """The file extensions matplotlib writes."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def check_plot_path(path: Path, flag: str) -> None:
    """Refuses a plot file that matplotlib cannot write: an unknown format, a missing folder."""
    formats = plot_formats()
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise ConfigError(
            f"{flag} {path}: {'.' + suffix if suffix else 'no file extension'} is not a format "
            f"matplotlib writes; end the name with one of {', '.join('.' + f for f in formats)}"
        )
    if not path.parent.is_dir():
        raise ConfigError(f"{flag} {path}: the folder {path.parent} does not exist")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display), imported when first needed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def wrap_title(text: str, width_in: float, fontsize: float = _TITLE_SIZE) -> str:
    """`text` with each of its lines wrapped, at spaces, to fit `width_in` inches at `fontsize`
    points (measured in matplotlib's default font)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    font, measure = FontProperties(size=fontsize), TextToPath()
    room = 0.95 * width_in * 72  # points, less a margin

    def fits(line: str) -> bool:
        return bool(measure.get_text_width_height_descent(line, font, ismath=False)[0] <= room)

    out = []
    for line in text.splitlines():
        words = line.split(" ")
        current = words[0]
        for word in words[1:]:
            if fits(f"{current} {word}"):
                current = f"{current} {word}"
            else:
                out.append(current)
                current = word
        out.append(current)
    return "\n".join(out)


def figure(rows: int, cols: int, width: float, height: float, title: str) -> tuple[Any, Any]:
    """A figure of rows x cols panels (a 2-D array) laid out so that nothing is clipped, its
    title wrapped to its width."""
    plt = pyplot()
    fig, axes = plt.subplots(
        rows, cols, figsize=(width, height), squeeze=False, layout="constrained"
    )
    fig.suptitle(wrap_title(title, width), fontsize=_TITLE_SIZE)
    return fig, axes


def draw_lines(ax: Any, lines: Sequence[PlotLine], rounds_axis: bool = False) -> None:
    """Each line in its method's colour and marker, nudged apart from the others (see above)."""
    from matplotlib.transforms import offset_copy

    n = len(lines)
    for j, line in enumerate(lines):
        style = method_style(line.method)
        step = j - (n - 1) / 2
        dx = step * NUDGE_X_PT if rounds_axis else 0.0
        shifted = offset_copy(
            ax.transData, fig=ax.figure, x=dx, y=-step * NUDGE_Y_PT, units="points"
        )
        # Drawn in data coordinates first (so the axes' limits fit the data), then shifted.
        drawn = ax.plot(
            line.xs,
            line.ys,
            color=style.color,
            marker=style.marker,
            linestyle=line.linestyle,
            linewidth=1.4,
            markersize=6,
            markeredgecolor="white",
            markeredgewidth=0.6,
            label=line.label,
            zorder=2 + j / n,
        )
        if line.band is not None:
            low, high = ([b[0] for b in line.band], [b[1] for b in line.band])
            drawn.append(
                ax.fill_between(line.xs, low, high, color=style.color, alpha=0.15, linewidth=0)
            )
        for artist in drawn:
            artist.set_transform(shifted)
    if rounds_axis:
        ax.set_xticks(sorted({int(x) for line in lines for x in line.xs}))


def legend_below(fig: Any, axes: Any, lines: int, rounds_axis: bool = False) -> None:
    """One legend for the whole figure, under it: every label once, never over the data; its
    title says how far coinciding lines were drawn apart."""
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if not seen:
        return
    cols = min(len(seen), 2 if max(len(k) for k in seen) > 24 else 4)
    note = nudge_note(lines, rounds_axis)
    fig.legend(
        list(seen.values()),
        list(seen),
        loc="outside lower center",
        ncols=cols,
        fontsize=8,
        title=note if lines > 1 else None,
        title_fontsize=7,
    )


def save(fig: Any, path: Path, dpi: int = 120) -> Any:
    """Writes `fig` to `path` (never through a link) and lets pyplot forget it; returns it, to
    be inspected."""
    with open_file(path, "wb") as fh:
        fig.savefig(fh, dpi=dpi, format=path.suffix.lstrip(".").lower() or None)
    pyplot().close(fig)
    return fig


def plot_lines(
    panels: Mapping[str, Sequence[PlotLine]],
    path: Path,
    title: str,
    *,
    xlabel: str,
    ylabel: str = "coverage (%)",
    rounds_axis: bool = False,
) -> Any:
    """One panel per key of `panels` (titled by it when there are several), the lines of each
    nudged apart, one legend under them all, the title wrapped to the figure; returns the
    figure, written to `path`."""
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    width = 7.0 if cols == 1 else 5.2 * cols
    fig, axes = figure(rows, cols, width, 3.6 * rows + 1.6, title)
    for ax, (name, lines) in zip(axes.flat, panels.items(), strict=False):
        draw_lines(ax, lines, rounds_axis)
        if len(panels) > 1:
            ax.set_title(wrap_title(name, width / cols), fontsize=_TITLE_SIZE)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    most = max((len(lines) for lines in panels.values()), default=0)
    legend_below(fig, axes, most, rounds_axis)
    return save(fig, path)


def plot_coverage(runs: Mapping[str, Sequence[Mapping[str, Any]]], path: Path, title: str) -> Any:
    """`ttc compare`'s figure: coverage (%) against cumulative output tokens, a line per method."""
    lines = [
        PlotLine(
            method,
            method,
            list(itertools.accumulate(float(r["output_tokens"]) for r in rounds)),
            [100 * float(r["coverage"]) for r in rounds],
        )
        for method, rounds in runs.items()
    ]
    return plot_lines({"": lines}, path, title, xlabel="cumulative output tokens")


def nudge_note(lines: int, rounds_axis: bool) -> str:
    """What a legend says of the drawing offsets of `lines` coinciding lines: in typographic
    points of the drawing (1/72 inch), never in the data's units (it read "±2.25 pt", which a
    reader of coverage takes for percentage points)."""
    half = (lines - 1) / 2
    across = f"±{NUDGE_X_PT * half:g} across and " if rounds_axis else ""
    return (
        f"lines drawn up to {across}±{NUDGE_Y_PT * half:g} up or down apart (in points of the "
        "drawing, 1/72 in, not data), so equal ones show"
    )
