"""One colour per kernel family, the same in every plot and report; a fixed fallback for new ones."""

from __future__ import annotations

import zlib

# Colour-blind-safe (Okabe-Ito order, then Tableau) so families stay apart in print and on screen.
FAMILY_COLORS = {
    "conv2d": "#0072B2",        # the study's ladder: blue
    "direct": "#D55E00",        # vermillion
    "im2col_gemm": "#009E73",   # bluish green
    "implicit_gemm": "#CC79A7",  # reddish purple
    "depthwise": "#E69F00",     # orange
    "winograd": "#56B4E9",      # sky blue
}
DIAGONALWISE_COLOR = "#8C564B"  # brown: a diagonalwise_* wrapper of a family we do not know
FALLBACK = ("#7F7F7F", "#BCBD22", "#17BECF", "#9467BD", "#F0E442", "#2F4F4F")
QUEUE_COLOR = "#D9D9D9"
SUBMIT_COLOR = "#969696"
FAILED_COLOR = "#C00000"
STRATEGY_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                   "#000000", "#8C564B")


def family_color(name: str) -> str:
    """The family's fixed colour; a diagonalwise_<family> wrapper gets a lighter shade of <family>."""
    name = str(name)
    if name in FAMILY_COLORS:
        return FAMILY_COLORS[name]
    if name.startswith("diagonalwise_"):
        inner = name[len("diagonalwise_"):]
        return lighten(FAMILY_COLORS[inner]) if inner in FAMILY_COLORS else DIAGONALWISE_COLOR
    return FALLBACK[zlib.crc32(name.encode()) % len(FALLBACK)]  # stable across runs, unlike hash()


def lighten(hex_color: str, amount: float = 0.45) -> str:
    """Mix a #RRGGBB colour with white."""
    rgb = [int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb)


def strategy_color(index: int) -> str:
    return STRATEGY_COLORS[index % len(STRATEGY_COLORS)]
