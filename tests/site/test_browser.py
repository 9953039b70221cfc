"""In a real browser (Playwright driving Debian's chromium, or $RT_CHROMIUM, in headless mode, no
browser download):

- notebook 13's neuron explorer in JupyterLab, the notebook run with a tiny training profile
  injected by papermill: moving the neuron slider must change the rendered image;
- the companion site (rt_lib.site.pages) built from the committed notebooks: it opens with no console
  error and no request outside its folder, every page shows every figure of its notebook, and
  the kernel-free explorers (rt_lib.plots.static_explorers) of notebooks 01, 02 and 13 change their picture when
  a slider moves, and the formulas of a page are typeset by the site's own MathJax copy.

Where Chromium is absent these tests are skipped with the reason in the summary (``run_tests.sh``
installs Debian's package where it can: ``scripts/setup_browser.sh``); with RT_REQUIRE_BROWSER=1
(set by CI, ``.ci/run``) they fail instead."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rt_lib.runtime.io import available_notebooks
from rt_lib.site.pages import CHROMIUM_ARGS, build_site, chromium

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = chromium()  # $RT_CHROMIUM, else chromium on the PATH; None: none here
TINY = {"train_params": {"p": 7, "epochs": 40, "eval_points": 4, "n_snapshots": 4, "d_model": 16,
                         "n_heads": 2, "threads": 1},
        "n_neurons": 2}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _need_browser() -> None:
    """Skip (fail under RT_REQUIRE_BROWSER=1, as in CI) where Chromium or Playwright is missing."""
    reason = None
    if CHROMIUM is None:
        reason = ("Chromium not found ($RT_CHROMIUM, or chromium on the PATH): install Debian's "
                  "chromium package "
                  "(scripts/setup_browser.sh does, as root) or set RT_CHROMIUM to run the browser tests")
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed (requirements.txt)"
    if reason and os.environ.get("RT_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + " (RT_REQUIRE_BROWSER=1: required here)")
    if reason:
        pytest.skip(reason)


def _fold_injected_parameters(path: Path) -> None:
    """Move papermill's injected-parameters cell into the parameters cell, and clear the recorded
    outputs and execution counts: an input prompt "[1]" then means this run has started."""
    book = json.loads(path.read_text())
    cells = book["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    tags = [cell.get("metadata", {}).get("tags", []) for cell in cells]
    param = next(i for i, t in enumerate(tags) if "parameters" in t)
    injected = next(i for i, t in enumerate(tags) if "injected-parameters" in t)
    defaults, tiny = ("".join(cells[i]["source"]) for i in (param, injected))
    cells[param]["source"] = defaults.rstrip("\n") + "\n\n" + tiny
    del cells[injected]
    path.write_text(json.dumps(book))


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server over tmp_path holding notebook 13 with the tiny profile injected."""
    _need_browser()
    import papermill

    papermill.execute_notebook(str(ROOT / "notebooks" / "13_miiii_neurons.ipynb"),
                               str(tmp_path / "13.ipynb"), parameters=TINY, prepare_only=True,
                               kernel_name="python3")
    _fold_injected_parameters(tmp_path / "13.ipynb")
    # JupyterLab's own settings, not the user's: every cell attached to the page (windowing off),
    # so Run All and the prompts read back do not depend on which cells are near the viewport
    settings = tmp_path / "lab-settings"
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), "rt-companion-test"
    env = os.environ | {"RT_RESULTS": str(tmp_path / "results"), "TQDM_DISABLE": "1",
                        "JUPYTERLAB_SETTINGS_DIR": str(settings),
                        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces")}
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


def _accept_kernel_dialog(page) -> None:
    """If JupyterLab asks which kernel to start, take the one it proposes (python3).  It asks at
    times, under load and here even without (seen in CI: the dialog sat over a notebook that
    never ran); the caller clicks Run All again if the run does not go on."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    dialog = page.locator(".jp-Dialog").filter(has_text="Select Kernel")
    if not dialog.count():
        return
    dialog.locator("button.jp-mod-accept").first.click()
    try:
        dialog.first.wait_for(state="detached", timeout=10_000)
    except PlaywrightTimeout:
        pass


def _settled(image, deadline_s: float = 60) -> bytes:
    """The element's screenshot once two in a row agree (it has finished drawing)."""
    deadline = time.monotonic() + deadline_s
    last = image.screenshot()
    while time.monotonic() < deadline:
        now = image.screenshot()
        if now == last:
            return now
        last = now
    pytest.fail(f"the image kept changing for {deadline_s:g} s before the slider moved")


def _ready(page, n_code: int, timeout_s: float = 180) -> None:
    """Wait until JupyterLab shows every code cell of the notebook and its kernel idle in the status
    bar, both for two seconds on end.  The notebook's own idle indicator comes earlier, while the
    notebook is half drawn and before the kernel has started: Run All Cells clicked then ran nothing
    (seen here, often)."""
    kernel_idle = page.locator(".jp-StatusBar-Widget").filter(has_text="| Idle")
    since, deadline = None, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _accept_kernel_dialog(page)
        if page.locator(".jp-Notebook .jp-CodeCell").count() != n_code or not kernel_idle.count():
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= 2:
            return
        time.sleep(0.25)
    pytest.fail(f"JupyterLab did not show the notebook's {n_code} code cells with an idle kernel "
                f"within {timeout_s:g} s")


def _run_until_image(page, image, timeout_s: float = 240, stalled_s: float = 15) -> str:
    """Wait for the widget's image after Run All Cells: "image" once it exists, "stopped" when for
    stalled_s no cell has been queued or running and some are still unrun (a run that did not start,
    or stopped part way: seen in CI after the first cell), "timeout" after timeout_s."""
    since, deadline = None, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if image.count():
            return "image"
        _accept_kernel_dialog(page)
        prompts = [p.strip() for p in page.locator(".jp-InputPrompt").all_inner_texts()]
        if "[*]:" in prompts or "[ ]:" not in prompts:
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= stalled_s:
            return "stopped"
        time.sleep(0.5)
    return "timeout"


def _kernel_log(path: Path) -> list[str]:
    """The JupyterLab server's lines about kernels (started, restarted, died, shut down)."""
    return [line.strip()[-200:] for line in path.read_text().splitlines()
            if re.search(r"kernel", line, re.IGNORECASE) and not re.search("Adapting|Control-C", line)]


def test_neuron_slider_changes_the_rendered_image(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    book = json.loads((tmp_path / "13.ipynb").read_text())
    n_code = sum(cell["cell_type"] == "code" for cell in book["cells"])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(lab)
        image = page.locator("img.widget-image").first
        outcomes = []
        # Run All Cells up to three times: JupyterLab itself at times drops a run (see the helpers);
        # a notebook that fails fails every time, and the message below shows its outputs.
        while len(outcomes) < 3 and "image" not in outcomes:
            _ready(page, n_code)
            page.locator("#jp-MainMenu").get_by_text("Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            outcomes.append(_run_until_image(page, image))
            if outcomes[-1] == "timeout":
                break
        if "image" not in outcomes:  # say what the notebook shows instead
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            prompts = page.locator(".jp-InputPrompt").all_inner_texts()
            dialogs = page.locator(".jp-Dialog").all_inner_texts()
            page.screenshot(path=str(tmp_path / "lab.png"), full_page=True)
            browser.close()
            pytest.fail(f"no widget image after Run All Cells ({', '.join(outcomes)}); input prompts "
                        f"{[p.strip() for p in prompts]}; dialogs open: {dialogs}; last outputs: "
                        + " | ".join(o.strip()[-400:] for o in outputs[-4:])
                        + "; the server's kernel log: " + " | ".join(_kernel_log(tmp_path / "lab.log")))
        # JupyterLab renders only the cells near the viewport: the image exists, bring it into view
        # before looking at it.
        image.scroll_into_view_if_needed()
        image.wait_for(state="visible", timeout=30_000)
        page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                               arg=image.element_handle(), timeout=60_000)  # decoded, not blank
        before = _settled(image)
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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site of the committed notebooks (the CPU profile's recorded runs); with
    RT_TEST_SITE_OF=<a profile's results root> (e.g. results), the site ./run_all.sh built there,
    checked against the notebooks that run executed."""
    _need_browser()
    built = os.environ.get("RT_TEST_SITE_OF")
    if built:
        root = Path(built).resolve()
        books = {name: root / name / f"{name}.ipynb" for name in available_notebooks()
                 if (root / name / f"{name}.ipynb").is_file()}
        if not (root / "site" / "index.html").is_file():
            pytest.fail(f"RT_TEST_SITE_OF={built}: no site/index.html there (./run_all.sh builds it)")
        return root / "site" / "index.html", books
    root = tmp_path_factory.mktemp("results")
    books = available_notebooks()
    for name, path in books.items():
        (root / name).mkdir()
        (root / name / f"{name}.ipynb").write_bytes(path.read_bytes())
    return build_site(root, "cpu", list(books)), books


def _figures(path: Path) -> int:
    """Images a rendered notebook must show: its PNG outputs and one per kernel-free explorer."""
    count = 0
    for cell in json.loads(path.read_text())["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            count += "image/png" in data
            count += "".join(data.get("text/html", [])).count('class="rt-explorer"')
    return count


def _browser(pw):
    return pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


def _watch(page) -> list[str]:
    """Console errors, uncaught exceptions and requests outside the site's files."""
    problems = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"exception: {e}"))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:"))
            else problems.append(f"request: {r.url}"))
    return problems


def test_the_site_opens_cleanly_and_every_page_shows_its_figures(site):
    from playwright.sync_api import sync_playwright

    index, books = site
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page()
        problems = _watch(page)
        page.goto(index.as_uri())
        links = page.locator("table.rt-pages a").evaluate_all("els => els.map(e => e.href)")
        assert len(links) == len(books)
        shown = {}
        for link in links:
            page.goto(link)
            page.wait_for_load_state("load")
            name = link.rsplit("/", 1)[-1].removesuffix(".html")
            images = page.locator("img").evaluate_all(
                "els => els.map(e => e.complete && e.naturalWidth > 0)")
            shown[name] = (sum(images), len(images), _figures(books[name]))
        browser.close()
    assert not problems, problems[:10]
    for name, (loaded, total, expected) in shown.items():
        assert loaded == total == expected, (name, loaded, total, expected)


@pytest.mark.parametrize("name", ["01_modular_addition", "02_needle_in_a_haystack",
                                  "13_miiii_neurons"])
def test_a_kernel_free_explorer_changes_its_picture_when_a_slider_moves(site, name):
    from playwright.sync_api import sync_playwright

    index, _ = site
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page()
        problems = _watch(page)
        page.goto((index.parent / f"{name}.html").as_uri())
        explorer = page.locator(".rt-explorer").first
        image = explorer.locator("img.rt-frame")
        before = image.get_attribute("src")
        slider = explorer.locator('input[type="range"]').first
        slider.focus()
        slider.press("ArrowRight")
        after = image.get_attribute("src")
        label = explorer.locator("[data-rt-label]").first.inner_text()
        browser.close()
    assert not problems, problems
    assert after != before, f"{name}: the picture did not change (slider label {label})"


MIIII = r"$T_\text{miiii}$"  # a formula of notebooks 11, 12, 14 and 15's markdown


def test_a_pages_formulas_are_typeset_by_the_sites_own_mathjax_with_nothing_fetched(site):
    from playwright.sync_api import sync_playwright

    index, books = site
    name = next((n for n, path in books.items()
                 if any(c["cell_type"] == "markdown" and MIIII in "".join(c["source"])
                        for c in json.loads(Path(path).read_text())["cells"])), None)
    if name is None:
        pytest.skip(f"no notebook of this site has {MIIII} in its markdown")
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page()
        problems = _watch(page)
        fetched = []  # anything from the network is refused, and named here
        page.route(re.compile(r"^https?://"),
                   lambda route: (fetched.append(route.request.url), route.abort()))
        page.goto((index.parent / f"{name}.html").as_uri())
        # MathJax's first pass over the page is over once its startup promise resolves
        typeset = page.evaluate("() => MathJax.startup.promise.then("
                                "() => document.querySelectorAll('mjx-container').length)")
        miiii = page.locator("mjx-container", has_text="miiii").count()
        errors = page.locator("mjx-merror").all_inner_texts()
        text = page.locator("body").inner_text()
        browser.close()
    assert not fetched and not problems, (fetched, problems)
    assert typeset > 0 and miiii > 0, (name, typeset, miiii)
    assert MIIII not in text, f"{name}: {MIIII} is still shown as TeX"
    assert not errors, (name, errors)


def test_the_readmes_picture_is_the_sites_first_screen(site, tmp_path):
    """rt_lib.site.pages.picture (what a full run redraws docs/site_claims.png with): the
    window's size, in a palette of 64 colours, and that window holds the title and the claims
    table's head (found independently, by their boxes in the same window)."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    from rt_lib.site.pages import picture

    index, _ = site
    png = picture(index, tmp_path / "claims.png", width=1200, height=800)
    with Image.open(png) as image:
        assert image.size == (1200, 800)
        assert image.mode == "P" and len(image.getcolors()) <= 64
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(index.resolve().as_uri())
        title = page.locator("h1").first.bounding_box()
        head = page.locator("table.rt-claims thead").bounding_box()
        browser.close()
    assert title["y"] + title["height"] < 800 and head["y"] + head["height"] < 800
    assert not list(tmp_path.glob(".*"))  # written atomically: no temporary left
