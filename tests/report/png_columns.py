"""png_columns.py PNG RRGGBB [RRGGBB...]: for each colour, the pixel columns (x) of a screenshot
(8-bit RGB or RGBA PNG, as headless Chromium writes it) where that exact colour appears, and how
often: prints one line per colour, "RRGGBB best=X:COUNT wide=N" where COUNT is the largest number
of pixels of that colour in one column (at x = X) and N the number of columns holding at least
half of COUNT. Standard library only (zlib): no image package needed."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        elif typ == b"IDAT":
            idat.append(body)
        elif typ == b"IEND":
            break
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        ft = raw[y * (stride + 1)]
        cur = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ft == 1:
            for i in range(bpp, stride):
                cur[i] = (cur[i] + cur[i - bpp]) & 255
        elif ft == 2:
            cur = bytearray((a + b) & 255 for a, b in zip(cur, prev))
        elif ft == 3:
            for i in range(stride):
                cur[i] = (cur[i] + ((cur[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif ft == 4:
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(cur))
        prev = cur
    return w, h, bpp, rows


w, h, bpp, rows = decode(sys.argv[1])
for hexc in sys.argv[2:]:
    want = bytes.fromhex(hexc)
    per_x = [0] * w
    for row in rows:
        px = row if bpp == 3 else b"".join(row[i:i + 3] for i in range(0, len(row), 4))
        i = px.find(want)
        while i >= 0:
            if i % 3 == 0:
                per_x[i // 3] += 1
            i = px.find(want, i + 1)
    best = max(range(w), key=lambda x: per_x[x])
    wide = sum(1 for c in per_x if per_x[best] and c * 2 >= per_x[best])
    print("%s best=%d:%d wide=%d" % (hexc, best, per_x[best], wide))
