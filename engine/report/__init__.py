"""What a run shows afterwards: the tables, the plots, `ttc report` and the rate timeline."""

from ttc.engine.report._plots import (
    METHOD_STYLES,
    MethodStyle,
    PlotLine,
    method_style,
    plot_lines,
    wrap_title,
)

__all__ = ["METHOD_STYLES", "MethodStyle", "PlotLine", "method_style", "plot_lines", "wrap_title"]
