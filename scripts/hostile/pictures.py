"""Write the hostile pictures of issue 40 (requirement 2) into a folder, one case folder each
(the format of `scripts/measure-hostile.sh`'s header): each runs the tiny DeiT of the test
fixtures on the picture (`--image`, or a corpus of it), `--json` to the case's output folder.

    python3 scripts/hostile/pictures.py OUT

Standard library only: the JPEGs are written by hand (quantisation tables of 1, one-code Huffman
tables, scans with no data or only end-of-band runs), the PNGs with zlib. The Rust tests
(tests/suite/support/pictures.rs) build the same files at small sizes.

Progressive JPEGs of many cheap scans (each header a dozen bytes; libjpeg goes over every block
of a scan's components for each):

- jpeg-5000-empty-8192: 8192 x 8192 gray, a DC scan and 5,000 AC scans with no data (50 KB).
- jpeg-20000-empty-8192-rgb: 8192 x 8192, three components, 20,000 such scans (200 KB).
- jpeg-2000-refine-8192: 8192 x 8192 gray, an AC scan and 2,000 refinement scans of band 1-63,
  each block ending its band in an end-of-band run (260 KB): a refinement checks all 63
  coefficients of every block.
- jpeg-600-scans-64: 64 x 64 gray, 600 empty scans: cheap, but over the scan count.
- corpus-jpeg-5000-empty-8192: the first, as a corpus of one picture (`--input` a folder).

PNG chunks that inflate past what PIL inflates (1 MiB a chunk):

- png-iccp-600mib: a 4 x 4 picture whose colour profile (iCCP) inflates to 600 MiB (600 KB).
- png-ztxt-600mib: the same as compressed text (zTXt).
"""
import os
import struct
import sys
import zlib

MODEL = "tests/fixtures/tiny-deit"


def segment(marker, body):
    return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body


def progressive_jpeg(width, height, components, kind, n):
    """`kind`: "empty" (n AC scans, no data, over each component in turn) or "refine" (an AC
    scan and n refinements of the first component, end-of-band runs as data)."""
    one_code = bytes([1] + [0] * 15)
    out = b"\xff\xd8" + segment(0xDB, b"\x00" + b"\x01" * 64)
    sof = struct.pack(">BHHB", 8, height, width, components)
    sof += b"".join(bytes([i + 1, 0x11, 0]) for i in range(components))
    out += segment(0xC2, sof)
    out += segment(0xC4, b"\x00" + one_code + b"\x00") + segment(0xC4, b"\x10" + one_code + b"\xe0")
    everyone = b"".join(bytes([i + 1, 0]) for i in range(components))
    out += segment(0xDA, bytes([components]) + everyone + b"\x00\x00\x00")
    blocks = -(-width // 8) * -(-height // 8)
    runs = bytes(-(-15 * -(-blocks // 16384) // 8))  # a code 0 and 14 zero bits per 16,384 blocks
    if kind == "empty":
        for i in range(n):
            out += segment(0xDA, bytes([1, i % components + 1, 0, 1, 63, 0x00]))
    else:
        out += segment(0xDA, bytes([1, 1, 0, 1, 63, 0x01])) + runs
        for _ in range(n):
            out += segment(0xDA, bytes([1, 1, 0, 1, 63, 0x10])) + runs
    return out + b"\xff\xd9"


def png_with_chunk(kind, inflated):
    """A 4 x 4 RGB PNG with an iCCP or zTXt chunk that inflates to `inflated` zero bytes."""

    def chunk(name, body):
        return struct.pack(">I", len(body)) + name + body + struct.pack(">I", zlib.crc32(name + body))

    z = zlib.compressobj(9)
    packed = b""
    block = bytes(1 << 20)
    left = inflated
    while left:
        n = min(left, len(block))
        packed += z.compress(block[:n])
        left -= n
    packed += z.flush()
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    data = chunk(b"IDAT", zlib.compress(b"".join(b"\x00" + b"\xc8" * 12 for _ in range(4))))
    extra = chunk(kind, b"bomb\x00\x00" + packed)
    return b"\x89PNG\r\n\x1a\n" + ihdr + extra + data + chunk(b"IEND", b"")


def case(out, name, file_name, data, corpus=False):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    if corpus:
        os.makedirs(os.path.join(folder, "pictures"), exist_ok=True)
        path = os.path.join("pictures", file_name)
        args = ["-m", MODEL, "--input", "{case}/pictures", "--out-dir", "{out}/corpus", "-q"]
    else:
        path = file_name
        args = ["-m", MODEL, "--image", "{case}/" + file_name, "--json", "{out}/a.json", "-q"]
    with open(os.path.join(folder, path), "wb") as f:
        f.write(data)
    with open(os.path.join(folder, "args"), "w") as f:
        f.write("\n".join(args) + "\n")


def main():
    out = sys.argv[1]
    empty = progressive_jpeg(8192, 8192, 1, "empty", 5000)
    case(out, "jpeg-5000-empty-8192", "scans.jpg", empty)
    case(out, "jpeg-20000-empty-8192-rgb", "scans.jpg", progressive_jpeg(8192, 8192, 3, "empty", 20000))
    case(out, "jpeg-2000-refine-8192", "refine.jpg", progressive_jpeg(8192, 8192, 1, "refine", 2000))
    case(out, "jpeg-600-scans-64", "scans.jpg", progressive_jpeg(64, 64, 1, "empty", 600))
    case(out, "corpus-jpeg-5000-empty-8192", "scans.jpg", empty, corpus=True)
    case(out, "png-iccp-600mib", "profile.png", png_with_chunk(b"iCCP", 600 << 20))
    case(out, "png-ztxt-600mib", "text.png", png_with_chunk(b"zTXt", 600 << 20))


if __name__ == "__main__":
    main()
