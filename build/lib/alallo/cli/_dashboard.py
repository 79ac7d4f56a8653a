"""``alallo dashboard``: a one-time link that signs a browser in to the dashboard."""

from __future__ import annotations

from alallo.cli._common import ApiKeyOption, UrlOption, console, open_client

__all__ = ["dashboard"]


def dashboard(url: UrlOption = None, api_key: ApiKeyOption = None) -> None:
    """Print a one-time sign-in link to the dashboard (valid for 10 minutes, once)."""
    with open_client(url, api_key) as client:
        link = client.dashboard_link()
    console().print(f"Open the dashboard: {link}", soft_wrap=True)
