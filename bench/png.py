"""A line chart as a PNG, in pure Python (zlib and struct): enough for the
benchmark's throughput plot without adding a plotting library.

Text uses a 3x5 pixel font (digits, lower-case letters and a few signs),
scaled up.
"""

from __future__ import annotations

import itertools
import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RGB = tuple[int, int, int]

# 3x5 glyphs, one string of 15 bits per character, rows top to bottom.
_FONT = {
    "0": "111101101101111",
    "1": "010110010010111",
    "2": "111001111100111",
    "3": "111001111001111",
    "4": "101101111001001",
    "5": "111100111001111",
    "6": "111100111101111",
    "7": "111001010010010",
    "8": "111101111101111",
    "9": "111101111001111",
    ".": "000000000000010",
    "/": "001001010100100",
    " ": "000000000000000",
    "-": "000000111000000",
    "a": "000011101101011",
    "b": "100110101101110",
    "c": "000011100100011",
    "d": "001011101101011",
    "e": "000111111100011",
    "f": "011100110100100",
    "g": "000111101011110",
    "h": "100110101101101",
    "i": "010000010010010",
    "k": "100101110101101",
    "l": "110010010010111",
    "m": "000111111101101",
    "n": "000110101101101",
    "o": "000010101101010",
    "p": "000110101110100",
    "q": "000011101011001",
    "r": "000110101100100",
    "s": "000011110001110",
    "t": "010111010010011",
    "u": "000101101101011",
    "v": "000101101101010",
    "w": "000101101111111",
    "x": "000101010101101",
    "y": "000101101011110",
    "z": "000111001100111",
}


@dataclass(frozen=True)
class Series:
    name: str
    colour: RGB
    points: Sequence[tuple[float, float]]


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, colour: RGB) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(colour)

    def rect(self, x0: int, y0: int, x1: int, y1: int, colour: RGB) -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.dot(x, y, colour)

    def line(self, x0: int, y0: int, x1: int, y1: int, colour: RGB, width: int = 1) -> None:
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for k in range(steps + 1):
            x = round(x0 + (x1 - x0) * k / steps)
            y = round(y0 + (y1 - y0) * k / steps)
            self.rect(x, y, x + width - 1, y + width - 1, colour)

    def text(self, x: int, y: int, text: str, colour: RGB = (0, 0, 0), scale: int = 2) -> None:
        for ch in text.lower():
            glyph = _FONT.get(ch, _FONT[" "])
            for row in range(5):
                for col in range(3):
                    if glyph[row * 3 + col] == "1":
                        self.rect(
                            x + col * scale,
                            y + row * scale,
                            x + col * scale + scale - 1,
                            y + row * scale + scale - 1,
                            colour,
                        )
            x += 4 * scale

    def save(self, path: Path) -> None:
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * self.width * 3 : (y + 1) * self.width * 3])
            for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        path.write_bytes(
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks if span > 0 else 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)


def _label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def line_chart(
    path: Path,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    width: int = 800,
    height: int = 420,
) -> None:
    canvas = Canvas(width, height)
    left, right, top, bottom = 70, width - 20, 20, height - 50
    xs = [x for s in series for x, _ in s.points] or [1.0]
    ys = [y for s in series for _, y in s.points] or [1.0]
    x_step, y_step = _nice_step(max(xs)), _nice_step(max(ys))
    x_max = math.ceil(max(xs) / x_step) * x_step or 1.0
    y_max = math.ceil(max(ys) / y_step) * y_step or 1.0

    def px(x: float) -> int:
        return round(left + (right - left) * x / x_max)

    def py(y: float) -> int:
        return round(bottom - (bottom - top) * y / y_max)

    grey = (225, 225, 225)
    k = 0.0
    while k <= y_max + 1e-9:
        canvas.line(left, py(k), right, py(k), grey)
        label = _label(k)
        canvas.text(left - 8 - 8 * len(label), py(k) - 5, label)
        k += y_step
    k = 0.0
    while k <= x_max + 1e-9:
        canvas.line(px(k), top, px(k), bottom, grey)
        label = _label(k)
        canvas.text(px(k) - 4 * len(label), bottom + 8, label)
        k += x_step
    canvas.line(left, bottom, right, bottom, (0, 0, 0))
    canvas.line(left, top, left, bottom, (0, 0, 0))
    canvas.text((left + right) // 2 - 4 * len(x_label), bottom + 28, x_label)
    canvas.text(8, top - 14 if top >= 14 else 2, y_label)
    for s in series:
        points = [(px(x), py(y)) for x, y in s.points]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            canvas.line(x0, y0, x1, y1, s.colour, width=2)
    legend_x, legend_y = right - 200, top + 6
    for i, s in enumerate(series):
        y = legend_y + i * 18
        canvas.rect(legend_x, y, legend_x + 14, y + 9, s.colour)
        canvas.text(legend_x + 22, y, s.name)
    canvas.save(path)
