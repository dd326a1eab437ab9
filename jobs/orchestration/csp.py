"""The Data Docs' Content-Security-Policy, one per page: GX's pages carry inline scripts and onclick handlers, and
each is allowed by its SHA-256 (CSP Level 3; 'unsafe-hashes' for the handlers), so no other inline script runs on
the approval API's origin. Pure: a page's text in, a header value out."""

from __future__ import annotations

import base64
import hashlib
from html.parser import HTMLParser

# Everything but script-src: nothing but this origin may load styles, fonts or frame the pages; GX's style
# attributes keep style-src's 'unsafe-inline' (styles run no code); images may be data: URLs (bootstrap's icons).
_REST = (
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)
STRICT_CSP = f"default-src 'self'; script-src 'self'; {_REST}"


class _InlineCode(HTMLParser):
    """Collects the text of every inline <script> and the value of every on* event handler attribute."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.handlers: list[str] = []
        self._open: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handlers.extend(value or "" for name, value in attrs if name.startswith("on"))
        if tag == "script" and not any(name == "src" for name, _ in attrs):
            self._open = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._open is not None:
            self.scripts.append("".join(self._open))
            self._open = None


def _sha256(code: str) -> str:
    # Browsers hash the text as the DOM holds it: the HTML parser has already turned CR LF and CR into LF.
    normalized = code.replace("\r\n", "\n").replace("\r", "\n")
    return "'sha256-" + base64.b64encode(hashlib.sha256(normalized.encode("utf-8")).digest()).decode("ascii") + "'"


def page_csp(html: str) -> str:
    """The policy for one HTML page: its own inline scripts and handlers by hash, scripts from this origin, nothing
    else."""
    found = _InlineCode()
    found.feed(html)
    found.close()
    hashes = sorted({_sha256(code) for code in (*found.scripts, *found.handlers)})
    sources = ["'self'", *hashes, *(["'unsafe-hashes'"] if found.handlers else [])]
    return f"default-src 'self'; script-src {' '.join(sources)}; {_REST}"
