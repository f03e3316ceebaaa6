"""What a value must be for both stores to hold it as it is: the one place
each rule is written (docs/design.md 3).

Each rule is written once, plainly. Where the plain form was too slow for the
write path, a fast path sits beside it, and tests/unit/test_validation.py
proves the two equal over the values the rule is about (NULs, lone
surrogates, controls, format characters, integers around 2**63); the test
named in each fast path's docstring is the one that fails when it drifts.
The domain values (``contracts.domain``), the event contract
(``contracts.events``) and the adapters call these; none of them restates a
rule.
"""

from __future__ import annotations

import base64
import math
import re
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence

# -- numbers --------------------------------------------------------------------

#: Integers both stores hold: Neo4j's INTEGER and the JSON numbers the
#: pgvector store round-trips are signed 64-bit.
INT64_MIN = -(2**63)
INT64_END = 2**63
#: The largest float32: pgvector stores float32 components and refuses one
#: that would round to infinity, so nothing beyond it is accepted.
FLOAT32_MAX = 3.4028234663852886e38


def fits_int64(value: int) -> bool:
    """Whether ``value`` is a signed 64-bit integer."""
    return INT64_MIN <= value < INT64_END


def check_finite(value: float, where: str) -> None:
    """A float property or metadata value: neither store holds NaN or an infinity."""
    if not math.isfinite(value):
        raise ValueError(f"{where}: {value} is not a finite number")


_PLAIN_NUMBERS = frozenset({float, int, bool})
_FLOATS = frozenset({float})


def finite_numbers(values: tuple[object, ...]) -> bool:
    """Every component an int or float and finite.

    Fast path of the per-component rule, proven equal by
    ``test_finite_numbers_agrees_with_the_per_component_check``. A record is
    built per entity per event, so the common case (plain floats) stays in C.
    When every component is a ``float``, one ``sum`` settles it: adding floats
    never raises, and a NaN or an infinity makes the sum NaN or infinite. A
    non-finite sum of finite floats (it overflowed) goes on to the check per
    component; ints are left to ``isfinite``, which refuses one too large for
    a float."""
    kinds = set(map(type, values))
    if kinds <= _PLAIN_NUMBERS:
        if kinds == _FLOATS and math.isfinite(sum(values)):  # type: ignore[arg-type]
            return True
        return all(map(math.isfinite, values))  # type: ignore[arg-type]
    return all(isinstance(x, int | float) and math.isfinite(x) for x in values)


# -- compact embeddings ---------------------------------------------------------


#: Canonical padded base64 of a whole number of float32s, as a JSON Schema
#: ``pattern`` (ECMA 262) for producers in other languages. Three float32s are
#: 16 characters; four or eight bytes more end in ``==`` or ``=``, after a
#: character whose unused bits are zero. :func:`float32_le_components` accepts
#: exactly what it matches (``test_base64_pattern_is_the_decoder_rule``).
BASE64_PATTERN = (
    r"^(?:[A-Za-z0-9+/]{16})*"
    r"(?:[A-Za-z0-9+/]{5}[AQgw]==|[A-Za-z0-9+/]{10}[AEIMQUYcgkosw048]=)?$"
)


def base64_length(size: int) -> int:
    """The length of the padded base64 text of ``size`` bytes."""
    return 4 * -(-size // 3)


def _float32_le_bytes(text: str, what: str, max_dimension: int) -> bytes:
    """The bytes ``text`` encodes, when it is the canonical padded standard
    base64 (RFC 4648 section 4) of 1 to ``max_dimension`` float32s."""
    if len(text) > base64_length(4 * max_dimension):
        raise ValueError(
            f"{what} is {len(text)} characters, more than {max_dimension} float32 "
            f"components take ({base64_length(4 * max_dimension)})"
        )
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or a character beyond ASCII
        raise ValueError(
            f"{what} is not base64 (the standard alphabet A-Z a-z 0-9 + /, "
            "padded with '=' to a multiple of 4 characters, no whitespace)"
        ) from None
    # b64decode ignores the unused bits of the last character and some
    # excess padding: two spellings of one vector would sign and hash
    # differently, so only the one base64 itself writes is accepted.
    if base64.b64encode(raw) != text.encode("ascii"):
        raise ValueError(f"{what} is not canonical base64 (wrong padding or unused bits set)")
    if not raw:
        raise ValueError(f"{what} must not be empty (omit it instead)")
    if len(raw) % 4:
        raise ValueError(
            f"{what} decodes to {len(raw)} bytes, not a whole number of float32s (a multiple of 4)"
        )
    return raw


def _refuse_non_finite(values: Sequence[float], raw: bytes, what: str) -> None:
    index = next(i for i, x in enumerate(values) if not math.isfinite(x))
    bits = raw[4 * index : 4 * index + 4][::-1].hex()
    raise ValueError(
        f"{what}: component {index} is {values[index]} (bits 0x{bits}); "
        "every component must be finite"
    )


def float32_le_components(text: str, what: str, max_dimension: int) -> list[float]:
    """The components ``text`` encodes: canonical padded base64 of 1 to
    ``max_dimension`` little-endian IEEE 754 float32s, every one finite (no
    NaN of any bit pattern, no infinity). Each comes back as the ``float``
    equal to it (widening is exact), so the stores receive exactly the list
    a JSON ``embedding`` of those values gives. Raises ``ValueError``.

    Fast path of :func:`float32_le_components_reference`, proven equal by
    ``test_float32_components_agree_with_the_reference``: ``array`` converts
    in C, and one ``sum`` settles finiteness, as in :func:`finite_numbers`.
    It cannot overflow here: a finite float32 is at most :data:`FLOAT32_MAX`,
    and a float holds the sum of 10**269 of them."""
    raw = _float32_le_bytes(text, what, max_dimension)
    vector = array("f", raw)
    if sys.byteorder != "little":
        vector.byteswap()
    values = vector.tolist()
    if not math.isfinite(sum(values)):
        _refuse_non_finite(values, raw, what)
    return values


def float32_le_components_reference(text: str, what: str, max_dimension: int) -> list[float]:
    """:func:`float32_le_components`, plainly: one ``struct`` unpack, one
    check per component."""
    raw = _float32_le_bytes(text, what, max_dimension)
    values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if not all(math.isfinite(x) for x in values):
        _refuse_non_finite(values, raw, what)
    return values


def float32_le_base64(values: Sequence[float]) -> str:
    """The text :func:`float32_le_components` reads back: each component
    rounded to the nearest float32 (what pgvector stores), little-endian,
    base64. Components beyond float32's range are the caller's to refuse."""
    vector = array("f", values)
    if sys.byteorder != "little":
        vector.byteswap()
    return base64.b64encode(vector.tobytes()).decode("ascii")


# -- text -----------------------------------------------------------------------


def storable_text(value: str) -> bool:
    """Whether both stores can hold ``value``: no NUL (Postgres ``text`` and
    ``jsonb`` refuse it) and no lone surrogate (UTF-8, which both speak,
    cannot encode one; ``str.encode`` refuses exactly those)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_storable_text(value: str, what: str, *, say_not_unicode: bool = True) -> str:
    """:func:`storable_text`, raising ``ValueError`` that names what broke it.

    Metadata refusals have always been worded without "(not valid Unicode)"
    (``say_not_unicode=False``), and a caller may match on a message."""
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL byte")
    if not storable_text(value):
        note = " (not valid Unicode)" if say_not_unicode else ""
        raise ValueError(f"{what} contains a lone surrogate{note}")
    return value


# -- ids ------------------------------------------------------------------------

MAX_ID_LENGTH = 256
#: What an entity, document or edge id may not contain: C0 controls (NUL
#: included), DEL and lone surrogates, so every id is storable text that
#: prints as what it is.
FORBIDDEN_ID_CHARACTER = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def check_id_text(value: str, what: str) -> str:
    """Entity, document and edge-type ids: non-empty, bounded, no control
    characters (:data:`FORBIDDEN_ID_CHARACTER`).

    Fast path: ids are checked several times per entity per event, and
    ``isprintable()`` is a faster C scan, true for most ids; a printable
    string holds none of the forbidden characters (they are Cc or Cs).
    Proven by ``test_id_checks_agree_with_their_plain_rules``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{what} is longer than {MAX_ID_LENGTH} characters")
    if not str.isprintable(value) and FORBIDDEN_ID_CHARACTER.search(value):
        raise ValueError(f"{what} contains a NUL, control character or lone surrogate")
    return value


#: What an id in an *event* (docs/events.md) may not contain: every
#: character that renders as nothing or reorders text, so that two ids that
#: look the same are the same. That is the categories Cc (controls, C1
#: included), Cf (format: zero-width characters, bidi embeddings, overrides
#: and isolates, soft hyphen, BOM, tags), Cs (lone surrogates), Zl and Zp
#: (line and paragraph separators), and the Default_Ignorable_Code_Point
#: property (Hangul fillers, combining grapheme joiner, variation selectors,
#: and the code points Unicode reserves as ignorable). Written out rather than
#: computed, so importing costs nothing; tests/unit/test_validation.py
#: recomputes it from unicodedata and fails when Python's Unicode database
#: adds a character to one of them.
INVISIBLE_ID_CHARACTER = re.compile(
    r"[\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    r"\u08e2\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e"
    r"\u2060-\u206f\u3164\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    r"\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    r"\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def check_event_id_text(value: str, what: str) -> str:
    """The ids an event carries (entity, document, edge endpoint, canonical,
    absorbed and restored ids): :func:`check_id_text`, and no invisible
    character (:data:`INVISIBLE_ID_CHARACTER`) and no whitespace at either
    end, so that ``acme`` and ``acme\\u200b`` or ``acme `` are never two
    entities that look like one. Stricter than the domain values, which keep
    accepting what the stores already hold.

    Fast path: printable ASCII holds none of the invisible characters, so
    most ids end after two C scans. Proven by
    ``test_id_checks_agree_with_their_plain_rules``."""
    check_id_text(value, what)
    if value.isascii() and value.isprintable():
        if value[0] == " " or value[-1] == " ":
            raise ValueError(f"{what} starts or ends with whitespace")
        return value
    found = INVISIBLE_ID_CHARACTER.search(value)
    if found:
        raise ValueError(
            f"{what} contains the invisible or format character "
            f"U+{ord(found.group()):04X}; ids must be visible text"
        )
    if value[0].isspace() or value[-1].isspace():
        raise ValueError(f"{what} starts or ends with whitespace")
    return value


# -- properties -----------------------------------------------------------------

#: Property keys become Neo4j property names (behind a prefix) and JSON keys.
PROPERTY_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: Edge and entity types become Neo4j relationship types and labels
#: (docs/adr/0004-neo4j-graph-store.md): a simple alphabet that needs no quoting.
TYPE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
MAX_STRING_LENGTH = 8192
MAX_LIST_LENGTH = 1024


def check_string(value: str, where: str) -> None:
    """A string property value, entity name or alias reason: storable text of
    at most :data:`MAX_STRING_LENGTH` characters."""
    check_storable_text(value, f"{where}: string")
    if len(value) > MAX_STRING_LENGTH:
        raise ValueError(f"{where}: string longer than {MAX_STRING_LENGTH} characters")


def _check_scalar(value: object, where: str) -> type:
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        if not fits_int64(value):
            raise ValueError(f"{where}: integer {value} does not fit in 64 bits")
        return int
    if isinstance(value, float):
        check_finite(value, where)
        return float
    if isinstance(value, str):
        check_string(value, where)
        return str
    raise ValueError(
        f"{where}: {type(value).__name__} is not a storable value "
        "(use a string, number, boolean or a list of one of those)"
    )


def check_property_value(value: object, where: str) -> None:
    """Raise ``ValueError`` unless both stores can hold ``value`` as it is."""
    if isinstance(value, list):
        if len(value) > MAX_LIST_LENGTH:
            raise ValueError(f"{where}: list longer than {MAX_LIST_LENGTH} items")
        kinds = {_check_scalar(item, where) for item in value}
        if len(kinds) > 1:
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise ValueError(f"{where}: list mixes {names}; lists must be homogeneous")
        return
    _check_scalar(value, where)


class Matched:
    """Whether a string fully matches ``pattern``, remembering up to ``limit``
    of those that did: a worker checks an entity type, an edge type and every
    property key of each entity and edge, a few names recur across millions of
    them, and a set lookup costs a quarter of the match. Only exact ``str``
    instances are remembered (a subclass could hash and compare otherwise),
    and only strings that matched: a refused one is matched again each time."""

    __slots__ = ("limit", "pattern", "seen")

    def __init__(self, pattern: re.Pattern[str], limit: int = 10_000) -> None:
        self.pattern = pattern
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, value: object) -> bool:
        if type(value) is str:
            if value in self.seen:
                return True
            if self.pattern.fullmatch(value) is None:
                return False
            if len(self.seen) < self.limit:
                self.seen.add(value)
            return True
        return isinstance(value, str) and self.pattern.fullmatch(value) is not None


_property_key = Matched(PROPERTY_KEY_PATTERN)
_type_name = Matched(TYPE_PATTERN)


def check_property_key(key: object, where: str) -> None:
    """A property key matches :data:`PROPERTY_KEY_PATTERN` (keys become
    property and column names in the stores)."""
    if not _property_key(key):
        raise ValueError(f"{where}: property key {key!r} must match {PROPERTY_KEY_PATTERN.pattern}")


def check_query_vector(vector: Sequence[float], where: str) -> None:
    """A search vector: every component an int or float and finite."""
    if not finite_numbers(tuple(vector)):
        raise ValueError(f"{where}: the query vector has a non-finite component")


def check_properties(properties: Mapping[str, object], where: str) -> None:
    """Every key matches :data:`PROPERTY_KEY_PATTERN` and every value passes
    :func:`check_property_value`.

    Fast path: numbers and booleans, most property values, pass without a
    call (properties are checked per entity and edge, twice per event); only
    exact types take it, so a subclass meets the full check. Proven by
    ``test_property_checks_refuse_what_they_refused``."""
    for key, value in properties.items():
        check_property_key(key, where)
        if type(value) is float:
            if math.isfinite(value):
                continue
        elif type(value) is int:
            if fits_int64(value):
                continue
        elif type(value) is bool:
            continue
        check_property_value(value, f"{where}.{key}")


def check_type_name(value: str, what: str) -> str:
    if not _type_name(value):
        raise ValueError(f"{what} {value!r} must match {TYPE_PATTERN.pattern}")
    return value


# -- vector metadata ------------------------------------------------------------

MAX_METADATA_DEPTH = 32


def check_metadata_value(value: object, where: str, depth: int = 0) -> None:
    """Raise ``ValueError`` unless ``value`` is JSON that reads back unchanged
    from every store: None, bool, int, finite float, str, list or str-keyed dict
    (no tuples, which would come back as lists). Its text is storable, so that
    every adapter agrees on which records are legal."""
    if depth > MAX_METADATA_DEPTH:
        raise ValueError(f"{where}: nested deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        check_finite(value, where)
        return
    if isinstance(value, str):
        check_storable_text(value, f"{where}: string", say_not_unicode=False)
        return
    if isinstance(value, list):
        for item in value:
            check_metadata_value(item, where, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a string")
            check_storable_text(key, f"{where}: string", say_not_unicode=False)
            check_metadata_value(item, f"{where}.{key}", depth + 1)
        return
    raise ValueError(f"{where}: {type(value).__name__} is not JSON metadata")


_TEXT = frozenset({str})


def check_metadata(metadata: object, where: str) -> None:
    """:func:`check_metadata_value`, with a fast path for the common shape, a
    flat dict of exact strings (what the vector fold writes): one type set and
    one :func:`storable_text` over all its text instead of a call per string.
    Joining cannot hide a NUL or make a surrogate pair of two lone halves
    (a ``str`` keeps code points apart). Proven by
    ``test_metadata_fast_path_refuses_what_the_full_check_refuses``."""
    if type(metadata) is dict:
        texts = [*metadata, *metadata.values()]
        if set(map(type, texts)) == _TEXT and storable_text("".join(texts)):
            return
    check_metadata_value(metadata, where)
