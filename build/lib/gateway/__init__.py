"""gateway: the HTTP face of alallo (REST, Server-Sent Events), on Starlette.

``build_app(runtime)`` is the ASGI app; ``serve(runtime, host=..., port=...)``
runs it under Hypercorn's trio worker; ``SignIn`` makes the dashboard's
one-time sign-in links.
"""

from ._signin import SignIn as SignIn
from .app import build_app as build_app
from .server import serve as serve

__all__ = ["SignIn", "build_app", "serve"]
