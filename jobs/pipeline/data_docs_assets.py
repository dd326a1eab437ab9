"""The styles and scripts GX's Data Docs templates link from CDNs, as pinned npm packages served from the Data Docs'
own folder (`make data-docs-assets` fetches them; docs/operations.md), and the rewrite of built pages onto them."""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NpmPackage:
    """One npm package at an exact version, its tarball's sha512 (npm's ``integrity``) and the paths taken from it."""

    name: str
    version: str
    integrity: str
    paths: tuple[str, ...]  # files, or folders taken whole (a trailing /); license files are always taken

    @property
    def folder(self) -> str:
        """Where its files live under the assets folder and the site's static/vendor."""
        return f"{self.name}@{self.version}"


BOOTSTRAP = NpmPackage(
    "bootstrap",
    "4.3.1",
    "sha512-rXqOmH1VilAt2DyPzluTi2blhk17bO7ef+zLLPlWvG494pDxcM234pJ8wTc/6R40UWizAIIMgxjvxZg5kmsbag==",
    ("dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js"),
)
JQUERY = NpmPackage(
    "jquery",
    "3.7.1",
    "sha512-m4avr8yL8kmFN8psrbFFFmB/If14iN5o9nw/NgnnM+kybDJpRsAynV2BsfpTYrTRysYUdADVD7CkUUizgkpLfg==",
    ("dist/jquery.min.js",),
)
POPPER = NpmPackage(
    "popper.js",
    "1.12.9",
    "sha512-s0EEi9xiSCdqz9lV4IiVH5yIZnDX/U1t0tCjB+0jXx9jW8lrR7kOpVupiUg175ogqVoudpDXHF1p6dKATCHMeg==",
    ("dist/umd/popper.min.js",),
)
BOOTSTRAP_TABLE = NpmPackage(
    "bootstrap-table",
    "1.19.1",
    "sha512-WvV+l1AI/C+zThaKmfHmi/IuayVNB0qdFyEhFx1jyZhO0oLtNJNANkCR3rvJf6Dkh72dsLElxpE/bzK9seEQLA==",
    (
        "dist/bootstrap-table.min.css",
        "dist/bootstrap-table.min.js",
        "dist/extensions/filter-control/bootstrap-table-filter-control.css",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    ),
)
DATEPICKER = NpmPackage(
    "bootstrap-datepicker",
    "1.9.0",
    "sha512-9rYYbaVOheGYxjOr/+bJCmRPihfy+LkLSg4fIFMT9Od8WwWB/MB50w0JO1eBgKUMbb7PFHQD5uAfI3ArAxZRXA==",
    ("dist/css/bootstrap-datepicker.min.css", "dist/js/bootstrap-datepicker.min.js"),
)
BOOTSTRAP_DARK = NpmPackage(
    "@forevolve/bootstrap-dark",
    "1.1.0",
    "sha512-A3ucpEpxPoTVO490lZZCfjPXxv832l7mm1IxX3bXyxvgwnPGXDLyh7dWrphXKO8YBAu3EswbBEu3VSW8NRMW3A==",
    ("dist/css/bootstrap-prefers-dark.css",),
)
FONTAWESOME = NpmPackage(
    "@fortawesome/fontawesome-free",
    "6.6.0",
    "sha512-60G28ke/sXdtS9KZCpZSHHkCbdsOGEhIUGlwq6yhY74UpTiToIh8np7A8yphhM4BWsvNFtIvLpi4co+h9Mr9Ow==",
    ("css/all.min.css", "webfonts/"),  # all.min.css loads ../webfonts/*
)
# GX links vega@5, vega-lite@5 and vega-embed@6 (whatever is newest); pinned here to the newest of each on 2026-11-27.
VEGA = NpmPackage(
    "vega",
    "5.33.1",
    "sha512-1fArfVDUqVbb5z8n+/nVQb+VNBzx8svY6CrsyTK4Ujm4yrd9I1auoKxBAPXLCavY1LcrbHUskQbGUP8gXOzyQw==",
    ("build/vega.min.js",),
)
VEGA_LITE = NpmPackage(
    "vega-lite",
    "5.23.0",
    "sha512-l4J6+AWE3DIjvovEoHl2LdtCUkfm4zs8Xxx7INwZEAv+XVb6kR6vIN1gt3t2gN2gs/y4DYTs/RPoTeYAuEg6mA==",
    ("build/vega-lite.min.js",),
)
VEGA_EMBED = NpmPackage(
    "vega-embed",
    "6.29.0",
    "sha512-PmlshTLtLFLgWtF/b23T1OwX53AugJ9RZ3qPE2c01VFAbgt3/GSNI/etzA/GzdrkceXFma+FDHNXUppKuM0U6Q==",
    ("build/vega-embed.min.js",),
)
PACKAGES = (
    BOOTSTRAP, JQUERY, POPPER, BOOTSTRAP_TABLE, DATEPICKER, BOOTSTRAP_DARK, FONTAWESOME, VEGA, VEGA_LITE, VEGA_EMBED
)  # fmt: skip

# Every CDN URL in great_expectations 1.x's render/view/templates, and the vendored file serving it (a unit test reads
# the installed templates, so an upgrade linking something new fails there). bootstrap and popper keep GX's SRI
# hashes: the npm files are byte-identical, so the browser still checks them. GX links the filter-control CSS of
# bootstrap-table 1.19.0 beside the 1.19.1 script; 1.19.1's CSS is served for both.
CDN_ASSETS: dict[str, tuple[NpmPackage, str]] = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": (BOOTSTRAP, "dist/css/bootstrap.min.css"),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": (BOOTSTRAP, "dist/js/bootstrap.min.js"),
    "https://code.jquery.com/jquery-3.7.1.min.js": (JQUERY, "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": (POPPER, "dist/umd/popper.min.js"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": (
        BOOTSTRAP_TABLE,
        "dist/bootstrap-table.min.css",
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": (
        BOOTSTRAP_TABLE,
        "dist/bootstrap-table.min.js",
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css": (
        BOOTSTRAP_TABLE,
        "dist/extensions/filter-control/bootstrap-table-filter-control.css",
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css": (
        BOOTSTRAP_TABLE,
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js": (
        BOOTSTRAP_TABLE,
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": (
        DATEPICKER,
        "dist/css/bootstrap-datepicker.min.css",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": (
        DATEPICKER,
        "dist/js/bootstrap-datepicker.min.js",
    ),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": (
        BOOTSTRAP_DARK,
        "dist/css/bootstrap-prefers-dark.css",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": (FONTAWESOME, "css/all.min.css"),
    "https://cdn.jsdelivr.net/npm/vega@5": (VEGA, "build/vega.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": (VEGA_LITE, "build/vega-lite.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": (VEGA_EMBED, "build/vega-embed.min.js"),
}
# GX's logo comes from its web-assets bucket; the same images ship in the site's static/images (GX copies them).
GX_WEB_ASSETS = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
_GX_IMAGES = {"logo-long.png": "logo-long.png", "full_logo_dark.png": "logo-long.png"}  # no dark logo ships
VENDOR = "static/vendor"
STAMP = ".manifest.sha256"

_CDN_URL = re.compile("|".join(re.escape(url) for url in sorted(CDN_ASSETS, key=len, reverse=True)))
_GX_IMAGE_URL = re.compile(re.escape(GX_WEB_ASSETS) + r"([\w.-]+)(\?[^\"')\s]*)?")
# A relative link to the site's static folder: GX's favicon link is one level short on validation pages (a 404).
_STATIC_LINK = re.compile(r"(\b(?:src|href)=\")(?:\./|(?:\.\./)+)static/")
# Whatever third-party script or stylesheet is left (a template this table does not know): dropped, never fetched.
_THIRD_PARTY_TAG = re.compile(
    r"<script\b[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>|<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>", re.I
)


def manifest_digest() -> str:
    """The sha256 naming this exact set of packages and paths: an assets folder is current while its stamp matches."""
    text = "\n".join(f"{p.folder} {p.integrity} {' '.join(p.paths)}" for p in PACKAGES)
    return hashlib.sha256(text.encode()).hexdigest()


def assets_current(folder: Path) -> bool:
    """Whether ``folder`` holds exactly these packages (its stamp, written last by the install, matches)."""
    stamp = folder / STAMP
    return stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == manifest_digest()


def localize(html: str, to_site: str, vendored: bool) -> str:
    """The page with every known CDN URL pointing at its copy under static/vendor (``to_site``: the relative path
    from the page's folder to the site root, e.g. ``../../``) and GX's logo at static/images; with ``vendored`` False
    (assets not installed) those tags are dropped instead. Links into static/ get the page's real depth; any other
    third-party script or stylesheet is dropped."""
    if vendored:
        html = _CDN_URL.sub(lambda m: _vendored(m.group(0), to_site), html)
    html = _STATIC_LINK.sub(lambda m: f"{m.group(1)}{to_site}static/", html)
    html = _GX_IMAGE_URL.sub(lambda m: f"{to_site}static/images/{_GX_IMAGES.get(m.group(1), m.group(1))}", html)
    return _THIRD_PARTY_TAG.sub("", html)


def _vendored(url: str, to_site: str) -> str:
    package, path = CDN_ASSETS[url]
    return f"{to_site}{VENDOR}/{package.folder}/{path}"


def localize_site(site: Path, assets: Path) -> bool:
    """Copy the installed assets into ``site``/static/vendor (unless already current) and rewrite every built page
    onto them; False when no current assets are installed (then the pages lose their CDN tags, unstyled)."""
    vendored = assets_current(assets)
    if vendored and not assets_current(site / VENDOR):
        target = site / VENDOR
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(assets, target, ignore=shutil.ignore_patterns(STAMP))
        (target / STAMP).write_text(manifest_digest(), encoding="utf-8")  # last: a cut copy is redone next build
    elif not vendored:
        log.warning("no Data Docs assets in %s (`make data-docs-assets`): the pages are built unstyled", assets)
    for page in site.rglob("*.html"):
        if page.is_relative_to(site / VENDOR):
            continue
        depth = len(page.relative_to(site).parts) - 1
        text = page.read_text(encoding="utf-8")
        local = localize(text, "../" * depth, vendored)
        if local != text:
            page.write_text(local, encoding="utf-8")
    return vendored
