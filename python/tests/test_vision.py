"""attnviz.run(image=...) on the tiny random DeiT: a path, a PIL image and a numpy array give the
CLI's attention for `--image` bit for bit (an in-memory picture is read where it lies, as the PNG
of its pixels would be), the picture's description (grid, special tokens, sizes) matches the
CLI's JSON, the report opens on its image view, and bad images raise ValueError or TypeError
naming the keyword: an array over the bounds from its shape alone, before anything of it is
copied, and nothing is ever written to disk. Pictures made to hold the decoder are refused, a
colour profile exactly where PIL refuses it."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import attnviz

REPO = Path(__file__).resolve().parents[2]
DEIT = str(REPO / "tests" / "fixtures" / "tiny-deit")
PICTURE = REPO / "tests" / "fixtures" / "images" / "big80x64.png"
BIN = Path(os.environ.get("ATTNVIZ_BIN", REPO / "target" / "release" / "attnviz"))


def cli_json(*args: str) -> dict:
    out = subprocess.run(
        [str(BIN), *args, "--json", "-", "--full-precision", "-q"],
        check=True,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def doc() -> dict:
    return cli_json("-m", DEIT, "--image", str(PICTURE))


def test_a_path_gives_the_cli_attention_and_picture(doc):
    r = attnviz.run(image=PICTURE, model=DEIT)
    assert np.array_equal(r.attention, np.array(doc["attention"], dtype=np.float32)), "bit for bit"
    assert r.tokens == doc["tokens"]
    assert r.image["grid"] == doc["image"]["grid"] == [4, 4]
    assert r.image["cells"][:2] == [{"kind": "class"}, {"kind": "distillation"}]
    assert r.image["original"] == [80, 64] and r.image["input"] == [32, 32]
    # The same norms, to the f32 rounding of the JSON's decimals.
    assert np.allclose(np.array(r.image["norms"]), np.array(doc["image"]["norms"]), rtol=1e-6, atol=0)
    # The report opens on the image view, the picture embedded.
    page = r.html()
    assert '"view":"image"' in page and "data:image/png;base64," in page


def test_a_pil_image_and_a_numpy_array_give_the_same_attention(doc):
    want = np.array(doc["attention"], dtype=np.float32)
    with Image.open(PICTURE) as im:
        im.load()
        from_pil = attnviz.run(image=im, model=DEIT)
        array = np.asarray(im.convert("RGB"))
    assert np.array_equal(from_pil.attention, want)
    from_array = attnviz.run(image=array, model=DEIT)
    assert np.array_equal(from_array.attention, want)
    # An in-memory picture is named "image".
    assert from_array.image["source"] == "image"
    # Floats in [0, 1] are the same picture at 1/255 steps.
    as_float = attnviz.run(image=array.astype(np.float64) / 255.0, model=DEIT)
    assert np.array_equal(as_float.attention, want)
    # A gray array is converted to RGB as the CLI converts a gray file.
    gray = attnviz.run(image=np.asarray(Image.open(PICTURE).convert("L")), model=DEIT)
    assert gray.attention.shape == want.shape


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(image=[]), ValueError, "holds no picture"),
        (dict(image=np.zeros((4, 4, 5), np.uint8)), ValueError, "shape"),
        (dict(image=np.zeros((4, 4, 3), np.int64)), ValueError, "uint8"),
        (dict(image=np.full((4, 4, 3), 2.0)), ValueError, "[0, 1]"),
        (dict(image=np.full((4, 4, 3), np.nan, np.float32)), ValueError, "[0, 1]"),
        (dict(image=np.zeros((0, 4, 3), np.uint8)), ValueError, "empty"),
        (dict(image=Image.new("RGB", (0, 0))), ValueError, "empty"),
        (dict(image=42), TypeError, "image must be"),
    ],
)
def test_bad_images_name_the_keyword(kwargs, error, words):
    with pytest.raises(error, match=None) as e:
        attnviz.run(model=DEIT, **kwargs)
    assert words in str(e.value)


LLAVA = str(REPO / "tests" / "fixtures" / "tiny-llava")
IMAGES = REPO / "tests" / "fixtures" / "images"


def _llava_case(name: str) -> dict:
    """A case of the processor's reference (tests/reference/make_llava.py writes it)."""
    cases = json.loads((REPO / "tests" / "reference" / "tiny-llava.json").read_text())["cases"]
    return next(c for c in cases if c["name"] == name)


def test_text_with_a_picture_is_refused_by_a_vision_model_in_the_library_words():
    # Only the loaded model knows it reads pictures alone: the library refuses, as on the CLI.
    with pytest.raises(ValueError) as e:
        attnviz.run("a caption", model=DEIT, image=str(PICTURE))
    assert "is a vision model (DeiT); it reads the picture alone, not text with it" in str(e.value)
    assert "\n" not in str(e.value)
    # Several pictures: one is what a vision model reads.
    with pytest.raises(ValueError) as e:
        attnviz.run(model=DEIT, image=[str(PICTURE), str(PICTURE)])
    assert "image= holds 2 pictures" in str(e.value) and "reads one" in str(e.value)


def test_a_vision_language_model_reads_its_prompt_with_the_picture():
    case = _llava_case("describe")
    report = attnviz.run(case["text"], model=LLAVA, image=str(IMAGES / case["images"][0]))
    assert json.loads(report.json())["input_ids"] == case["input_ids"]
    (first, count), = case["image_token_runs"]
    [picture] = report.pictures
    assert (picture["first"], picture["count"]) == (first, count)
    assert picture["source"] == case["images"][0] and picture["grid"] == [4, 4]
    assert len(picture["cells"]) == count


def test_pan_and_scan_gives_gemma_3_s_whole_picture_then_its_crops():
    """As the CLI's --pan-and-scan: the reference's ids (make_gemma3_vlm.py --variant
    pan-and-scan, whose processor asks for crops of 16 pixels), each crop a run that says so; the
    same checkpoint's folder with the flag's defaults (crops of 256 pixels) leaves the small
    picture whole; a model without crops refuses it in the library's words."""
    ref = json.loads((REPO / "tests" / "reference" / "tiny-gemma3-vlm-pas.json").read_text())
    case = next(c for c in ref["cases"] if c["name"] == "tall_and_square")
    tall, square = (str(IMAGES / name) for name in case["images"])
    report = attnviz.run(
        case["text"], model=str(REPO / "tests" / "fixtures" / "tiny-gemma3-vlm-pas"), image=[tall, square]
    )
    assert json.loads(report.json())["input_ids"] == case["input_ids"]
    tiles = [p.get("tile") for p in report.pictures]
    assert [t["at"] if "at" in t else None for t in tiles] == [None, [0, 0], [1, 0], [2, 0], None]
    assert all(t["crop"] for t in tiles)
    plain = attnviz.run(
        "<start_of_image> hi",
        model=str(REPO / "tests" / "fixtures" / "tiny-gemma3-vlm"),
        image=tall,
        pan_and_scan=True,
    )
    assert len(plain.pictures) == 1
    with pytest.raises(ValueError, match="only Gemma 3's processor writes them.*drop pan_and_scan=True"):
        attnviz.run("hi", model=str(REPO / "tests" / "fixtures" / "tiny-smolvlm"), image=tall, pan_and_scan=True)


def test_a_picture_is_one_band_of_the_matrix_unless_expanded(tmp_path):
    case = _llava_case("describe")
    report = attnviz.run(case["text"], model=LLAVA, image=str(IMAGES / case["images"][0]))
    # The terminal view, as the CLI's: one band for the 16 image tokens, or each of them.
    banded = report.terminal()
    assert "picture 1 · 4×4: each picture's image tokens as one band" in banded
    assert "<img1 0,0>" not in banded
    assert "<img1 0,0>" in report.terminal(expand_pictures=True)
    a, b = tmp_path / "band.svg", tmp_path / "tokens.svg"
    report.svg(a)
    report.svg(b, expand_pictures=True)
    assert "picture 1 · 4×4" in a.read_text() and "img1 0,1" not in a.read_text()
    assert "img1 0,1" in b.read_text()


def test_the_tower_alone_and_a_token_on_the_picture_are_the_cli_s(tmp_path):
    # tower=True: the vision tower's own run, as `--tower` gives it.
    picture = str(IMAGES / "own32.png")
    report = attnviz.run(model=LLAVA, image=picture, tower=True)
    cli = cli_json("-m", LLAVA, "--image", picture, "--tower")
    mine = json.loads(report.json(full_precision=True))
    assert mine["tokens"] == cli["tokens"] and mine["image"]["grid"] == cli["image"]["grid"]
    assert np.array_equal(np.asarray(mine["attention"]), np.asarray(cli["attention"]))
    with pytest.raises(ValueError, match="vision tower over the picture alone; leave the text out"):
        attnviz.run("What is this?", model=LLAVA, image=picture, tower=True)
    with pytest.raises(ValueError, match="generate=, chat= and head attribution or ablation are the language model's"):
        attnviz.run(model=LLAVA, image=picture, tower=True, generate=2)
    with pytest.raises(ValueError, match="give image= as well"):
        attnviz.run("What is this?", model=LLAVA, tower=True)
    # query=N: token N's attention drawn over the picture, the CLI's `--query N` figure byte for
    # byte; the report opens its image view on that token.
    case = _llava_case("describe")
    text, image = case["text"], str(IMAGES / case["images"][0])
    n = len(case["input_ids"]) - 1
    report = attnviz.run(text, model=LLAVA, image=image, query=n)
    mine, theirs = tmp_path / "mine.svg", tmp_path / "theirs.svg"
    report.svg(mine, figure="layer", layer=1, query=n)
    subprocess.run(
        [str(BIN), "-m", LLAVA, "--image", image, text, "--query", str(n), "--figure", "layer", "--layer", "1",
         "--svg", str(theirs), "-q"],
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert mine.read_text() == theirs.read_text()
    # Without query= the same figure is the matrix over the whole sequence.
    matrix = tmp_path / "matrix.svg"
    report.svg(matrix, figure="layer", layer=1)
    assert matrix.read_text() != mine.read_text()
    page = report.html()
    assert f'"query":{n}' in page.replace(" ", "")
    with pytest.raises(ValueError, match="past the last token"):
        report.svg(tmp_path / "x.svg", query=n + 1)
    with pytest.raises(ValueError, match="generated none"):
        report.svg(tmp_path / "x.svg", query="generated")
    assert not (tmp_path / "x.svg").exists()


def test_a_vision_language_model_reads_a_list_of_pictures_in_memory_or_on_disk():
    case = _llava_case("two_images")
    wide, big = (IMAGES / name for name in case["images"])
    report = attnviz.run(case["text"], model=LLAVA, image=[str(wide), Image.open(big)])
    assert json.loads(report.json())["input_ids"] == case["input_ids"]
    runs = [[p["first"], p["count"]] for p in report.pictures]
    assert runs == case["image_token_runs"]
    assert [p["source"] for p in report.pictures] == [case["images"][0], "image2"]
    # A prompt that marks two pictures with one given is refused in the library's words.
    with pytest.raises(ValueError, match="marks 2 pictures with <image> but 1 was given"):
        attnviz.run(case["text"], model=LLAVA, image=str(wide))


GGUF = REPO / "tests" / "fixtures" / "gguf"


def test_a_gguf_text_model_reads_pictures_with_its_projector_file():
    # tests/reference/make_mmproj.py's pair of tiny-llava: the same expanded ids and runs.
    case = _llava_case("describe")
    report = attnviz.run(
        case["text"], model=str(GGUF / "tiny-llava.gguf"), mmproj=GGUF / "mmproj-tiny-llava.gguf",
        image=str(IMAGES / case["images"][0]),
    )
    assert json.loads(report.json())["input_ids"] == case["input_ids"]
    [picture] = report.pictures
    assert [picture["first"], picture["count"]] == case["image_token_runs"][0]
    # Without the projector, a picture is refused in one line that names mmproj=.
    with pytest.raises(ValueError) as e:
        attnviz.run(case["text"], model=str(GGUF / "tiny-llava.gguf"), image=str(IMAGES / case["images"][0]))
    assert "needs the projector file" in str(e.value) and "mmproj=" in str(e.value)
    assert "--" not in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TypeError, match="mmproj must be a path"):
        attnviz.run(case["text"], model=str(GGUF / "tiny-llava.gguf"), mmproj=3)


def _convert_to_rgb(image: Image.Image) -> Image.Image:
    """transformers' `image_transforms.convert_to_rgb`, line for line: anything but RGB becomes
    RGBA and is composited onto white."""
    if image.mode == "RGB":
        return image
    image_rgba = image.convert("RGBA")
    background = Image.new("RGBA", image_rgba.size, (255, 255, 255))
    return Image.alpha_composite(background, image_rgba).convert("RGB")


def _pictures(folder: Path) -> dict:
    """One picture in each mode a PNG or JPEG file opens in with PIL, written by PIL."""
    rng = np.random.default_rng(1)
    h, w = 37, 45
    rgb = (rng.random((h, w, 3)) * 255).astype(np.uint8)
    alpha = (rng.random((h, w)) * 255).astype(np.uint8)
    palette = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16)
    out = {}
    for name, image, extra in [
        ("L.png", Image.fromarray(rgb[..., 0], "L"), {}),
        ("LA.png", Image.fromarray(np.dstack([rgb[..., 0], alpha]), "LA"), {}),
        ("RGBA.png", Image.fromarray(np.dstack([rgb, alpha]), "RGBA"), {}),
        ("P.png", palette, {}),
        ("P-transparent.png", palette, {"transparency": 3}),
        ("1.png", Image.fromarray(rgb[..., 0] > 128), {}),
        ("I16.png", Image.fromarray((rng.random((h, w)) * 65535).astype(np.uint16)), {}),
        ("RGB.jpg", Image.fromarray(rgb), {"quality": 85}),
        ("progressive.jpg", Image.fromarray(rgb), {"quality": 70, "progressive": True}),
        ("L.jpg", Image.fromarray(rgb[..., 1], "L"), {}),
        ("CMYK.jpg", Image.fromarray(rgb).convert("CMYK"), {"quality": 90}),
        ("CMYK-progressive.jpg", Image.fromarray(rgb).convert("CMYK"), {"progressive": True}),
    ]:
        path = folder / name
        image.save(path, **extra)
        out[name] = path
    return out


def test_every_pil_mode_reaches_the_model_as_transformers_prepares_it(tmp_path):
    """The picture the model saw (the JSON's `view_png`: decoded, made RGB, resized) equals what
    transformers' processor makes with PIL, pixel for pixel, for each PNG mode and for JPEGs
    (baseline, progressive, gray, CMYK): PIL decodes JPEG with libjpeg-turbo, as attnviz does,
    and makes CMYK RGB with its own conversion, which attnviz follows."""
    import base64
    import io

    config = json.loads((Path(DEIT) / "preprocessor_config.json").read_text())
    size = (config["size"]["width"], config["size"]["height"])
    for name, path in _pictures(tmp_path).items():
        with Image.open(path) as im:
            want = np.asarray(_convert_to_rgb(im).resize(size, resample=config["resample"]))
        doc = cli_json("-m", DEIT, "--image", str(path))
        png = base64.b64decode(doc["image"]["view_png"].split(",")[-1])
        with Image.open(io.BytesIO(png)) as seen:
            got = np.asarray(seen.convert("RGB"))
        assert got.shape == want.shape, name
        worst = int(np.abs(got.astype(int) - want.astype(int)).max())
        assert worst == 0, f"{name}: {worst} levels from transformers' pixels"


def test_every_pil_mode_in_memory_gives_what_its_file_gives(tmp_path):
    """A PIL image handed over in memory (its pixels, made RGB or gray only where PNG would
    change them) reaches the model as its file does through the CLI's decoder."""
    for name, path in _pictures(tmp_path).items():
        with Image.open(path) as im:
            im.load()
            from_memory = attnviz.run(image=im, model=DEIT)
        from_file = attnviz.run(image=path, model=DEIT)
        assert np.array_equal(from_memory.attention, from_file.attention), name


def test_pictures_in_memory_leave_no_file_even_when_they_fail(tmp_path, monkeypatch):
    """Nothing of a picture in memory is written to disk, whether it runs or is refused: the
    temporary folder (this test's own) stays empty."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with Image.open(PICTURE) as im:
        im.load()
        attnviz.run(image=im, model=DEIT)
    attnviz.run(image=np.zeros((40, 50, 3), np.uint8), model=DEIT)
    assert sorted(p.name for p in temp.iterdir()) == []
    for bad in (Image.new("RGB", (0, 0)), Image.new("L", (20_000, 1)), np.zeros((0, 5), np.uint8)):
        with pytest.raises(ValueError):
            attnviz.run(image=bad, model=DEIT)
        assert sorted(p.name for p in temp.iterdir()) == [], f"left behind by {bad!r}"


@pytest.mark.parametrize(
    "array",
    [
        # A side over 16384 (small enough that the old conversion could be measured).
        np.broadcast_to(np.float32(0.5), (20_000, 10, 3)),
        # 72 megapixels of float64 (1.7 GB as a copy, nothing as a view).
        np.broadcast_to(np.float64(0.5), (9000, 8000, 3)),
        # 10^10 pixels (30 GB as a copy).
        np.broadcast_to(np.uint8(7), (100_000, 100_000, 3)),
    ],
    ids=["side", "float64-72mp", "broadcast-1e10"],
)
def test_an_array_over_the_bounds_is_refused_from_its_shape_before_any_copy(array):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="more than attnviz reads") as e:
            attnviz.run(image=array, model=DEIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "16384 a side and 64 megapixels" in str(e.value)
    assert peak < 1 << 20, f"{array.shape}: {peak} bytes allocated before the refusal"


def test_an_array_is_read_where_it_lies_not_copied_whole():
    """A float array is checked and made 8-bit a row at a time as the model's resize takes it:
    numpy allocates nothing of its size, and the result is the uint8 picture's. A strided view
    (flipped, every other column) is read as its contiguous copy would be."""
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (600, 900, 3), dtype=np.uint8)
    as_float = pixels.astype(np.float64) / 255.0
    want = attnviz.run(image=pixels, model=DEIT).attention
    tracemalloc.start()
    try:
        got = attnviz.run(image=as_float, model=DEIT).attention
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, want)
    assert peak < as_float.nbytes // 16, f"{peak} bytes allocated for a {as_float.nbytes}-byte array"
    # float32 and float16 give the same 8-bit values (x/255 rounds back to x in each).
    for dtype in (np.float32, np.float16):
        assert np.array_equal(attnviz.run(image=as_float.astype(dtype), model=DEIT).attention, want)
    view = pixels[::-1, ::2]
    assert not view.flags.c_contiguous
    assert np.array_equal(
        attnviz.run(image=view, model=DEIT).attention,
        attnviz.run(image=np.ascontiguousarray(view), model=DEIT).attention,
    )


def _progressive_jpeg(scans: int) -> bytes:
    """An 8 × 8 gray progressive JPEG of a DC scan and `scans` empty AC scans (each a dozen
    bytes): tests/suite/support/pictures.rs's `EmptyAc`."""

    def segment(marker: int, body: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body

    one_code = bytes([1] + [0] * 15)
    out = b"\xff\xd8" + segment(0xDB, b"\x00" + b"\x01" * 64)
    out += segment(0xC2, struct.pack(">BHHB", 8, 8, 8, 1) + b"\x01\x11\x00")
    out += segment(0xC4, b"\x00" + one_code + b"\x00") + segment(0xC4, b"\x10" + one_code + b"\xe0")
    out += segment(0xDA, b"\x01\x01\x00\x00\x00\x00")
    out += segment(0xDA, b"\x01\x01\x00\x01\x3f\x00") * scans
    return out + b"\xff\xd9"


def test_pictures_made_to_hold_the_decoder_are_refused_where_pil_refuses_a_profile(tmp_path):
    # 500 scans in all decode; 501 are refused (PIL would go on through every one).
    fine, many = tmp_path / "fine.jpg", tmp_path / "many.jpg"
    fine.write_bytes(_progressive_jpeg(499))
    many.write_bytes(_progressive_jpeg(500))
    attnviz.run(image=fine, model=DEIT)
    with pytest.raises(RuntimeError, match="more than 500 scans"):
        attnviz.run(image=many, model=DEIT)
    # A colour profile that inflates past 1 MiB: PIL refuses to open it, and so does attnviz;
    # one of exactly 1 MiB both read.
    for size, refused in ((1 << 20, False), ((1 << 20) + 1, True)):
        path = tmp_path / f"profile-{size}.png"
        Image.new("RGB", (40, 40), (200, 100, 50)).save(path, icc_profile=b"\0" * size)
        if refused:
            with pytest.raises(ValueError, match="Decompressed data too large"):
                Image.open(path)
            with pytest.raises(RuntimeError, match=r"colour profile \(iCCP\) chunk that inflates past 1 MiB"):
                attnviz.run(image=path, model=DEIT)
        else:
            with Image.open(path) as im:
                assert len(im.info["icc_profile"]) == size
            attnviz.run(image=path, model=DEIT)
