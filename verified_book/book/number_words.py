"""Numbers in words, as a reader reads them: which phrases are figures, and the value each states.

The unbound-number scanner (`verified_book.book.bindings`) finds them with `WORD_NUMBER`; a binding's title
gives the value a phrase states, and `binding_hint` says how to write that binding.
"""

from __future__ import annotations

import re

# Numbers in words. A figure in words is one of: a cardinal from two up, alone or in a
# compound ("twenty-five", "two hundred and fifty-six", "ten billion"), or joined by a hyphen
# to the noun it counts ("eight-bit", "two-layer"); "a dozen"; a fraction ("half", "a quarter",
# "nine tenths"); a multiple ("twice", "doubles", "fourfold"). "One" is left out on its own (it
# is an article and a pronoun far more often than a count) but counts inside a compound
# ("twenty-one"), before a scale ("one hundred", "one billion") and before a unit the book
# measures in (`COUNTED`: "one byte", "one-bit", "one CPU core"). Ordinals other than fractions
# ("second", "first") are not quantities, and neither are plural magnitudes ("tens to hundreds
# of gigabytes", "thousands of cores", "a few dozen lines"), which name no value. Each match is
# one phrase: "four to ten" is two, "four" and "ten".
_UNITS = (
    "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    "sixteen|seventeen|eighteen|nineteen"
)
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
_SCALES = "hundred|thousand|million|billion|trillion"
#: the units the book counts in, before which "one" is a figure ("one byte", "one CPU core", "one-bit")
COUNTED = (
    "bits?|bytes?|tokens?|flops?|layers?|elements?|weights?|parameters?|rows?|columns?|blocks?|"
    r"cores?|cpu(?:\s+cores?)?|gpus?|channels?|lanes?"
)
_FRACTIONS = (
    "half|halves|halved|halve|thirds?|quarters?|fifths?|sixths?|sevenths?|eighths?|ninths?|"
    "tenths?|hundredths?|thousandths?"
)
_MULTIPLES = (
    "twice|double[sd]?|triple[sd]?|treble[sd]?|quadruple[sd]?|"
    "(?:two|three|four|five|six|eight|ten|hundred|thousand)fold"
)
_WORD = rf"(?:{_TENS})(?:-(?:one|{_UNITS}))?|{_UNITS}|{_SCALES}|(?<!few\s)dozen(?!s)|{_FRACTIONS}|{_MULTIPLES}"
WORD_NUMBER = re.compile(
    rf"(?<![\w-])(?:{_WORD}|one(?=[\s-]+(?:{_SCALES}|{COUNTED})\b))(?:(?:\s+and\s+|\s+|-)(?:{_WORD}|one))*"
    r"(?!\w)(?!-\d)",
    re.IGNORECASE,
)


def is_number_word(text: str) -> bool:
    """Whether an unbound number is a number in words ("two", "half", "ten billion", "twice")."""
    return WORD_NUMBER.fullmatch(text) is not None


_SMALL = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TEN = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALE = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_PARTS = {
    "half": 2,
    "halves": 2,
    "third": 3,
    "quarter": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "hundredth": 100,
    "thousandth": 1000,
}
_TIMES = {"twice": 2, "double": 2, "triple": 3, "treble": 3, "quadruple": 4}


def word_value(text: str) -> str | None:
    """The value a number in words states, as a binding's title gives it ("twenty-five" → "25", "a
    quarter" → "0.25", "nine tenths" → "0.9", "twice" → "2"); None where it does not say one plainly."""
    words = [w for w in re.split(r"[\s-]+", text.lower().strip()) if w not in ("and", "a", "an")]
    if not words:
        return None
    last = words[-1].rstrip("s") if words[-1] not in ("halves",) else "halves"
    if last in _PARTS or words[-1] in _PARTS:
        count = _cardinal(words[:-1]) if words[:-1] else 1
        part = _PARTS.get(words[-1], _PARTS.get(last))
        return None if count is None or part is None else f"{count / part:g}"
    multiple = re.fullmatch(r"(\w+?)(?:fold|[sd])?", words[0]) if len(words) == 1 else None
    if multiple and words[0].endswith("fold"):
        n = _cardinal([words[0][:-4]])
        return None if n is None else str(n)
    if multiple and (words[0] in _TIMES or words[0].rstrip("sd") in _TIMES):
        return str(_TIMES.get(words[0], _TIMES.get(words[0].rstrip("sd"), 0)))
    n = _cardinal(words)
    return None if n is None else str(n)


def _cardinal(words: list[str]) -> int | None:
    total, current = 0, 0
    for word in words:
        if word in _SMALL:
            current += _SMALL[word]
        elif word in _TEN:
            current += _TEN[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word == "dozen":
            current = max(current, 1) * 12
        elif word in _SCALE:
            total, current = total + max(current, 1) * _SCALE[word], 0
        else:
            return None
    return total + current


def binding_hint(text: str) -> str:
    """How an unbound number is bound: digits as they stand, a number in words with the title its
    value needs (`[twenty-five](claim:... "25")`)."""
    if not is_number_word(text):
        return f"[{text}](claim:...)"
    value = word_value(text)
    return f'[{text}](claim:... "{value if value is not None else "its value"}")'
