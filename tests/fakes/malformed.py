"""The "malformed 200" fault every fake in tests/fakes can serve on its list/describe calls.

Providers are untrusted: an answer with HTTP 200 whose body cannot be read (a gateway or a proxy
in the path cut it short or replaced it) must be an error in the adapter, never "no instances".
A fake serves one of these variants instead of its real answer while the fault lasts:

* ``truncated``: the real body cut in the middle (a connection closed early);
* ``html``: a gateway's HTML error page, served as ``text/html`` with status 200 (as CDNs and
  captive portals do);
* ``empty``: ``{}``: well-formed JSON with none of the answer's fields;
* ``wrong-types``: the answer's shape with wrong types (each fake gives its own: a mapping where
  a list belongs, a string where a structure does).

Each fake's docstring names its control lever; the bodies come from :func:`body`, pending faults
(``{"target", "variant", "count"}``) are taken with :func:`take`.
"""

from __future__ import annotations

VARIANTS = ("truncated", "html", "empty", "wrong-types")

GATEWAY_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
    b"<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"
)


def body(variant: str, real: bytes, wrong_types: bytes, content_type: str) -> tuple[bytes, str]:
    """The (body, content type) a fake sends for ``variant``; ``real`` is the answer it would
    have sent, ``wrong_types`` its vendor's shape with wrong types. ValueError for an unknown variant."""
    if variant == "truncated":
        return real[: max(1, len(real) // 2)], content_type
    if variant == "html":
        return GATEWAY_PAGE, "text/html"
    if variant == "empty":
        return b"{}", content_type
    if variant == "wrong-types":
        return wrong_types, content_type
    raise ValueError(f"unknown malformed variant {variant!r}: use one of {', '.join(VARIANTS)}")


def take(faults: list[dict], target: str) -> str | None:
    """The variant of the first pending fault on ``target`` (its count goes down by one); None if none.
    The caller holds its fake's lock."""
    for fault in faults:
        if fault["count"] > 0 and fault["target"] == target:
            fault["count"] -= 1
            return str(fault["variant"])
    return None
