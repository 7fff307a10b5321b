#!/usr/bin/python3
"""Checks out/index.html pages in headless Chromium (run by tests/browser.sh).

    browser_test.py --shots DIR --case NAME PAGE ROWS MAPS [--case ...]

For each case: the page loads from file:// with no console errors and no request
that is not file: or data:, the heads table has ROWS rows, sorting by a column
orders it, clicking a row selects that head (panel, title, highlighted row), the
selected head shows its picture when the report lists one and, when MAPS is 1,
a non-empty heatmap canvas whose cells match the embedded map and a line view
that answers hover; when MAPS is 0 the page says the maps are not embedded.
A full-page screenshot of each case is saved in DIR. Prints one line per failure
and ends with "browser: N passed, M failed"; exits 1 on any failure.
"""
import argparse
import base64
import os
import shutil
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def find_binary(names):
    for n in names:
        p = shutil.which(n) if not os.path.isabs(n) else (n if os.access(n, os.X_OK) else None)
        if p:
            return p
    return None


def start_browser(profile):
    opts = webdriver.ChromeOptions()
    binary = find_binary(["/usr/lib/chromium/chromium", "chromium"])
    if binary:
        opts.binary_location = binary
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--disable-quic", "--disable-dev-shm-usage",
              "--user-data-dir=" + profile, "--window-size=1600,1200",
              "--force-device-scale-factor=1"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = find_binary(["/usr/bin/chromedriver", "chromedriver"])
    return webdriver.Chrome(service=Service(driver_path), options=opts)


def console_errors(drv):
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


# Pixel (r, g, b) at the centre of heatmap cell (query i, key j), from the canvas's
# own geometry (data-offset, data-cell in CSS pixels).
PIXEL_JS = """
const cv = document.getElementById('hs-heatmap');
if (!cv) return null;
const off = +cv.dataset.offset, cell = +cv.dataset.cell, s = cv.width / parseFloat(cv.style.width);
const x = Math.floor((off + arguments[1] * cell + cell / 2) * s), y = Math.floor((off + arguments[0] * cell + cell / 2) * s);
const d = cv.getContext('2d').getImageData(x, y, 1, 1).data;
return [d[0], d[1], d[2]];
"""

# Distinct colours on the heatmap canvas (a blank canvas has one).
COLOURS_JS = """
const cv = document.getElementById('hs-heatmap');
if (!cv || !cv.width || !cv.height) return 0;
const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data, seen = new Set();
for (let i = 0; i < d.length && seen.size < 64; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
return seen.size;
"""

# The embedded map of head k, decoded independently of the page's own script.
MAP_JS = """
const info = JSON.parse(document.getElementById('hs-maps-info').textContent);
const rec = document.querySelector("script.hs-map[data-index='" + arguments[0] + "']");
if (!info.embedded || !rec) return null;
return {n: info.n, levels: info.levels, b64: rec.textContent.trim()};
"""

VIRIDIS_END = {0: (68, 1, 84), 1: (253, 231, 37)}


def near(rgb, ref, tol=12):
    return rgb is not None and all(abs(a - b) <= tol for a, b in zip(rgb, ref))


def column_values(drv, key):
    idx = drv.execute_script(
        "return Array.prototype.findIndex.call(document.querySelectorAll('#hs-heads thead th'),"
        " th => th.dataset.key === arguments[0]);", key)
    vals = []
    for r in drv.find_elements(By.CSS_SELECTOR, "#hs-heads tbody tr"):
        td = r.find_elements(By.TAG_NAME, "td")[idx]
        t = td.get_attribute("title")
        vals.append(float(t) if t else None)
    return vals


def sorted_ok(vals, descending):
    nums = [v for v in vals if v is not None]
    first_null = next((i for i, v in enumerate(vals) if v is None), len(vals))
    nulls_last = all(v is None for v in vals[first_null:])
    return nulls_last and nums == sorted(nums, reverse=descending)


def run_case(drv, name, page, rows_expected, maps, shots):
    url = "file://" + os.path.abspath(page)
    drv.get_log("browser")  # drop anything from a previous page
    drv.set_window_size(1600, 1200)
    drv.get(url)
    try:
        WebDriverWait(drv, 10).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#hs-heads tbody tr")
            or d.find_element(By.ID, "hs-error").is_displayed())
    except Exception:
        pass
    err_box = drv.find_element(By.ID, "hs-error")
    check(not err_box.is_displayed(), "%s: page shows an error: %s" % (name, err_box.text))
    rows = drv.find_elements(By.CSS_SELECTOR, "#hs-heads tbody tr")
    check(len(rows) == rows_expected, "%s: %d table rows, want %d" % (name, len(rows), rows_expected))
    if not rows:
        return
    check(drv.find_element(By.ID, "hs-model").text.strip() != "", "%s: header has no model" % name)
    check(len(drv.find_elements(By.CSS_SELECTOR, "#hs-summary .card")) >= 4,
          "%s: summary has fewer than 4 cards" % name)
    check(len(drv.find_elements(By.CSS_SELECTOR, "#hs-tokens .tok")) > 0, "%s: no tokens shown" % name)

    # sorting: ablation delta descending, then ascending; nulls stay last
    th = drv.find_element(By.CSS_SELECTOR, "#hs-heads th[data-key='ablation_delta']")
    th.click()
    check(sorted_ok(column_values(drv, "ablation_delta"), True),
          "%s: ablation column not in descending order after one click" % name)
    th.click()
    check(sorted_ok(column_values(drv, "ablation_delta"), False),
          "%s: ablation column not in ascending order after two clicks" % name)
    drv.find_element(By.CSS_SELECTOR, "#hs-heads th[data-key='id']").click()
    ids = [r.get_attribute("data-head") for r in drv.find_elements(By.CSS_SELECTOR, "#hs-heads tbody tr")]
    key = [tuple(int(x) for x in i.split(".")) for i in ids]
    check(key == sorted(key), "%s: head column not in layer.head order: %s" % (name, ids))

    # click every row in turn (the last one clicked is kept for the picture checks)
    panel = drv.find_element(By.ID, "hs-selected")
    for r in drv.find_elements(By.CSS_SELECTOR, "#hs-heads tbody tr"):
        hid = r.get_attribute("data-head")
        drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", r)
        r.click()
        ok = panel.get_attribute("data-head") == hid
        ok = ok and drv.find_element(By.ID, "hs-sel-title").text.strip().endswith(hid)
        ok = ok and "sel" in r.get_attribute("class").split()
        check(ok, "%s: clicking row %s did not select it (panel shows %s)"
              % (name, hid, panel.get_attribute("data-head")))

    report_files = drv.execute_script(
        "const r = JSON.parse(document.getElementById('hs-report').textContent);"
        " return Array.isArray(r.files) ? r.files : [];")
    # pick a head with a clear pattern when there is one: the strongest previous-token head
    target = drv.execute_script(
        "const r = JSON.parse(document.getElementById('hs-report').textContent); let b = 0;"
        " const pt = (h) => h.text_scores.no_sinks.previous_token || 0;"
        " r.heads.forEach((h, k) => { if (pt(h) > pt(r.heads[b])) b = k; });"
        " return b;")
    row = drv.find_element(By.CSS_SELECTOR, "#hs-heads tbody tr[data-k='%d']" % target)
    drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
    row.click()
    hid = row.get_attribute("data-head")
    layer, head = hid.split(".")
    png = "heads/L%s_H%s.png" % (layer, head)
    if png in report_files:
        img = drv.find_elements(By.ID, "hs-sel-img")
        WebDriverWait(drv, 5).until(lambda d: d.execute_script(
            "const i = document.getElementById('hs-sel-img'); return !i || i.complete;"))
        check(img and drv.execute_script("return arguments[0].naturalWidth;", img[0]) > 0,
              "%s: head %s picture %s not shown" % (name, hid, png))
    for f in ("gallery.png", "similarity.png", "importance.png"):
        if f in report_files:
            imgs = [i for i in drv.find_elements(By.CSS_SELECTOR, "#hs-pictures img")
                    if i.get_attribute("src").endswith("/" + f)]
            if imgs:
                drv.execute_script("arguments[0].scrollIntoView();", imgs[0])
                WebDriverWait(drv, 5).until(lambda d: d.execute_script("return arguments[0].complete;", imgs[0]))
            check(imgs and drv.execute_script("return arguments[0].naturalWidth;", imgs[0]) > 0,
                  "%s: %s listed in files but not shown" % (name, f))

    if maps:
        check(drv.execute_script(COLOURS_JS) > 2, "%s: heatmap canvas of %s is empty" % (name, hid))
        m = drv.execute_script(MAP_JS, target)
        if check(m is not None, "%s: no embedded map for head %s" % (name, hid)):
            n, levels = m["n"], m["levels"]
            raw = base64.b64decode(m["b64"])
            check(len(raw) == n * n, "%s: map of %s has %d bytes, want %d" % (name, hid, len(raw), n * n))
            # cells that are exactly 0 or 1 must be drawn at the ends of viridis
            bad = []
            for (i, j) in [(i, j) for i in range(n) for j in range(n)][:: max(1, n * n // 60)]:
                b = raw[i * n + j]
                if b in (0, levels):
                    px = drv.execute_script(PIXEL_JS, i, j)
                    if not near(px, VIRIDIS_END[0 if b == 0 else 1]):
                        bad.append((i, j, b, px))
            check(not bad, "%s: heatmap cells of %s do not match the map: %s" % (name, hid, bad[:3]))
            # line view: hovering query token i tints the key token it attends to most
            lv_q = drv.find_elements(By.CSS_SELECTOR, "#hs-lines .col.q .lt")
            lv_k = drv.find_elements(By.CSS_SELECTOR, "#hs-lines .col.k .lt")
            check(len(lv_q) == n and len(lv_k) == n,
                  "%s: line view has %d/%d tokens, want %d" % (name, len(lv_q), len(lv_k), n))
            if len(lv_q) == n:
                i = n - 1
                j = max(range(n), key=lambda x: raw[i * n + x])
                drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", lv_q[i])
                ActionChains(drv).move_to_element(lv_q[i]).perform()
                bg = lv_k[j].value_of_css_property("background-color")
                check(raw[i * n + j] > 0 and "47, 95, 179" in bg,
                      "%s: hovering query %d did not highlight key %d (%s)" % (name, i, j, bg))
                ActionChains(drv).move_to_element(drv.find_element(By.ID, "hs-sel-title")).perform()
        # the thumbnail grid drawn from the maps: one per head, a click opens it
        thumbs = drv.find_elements(By.CSS_SELECTOR, "#hs-thumbs .thumb")
        check(len(thumbs) == rows_expected, "%s: %d thumbnails, want %d" % (name, len(thumbs), rows_expected))
        if thumbs:
            t = thumbs[0]
            drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", t)
            t.click()
            want = drv.execute_script("return document.querySelector(\"#hs-heads tr[data-k='\" + arguments[0] + \"']\").dataset.head;",
                                      t.get_attribute("data-head-index"))
            check(panel.get_attribute("data-head") == want,
                  "%s: clicking the thumbnail of %s shows %s" % (name, want, panel.get_attribute("data-head")))
            row.click()
    else:
        check(not drv.find_elements(By.ID, "hs-heatmap"), "%s: heatmap drawn without maps" % name)
        check(not drv.find_elements(By.CSS_SELECTOR, "#hs-thumbs"), "%s: thumbnails drawn without maps" % name)
        check("not embedded" in panel.text, "%s: page does not say the maps are absent" % name)

    bad_urls = drv.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(u => !u.startsWith('file:') && !u.startsWith('data:'));")
    check(not bad_urls, "%s: requests outside file:/data: %s" % (name, bad_urls))
    errs = console_errors(drv)
    check(not errs, "%s: console errors: %s" % (name, [e.get("message") for e in errs][:3]))

    drv.execute_script("window.scrollTo(0, 0);")
    WebDriverWait(drv, 5).until(lambda d: d.execute_script(
        "return Array.prototype.every.call(document.images, i => i.complete);"))
    w, h = drv.execute_script("return [document.documentElement.scrollWidth, document.documentElement.scrollHeight];")
    shot = os.path.join(shots, "browser-%s.png" % name)
    png = drv.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": w, "height": min(h, 8000), "scale": 1}})
    with open(shot, "wb") as f:
        f.write(base64.b64decode(png["data"]))
    ok = True
    if check(ok and os.path.getsize(shot) > 0, "%s: screenshot failed" % name):
        print("browser: %s: screenshot %s" % (name, shot))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", required=True)
    ap.add_argument("--case", nargs=4, action="append", required=True,
                    metavar=("NAME", "PAGE", "ROWS", "MAPS"))
    args = ap.parse_args()
    os.makedirs(args.shots, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="hs-chromium-")
    drv = None
    try:
        drv = start_browser(profile)
        for name, page, rows, maps in args.case:
            try:
                run_case(drv, name, page, int(rows), maps == "1", args.shots)
            except Exception as e:  # a broken page must fail the case, not the run
                check(False, "%s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    except Exception as e:
        check(False, "cannot start headless Chromium: %s" % e)
    finally:
        if drv:
            drv.quit()
        shutil.rmtree(profile, ignore_errors=True)
    print("browser: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
