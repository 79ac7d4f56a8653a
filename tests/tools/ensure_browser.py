"""The Chromium the dashboard's tests drive: find one, or install one.

    python tests/tools/ensure_browser.py -- COMMAND [ARG ...]

prints one line on stderr saying which Chromium (``browser: PATH (WHERE FROM; VERSION)``),
and one saying where axe-core is (``axe-core: PATH (VERSION)``, fetched first when it is not
there: tests/tools/axe.py), and runs COMMAND in its place with ``ALALLO_TEST_CHROMIUM`` and
``ALALLO_TEST_AXE`` set to them. The first that applies:

1. ``ALALLO_TEST_CHROMIUM`` is set: that executable.
2. Playwright's own Chromium, already downloaded or downloaded now
   (``playwright install chromium``, DOWNLOAD_TIMEOUT_S at most; on a closed network it
   fails within seconds).
3. ``chromium`` or ``chromium-browser`` on PATH (Debian's package: /usr/bin/chromium).
4. As root where apt-get is: Debian's package, ``apt-get install -y chromium``, then 3.

``ALALLO_TEST_BROWSER_INSTALL=0`` turns off the download and apt-get: only a browser
already there is taken. With none, the line says what to install, and the exit status is 1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CHROMIUM_VARIABLE = "ALALLO_TEST_CHROMIUM"
INSTALL_VARIABLE = "ALALLO_TEST_BROWSER_INSTALL"
DOWNLOAD_TIMEOUT_S = 120
"""How long Playwright's download of its Chromium may take (s)."""
APT_TIMEOUT_S = 600
"""How long ``apt-get update`` and ``apt-get install chromium`` may take, each (s)."""
NAMES = ("chromium", "chromium-browser")
"""What a system's Chromium is called on PATH."""
ADVICE = (f"install Debian's package (apt-get install chromium), let Playwright download "
          f"its own (.venv/bin/playwright install chromium), or set {CHROMIUM_VARIABLE} to a "
          "Chromium executable")


class NoBrowser(Exception):
    """No usable Chromium; the message says why."""


@dataclass(frozen=True)
class Browser:
    """A Chromium executable and where it comes from (``"on PATH"``, ...)."""

    path: str
    source: str


def playwright_chromium() -> Path:
    """Where Playwright keeps its own Chromium (it may not be downloaded)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        return Path(playwright.chromium.executable_path)


def download_playwright_chromium() -> bool:
    """``playwright install chromium`` within DOWNLOAD_TIMEOUT_S; True when it succeeded."""
    # In a group of its own: a timeout stops the Node.js driver it starts too.
    process = subprocess.Popen([sys.executable, "-m", "playwright", "install", "chromium"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        return process.wait(timeout=DOWNLOAD_TIMEOUT_S) == 0
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False


def on_path(path: str | None) -> str | None:
    """The first of NAMES found on ``path`` (a PATH string), or None."""
    for name in NAMES:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def apt_install() -> None:
    """``apt-get update`` and ``apt-get install -y chromium``; raises NoBrowser with apt's
    last lines when either fails."""
    print("browser: installing Debian's chromium with apt-get (a minute or two) ...",
          file=sys.stderr, flush=True)
    # dpkg and its maintainer scripts need the system's folders, whatever PATH this has.
    path = os.pathsep.join(filter(None, [os.environ.get("PATH"), "/usr/sbin:/usr/bin:/sbin:/bin"]))
    env = {**os.environ, "PATH": path, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  stdin=subprocess.DEVNULL, timeout=APT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise NoBrowser(f"{' '.join(command)} took over {APT_TIMEOUT_S} s") from None
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise NoBrowser(f"{' '.join(command)} failed ({done.returncode}):\n{tail}")


def find(environ: dict[str, str], *, install: bool | None = None) -> Browser:
    """The Chromium to use (see the module's docstring for the order).

    ``install`` (default: unless ``ALALLO_TEST_BROWSER_INSTALL=0``) allows the download and
    apt-get. Raises NoBrowser when there is none.
    """
    named = environ.get(CHROMIUM_VARIABLE)
    if named:
        if not os.access(named, os.X_OK):
            raise NoBrowser(f"{CHROMIUM_VARIABLE}={named} is not an executable")
        return Browser(named, CHROMIUM_VARIABLE)
    if install is None:
        install = environ.get(INSTALL_VARIABLE, "1") != "0"
    playwright = playwright_chromium()
    if playwright.exists():
        return Browser(str(playwright), "Playwright's")
    if install and download_playwright_chromium() and playwright.exists():
        return Browser(str(playwright), "Playwright's, downloaded now")
    system = on_path(environ.get("PATH"))
    if system:
        return Browser(system, "on PATH")
    if install and os.geteuid() == 0 and shutil.which("apt-get", path=environ.get("PATH")):
        apt_install()
        system = on_path(environ.get("PATH")) or on_path("/usr/bin")  # where Debian puts it
        if system:
            return Browser(system, "Debian's chromium, installed now with apt-get")
    raise NoBrowser("no Chromium found")


def version(browser: Browser) -> str:
    """What ``--version`` prints (``"Chromium 156.0.8078.73 built on Debian ..."``).

    Raises NoBrowser when it does not run."""
    try:
        done = subprocess.run([browser.path, "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NoBrowser(f"{browser.path} does not run: {error}") from None
    if done.returncode != 0:
        raise NoBrowser(f"{browser.path} --version failed ({done.returncode}): "
                        f"{done.stderr.strip()}")
    return done.stdout.strip()


def main(argv: list[str]) -> int:
    import axe  # beside this script, which runs as ``python tests/tools/ensure_browser.py``

    if not argv or argv[0] != "--" or len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        browser = find(dict(os.environ))
        line = f"browser: {browser.path} ({browser.source}; {version(browser)})"
    except NoBrowser as error:
        print(f"browser: {error}. The dashboard's tests need Chromium: {ADVICE}.",
              file=sys.stderr)
        return 1
    print(line, file=sys.stderr, flush=True)
    try:  # what the browser tests inject to check accessibility (tests/tools/axe.py)
        checker = axe.ensure()
    except RuntimeError as error:
        print(f"axe-core: {error}", file=sys.stderr)
        return 1
    print(f"axe-core: {checker} ({axe.VERSION})", file=sys.stderr, flush=True)
    os.execvpe(argv[1], argv[1:], {**os.environ, CHROMIUM_VARIABLE: browser.path,
                                   axe.VARIABLE: str(checker)})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
