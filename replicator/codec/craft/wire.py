"""Craft primitive readers: uvarints, delta chunks, size tables, the term dictionary.

Each takes (buf, pos, end) and returns (value(s), new pos); `end` bounds the region being parsed,
never the whole buffer, so a field cannot read into its neighbour. Every count is checked against
the bytes that remain before anything is allocated.
"""

from __future__ import annotations

from typing import Final

from replicator.codec.craft.common import _I64_MAX, _I64_MIN, _wrap_i64
from replicator.errors import DecodeError

# --------------------------------------------------------------------------------------------
# Primitive readers. Each takes (buf, pos, end) and returns (value(s), new pos); `end` bounds
# the region being parsed, never the whole buffer, so a field cannot read into its neighbour.
# Everything Craft stores outside values is a run of uvarints. Most are one byte, so runs are
# read by locating multi-byte varints in `marks` (buf translated to 1 = continuation byte, else 0)
# with C-level `find` and copying the single-byte stretches between them wholesale.

MARKS: Final = bytes(0 if i < 0x80 else 1 for i in range(256))


def uvarint(buf: bytes, p: int, end: int, what: str) -> tuple[int, int]:
    """LEB128 uvarint as Go's binary.Uvarint: at most 10 bytes, the 10th at most 1."""
    x = 0
    shift = 0
    for b in buf[p : end if end - p < 10 else p + 10]:
        if b < 0x80:
            if shift == 63 and b > 1:
                raise DecodeError(f"{what}: uvarint overflows 64 bits", offset=p)
            return x | (b << shift), p + 1 + shift // 7
        x |= (b & 0x7F) << shift
        shift += 7
    if shift == 70:
        raise DecodeError(f"{what}: uvarint longer than 10 bytes", offset=p)
    raise DecodeError(f"{what}: truncated uvarint", offset=p)


def uvarints(buf: bytes, marks: bytes, p: int, end: int, n: int, what: str) -> tuple[list[int], int]:
    """n consecutive uvarints starting at p."""
    out: list[int] = []
    while True:
        q = p + n
        if q > end:  # every element needs at least one byte: a huge count cannot allocate
            raise DecodeError(f"{what}: {n} more elements do not fit in {end - p} bytes", offset=p)
        j = marks.find(1, p, q)
        if j < 0:
            out += buf[p:q]
            return out, q
        if j > p:
            out += buf[p:j]
            n -= j - p
        if j + 1 < end and buf[j + 1] < 0x80:
            out.append((buf[j] & 0x7F) | (buf[j + 1] << 7))
            p = j + 2
        else:
            v, p = uvarint(buf, j, end, what)
            out.append(v)
        n -= 1
        if n == 0:
            return out, p


def _uvarints_to(buf: bytes, marks: bytes, p: int, end: int, what: str) -> list[int]:
    """All uvarints of the region [p, end), which must end exactly on a varint boundary."""
    out: list[int] = []
    while p < end:
        j = marks.find(1, p, end)
        if j < 0:
            out += buf[p:end]
            break
        out += buf[p:j]
        v, p = uvarint(buf, j, end, what)
        out.append(v)
    return out


def delta_zigzag(raw: list[int]) -> list[int]:
    """Delta varint chunk from its raw uvarints: zigzag, then prefix sums in int64 (Go wraps)."""
    out: list[int] = []
    append = out.append
    acc = 0
    for u in raw:
        acc += (u >> 1) ^ -(u & 1)
        if not _I64_MIN <= acc <= _I64_MAX:
            acc = _wrap_i64(acc)
        append(acc)
    return out


def reversed_uvarint(buf: bytes, floor: int) -> tuple[int, int]:
    """The trailing size-tables length: a uvarint stored back to front; returns (value, bytes)."""
    p = len(buf) - 1
    x = 0
    shift = 0
    i = 0
    while p >= floor:
        b = buf[p]
        if b < 0x80:
            if i == 9 and b > 1:
                raise DecodeError("size-tables length overflows 64 bits", offset=p)
            return x | (b << shift), i + 1
        if i == 9:
            raise DecodeError("size-tables length longer than 10 bytes", offset=p)
        x |= (b & 0x7F) << shift
        shift += 7
        i += 1
        p -= 1
    raise DecodeError("truncated size-tables length at the end of the message", offset=floor)


def decode_size_tables(buf: bytes, p: int, end: int) -> list[list[int]]:
    """Each table: element count, then a delta varint chunk (the region is all uvarints).

    Sizes are summed without Go's int64 wraparound: a real size never comes near 2**63, and any
    value that is not a plausible size is rejected by the callers' range checks anyway.
    """
    tables: list[list[int]] = []
    while p < end:
        n = buf[p]
        if n < 0x80:
            p += 1
        else:
            n, p = uvarint(buf, p, end, "size table element count")
        if n == 0 or n > end - p:  # the reference cannot write an empty delta chunk
            raise DecodeError(f"size table {len(tables)}: bad element count {n}", offset=p)
        table: list[int] = []
        append = table.append
        acc = 0
        for _ in range(n):
            b = buf[p] if p < end else 0x80
            if b < 0x80:
                p += 1
            elif p + 1 < end and buf[p + 1] < 0x80:
                b = (b & 0x7F) | (buf[p + 1] << 7)
                p += 2
            else:
                b, p = uvarint(buf, p, end, "size table element")
            acc += (b >> 1) ^ -(b & 1)
            append(acc)
        tables.append(table)
    return tables


# Consecutive messages of one table carry byte-identical term dictionaries: memoize the decoded
# terms by content (bounded in entry size and count, so it cannot grow with hostile input).
_TERMS_CACHE: dict[bytes, list[str]] = {}
TERMS_CACHE_ENTRIES: Final = 256
TERMS_CACHE_MAX_BYTES: Final = 4096


def cached_term_dictionaries() -> list[bytes]:
    """The term dictionaries memoized now (their wire bytes): what the bounds above keep small."""
    return list(_TERMS_CACHE)


def decode_terms(buf: bytes, marks: bytes, p: int, end: int) -> list[str]:
    """The term dictionary: a uvarint count, the lengths as a uvarint chunk, then the UTF-8 terms."""
    key = buf[p:end]
    terms = _TERMS_CACHE.get(key)
    if terms is not None:
        return terms
    start = p
    n, p = uvarint(buf, p, end, "term dictionary count")
    lengths, p = uvarints(buf, marks, p, end, n, "term dictionary lengths") if n else ([], p)
    terms = []
    append = terms.append
    for i, ln in enumerate(lengths):
        q = p + ln
        if q > end:
            raise DecodeError(f"term {i} ({ln} bytes) overruns the term dictionary", offset=p)
        try:
            append(buf[p:q].decode())
        except UnicodeDecodeError:
            raise DecodeError(f"term {i} is not valid UTF-8", offset=p) from None
        p = q
    if p != end:
        raise DecodeError(f"{end - p} stray bytes after the term dictionary", offset=p)
    if end - start <= TERMS_CACHE_MAX_BYTES:
        if len(_TERMS_CACHE) >= TERMS_CACHE_ENTRIES:
            _TERMS_CACHE.clear()
        _TERMS_CACHE[key] = terms
    return terms


def _nullable_term(ident: int, terms: list[str], offset: int, what: str) -> str:
    """Header schema/table id: -1 = null (read as ""), otherwise an index into the dictionary."""
    if 0 <= ident < len(terms):
        return terms[ident]
    if ident == -1:
        return ""
    raise DecodeError(f"{what}: term id {ident} outside the dictionary of {len(terms)}", offset=offset)
