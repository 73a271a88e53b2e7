"""attnviz.run(image=...) on the tiny random DeiT: a path, a PIL image and a numpy array give the
CLI's attention for `--image` bit for bit (an in-memory picture goes through a lossless PNG), the
picture's description (grid, special tokens, sizes) matches the CLI's JSON, the report opens on
its image view, and bad images raise ValueError or TypeError naming the keyword."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import tempfile
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
    # An in-memory picture is named "image", and its temporary file is gone.
    assert from_array.image["source"] == "image"
    assert not glob.glob(os.path.join(tempfile.gettempdir(), "attnviz-*.png"))
    # Floats in [0, 1] are the same picture at 1/255 steps.
    as_float = attnviz.run(image=array.astype(np.float64) / 255.0, model=DEIT)
    assert np.array_equal(as_float.attention, want)
    # A gray array is converted to RGB as the CLI converts a gray file.
    gray = attnviz.run(image=np.asarray(Image.open(PICTURE).convert("L")), model=DEIT)
    assert gray.attention.shape == want.shape


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(text="hi", image=str(PICTURE)), ValueError, "not both"),
        (dict(image=np.zeros((4, 4, 2), np.uint8)), ValueError, "shape"),
        (dict(image=np.zeros((4, 4, 3), np.int64)), ValueError, "uint8"),
        (dict(image=np.full((4, 4, 3), 2.0)), ValueError, "[0, 1]"),
        (dict(image=42), TypeError, "image must be"),
    ],
)
def test_bad_images_name_the_keyword(kwargs, error, words):
    with pytest.raises(error, match=None) as e:
        attnviz.run(model=DEIT, **kwargs)
    assert words in str(e.value)


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
    ]:
        path = folder / name
        image.save(path, **extra)
        out[name] = path
    return out


def test_every_pil_mode_reaches_the_model_as_transformers_prepares_it(tmp_path):
    """The picture the model saw (the JSON's `view_png`: decoded, made RGB, resized) equals what
    transformers' processor makes with PIL, pixel for pixel, for each PNG mode and for JPEGs
    (baseline, progressive, gray): PIL decodes JPEG with libjpeg-turbo, as attnviz does."""
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
