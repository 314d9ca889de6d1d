"""Helpers the tests of several modules share: spec texts, fake harnesses, control clients.

Imported as ``support.<module>``: ``tests/conftest.py`` puts ``tests/`` on ``sys.path``, so this
package is found from any test folder, in one pytest call or many. Fixtures stay in the
``conftest.py`` of the folder whose tests use them; what a fixture and a test both need lives here.
"""
