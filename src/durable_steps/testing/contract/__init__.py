"""The store contract suite, shipped: what every store -- built in, or a backend another
package registers -- must pass, run from an installed package against any backend::

    pytest --pyargs durable_steps.testing.contract --durable-backends=sqlite

(``pip install 'durable-steps[testing]'``; the backend's package installed, its
``Backend`` registered under the entry point group ``durable_steps.stores`` with a
``fresh``). Each test runs on the blocking store and on its async twin. ``test_store``
holds the promises of ``Store`` (conditional saves, damaged and newer checkpoints,
run ids, the JSON rules, the size limit, resumption through ``run``); ``test_codec``
checks that the codec reaches the backend's bytes -- a secret written with encryption
on is never there -- and that a wrong key is a ``CodecError``. ``fixtures`` has the
``backend`` fixture and the hooks a backend gives the suite (``docs/stores.md``).
"""
