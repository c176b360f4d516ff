"""Checksums of the store's Parquet files: a part, a compacted file or a snapshot that parses but whose bytes
changed after they were written (a flipped bit on a disk, a torn copy) is refused by every reader, not read as
a result.

Each file the store writes carries two checks:
- the SHA-256 of its bytes up to the footer (its pages: data, dictionary and their headers), kept in the
  footer's key-value metadata under `stitchsweep.checksum` as `sha256:<bytes covered>:<hex digest>`; the
  store's readers (`Loc.read_parquet`, so `analysis.load`, `report`, `status` and the planner) verify it;
- Parquet's own page checksums (CRC-32 of each page), which other readers can verify too
  (`pq.ParquetFile(path, page_checksum_verification=True)`), and which ours verify as they decode.

A file without the key (written before checksums existed, or by another tool) is read unverified.
"""

from __future__ import annotations

import hashlib
import io

import pyarrow as pa
import pyarrow.parquet as pq

KEY = b"stitchsweep.checksum"


class ChecksumError(ValueError):
    """A Parquet file whose bytes are not those its writer recorded."""


def parquet_bytes(table: pa.Table) -> bytes:
    """`table` as one Parquet file (as `pq.write_table` writes it) with page checksums, and the SHA-256 of its
    bytes before the footer recorded in the footer."""
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema, write_page_checksum=True) as writer:
        writer.write_table(table)
        body = sink.getvalue()  # the pages are written: only the footer is left
        writer.add_key_value_metadata({KEY: f"sha256:{len(body)}:{hashlib.sha256(body).hexdigest()}"})
    return sink.getvalue()


def verified(data: bytes, where: str) -> pq.ParquetFile:
    """The Parquet file `data` (read from `where`), its recorded checksum verified, its pages' CRCs verified as
    they are read. Raises ChecksumError naming `where` when the bytes differ from those written."""
    pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
    recorded = (pf.metadata.metadata or {}).get(KEY)
    if recorded is None:  # written before checksums, or by another tool: nothing to verify
        return pf
    try:
        algorithm, covered, digest = recorded.decode().split(":")
        n = int(covered)
    except ValueError:
        raise ChecksumError(f"{where}: expected a checksum 'sha256:<bytes>:<hex>', found {recorded[:80]!r}") from None
    found = hashlib.sha256(data[:n]).hexdigest() if algorithm == "sha256" and n <= len(data) else None
    if found != digest:
        raise ChecksumError(
            f"{where}: expected bytes whose SHA-256 is {digest[:16]}... (recorded when it was written), found"
            f" {found[:16] + '...' if found else 'a file too short for it'}: the file changed after it was written"
        )
    return pf
