#!/usr/bin/python3
"""The head view of a headscope page, one layer with every head on, as a PNG (headless
Chromium; run by docs/img/make_images.sh).

    head_view_shot.py PAGE LAYER OUT.png
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from browser_util import by_css, open_page, start_browser  # noqa: E402


def main():
    page, layer, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    drv = start_browser(tempfile.mkdtemp(prefix="hs-chromium-"))
    try:
        if not open_page(drv, page):
            return 1
        k = drv.execute_script("return window.headscope.heads.findIndex(h => h.layer === arguments[0]);", layer)
        drv.execute_script("window.headscope.choose(arguments[0]); window.headscope.show('head');", k)
        drv.execute_script("document.querySelector('#view-head button[title=\"every head of the layer\"]').click();")
        drv.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")
        box = by_css(drv, "#view-head .panel")[0]
        with open(out, "wb") as f:
            f.write(box.screenshot_as_png)
    finally:
        drv.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
