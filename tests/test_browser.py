"""Notebook 13's neuron explorer in a real browser: JupyterLab in headless Chromium (Playwright
driving Debian's /usr/bin/chromium, no browser download).  The notebook runs with a tiny training
profile injected by papermill; moving the neuron slider must change the rendered image.

Skipped, with the reason in the summary, when Chromium is absent (``run_tests.sh`` installs
Debian's package where it can: ``scripts/setup_browser.sh``)."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("RT_CHROMIUM", "/usr/bin/chromium")
TINY = {"train_params": {"p": 7, "epochs": 40, "eval_points": 4, "n_snapshots": 4, "d_model": 16,
                         "n_heads": 2, "threads": 1},
        "n_neurons": 2}
# The flags this sandbox needs (no GPU, root, a closed network: no background connections).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server over tmp_path holding notebook 13 with the tiny profile injected."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}: install Debian's chromium package "
                    "(scripts/setup_browser.sh does, as root) or set RT_CHROMIUM to run the browser test")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements.txt)")
    import papermill

    papermill.execute_notebook(str(ROOT / "notebooks" / "13_miiii_neurons.ipynb"),
                               str(tmp_path / "13.ipynb"), parameters=TINY, prepare_only=True,
                               kernel_name="python3")
    port, token = _free_port(), "rt-companion-test"
    env = os.environ | {"RT_RESULTS": str(tmp_path / "results"), "TQDM_DISABLE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
         f"--port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={tmp_path}",
         "--ServerApp.ip=127.0.0.1", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "lab.log", "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
    yield f"{url}/lab/tree/13.ipynb?token={token}"
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


def test_neuron_slider_changes_the_rendered_image(lab):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(lab)
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
        for _attempt in range(3):  # the menu may not act before the notebook has settled
            time.sleep(3)
            page.locator("#jp-MainMenu").get_by_text("Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            try:  # the parameters cell got an execution count: the run has started
                page.locator(".jp-InputPrompt").filter(has_text="[1]").first.wait_for(
                    state="attached", timeout=60_000)
                break
            except PlaywrightTimeout:
                continue
        image = page.locator("img.widget-image").first
        # JupyterLab renders only the cells near the viewport: wait for the image to exist, then
        # bring it into view before looking at it.
        image.wait_for(state="attached", timeout=240_000)
        image.scroll_into_view_if_needed()
        image.wait_for(state="visible", timeout=30_000)
        time.sleep(1)
        before = image.screenshot()
        slider = page.locator(".widget-hslider").filter(has_text="neuron").locator(".noUi-handle").first
        slider.focus()
        slider.press("ArrowRight")
        deadline = time.time() + 60
        after = image.screenshot()
        while after == before and time.time() < deadline:
            time.sleep(0.5)
            after = image.screenshot()
        readout = page.locator(".widget-hslider").filter(has_text="neuron").locator(".widget-readout")
        value = readout.first.inner_text()
        browser.close()
    assert after != before, f"the image did not change after moving the neuron slider (readout {value})"
