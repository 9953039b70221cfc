"""A picture of the companion site: its first screen, as headless Chromium draws it.

    .venv/bin/python scripts/site_screenshot.py results/site/index.html docs/site_claims.png

Every full CPU-profile run of ./run_all.sh redraws docs/site_claims.png itself
(:func:`rt_lib.site.pages.picture`); this draws any site's, e.g. another profile's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rt_lib.site.pages import picture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, help="the site's index.html")
    parser.add_argument("png", type=Path, help="where the picture goes")
    parser.add_argument("--width", type=int, default=1400, help="window width in pixels")
    parser.add_argument("--height", type=int, default=1000, help="window height in pixels")
    parser.add_argument("--colors", type=int, default=64,
                        help="palette size of the saved PNG (a third of the full-colour size; 0: full colour)")
    args = parser.parse_args()
    if not args.index.is_file():
        parser.error(f"index: no such file {args.index} (build the site with ./run_all.sh)")
    png = picture(args.index, args.png, args.width, args.height, args.colors)
    print(f"{png}: {png.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
