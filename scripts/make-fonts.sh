#!/usr/bin/env bash
# Rebuild crates/render/assets/fonts/ from the packages named below (Debian packages and one npm package),
# each checked against its SHA-256 before use. The outputs are committed; run this only to
# change a font. Needs apt-get (after `apt-get update`), npm, python3 and gzip.
#
# What it writes, per font: NAME.ttf.gz (gzip -9n, deterministic), NAME.cmap (the code points
# the font maps, as hex ranges, one a line: the renderer picks a font per character from these
# without inflating fonts it doesn't need) and the licence texts. crates/render/assets/fonts/README.md
# records the sources, versions, licences and checksums.
set -euo pipefail

out="$(cd "$(dirname "$0")/.." && pwd)/crates/render/assets/fonts"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

fetch_deb() { # package version sha256
  apt-get download "$1=$2" >/dev/null
  local deb
  deb=$(ls "$1"_*.deb)
  echo "$3  $deb" | sha256sum -c --quiet
  mkdir -p "x/$1"
  dpkg-deb -x "$deb" "x/$1"
}

fetch_deb fonts-dejavu-core 2.37-6 8892669e51aab4dc56682c8e39d8ddb7d70fad83c369344e1e240bf3ca22bb76
fetch_deb fonts-droid-fallback 1:6.0.1r16-1.1 d2096d4edde128fedf6749be2dd204a5810210a6201126d99b8d412344f71056
fetch_deb fonts-nanum 20200506-1 5e86c346e6485b694e1f0ebd27132892fcf014d1b975de4fd21d1654ddf37043
fetch_deb fonts-noto-core 20201225-1 58f4f0bb6720f919f92096b3508e1412a0f1544424ade6c5b5bf1eb694dd64ba

npm pack --silent @fontsource/noto-emoji@5.3.2 >/dev/null
echo "1fe49bb2cf7c2d78f93c0a69b6a431dcfd0d585b7831eba87fae6888ccf8d373  fontsource-noto-emoji-5.3.2.tgz" | sha256sum -c --quiet
mkdir -p x/noto-emoji
tar xzf fontsource-noto-emoji-5.3.2.tgz -C x/noto-emoji

python3 -m venv venv
venv/bin/pip install --quiet fonttools==4.68.0

dejavu=x/fonts-dejavu-core/usr/share/fonts/truetype/dejavu
droid=x/fonts-droid-fallback/usr/share/fonts/truetype/droid
nanum=x/fonts-nanum/usr/share/fonts/truetype/nanum
noto=x/fonts-noto-core/usr/share/fonts/truetype/noto
mkdir -p fonts
cp "$dejavu/DejaVuSans.ttf" "$dejavu/DejaVuSans-Bold.ttf" fonts/
cp "$droid/DroidSansFallbackFull.ttf" fonts/

# Fonts cut to the script they are here for (hinting dropped: the renderer does not hint), with
# their layout tables (GSUB/GPOS) kept for the glyphs that stay, so shaping still works.
subset() { # source output unicodes
  venv/bin/pyftsubset "$1" --output-file="fonts/$2" --unicodes="$3" --no-hinting \
    --layout-features='*' --name-IDs='*' --notdef-outline --drop-tables+=DSIG 2>/dev/null
}
marks="U+200C-200F,U+25CC"
subset "$nanum/NanumGothic.ttf" NanumGothic-Hangul.ttf "U+1100-11FF,U+3130-318F,U+A960-A97F,U+AC00-D7A3,U+D7B0-D7FF"
subset "$noto/NotoSansArabic-Regular.ttf" NotoSansArabic.ttf "U+0600-06FF,U+0750-077F,U+08A0-08FF,U+FB50-FDFF,U+FE70-FEFF,$marks"
subset "$noto/NotoSansHebrew-Regular.ttf" NotoSansHebrew.ttf "U+0590-05FF,U+FB1D-FB4F,$marks"
subset "$noto/NotoSansDevanagari-Regular.ttf" NotoSansDevanagari.ttf "U+0900-097F,U+A8E0-A8FF,U+1CD0-1CFF,$marks"
subset "$noto/NotoSansThai-Regular.ttf" NotoSansThai.ttf "U+0E00-0E7F,$marks"
# Noto Emoji (monochrome outlines; colour bitmap fonts cannot be rasterised by ab_glyph), the
# static weight-400 instance as fontsource ships it (WOFF), unwrapped to TrueType.
venv/bin/python - x/noto-emoji/package/files/noto-emoji-emoji-400-normal.woff fonts/NotoEmoji.ttf <<'EOF'
import sys
from fontTools.ttLib import TTFont
f = TTFont(sys.argv[1])
f.flavor = None
f.save(sys.argv[2])
EOF

venv/bin/python - fonts <<'EOF'
import os, sys
from fontTools.ttLib import TTFont
d = sys.argv[1]
for name in sorted(os.listdir(d)):
    cps = sorted(c for c in TTFont(os.path.join(d, name)).getBestCmap() if c >= 0x20)
    ranges = []
    for c in cps:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    with open(os.path.join(d, name.removesuffix(".ttf") + ".cmap"), "w") as f:
        for a, b in ranges:
            f.write(f"{a:x}-{b:x}\n")
EOF

rm -f "$out"/*.ttf "$out"/*.ttf.gz "$out"/*.cmap
for f in fonts/*.ttf; do
  gzip -9nc "$f" >"$out/$(basename "$f").gz"
done
cp fonts/*.cmap "$out/"
cp x/fonts-dejavu-core/usr/share/doc/fonts-dejavu-core/copyright "$out/LICENSE-DejaVu.txt"
cp x/fonts-nanum/usr/share/doc/fonts-nanum/copyright "$out/LICENSE-Nanum.txt"
cp x/fonts-noto-core/usr/share/doc/fonts-noto-core/copyright "$out/LICENSE-Noto.txt"
cp x/noto-emoji/package/LICENSE "$out/LICENSE-NotoEmoji.txt"
(cd fonts && sha256sum *.ttf) >"$out/SHA256SUMS-ttf"
(cd "$out" && sha256sum *.ttf.gz) >"$out/SHA256SUMS"
echo "wrote $(ls "$out"/*.ttf.gz | wc -l) fonts into $out"
