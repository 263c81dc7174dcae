"""TFRecord files: a streaming, CRC-checked reader and an atomic writer, without TensorFlow.

A TFRecord file is a plain sequence of records, each framed as::

    uint64 length          little-endian, number of data bytes
    uint32 length_crc      masked_crc32c(the 8 length bytes), little-endian
    bytes  data[length]
    uint32 data_crc        masked_crc32c(data), little-endian

CRC32C is the Castagnoli CRC (``crc32c`` package). TensorFlow stores it "masked" so that a CRC
of data that itself holds CRCs does not look like one::

    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) mod 2**32     (rotate right by 15, add)

The reader holds at most one record in memory: a 1 GB shard is read one record at a time from
an open file, and every record's two CRCs are checked before its data is handed out.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c as _crc32c

from scenefactory.errors import UserError

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_HEADER = struct.Struct("<QI")  # length, masked CRC of the 8 length bytes
_FOOTER = struct.Struct("<I")  # masked CRC of the data
_LENGTH = struct.Struct("<Q")
_GZIP_MAGIC = b"\x1f\x8b"

HEADER_BYTES = _HEADER.size  # 12
FOOTER_BYTES = _FOOTER.size  # 4


class CorruptRecordError(UserError):
    """A TFRecord file that cannot be read: names the file, record index, byte offset and the fault."""


@dataclass(frozen=True)
class Record:
    """One TFRecord record.

    Attributes:
        index: 0-based position of the record in its file.
        offset: byte offset of the record's header (its length field) from the start of the file.
        data: the record's payload (for WOMD scenario files, one serialized ``Scenario``).
    """

    index: int
    offset: int
    data: bytes


def masked_crc32c(data: bytes) -> int:
    """Return TensorFlow's masked CRC32C of ``data`` as an unsigned 32-bit int (see module docstring)."""
    crc = _crc32c.crc32c(data)
    rotated = ((crc >> 15) | (crc << 17)) & _U32
    return (rotated + _MASK_DELTA) & _U32


def iter_records(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Yield the records of the TFRecord file at ``path`` in order, one at a time, both CRCs checked.

    Reads 12 header bytes, then ``length + 4`` bytes per record from an open file, so memory is
    bounded by the largest record, never the file. The file stays open while the generator is
    alive; close the generator (or exhaust it) to release it.

    Raises:
        CorruptRecordError: on a truncated header, a length CRC mismatch, truncated data or a data
            CRC mismatch; the message names the file, the record index and its byte offset. Records
            before the bad one have already been yielded.
        UserError: if the file cannot be opened.
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UserError(f"{path}: cannot open TFRecord file: {exc.strerror or exc}") from exc
    with handle:
        file_size = os.fstat(handle.fileno()).st_size
        index = 0
        offset = 0
        while True:
            header = handle.read(HEADER_BYTES)
            if not header:
                return
            where = f"{path}: record {index} at byte offset {offset}"
            if len(header) < HEADER_BYTES:
                raise CorruptRecordError(
                    f"{where}: truncated header ({len(header)} of {HEADER_BYTES} bytes before end of file)"
                )
            length, length_crc = _HEADER.unpack(header)
            expected = masked_crc32c(header[: _LENGTH.size])
            if length_crc != expected:
                hint = (
                    " (it starts like a gzip file: decompress it first)" if header[:2] == _GZIP_MAGIC else ""
                )
                raise CorruptRecordError(
                    f"{where}: bad length CRC (stored 0x{length_crc:08x}, computed 0x{expected:08x}"
                    f" over length field {length}); the file is corrupt or not a TFRecord file{hint}"
                )
            # Check against the file size before reading, so a bad length never allocates its size.
            available = file_size - offset - HEADER_BYTES
            if available < length + FOOTER_BYTES:
                raise CorruptRecordError(
                    f"{where}: truncated data ({max(available, 0)} of {length} data + {FOOTER_BYTES} CRC"
                    " bytes before end of file)"
                )
            body = handle.read(length + FOOTER_BYTES)
            if len(body) < length + FOOTER_BYTES:  # the file shrank while being read
                raise CorruptRecordError(
                    f"{where}: truncated data ({len(body)} of {length} data + {FOOTER_BYTES} CRC bytes"
                    " before end of file)"
                )
            data = body[:length]
            (data_crc,) = _FOOTER.unpack(body[length:])
            expected = masked_crc32c(data)
            if data_crc != expected:
                raise CorruptRecordError(
                    f"{where}: bad data CRC (stored 0x{data_crc:08x}, computed 0x{expected:08x}"
                    f" over {length} data bytes)"
                )
            yield Record(index=index, offset=offset, data=data)
            index += 1
            offset += HEADER_BYTES + length + FOOTER_BYTES


def encode_record(data: bytes) -> bytes:
    """Return ``data`` framed as one TFRecord record (header, data, data CRC)."""
    length = _LENGTH.pack(len(data))
    return length + _FOOTER.pack(masked_crc32c(length)) + data + _FOOTER.pack(masked_crc32c(data))


def write_records(path: str | os.PathLike[str], records: Iterable[bytes]) -> int:
    """Write ``records`` (one ``bytes`` payload each) as a TFRecord file at ``path``; return the count.

    Atomic: the records go to a temporary file in the same folder, which replaces ``path`` only
    once every record is written and flushed, so a crash or an exception from ``records`` never
    leaves a partial file at ``path``.
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    count = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for data in records:
                out.write(encode_record(bytes(data)))
                count += 1
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp_name, 0o644)  # mkstemp makes it 0600; a written data file is world-readable
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return count
