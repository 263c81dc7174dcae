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

Two readers share one loop: :func:`iter_records` stops at the first fault (it raises), and
:func:`scan_records` reports each fault and reads on, so one bad record costs that record only.
After a bad data CRC the (CRC-checked) length still says where the next record starts; after a bad
length field or a truncation it resynchronises on the next offset where a header's length CRC and
then the data CRC both match (a false match needs two 32-bit CRCs to agree by chance).
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import crc32c as _crc32c

from scenefactory.errors import UserError

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_HEADER = struct.Struct("<QI")  # length, masked CRC of the 8 length bytes
_FOOTER = struct.Struct("<I")  # masked CRC of the data
_LENGTH = struct.Struct("<Q")
_GZIP_MAGIC = b"\x1f\x8b"
_RESYNC_CHUNK = 1 << 20  # bytes searched per read while resynchronising
_ZERO_HIGH_WORD = b"\x00\x00\x00\x00"  # the top 4 bytes of any length below 4 GiB

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


@dataclass(frozen=True)
class RecordFault:
    """A stretch of a TFRecord file that held no readable record (see :func:`scan_records`).

    Attributes:
        index: the record index the stretch would have had. After a resync the stretch counts as
            one record, so later indices may differ from the writer's; offsets stay exact.
        offset: byte offset where the stretch starts.
        message: names the file, the record index, the byte offset and the fault (and, after a
            resync, where reading resumed).
    """

    index: int
    offset: int
    message: str


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
    for item in scan_records(path, resync=False):
        if isinstance(item, RecordFault):
            raise CorruptRecordError(item.message)
        yield item


def scan_records(path: str | os.PathLike[str], *, resync: bool = True) -> Iterator[Record | RecordFault]:
    """Yield every record of the TFRecord file at ``path`` and a :class:`RecordFault` for each bad stretch.

    Like :func:`iter_records` (same streaming, same checks, same messages), but a fault does not end
    the file: after a bad data CRC reading goes on at the next record (the length was CRC-checked);
    after a bad length CRC or truncated data it resumes at the next valid record found by
    :func:`_resync` (not in a file that starts like gzip: the fault then covers all of it). With
    ``resync=False`` the first fault is the last item.

    Raises:
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
            got = _read_record(handle, path, index, offset, file_size)
            if got is None:
                return
            if isinstance(got, Record):
                yield got
                index += 1
                offset += HEADER_BYTES + len(got.data) + FOOTER_BYTES
                continue
            message, next_offset, searchable = got
            if not resync:
                yield RecordFault(index=index, offset=offset, message=message)
                return
            if next_offset is None:
                next_offset = _resync(handle, offset + 1, file_size) if searchable else None
                message += (
                    f"; skipped {file_size - offset} bytes to the end of the file (no valid record follows)"
                    if next_offset is None
                    else f"; skipped {next_offset - offset} bytes to the next valid record at byte offset"
                    f" {next_offset}"
                )
            yield RecordFault(index=index, offset=offset, message=message)
            if next_offset is None or next_offset >= file_size:
                return
            handle.seek(next_offset)
            index += 1
            offset = next_offset


def _read_record(
    handle: BinaryIO, path: Path, index: int, offset: int, file_size: int
) -> Record | tuple[str, int | None, bool] | None:
    """Read record ``index`` at ``offset``, where the handle is: ``None`` at the end of the file, the
    record, or a fault as ``(message, next record's offset if known, whether a resync may search)``."""
    where = f"{path}: record {index} at byte offset {offset}"
    header = handle.read(HEADER_BYTES)
    if not header:
        return None
    if len(header) < HEADER_BYTES:
        return (
            f"{where}: truncated header ({len(header)} of {HEADER_BYTES} bytes before end of file)",
            None,
            True,
        )
    length, length_crc = _HEADER.unpack(header)
    expected = masked_crc32c(header[: _LENGTH.size])
    if length_crc != expected:
        gzip = header[:2] == _GZIP_MAGIC and offset == 0
        return (
            f"{where}: bad length CRC (stored 0x{length_crc:08x}, computed 0x{expected:08x} over length"
            f" field {length}); the file is corrupt or not a TFRecord file"
            + (" (it starts like a gzip file: decompress it first)" if gzip else ""),
            None,
            not gzip,
        )
    # Checked against the file size before reading, so a bad length never allocates its size.
    available = file_size - offset - HEADER_BYTES
    body = handle.read(length + FOOTER_BYTES) if available >= length + FOOTER_BYTES else b""
    if len(body) < length + FOOTER_BYTES:  # short file, or it shrank while being read
        got = len(body) if body else max(available, 0)
        return (
            f"{where}: truncated data ({got} of {length} data + {FOOTER_BYTES} CRC bytes before end of file)",
            None,
            True,
        )
    data = body[:length]
    (data_crc,) = _FOOTER.unpack(body[length:])
    expected = masked_crc32c(data)
    if data_crc != expected:
        return (
            f"{where}: bad data CRC (stored 0x{data_crc:08x}, computed 0x{expected:08x} over {length}"
            " data bytes)",
            offset + HEADER_BYTES + length + FOOTER_BYTES,
            True,
        )
    return Record(index=index, offset=offset, data=data)


def _resync(handle: BinaryIO, start: int, file_size: int) -> int | None:
    """Offset of the first valid record at or after ``start`` (both CRCs match), or ``None``.

    Searches ``_RESYNC_CHUNK`` bytes at a time, trying only offsets whose length field is below
    4 GiB (its high word is zero), so memory stays bounded by one chunk plus one record.
    """
    chunk_start = start
    while chunk_start + HEADER_BYTES + FOOTER_BYTES <= file_size:
        handle.seek(chunk_start)
        chunk = handle.read(_RESYNC_CHUNK + HEADER_BYTES)
        last = min(_RESYNC_CHUNK, len(chunk) - HEADER_BYTES)  # candidate offsets i in [0, last)
        j = chunk.find(_ZERO_HIGH_WORD, _LENGTH.size // 2)
        while 0 <= j - 4 < last:
            i = j - 4
            length, length_crc = _HEADER.unpack_from(chunk, i)
            at = chunk_start + i
            if (
                length_crc == masked_crc32c(chunk[i : i + _LENGTH.size])
                and at + HEADER_BYTES + length + FOOTER_BYTES <= file_size
            ):
                handle.seek(at + HEADER_BYTES)
                body = handle.read(length + FOOTER_BYTES)
                if len(body) == length + FOOTER_BYTES and _FOOTER.unpack(body[length:])[0] == masked_crc32c(
                    body[:length]
                ):
                    return at
            j = chunk.find(_ZERO_HIGH_WORD, j + 1)
        chunk_start += _RESYNC_CHUNK
    return None


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
