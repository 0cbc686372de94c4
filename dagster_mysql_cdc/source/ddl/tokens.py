"""Token helpers over sqlglot's tokenizer: a cursor (:class:`TokenCursor`), the statement kind of the first
tokens, and the split of an event's text into statements (stored-program bodies are never split)."""

from __future__ import annotations

from sqlglot.tokens import Token, TokenType

from .dialect import RAW_TOKENIZER
from .outcome import DdlFailure

_NOT_NAME = frozenset(
    {
        TokenType.L_PAREN,
        TokenType.R_PAREN,
        TokenType.COMMA,
        TokenType.SEMICOLON,
        TokenType.DOT,
        TokenType.EQ,
        TokenType.STRING,
        TokenType.NUMBER,
    }
)


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` by :data:`~.dialect.RAW_TOKENIZER`.

    Raises:
        DdlFailure: sqlglot cannot tokenize the text (e.g. an unterminated quote).
    """
    try:
        return list(RAW_TOKENIZER.tokenize(text))
    except Exception as e:  # sqlglot TokenError and friends
        raise DdlFailure(f"sqlglot tokenizer error: {e}") from None


def word_of(tok: Token | None) -> str | None:
    """Upper-case keyword/bare word of a token; ``None`` for quoted identifiers, strings, numbers."""
    if tok is None or tok.token_type in (
        TokenType.IDENTIFIER,
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.NATIONAL_STRING,
    ):
        return None
    return " ".join(tok.text.upper().split())


def is_name(tok: Token | None) -> bool:
    """Whether a token can be a name (an identifier or a bare word, not punctuation/literal)."""
    return tok is not None and tok.token_type not in _NOT_NAME and bool(tok.text)


class TokenCursor:
    """A cursor over a token list (half-open range) with the source text for slicing."""

    def __init__(self, text: str, toks: list[Token], start: int = 0, end: int | None = None):
        self.text = text
        self.toks = toks
        self.i = start
        self.end = len(toks) if end is None else end

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < self.end else None

    def word(self, k: int = 0) -> str | None:
        return word_of(self.peek(k))

    def at_end(self) -> bool:
        return self.i >= self.end

    def accept(self, *words: str) -> bool:
        """Consume the given word sequence if it is next (multi-word tokens are handled)."""
        want = " ".join(words)
        w = self.word()
        if w == want:
            self.i += 1
            return True
        j = 0
        for wd in words:
            if self.word(j) != wd:
                return False
            j += 1
        self.i += j
        return True

    def accept_any(self, *words: str) -> str | None:
        w = self.word()
        if w in words:
            self.i += 1
            return w
        return None

    def accept_type(self, tt: TokenType) -> bool:
        t = self.peek()
        if t is not None and t.token_type == tt:
            self.i += 1
            return True
        return False

    def name(self, what: str = "name") -> str:
        t = self.peek()
        if not is_name(t):
            raise DdlFailure(f"expected {what} but found {t.text if t else 'end of statement'!r}")
        self.i += 1
        return t.text  # type: ignore[union-attr]

    def qualified_name(self, what: str = "table name") -> tuple[str | None, str]:
        first = self.name(what)
        if self.accept_type(TokenType.DOT):
            second = self.name(what)
            if self.peek() is not None and self.peek().token_type == TokenType.DOT:  # type: ignore[union-attr]
                raise DdlFailure(f"unsupported three-part {what}")
            return first, second
        return None, first

    def value(self) -> str:
        """An option value: string literal or bare word/identifier (after an optional ``=``)."""
        self.accept_type(TokenType.EQ)
        t = self.peek()
        if t is None:
            raise DdlFailure("missing option value")
        self.i += 1
        return t.text

    def matching_paren(self, j: int) -> int:
        """Index of the ``)`` closing the ``(`` at index ``j``."""
        depth = 0
        for k in range(j, self.end):
            tt = self.toks[k].token_type
            if tt == TokenType.L_PAREN:
                depth += 1
            elif tt == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    return k
        raise DdlFailure("unbalanced parentheses")

    def split(self, start: int, end: int) -> list[tuple[int, int]]:
        """Ranges of ``[start, end)`` separated by top-level commas."""
        parts: list[tuple[int, int]] = []
        depth = 0
        s = start
        for k in range(start, end):
            tt = self.toks[k].token_type
            if tt == TokenType.L_PAREN:
                depth += 1
            elif tt == TokenType.R_PAREN:
                depth -= 1
            elif tt == TokenType.COMMA and depth == 0:
                parts.append((s, k))
                s = k + 1
        parts.append((s, end))
        return [(a, b) for a, b in parts if b > a]

    def slice(self, start: int, end: int) -> str:
        if end <= start:
            return ""
        return self.text[self.toks[start].start : self.toks[end - 1].end + 1]

    def sub(self, start: int, end: int) -> TokenCursor:
        return TokenCursor(self.text, self.toks, start, end)


_CREATE_KINDS = frozenset(
    {
        "TABLE",
        "DATABASE",
        "SCHEMA",
        "INDEX",
        "VIEW",
        "PROCEDURE",
        "FUNCTION",
        "TRIGGER",
        "EVENT",
        "USER",
        "ROLE",
        "SERVER",
        "TABLESPACE",
        "SEQUENCE",
        "PACKAGE",
        "LOGFILE",
        "SPATIAL REFERENCE SYSTEM",
        "RESOURCE",
        "SYNONYM",
        "TYPE",
        "MATERIALIZED",
    }
)
_COMPOUND_KINDS = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"})


def object_kind(toks: list[Token], start: int = 1, limit: int = 40) -> tuple[str | None, int, bool]:
    """First object-kind word after CREATE/ALTER/DROP: (kind, index, temporary seen)."""
    temporary = False
    for k in range(start, min(len(toks), start + limit)):
        w = word_of(toks[k])
        if w == "TEMPORARY":
            temporary = True
        if w in _CREATE_KINDS or w == "TABLES":
            return ("TABLE" if w == "TABLES" else w), k, temporary
        if w == "UNIQUE INDEX":  # possible multi-word tokenisation
            return "INDEX", k, temporary
    return None, start, temporary


def _is_compound_head(toks: list[Token], i: int) -> bool:
    """Statements whose body contains ``;`` (stored programs, MariaDB compound statements)."""
    w = word_of(toks[i])
    if w == "CREATE":
        kind, _, _ = object_kind(toks, i + 1)
        return kind in _COMPOUND_KINDS
    if w == "ALTER":
        kind, _, _ = object_kind(toks, i + 1)
        return kind == "EVENT"
    if w == "BEGIN":
        return word_of(toks[i + 1]) == "NOT" if i + 1 < len(toks) else False
    if w in ("IF", "WHILE", "REPEAT", "LOOP", "CASE", "DECLARE"):
        return True
    if i + 1 < len(toks) and toks[i + 1].token_type == TokenType.COLON:
        return True  # "label: BEGIN ..."
    return False


def split_statements(text: str) -> list[str]:
    """The statements of one QueryEvent's text, split at top-level ``;``; a stored program
    (``CREATE PROCEDURE``/``FUNCTION``/``TRIGGER``/``EVENT``/``PACKAGE``) and what follows it are
    one statement, as its body holds ``;``.

    Raises:
        DdlFailure: the text cannot be tokenized.
    """
    toks = tokenize(text)
    if not toks:
        return []
    if not any(t.token_type == TokenType.SEMICOLON for t in toks):
        return [text.strip()]
    out: list[str] = []
    start = 0
    i = 0
    while i < len(toks):
        if i == start and toks[i].token_type != TokenType.SEMICOLON and _is_compound_head(toks, i):
            out.append(text[toks[i].start :].strip())
            return out
        if toks[i].token_type == TokenType.SEMICOLON:
            if i > start:
                out.append(text[toks[start].start : toks[i - 1].end + 1])
            start = i + 1
        i += 1
    if start < len(toks):
        out.append(text[toks[start].start : toks[-1].end + 1])
    return out
