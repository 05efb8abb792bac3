#!/usr/bin/env python3
"""check_png.py PNG... — decode each PNG with Python's zlib (independent of
the project's writer): signature, chunk CRCs, IHDR, the IDAT stream, the
scanline filters; with --plot also that the image is a plot (several
colours, ink on a good share of the rows and columns). Exit 1 on failure."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(ctype + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"chunk {ctype!r} at {pos}: CRC mismatch")
        chunks.append((ctype, body))
        if ctype == b"IDAT":
            idat += body
        pos += 12 + length
    if chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("IHDR must come first and IEND last")
    w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth != 8 or ctype not in (0, 2, 3) or comp or filt or inter:
        raise ValueError(f"unexpected IHDR {depth=} {ctype=}")
    bpp = {0: 1, 2: 3, 3: 1}[ctype]
    raw = zlib.decompress(idat)
    stride = 1 + w * bpp
    if len(raw) != h * stride:
        raise ValueError(f"{len(raw)} bytes of scanlines, expected {h * stride}")
    rows = [raw[i * stride + 1:(i + 1) * stride] for i in range(h)]
    if any(raw[i * stride] != 0 for i in range(h)):
        raise ValueError("a scanline filter other than 0 (the writer uses none)")
    return w, h, rows


def main(argv):
    plot = "--plot" in argv
    paths = [a for a in argv if a != "--plot"]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for path in paths:
        try:
            w, h, rows = decode(path)
            if plot:
                colours = set(b for r in rows for b in r)
                background = rows[0][0]
                inked_rows = sum(1 for r in rows if any(b != background for b in r))
                inked_cols = sum(1 for x in range(w) if any(r[x] != background for r in rows))
                if len(colours) < 4 or inked_rows < h // 2 or inked_cols < w // 2:
                    raise ValueError(f"does not look like a plot ({len(colours)} colours, "
                                     f"{inked_rows} inked rows, {inked_cols} inked columns)")
        except (OSError, ValueError, zlib.error, struct.error) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 1
        print(f"{path}: ok, {w}x{h}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
