"""axe-core, the accessibility engine the dashboard's browser tests inject into a page.

Fetched like the tests' Chromium, by the test tooling and not by the package: the npm
package ``axe-core`` (MPL-2.0, github.com/dequelabs/axe-core) at a pinned version, its
tarball checked against the registry's ``dist.integrity`` (sha512) before anything in it
is used, and its ``axe.min.js`` kept in ``~/.cache/alallo/axe-core-<version>/`` (or
``ALALLO_TEST_AXE``, a path to an ``axe.min.js`` already on disk). Standard library only:
there may be no Node.js on the machine.

    python tests/tools/axe.py     # fetch it now; prints the path
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "4.14.1"
TARBALL = f"https://registry.npmjs.org/axe-core/-/axe-core-{VERSION}.tgz"
INTEGRITY = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
"""``npm view axe-core@4.14.1 dist.integrity``: the tarball's SHA-512, base64."""
VARIABLE = "ALALLO_TEST_AXE"
DOWNLOAD_TIMEOUT_S = 60


def cached() -> Path:
    """Where the script is kept: ``~/.cache/alallo/axe-core-<VERSION>/axe.min.js``."""
    return Path.home() / ".cache" / "alallo" / f"axe-core-{VERSION}" / "axe.min.js"


def ensure() -> Path:
    """The path of ``axe.min.js``: ``ALALLO_TEST_AXE``, else the cached copy, fetched first
    when there is none (one download for every test process: written whole, then renamed).

    Raises:
        RuntimeError: the download failed, or the tarball is not the one pinned.
    """
    if os.environ.get(VARIABLE):
        return Path(os.environ[VARIABLE])
    path = cached()
    if path.is_file():
        return path
    try:
        with urllib.request.urlopen(TARBALL, timeout=DOWNLOAD_TIMEOUT_S) as response:
            tarball = response.read()
    except OSError as error:
        raise RuntimeError(f"could not fetch axe-core {VERSION} from {TARBALL} ({error}); "
                           f"set {VARIABLE} to an axe.min.js") from None
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if digest != INTEGRITY:
        raise RuntimeError(f"{TARBALL} is not axe-core {VERSION}: its sha512 is {digest}, "
                           f"the registry's is {INTEGRITY}")
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
        member = archive.extractfile("package/axe.min.js")
        assert member is not None, "the tarball holds package/axe.min.js"
        script = member.read()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as partial:
        partial.write(script)
    Path(partial.name).chmod(0o644)
    Path(partial.name).replace(path)
    return path


if __name__ == "__main__":
    try:
        print(ensure())
    except RuntimeError as error:
        sys.exit(f"axe-core: {error}")
