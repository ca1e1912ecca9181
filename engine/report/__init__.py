"""What a run shows afterwards: the tables, the plots, `ttc report` and the rate timeline."""

from ttc.engine.report._plots import (
    METHOD_STYLES,
    MethodStyle,
    PlotLine,
    method_style,
    plot_lines,
    wrap_title,
)
from ttc.engine.report._stats import (
    Interval,
    bootstrap_mean,
    maj_at_k,
    mcnemar_exact,
    paired_difference,
    pass_at_k,
)

__all__ = [
    "METHOD_STYLES",
    "Interval",
    "MethodStyle",
    "PlotLine",
    "bootstrap_mean",
    "maj_at_k",
    "mcnemar_exact",
    "method_style",
    "paired_difference",
    "pass_at_k",
    "plot_lines",
    "wrap_title",
]
