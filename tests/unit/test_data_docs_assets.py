"""The Data Docs' CDN assets: every one GX's templates link has a pinned npm copy, built pages point at the copies
(at the page's depth), and anything unknown from another origin is dropped rather than fetched."""

from __future__ import annotations

import re
from pathlib import Path

import great_expectations

from jobs.pipeline.data_docs_assets import (
    CDN_ASSETS,
    PACKAGES,
    STAMP,
    VENDOR,
    assets_current,
    localize,
    localize_site,
    manifest_digest,
)

TEMPLATES = Path(great_expectations.__file__).parent / "render" / "view" / "templates"
_LINKED = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(https?://[^\"]+)\"")


def test_every_cdn_asset_the_installed_gx_templates_link_has_a_pinned_copy() -> None:
    linked = {url for t in TEMPLATES.glob("*.j2") for url in _LINKED.findall(t.read_text(encoding="utf-8"))}
    assert len(linked) >= 15, linked  # the templates were read
    assert linked <= set(CDN_ASSETS), linked - set(CDN_ASSETS)
    for package, path in CDN_ASSETS.values():
        assert package in PACKAGES and any(path == p or (p.endswith("/") and path.startswith(p)) for p in package.paths)
        assert package.integrity.startswith("sha512-") and re.fullmatch(r"\d+\.\d+\.\d+", package.version), package


def test_a_page_points_at_the_vendored_copies_at_its_depth_and_drops_other_origins() -> None:
    page = (
        '<link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>'
        '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>'
        '<link rel="shortcut icon" href="../../../static/images/favicon.ico"/>'
        '<img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=20261127">'
        '<script src="https://cdn.example.org/tracker.js"></script><a href="https://greatexpectations.io">GX</a>'
    )
    local = localize(page, "../../../../", vendored=True)
    assert 'href="../../../../static/vendor/bootstrap@4.3.1/dist/css/bootstrap.min.css"' in local
    assert 'src="../../../../static/vendor/vega@5.33.1/build/vega.min.js"' in local
    assert 'href="../../../../static/images/favicon.ico"' in local  # GX's link is one level short
    assert 'src="../../../../static/images/logo-long.png"' in local
    assert "tracker.js" not in local and 'href="https://greatexpectations.io"' in local  # a link is not a fetch
    unstyled = localize(page, "", vendored=False)
    assert not re.search(r"<(script|link)[^>]*(src|href)=\"https?://", unstyled) and "vendor" not in unstyled


def test_a_site_gets_the_assets_copied_once_and_its_pages_rewritten(tmp_path: Path) -> None:
    assets, site = tmp_path / "assets", tmp_path / "site"
    (assets / "jquery@3.7.1" / "dist").mkdir(parents=True)
    (assets / "jquery@3.7.1" / "dist" / "jquery.min.js").write_text("/* jquery */", encoding="utf-8")
    (site / "validations" / "s1").mkdir(parents=True)
    page = site / "validations" / "s1" / "run.html"
    page.write_text('<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>', encoding="utf-8")
    assert not localize_site(site, assets)  # no stamp: not installed, the tag is dropped
    assert "<script" not in page.read_text(encoding="utf-8") and not (site / VENDOR).exists()

    page.write_text('<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>', encoding="utf-8")
    (assets / STAMP).write_text(manifest_digest() + "\n", encoding="utf-8")
    assert localize_site(site, assets) and assets_current(site / VENDOR)
    assert (
        page.read_text(encoding="utf-8")
        == '<script src="../../static/vendor/jquery@3.7.1/dist/jquery.min.js"></script>'
    )
    assert (page.parent / "../../static/vendor/jquery@3.7.1/dist/jquery.min.js").resolve().is_file()
