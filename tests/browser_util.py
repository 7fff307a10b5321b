"""The browser tests' helpers (tests/browser_test.py, tests/browser_views.py): the pass and
failure counts, the page's quantisation of a weight, headless Chromium and the page's
controls."""
import base64
import os
import shutil
import sys
import time

import numpy as np


passed = 0
failed = 0
LEVELS = 254
QTOL = 0.5 / LEVELS + 1e-6  # one quantisation step's rounding


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def quant(v):
    """The page's byte for a weight (viz/html.c quantise), as a weight again."""
    return np.round(np.clip(v, 0, 1) * LEVELS) / LEVELS


# ---- the browser ---------------------------------------------------------------------------
def start_browser(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    for b in ("/usr/lib/chromium/chromium", shutil.which("chromium") or ""):
        if b and os.access(b, os.X_OK):
            opts.binary_location = b
            break
    for a in ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--disable-quic", "--disable-dev-shm-usage",
              "--user-data-dir=" + profile, "--window-size=1500,1100",
              "--force-device-scale-factor=1"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv_path = "/usr/bin/chromedriver" if os.access("/usr/bin/chromedriver", os.X_OK) else shutil.which("chromedriver")
    return webdriver.Chrome(service=Service(drv_path), options=opts)


def by_css(drv, sel):
    from selenium.webdriver.common.by import By
    return drv.find_elements(By.CSS_SELECTOR, sel)


def hover(drv, elem):
    from selenium.webdriver.common.action_chains import ActionChains
    drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", elem)
    ActionChains(drv).move_to_element(elem).perform()


def keys(drv, elem, *ks):
    elem.send_keys(*ks)  # focuses the element without moving the mouse


def shot(drv, shots, name, full=False):
    path = os.path.join(shots, "browser-%s.png" % name)
    if full:
        w, h = drv.execute_script("return [document.documentElement.scrollWidth, document.documentElement.scrollHeight];")
        png = drv.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": w, "height": min(h, 6000), "scale": 1}})
        with open(path, "wb") as f:
            f.write(base64.b64decode(png["data"]))
    else:
        drv.save_screenshot(path)
    if check(os.path.getsize(path) > 0, "%s: screenshot failed" % name):
        print("browser: %s: screenshot %s" % (name, path))


def open_page(drv, page, frag=""):
    drv.get_log("browser")  # drop anything from a previous page
    drv.get("file://" + os.path.abspath(page) + frag)
    t = time.time()
    while time.time() - t < 20:
        if drv.execute_script("return !!(window.headscope && window.headscope.ready) || !document.getElementById('hs-error').hidden;"):
            break
        time.sleep(0.05)
    err = drv.execute_script("return document.getElementById('hs-error').hidden ? '' : document.getElementById('hs-error').textContent;")
    return check(not err, "%s: page shows an error: %s" % (page, err))


def page_clean(drv, name):
    bad = drv.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(u => !u.startsWith('file:') && !u.startsWith('data:'));")
    check(not bad, "%s: requests outside file:/data: %s" % (name, bad))
    errs = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
    check(not errs, "%s: console errors: %s" % (name, [e.get("message") for e in errs][:3]))


def report(drv):
    return drv.execute_script("return JSON.parse(document.getElementById('hs-report').textContent);")


def view(drv, name):
    drv.find_element("id", "tab-" + name).click()
    return drv.find_element("id", "view-" + name)
