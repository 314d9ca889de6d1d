"""The ``fleet`` command line: a click group with one thin module per command."""
