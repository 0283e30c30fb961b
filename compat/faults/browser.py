"""A fault report (:mod:`compat.faults.report`) as headless Chromium renders it.

``python -m compat.faults.browser DIR/index.html`` writes ``DIR/screenshot.png``: the whole
page as Debian's ``chromium`` (``compat/ensure-chromium.sh`` installs it) draws it from the
file system, at one CSS pixel per pixel.

:func:`rendered_images` checks what a screenshot cannot show by itself -- that each image the
page names was loaded and drawn: it renders a probe page beside the report that places each of
the report's ``<img>`` sources (the same relative paths) at a known position, and compares
each region of that screenshot with the PNG's own pixels decoded by Pillow.
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from PIL import Image, ImageChops, ImageStat

from compat.faults.report import png_size

GAP_PX = 8
"""Space between the probe page's images."""
CHANGED_LEVELS = 24
"""A pixel differs when a channel is off by more than this (of 255): beyond colour management."""


def chromium() -> str | None:
    """The path of Debian's ``chromium`` (or ``chromium-browser``), None where neither is on PATH."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: Path, out: Path, width: int, height: int, timeout_s: float = 120.0) -> Path:
    """Render ``page`` (a file) in headless Chromium in a ``width`` x ``height`` window at
    device scale 1 and write the screenshot to ``out`` (PNG). Raises FileNotFoundError without
    Chromium, subprocess.CalledProcessError when it fails, and RuntimeError when it wrote no
    screenshot."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed (compat/ensure-chromium.sh)")
    out.unlink(missing_ok=True)
    # --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start
    subprocess.run([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions",
                    f"--user-data-dir={out.parent / '.chromium-profile'}",
                    f"--window-size={width},{height}", f"--screenshot={out}", page.resolve().as_uri()],
                   check=True, capture_output=True, timeout=timeout_s)
    shutil.rmtree(out.parent / ".chromium-profile", ignore_errors=True)
    if not out.exists():
        raise RuntimeError(f"chromium wrote no screenshot of {page}")
    return out


def trim(shot: Path, margin_px: int = 16) -> Path:
    """Cut the blank rows below the content of the screenshot ``shot`` (a window taller than
    the page leaves them), keeping ``margin_px``."""
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
    box = ImageChops.difference(rgb, Image.new("RGB", rgb.size, rgb.getpixel((rgb.width - 1, rgb.height - 1)))).getbbox()
    if box is not None and box[3] + margin_px < rgb.height:
        rgb.crop((0, 0, rgb.width, box[3] + margin_px)).save(shot)
    return shot


class _Page(HTMLParser):
    """The ``<img>`` sources of a page, their ``width`` and ``height``, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.sizes: list[tuple[int, int]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            named = dict(attrs)
            self.images.append(named.get("src") or "")
            self.sizes.append((int(named.get("width") or 0), int(named.get("height") or 0)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def read_page(index: Path) -> tuple[list[str], str]:
    """``(img sources, visible text)`` of the page ``index``."""
    parser = _Page()
    parser.feed(index.read_text(encoding="utf-8"))
    return parser.images, " ".join(parser.text)


def page_size(index: Path) -> tuple[int, int]:
    """A window that holds the whole report: the widest row of images side by side and the
    images' heights with room for the text."""
    images, _ = read_page(index)
    sizes = [png_size(index.parent / src) for src in images]
    width = max((w for w, _ in sizes), default=800)
    return width * 2 + 120, sum(h for _, h in sizes) + 400 * len(sizes) // 4 + 600


@dataclass
class Rendered:
    """One image of the probe: its source, its size, the mean absolute difference (0-255, over
    every channel) between the rendered region and the PNG's pixels, and the fraction of its
    pixels that differ by more than :data:`CHANGED_LEVELS` in some channel."""

    src: str
    size: tuple[int, int]
    difference: float
    changed: float


def rendered_images(index: Path, out: Path, reference: Path | None = None) -> list[Rendered]:
    """Render every image ``index`` names, at the size its ``<img>`` gives, from the page's
    directory, in headless Chromium (the probe page ``.probe.html`` beside ``index``, its
    screenshot ``out``) and compare each with the PNG of that name in ``reference`` (default:
    the page's directory) as Pillow decodes it. A source that did not load renders as a
    broken-image box and differs by far more than a few levels of colour management."""
    parser = _Page()
    parser.feed(index.read_text(encoding="utf-8"))
    images, sizes = parser.images, parser.sizes
    reference = index.parent if reference is None else reference
    top = 0
    tags = []
    places = []
    for src, (w, h) in zip(images, sizes, strict=True):
        tags.append(f'<img src="{html.escape(src)}" width="{w}" height="{h}" alt="missing: {html.escape(src)}" '
                    f'style="position:absolute;left:0;top:{top}px">')
        places.append(top)
        top += h + GAP_PX
    probe = index.parent / ".probe.html"
    probe.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><style>body{margin:0;background:#fff}"
                     "</style></head><body>" + "".join(tags) + "</body></html>", encoding="utf-8")
    try:
        screenshot(probe, out, max((w for w, _ in sizes), default=100), max(top, 100))
    finally:
        probe.unlink(missing_ok=True)
    shot = Image.open(out).convert("RGB")
    found = []
    for src, (w, h), y in zip(images, sizes, places, strict=True):
        region = shot.crop((0, y, w, y + h))
        with Image.open(reference / src) as png:
            png.load()
            expected = png.convert("RGBA")
        flat = Image.new("RGB", expected.size, "white")
        flat.paste(expected, mask=expected.getchannel("A"))
        difference = ImageChops.difference(region, flat)
        stat = ImageStat.Stat(difference)
        red, green, blue = difference.split()
        most = ImageChops.lighter(ImageChops.lighter(red, green), blue)
        changed = most.point(lambda level: 255 if level > CHANGED_LEVELS else 0)
        fraction = ImageStat.Stat(changed).mean[0] / 255
        found.append(Rendered(src, (w, h), sum(stat.mean) / len(stat.mean), fraction))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m compat.faults.browser DIR/index.html", file=sys.stderr)
        return 2
    index = Path(args[0])
    out = trim(screenshot(index, index.parent / "screenshot.png", *page_size(index)))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
