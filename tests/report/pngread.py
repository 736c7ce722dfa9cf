"""A minimal PNG reader (8-bit RGB/RGBA, non-interlaced) for screenshot checks, standard library only."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path


def read_png(path: Path) -> tuple[int, int, int, bytes]:
    """(width, height, channels, unfiltered pixel bytes)."""
    data = Path(path).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"{path} is not a PNG")
    pos, idat = 8, b""
    width = height = depth = color = interlace = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    out = bytearray()
    previous = bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[i] = (line[i] + pred) & 0xFF
        out += line
        previous = line
    return width, height, channels, bytes(out)


def count_near(path: Path, colors: dict[str, tuple[int, int, int]], tolerance: int = 12) -> Counter:
    """How many pixels are within ``tolerance`` (per channel) of each named colour."""
    width, height, channels, pixels = read_png(path)
    counts: Counter = Counter({name: 0 for name in colors})
    for offset in range(0, len(pixels), channels):
        r, g, b = pixels[offset], pixels[offset + 1], pixels[offset + 2]
        for name, (cr, cg, cb) in colors.items():
            if abs(r - cr) <= tolerance and abs(g - cg) <= tolerance and abs(b - cb) <= tolerance:
                counts[name] += 1
    return counts
