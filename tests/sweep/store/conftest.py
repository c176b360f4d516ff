"""Fixtures of the store's tests on an object store: `s3` (a moto S3 server on loopback, from test_storage.py) and
`erring` (the erring proxy in front of it, from erring_s3.py)."""

from tests.sweep.store.erring_s3 import erring  # noqa: F401
from tests.sweep.store.test_storage import s3  # noqa: F401
