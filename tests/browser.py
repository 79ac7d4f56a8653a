"""Debian's Chromium, as the dashboard's tests drive it through Playwright."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 30_000
"""How long a page waits for what a test expects (ms)."""
