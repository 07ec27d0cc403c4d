"""Opening a Snakemake HTML report in headless Chromium (Debian's chromium + chromium-driver, via
selenium) and walking it as a reader would: category -> table/figure -> its provenance row -> its
content. Shared by the workflow tests (tests/test_slurm_smoke.py) and used to make docs/report.png.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@contextlib.contextmanager
def browser(width: int = 1400, height: int = 800):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _click_text(driver, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(
        lambda d: d.find_element(By.XPATH, f"//*[normalize-space(text())='{text}']")).click()


def _wait_text(driver, text: str) -> str:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def body_with_text(d):
        body = d.find_element(By.TAG_NAME, "body").text
        return body if text in body else False

    return WebDriverWait(driver, 10).until(body_with_text)


def _data_uri_text(uri: str) -> str:
    import base64
    from urllib.parse import unquote

    header, _, payload = uri.partition(",")
    if not header.startswith("data:"):
        return ""
    return base64.b64decode(payload).decode() if header.endswith(";base64") else unquote(payload)


def walk_report(report: Path, screenshot: Path | None = None) -> dict:
    """Open ``report`` and visit every marked result the way a reader does.

    Returns ``{"marked": {path: (category, name)}, "rows": {name: text of its provenance row},
    "shown": {name: what its view displayed}, "errors": [severe console messages]}``. Each
    result is reached through the menu (category, then its subcategory = the table/figure name),
    its row must be visible, and its eye button must show it: a figure as an image, a table as
    the download of its embedded CSV (``shown`` holds the CSV text). ``screenshot``: a PNG of the first figure's view.
    """
    from selenium.webdriver.common.by import By

    out = {"marked": {}, "rows": {}, "shown": {}, "errors": []}
    with browser() as driver:
        url = Path(report).resolve().as_uri()
        driver.get(url)
        categories = driver.execute_script("return categories")
        results = driver.execute_script("return Object.keys(results)")
        for category, subcategories in categories.items():
            for name, paths in subcategories.items():
                for path in paths:
                    out["marked"][path] = (category, name)
        assert set(out["marked"]) == set(results), "results outside the report's categories"
        for path, (category, name) in sorted(out["marked"].items()):
            driver.get(url)
            _click_text(driver, category)
            _click_text(driver, name)
            body = _wait_text(driver, "CONFIG SHA256")
            out["rows"][name] = next((line for line in body.splitlines() if line.startswith(name + " ")), "")
            view = driver.find_element(By.CSS_SELECTOR, "a[iconname='eye']")
            if path.endswith(".png"):
                view.click()
                images = [img for img in driver.find_elements(By.TAG_NAME, "img")
                          if (img.get_attribute("src") or "").startswith("data:image/png")
                          and img.get_attribute("naturalWidth") not in (None, "0")]
                out["shown"][name] = f"{len(images)} png image(s)"
                if screenshot is not None and not Path(screenshot).exists():
                    driver.save_screenshot(str(screenshot))
            else:  # the report offers other files (a table's CSV) as a download of their embedded content
                out["shown"][name] = _data_uri_text(view.get_attribute("href") or "")
        out["errors"] = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return out
