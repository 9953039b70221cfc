"""A picture of the companion site: its claims table, as headless Chromium draws it.

    .venv/bin/python scripts/site_screenshot.py results/site/index.html docs/site_claims.png

Drives Debian's /usr/bin/chromium (or $RT_CHROMIUM) through Playwright, as the browser tests do.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from playwright.sync_api import sync_playwright

# The flags this sandbox needs (root, no GPU, a closed network): as tests/test_browser.py.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, help="the site's index.html")
    parser.add_argument("png", type=Path, help="where the picture goes")
    parser.add_argument("--width", type=int, default=1500, help="viewport width in pixels")
    parser.add_argument("--colors", type=int, default=64,
                        help="palette size of the saved PNG (a third of the full-colour size; 0: full colour)")
    args = parser.parse_args()
    if not args.index.is_file():
        parser.error(f"index: no such file {args.index} (build the site with ./run_all.sh)")
    args.png.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=os.environ.get("RT_CHROMIUM", "/usr/bin/chromium"),
                                     args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": 1000})
        page.goto(args.index.resolve().as_uri())
        page.locator("table.rt-claims").screenshot(path=str(args.png))
        browser.close()
    if args.colors:  # the picture lives in git: a palette keeps it small, text stays sharp
        from PIL import Image  # matplotlib's dependency

        with Image.open(args.png) as shot:
            small = shot.convert("RGB").quantize(colors=args.colors, method=Image.Quantize.MEDIANCUT)
        small.save(args.png, optimize=True)
    print(f"{args.png}: {args.png.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
