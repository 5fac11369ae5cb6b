"""Browser security headers on every response that does not set its own.

The API answers JSON (and `/metrics` text) that no browser should render as a page, sniff as
another type, or show inside a frame: `default-src 'none'` with `frame-ancestors 'none'` is
the policy for such responses. Pages that a browser does render (the Memory page, `/docs`,
`/redoc`) set their own policy, which this middleware leaves as it is.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import Scope

from service.kit.response_headers import ResponseHeadersMiddleware

API_SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


class SecurityHeadersMiddleware(ResponseHeadersMiddleware):
    def set_headers(self, scope: Scope, headers: MutableHeaders) -> None:
        for name, value in API_SECURITY_HEADERS.items():
            if name not in headers:
                headers[name] = value
