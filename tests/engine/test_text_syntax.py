"""The text query parser (hybridsearch/query/text.py): it never raises, reads back the syntax it
renders, and anything that is not syntax stays literal text with all of its words."""
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridsearch.engine.analysis import TextAnalyzer
# internal: the parser's clauses before analysis; tests/contract/test_query_syntax.py checks what
# the storages make of them
from hybridsearch.query.text import Clause, parse_text, uses_syntax

ANALYZER = TextAnalyzer(stemmer=None)


def words(text: str) -> list:
    return ANALYZER.words(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(max_size=40) | st.text(alphabet=' +-*"ab\tZé\u0301_', max_size=30))
def test_any_text_parses_and_keeps_every_word(text):
    """Never raises; the clauses hold the text's words, in order, none lost or invented (the
    parser only consumes whitespace, signs, quotes and a prefix's *, none of them word characters)."""
    clauses = parse_text(text)
    assert all(isinstance(c, Clause) and c.kind in ("words", "phrase", "prefix")
               and c.occur in ("should", "must", "must_not") for c in clauses)
    assert [w for c in clauses for w in words(c.text)] == words(text)
    for c in clauses:
        if c.kind == "prefix":
            assert len(c.text) >= 2 and c.text.isalnum()


word = st.text(alphabet="abcdefxyz0129", min_size=1, max_size=6)
sign = st.sampled_from(["", "+", "-"])
piece = st.one_of(
    st.tuples(st.just("words"), sign, word),
    st.tuples(st.just("phrase"), sign, st.lists(word, max_size=4).map(" ".join)),
    st.tuples(st.just("prefix"), sign, word.filter(lambda w: len(w) >= 2)),
)


def render(kind, s, body):
    return s + ('"%s"' % body if kind == "phrase" else body + "*" if kind == "prefix" else body)


@settings(max_examples=500, deadline=None)
@given(st.lists(piece, max_size=6), st.sampled_from([" ", "  ", "\t", " \n "]))
def test_rendered_syntax_reads_back(pieces, sep):
    parsed = parse_text(sep.join(render(*p) for p in pieces))
    occur = {"": "should", "+": "must", "-": "must_not"}
    assert parsed == tuple(Clause(kind, occur[s], body) for kind, s, body in pieces)


def test_what_is_not_syntax_is_literal():
    cases = {
        "+": [Clause("words", "should", "+")],
        "- red": [Clause("words", "should", "-"), Clause("words", "should", "red")],
        "*": [Clause("words", "should", "*")],
        "a*": [Clause("words", "should", "a*")],           # one leading character
        "ab**": [Clause("words", "should", "ab**")],
        "a-b*": [Clause("words", "should", "a-b*")],         # not one word
        '"new york': [Clause("words", "should", '"new'), Clause("words", "should", "york")],  # unclosed
        'red"phone case"': [Clause("words", "should", 'red"phone'), Clause("words", "should", 'case"')],
        "usb-c": [Clause("words", "should", "usb-c")],       # a hyphen inside a word is no sign
        "+-red": [Clause("words", "must", "-red")],
        '"a b"c': [Clause("phrase", "should", "a b"), Clause("words", "should", "c")],
        '""': [Clause("phrase", "should", "")],
        "piz*": [Clause("prefix", "should", "piz")],
        "-Piz*": [Clause("prefix", "must_not", "Piz")],
    }
    for text, want in cases.items():
        assert list(parse_text(text)) == want, text
    assert not uses_syntax(parse_text('red phone a* + - * "unclosed'))
    assert uses_syntax(parse_text('"red"')) and uses_syntax(parse_text("+red")) and uses_syntax(parse_text("re*"))
