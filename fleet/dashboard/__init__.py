"""``fleet dashboard``: a read-only web page over the state store (stdlib ``http.server``).

``server`` serves it; ``pages`` renders HTML from the read models in :mod:`fleet.views` (the
same data ``fleet status --json`` and ``fleet history --json`` print); ``charts`` draws the
inline SVG charts server-side. Nothing here writes to a provider; the only writes are the
ones ``fleet status`` itself makes (reconciling the record with what runs).
"""
