"""Read models: what the CLI and the dashboard show, computed once from the store and the
providers (``status``: one fleet now; ``interruptions``: the timeline of every lost node).

Each function returns JSON-ready data; rendering (terminal tables, HTML) is the caller's job,
so ``fleet status --json`` and the dashboard print the same numbers.
"""
