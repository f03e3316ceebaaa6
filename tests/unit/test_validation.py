"""Each fast path in ``contracts.validation`` decides exactly what its plain
rule decides, with the same error: the plain rules are written out here as
the code had them before any fast path, and hypothesis draws the values the
rules turn on.

A generator that cannot draw the value a rule is about does not fail; the
properties over it go quiet (``st.text()`` never draws a lone surrogate). So
the strategies are pinned from the outside too
(``TestTheStrategiesReachWhatTheRulesAreAbout``)."""

from __future__ import annotations

import base64
import functools
import math
import re
import struct
import unicodedata
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from contracts.validation import (
    BASE64_PATTERN,
    FORBIDDEN_ID_CHARACTER,
    INT64_END,
    INT64_MIN,
    INVISIBLE_ID_CHARACTER,
    MAX_ID_LENGTH,
    PROPERTY_KEY_PATTERN,
    TYPE_PATTERN,
    Matched,
    check_event_id_text,
    check_id_text,
    check_metadata,
    check_metadata_value,
    check_properties,
    check_property_value,
    check_storable_text,
    finite_numbers,
    fits_int64,
    float32_le_base64,
    float32_le_components,
    float32_le_components_reference,
    storable_text,
)

# -- the plain rules -------------------------------------------------------------

INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
#: Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt), which
#: unicodedata does not expose.
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
]  # fmt: skip
IGNORABLE = frozenset(c for low, high in DEFAULT_IGNORABLE for c in range(low, high + 1))


def is_lone_surrogate(c: str) -> bool:
    return 0xD800 <= ord(c) <= 0xDFFF


def plain_storable(value: str) -> bool:
    return not any(c == "\x00" or is_lone_surrogate(c) for c in value)


def plain_check_storable(value: str, what: str, say_not_unicode: bool = True) -> str:
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL byte")
    if any(map(is_lone_surrogate, value)):
        note = " (not valid Unicode)" if say_not_unicode else ""
        raise ValueError(f"{what} contains a lone surrogate{note}")
    return value


def plain_fits_int64(value: int) -> bool:
    return -(2**63) <= value <= 2**63 - 1


def old_forbidden(c: str) -> bool:
    return ord(c) < 0x20 or ord(c) == 0x7F or is_lone_surrogate(c)


def plain_check_id_text(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{what} is longer than {MAX_ID_LENGTH} characters")
    if any(map(old_forbidden, value)):
        raise ValueError(f"{what} contains a NUL, control character or lone surrogate")
    return value


def is_invisible(c: str) -> bool:
    return ord(c) in IGNORABLE or unicodedata.category(c) in INVISIBLE_CATEGORIES


def plain_check_event_id_text(value: str, what: str) -> str:
    plain_check_id_text(value, what)
    invisible = [c for c in value if is_invisible(c)]
    if invisible:
        raise ValueError(
            f"{what} contains the invisible or format character "
            f"U+{ord(invisible[0]):04X}; ids must be visible text"
        )
    if value.strip() != value:
        raise ValueError(f"{what} starts or ends with whitespace")
    return value


def old_finite_numbers(values: tuple[object, ...]) -> bool:
    if set(map(type, values)) <= frozenset({float, int, bool}):
        return all(map(math.isfinite, values))  # type: ignore[arg-type]
    return all(isinstance(x, int | float) and math.isfinite(x) for x in values)


def old_check_properties(properties: dict[Any, Any], where: str) -> None:
    for key, value in properties.items():
        if not isinstance(key, str) or not PROPERTY_KEY_PATTERN.fullmatch(key):
            raise ValueError(
                f"{where}: property key {key!r} must match {PROPERTY_KEY_PATTERN.pattern}"
            )
        check_property_value(value, f"{where}.{key}")


def outcome(call: Any, *args: Any, **kwargs: Any) -> tuple[object, ...]:
    try:
        result = call(*args, **kwargs)
    except Exception as exc:  # any error is an outcome to compare
        return ("error", type(exc), str(exc))
    return ("ok", repr(result))


# -- values ---------------------------------------------------------------------


class Real(float):
    pass


class Whole(int):
    pass


class Text(str):
    pass


#: Characters the text rules treat specially and that no category below
#: reliably reaches: default-ignorable letters and marks (Hangul fillers,
#: variation selectors, the combining grapheme joiner), a tag, the spaces the
#: ASCII fast paths compare with, and the ends of the code space.
SPECIAL_CHARACTERS = [
    "\x00", " ", "\t", "\x7f", "\x85", "\xa0", "\xad", "\u034f", "\u115f", "\u3164",
    "\ufe0f", "\uffa0", "\u200b", "\u2028", "\u2029", "\u202e", "\u3000", "\ufeff",
    "\ud800", "\udbff", "\udc00", "\udfff", "\U000e0001", "\U0010ffff", "é", "東",
]  # fmt: skip
characters = st.one_of(
    st.sampled_from(SPECIAL_CHARACTERS),
    st.characters(categories=["Cc"]),  # C0 (NUL, tab, newline), DEL, C1
    st.characters(categories=["Cf"]),  # zero-width, bidi, BOM, tags
    st.characters(categories=["Cs"]),  # lone surrogates: st.text() never draws one
    st.characters(categories=["Zs", "Zl", "Zp"]),
    st.characters(exclude_categories=[]),  # any code point at all
)
#: The common case every fast path is for: printable ASCII.
ascii_texts = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8)
# Joined from a list: st.text() over this alphabet merges it into one
# character class and drops the surrogates and separators again.
texts = st.one_of(ascii_texts, st.lists(characters, max_size=8).map("".join))
ids = st.one_of(
    texts,
    ascii_texts.map(lambda t: f" {t}"),
    ascii_texts.map(lambda t: f"{t} "),
    st.sampled_from(["", "e", "x" * MAX_ID_LENGTH, "x" * (MAX_ID_LENGTH + 1)]),
)
INT64_EDGES = [INT64_MIN - 1, INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_END - 1, INT64_END]
integers = st.one_of(
    st.sampled_from(INT64_EDGES),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(INT64_EDGES).map(Whole),
)

FLOAT_OVERFLOW = 2**1024 - 2**970  # float() of it raises OverflowError
odd_numbers = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        -0.0,
        1.7976931348623157e308,
        5e-324,
        True,
        False,
        FLOAT_OVERFLOW,
        -FLOAT_OVERFLOW,
        Real(0.5),
        Real(math.nan),
        Whole(2**64),
        Fraction(1, 3),
        Decimal("0.5"),
        "0.5",
        None,
    ]
)
components = st.one_of(
    st.floats(),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1.0, max_value=1.0),
    integers,
    odd_numbers,
)
json_values = st.recursive(
    st.none() | st.booleans() | integers | st.floats() | texts | texts.map(Text),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(texts | st.integers(), inner, max_size=3)
    ),
    max_leaves=6,
)
metadata = st.one_of(
    st.dictionaries(texts, texts, max_size=4),
    st.dictionaries(texts | texts.map(Text) | st.integers(), json_values, max_size=3),
    st.lists(texts, max_size=2),
    st.just({}),
)
property_values = st.one_of(
    components,
    texts,
    texts.map(Text),
    st.lists(components | texts, max_size=3),
    st.dictionaries(texts, texts, max_size=1),
)


# -- text the stores can hold ---------------------------------------------------


def test_storable_text_refuses_exactly_nul_and_lone_surrogates() -> None:
    every = [chr(c) for c in range(0x110000)]
    assert [c for c in every if not storable_text(c)] == ["\x00"] + [
        chr(c) for c in range(0xD800, 0xE000)
    ]
    with pytest.raises(ValueError, match=r"^producer contains a lone surrogate \(not valid"):
        check_storable_text("p\udc80", "producer")
    with pytest.raises(ValueError, match=r"^m: string contains a lone surrogate$"):
        check_storable_text("p\udc80", "m: string", say_not_unicode=False)


@given(value=texts, say_not_unicode=st.booleans())
@example(value="a\x00\ud800", say_not_unicode=True)
@example(value="\udfff", say_not_unicode=False)
def test_storable_text_is_the_plain_rule(value: str, say_not_unicode: bool) -> None:
    assert storable_text(value) == plain_storable(value)
    assert outcome(check_storable_text, value, "t", say_not_unicode=say_not_unicode) == outcome(
        plain_check_storable, value, "t", say_not_unicode
    )


# -- 64-bit integers --------------------------------------------------------------


@given(value=integers)
def test_fits_int64_is_the_plain_rule(value: int) -> None:
    assert fits_int64(value) == plain_fits_int64(value)


# -- ids ------------------------------------------------------------------------


def test_id_text_fast_path_agrees_with_the_character_class() -> None:
    every = [chr(c) for c in range(0x110000)]
    refused = {c for c in every if FORBIDDEN_ID_CHARACTER.search(c)}
    assert refused == {c for c in every if old_forbidden(c)}
    # check_id_text skips the search for printable text: it must hold none.
    assert not any(c.isprintable() for c in refused)
    for c in [*sorted(refused)[::7], "\x00", "\x7f", "\udfff"]:
        with pytest.raises(ValueError, match="contains a NUL, control character or lone surrogate"):
            check_id_text(f"id{c}x", "entity id")
    assert check_id_text("é\u00a0\u2028\ue000\U0010ffff x", "entity id")


def test_event_ids_refuse_exactly_the_invisible_characters() -> None:
    """The written-out class is Cc, Cf, Cs, Zl, Zp and Default_Ignorable_Code_Point
    as this Python's Unicode database has them: when an upgrade adds one, this
    fails and the class is regenerated."""
    expected = {c for c in range(0x110000) if is_invisible(chr(c))}
    found = {c for c in range(0x110000) if INVISIBLE_ID_CHARACTER.search(chr(c))}
    assert found == expected
    # The ASCII shortcut of check_event_id_text: printable ASCII holds none.
    assert not any(INVISIBLE_ID_CHARACTER.search(chr(c)) for c in range(0x20, 0x7F))
    for c in sorted(expected)[::11]:
        # C0, DEL and surrogates are refused by check_id_text already.
        with pytest.raises(ValueError, match=f"U\\+{c:04X}|control character"):
            check_event_id_text(f"acme{chr(c)}x", "entity id")
    for text in (" acme", "acme ", "acme\u00a0", "\u3000acme", " "):
        with pytest.raises(ValueError, match=r"whitespace|U\+"):
            check_event_id_text(text, "entity id")
    assert check_event_id_text("é a\u00a0b\ue000\U0010ffff x", "entity id")


@pytest.mark.parametrize(
    ("check", "plain"),
    [(check_id_text, plain_check_id_text), (check_event_id_text, plain_check_event_id_text)],
)
@given(value=ids)
@example(value="a\x00")
@example(value="\udc80")
@example(value="\x85")
@example(value=" acme")
@example(value="acme\u00a0")
@example(value="acme\u200b")
@example(value="\u3164")
def test_id_checks_agree_with_their_plain_rules(check: Any, plain: Any, value: str) -> None:
    assert outcome(check, value, "entity id") == outcome(plain, value, "entity id")


# -- numbers, properties, metadata ----------------------------------------------


@given(vector=st.lists(components, max_size=6))
@example(vector=[1e308, 1e308])  # finite, but the sum overflows
@example(vector=[FLOAT_OVERFLOW, -FLOAT_OVERFLOW])  # cancel out in a sum
@example(vector=[math.nan, FLOAT_OVERFLOW])
@example(vector=[Fraction(1, 2), 0.5])  # sums to a float
@example(vector=[math.inf, -math.inf])
def test_finite_numbers_agrees_with_the_per_component_check(vector: list[Any]) -> None:
    values = tuple(vector)
    assert outcome(finite_numbers, values) == outcome(old_finite_numbers, values)


@given(
    properties=st.dictionaries(
        st.sampled_from(["a", "b_1", "_c", "bad key", "9", ""]) | texts | st.integers(),
        property_values,
        max_size=4,
    )
)
@example(properties={"a": 2**63})
@example(properties={"a": -(2**63) - 1})
@example(properties={"a": Whole(2**63)})
@example(properties={"a": math.nan, "bad key": 1})
@example(properties={"a": Real(math.inf)})
@example(properties={"a": FLOAT_OVERFLOW})
@example(properties={"a": "b\ud800"})
def test_property_checks_refuse_what_they_refused(properties: dict[Any, Any]) -> None:
    assert outcome(check_properties, properties, "p") == outcome(
        old_check_properties, properties, "p"
    )


class _Loose(str):
    """A string that claims to equal every string and hashes like ``"a"``."""

    def __hash__(self) -> int:
        return hash("a")

    def __eq__(self, other: object) -> bool:
        return True


names = st.one_of(
    st.sampled_from(["a", "A1", "b_1", "_c", "WORKS_AT", "bad key", "9", "", "a\n", "x" * 65]),
    texts,
    st.sampled_from(["a", "bad key", "9"]).map(_Loose),
)


@given(values=st.lists(names, max_size=12), limit=st.integers(0, 3))
def test_matched_names_agree_with_the_pattern_however_often_they_recur(
    values: list[str], limit: int
) -> None:
    for pattern in (PROPERTY_KEY_PATTERN, TYPE_PATTERN):
        matched = Matched(pattern, limit)
        for value in values + values:  # the second time, from what was remembered
            assert matched(value) == (pattern.fullmatch(value) is not None), value
        assert len(matched.seen) <= limit
        assert all(type(v) is str and pattern.fullmatch(v) for v in matched.seen)


def test_a_refused_name_is_never_remembered_and_a_subclass_never_is() -> None:
    matched = Matched(TYPE_PATTERN)
    assert matched("Person") and matched("Person")
    assert not matched("bad key") and not matched("bad key")
    loose = _Loose("Person")
    assert matched(loose) and not matched(_Loose("9"))
    assert matched.seen == {"Person"}


@given(metadata=metadata)
@example(metadata={"a": "\x00"})
@example(metadata={"\udfff": "a"})
@example(metadata={"a": "b", "c": "\ud800"})
@example(metadata={"a": "b", 1: "c"})
@example(metadata={"\ud800": "\udc00"})  # joined, still two lone halves
def test_metadata_fast_path_refuses_what_the_full_check_refuses(metadata: Any) -> None:
    assert outcome(check_metadata, metadata, "m") == outcome(check_metadata_value, metadata, "m")


# -- compact embeddings -----------------------------------------------------------

#: float32 bit patterns: any, and the ones the finiteness rule is about (every
#: NaN, quiet or signalling, of either sign; both infinities; the largest
#: finite; the smallest subnormal; minus zero).
float32_bits = (
    st.integers(0, 2**32 - 1)
    | st.sampled_from([0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000000])
    | st.integers(0x7F800001, 0x7FFFFFFF)
    | st.integers(0xFF800001, 0xFFFFFFFF)
)
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: Texts near base64: whole encodings of any byte length, and the alphabet
#: with padding, whitespace and a character beyond ASCII mixed in.
near_base64 = st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()) | st.text(
    B64_ALPHABET + "= \né-_", max_size=40
)


def float32s(bits: list[int]) -> str:
    return base64.b64encode(struct.pack(f"<{len(bits)}I", *bits)).decode()


@given(text=st.lists(float32_bits, max_size=12).map(float32s) | near_base64)
@example(text=float32s([0x7FC00000]))
@example(text=float32s([0x3F800000, 0xFF800001]))
@example(text=float32s([0x7F7FFFFF] * 12))  # the largest sum there is
@example(text="AAAAAB==")  # unused bits set
@example(text="AAAAAA=")  # short of its padding
@example(text="AAAAAA===")
@example(text="AAA")
def test_float32_components_agree_with_the_reference(text: str) -> None:
    for dimension in (2, 4096):
        assert outcome(float32_le_components, text, "e", dimension) == outcome(
            float32_le_components_reference, text, "e", dimension
        )


@given(text=st.lists(float32_bits, max_size=12).map(float32s) | near_base64)
@example(text="")
@example(text="AAAAAB==")
@example(text="AAAAAAAAAAC=")
def test_base64_pattern_is_the_decoder_rule(text: str) -> None:
    """The exported schema's pattern matches exactly the texts the decoder
    takes apart (finiteness aside, which no pattern can say)."""
    result = outcome(float32_le_components_reference, text, "e", 4096)
    decodes = result[0] == "ok" or "finite" in str(result[2])
    assert decodes == (bool(re.fullmatch(BASE64_PATTERN, text)) and text != "")


@given(bits=st.lists(float32_bits, min_size=1, max_size=12))
def test_float32_components_are_the_float32_values_widened(bits: list[int]) -> None:
    values = list(struct.unpack(f"<{len(bits)}f", struct.pack(f"<{len(bits)}I", *bits)))
    if all(map(math.isfinite, values)):
        decoded = float32_le_components(float32s(bits), "e", 4096)
        assert [struct.pack("<d", x) for x in decoded] == [struct.pack("<d", x) for x in values]
        assert float32_le_base64(decoded) == float32s(bits)  # and back, bit for bit
    else:
        with pytest.raises(ValueError, match="must be finite"):
            float32_le_components(float32s(bits), "e", 4096)


def test_a_compact_embedding_is_refused_beyond_the_dimension() -> None:
    assert len(float32_le_components(float32s([0] * 3), "e", 3)) == 3
    with pytest.raises(ValueError, match="more than 2 float32 components"):
        float32_le_components(float32s([0] * 3), "e", 2)


# -- the strategies reach what the rules are about --------------------------------


#: Draws for the guards below; derandomized, so that a guard never passes or
#: fails by luck.
DRAWING = settings(
    max_examples=500,
    database=None,
    derandomize=True,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@functools.cache
def _draw(name: str) -> tuple[Any, ...]:
    drawn: list[Any] = []

    @DRAWING
    @given({"texts": texts, "ids": ids, "integers": integers}[name])
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return tuple(drawn)


class TestTheStrategiesReachWhatTheRulesAreAbout:
    """The properties above prove nothing about a character or a number their
    strategy never draws."""

    def test_texts_hold_every_kind_of_character_a_rule_turns_on(self) -> None:
        drawn = _draw("texts")
        seen = {c for text in drawn for c in text}
        categories = {unicodedata.category(c) for c in seen}
        assert "\x00" in seen
        assert any(map(is_lone_surrogate, seen))
        assert {"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"} <= categories
        assert any(0x80 <= ord(c) <= 0x9F for c in seen), "no C1 control"
        assert any(ord(c) > 0xFFFF for c in seen), "nothing beyond the BMP"
        ignorable = {c for low, high in DEFAULT_IGNORABLE for c in range(low, high + 1)}
        assert any(ord(c) in ignorable and unicodedata.category(c) != "Cf" for c in seen), (
            "no default-ignorable character outside Cf"
        )

    def test_texts_fall_on_both_sides_of_every_rule(self) -> None:
        drawn = _draw("texts")
        assert any(storable_text(t) for t in drawn) and not all(storable_text(t) for t in drawn)
        nonempty_ascii = [t for t in drawn if t and t.isascii() and t.isprintable()]
        assert nonempty_ascii, "the fast paths' own case is never drawn"
        assert any(t and not t.isprintable() and storable_text(t) for t in drawn)

    def test_ids_reach_each_refusal_and_acceptance(self) -> None:
        outcomes = [outcome(check_event_id_text, value, "id") for value in _draw("ids")]
        reasons = {"non-empty", "longer than", "NUL, control", "invisible or format", "whitespace"}
        reached = {r for o in outcomes if o[0] == "error" for r in reasons if r in str(o[2])}
        assert reached == reasons
        assert any(o[0] == "ok" for o in outcomes)

    def test_integers_reach_both_sides_of_the_64_bit_edges(self) -> None:
        drawn = set(_draw("integers"))
        assert set(INT64_EDGES) <= drawn
        assert any(type(n) is Whole and not fits_int64(n) for n in _draw("integers"))
