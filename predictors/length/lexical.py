"""The 19 lexical features of Clairvoyant (seed 002, Section 3.2), shared by training and serving.

One extractor, :func:`extract`, is the only code that turns prompt text into features: the
trainer (``lexical_model.train_lexical``), the ONNX ranker (``lexical_model.LexicalRanker``) and
the benchmark all call it (or :func:`extract_many`, which loops over it), so the features served
are byte-for-byte the features trained on. Any change here changes every artifact's meaning;
``LEXICAL_FEATURE_NAMES`` is written into each artifact's sidecar and checked at load time, and
``FEATURE_VERSION`` must be bumped on any change to the keyword sets or rules below.

The columns, in this fixed order (seed 002 Section 3.2, "Numeric features (6)" then "Verb
one-hot features (13)"):

====  ======================  ==========================================================
 idx  name                    value
====  ======================  ==========================================================
  0   prompt_token_len        ``len(prompt) // 4`` (characters, floor-divided by 4: the
                              seed's "floor(len(prompt)/4)" tokenizer approximation)
  1   has_code_keyword        1 if any word of ``CODE_KEYWORDS`` occurs (whole word,
                              case-insensitive) or the prompt contains a ``````` fence
  2   has_length_constraint   1 if any word of ``LENGTH_WORDS`` occurs, or a count phrase
                              such as "500 words", "2,000-word", "3 paragraphs", "in one
                              sentence", "a few lines" (``_LENGTH_PHRASE``)
  3   ends_with_question      1 if the prompt, trailing whitespace removed, ends with "?"
  4   has_format_keyword      1 if any word of ``FORMAT_KEYWORDS`` occurs
  5   clause_count            number of occurrences of the subordinating conjunctions and
                              relative pronouns in ``CLAUSE_WORDS`` (every occurrence counts)
 6-18 verb_<class>            one-hot of the leading instruction verb over the seed's 13
                              classes: what, write, explain, summarize, how, list,
                              implement, compare, describe, generate, why, define, other
====  ======================  ==========================================================

The seed names the 13 verb classes exactly (12 verbs plus "other"); it gives only examples for
the keyword flags ("e.g. function, class, implement, algorithm"; "e.g. brief, detailed, in one
sentence"; "e.g. table, list, json, csv, markdown"), so the sets below contain the seed's
examples plus common neighbours, listed here in full so that the feature is reproducible.

Leading verb: the seed takes "the leading instruction verb from the prompt's initial imperative
clause". We take the first word of the prompt after skipping politeness/request fillers
(``please``, ``can you``, ``could you``, ``i want you to``, ``hi``, ...; at most
``_MAX_LEADING_SKIP`` words), and map it through ``_VERB_CLASS``: the 12 verbs themselves plus
the British spelling "summarise" (apostrophes split words, so "What's" leads with "what").
Any other word, or no word, is class ``other``.

Words are maximal runs of ASCII letters, case-folded (``[A-Za-z]+`` over the prompt's UTF-8
bytes); so "What's" gives "what" and "s", and digits, punctuation and non-ASCII characters
separate words. The text is encoded once and tokenized once (``bytes.translate`` + ``split``,
C-level passes); the flags are C-level ``frozenset.isdisjoint`` scans of the word list
(stopping at the first hit) and the clause count one C-level ``map`` of set membership. The only regex, the length-count phrase search
(linear, no nested quantifiers), runs only when a unit word ("words", "sentence", ...) occurs.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np

FEATURE_VERSION = 1

NUMERIC_FEATURES: tuple[str, ...] = (
    "prompt_token_len",
    "has_code_keyword",
    "has_length_constraint",
    "ends_with_question",
    "has_format_keyword",
    "clause_count",
)
VERB_CLASSES: tuple[str, ...] = (
    "what", "write", "explain", "summarize", "how", "list", "implement",
    "compare", "describe", "generate", "why", "define", "other",
)
LEXICAL_FEATURE_NAMES: tuple[str, ...] = NUMERIC_FEATURES + tuple(f"verb_{v}" for v in VERB_CLASSES)
N_FEATURES = len(LEXICAL_FEATURE_NAMES)
assert N_FEATURES == 19

CODE_KEYWORDS = frozenset({
    # the seed's examples
    "function", "class", "implement", "algorithm",
    # neighbours
    "code", "program", "programming", "script", "python", "java", "javascript", "typescript",
    "cpp", "rust", "golang", "sql", "bash", "html", "css", "def", "return", "import", "compile",
    "compiler", "debug", "bug", "api", "regex", "variable", "loop", "array", "method", "recursion",
    "recursive", "snippet", "struct", "pandas", "numpy", "dataframe", "query", "lambda",
    "functions", "classes", "algorithms",
})
LENGTH_WORDS = frozenset({
    # the seed's examples
    "brief", "detailed",
    # neighbours
    "briefly", "concise", "concisely", "succinct", "succinctly", "short", "shorter", "lengthy",
    "elaborate", "comprehensive", "thorough", "thoroughly", "tldr",
})
FORMAT_KEYWORDS = frozenset({
    # the seed's examples
    "table", "list", "json", "csv", "markdown",
    # neighbours
    "bullet", "bullets", "bulleted", "numbered", "yaml", "xml", "outline", "tabular", "format",
    "formatted", "tables", "lists",
})
CLAUSE_WORDS = frozenset({
    # subordinating conjunctions
    "because", "although", "though", "while", "whereas", "if", "unless", "since", "when",
    "whenever", "wherever", "after", "before", "until", "once", "whether",
    # relative pronouns
    "that", "which", "who", "whom", "whose", "where",
})
_VERB_CLASS: dict[str, int] = {v: i for i, v in enumerate(VERB_CLASSES[:-1])}
_VERB_CLASS["summarise"] = VERB_CLASSES.index("summarize")
_OTHER = len(VERB_CLASSES) - 1
_LEADING_FILLERS = frozenset({
    "please", "pls", "kindly", "can", "could", "would", "will", "you", "u", "i", "want", "need",
    "to", "hi", "hello", "hey", "ok", "okay", "now", "also", "then", "and", "so",
})
_MAX_LEADING_SKIP = 6

# Words: bytes.translate maps ASCII letters to lower case and every other byte (digits,
# punctuation, whitespace, the bytes of non-ASCII UTF-8 characters) to a space; split() then
# gives the maximal runs of ASCII letters. Both are single C-level passes over the text.
_WORD_TABLE = bytes(c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 else 32 for c in range(256))
_B = lambda words: frozenset(w.encode("ascii") for w in words)  # noqa: E731
_CODE_B, _LENGTH_B, _FORMAT_B, _CLAUSE_B = _B(CODE_KEYWORDS), _B(LENGTH_WORDS), _B(FORMAT_KEYWORDS), _B(CLAUSE_WORDS)
_VERB_B = {k.encode("ascii"): v for k, v in _VERB_CLASS.items()}
_FILLERS_B = _B(_LEADING_FILLERS)
# "500 words", "2,000-word", "3 paragraphs", "one sentence", "a few lines", "in 2 sentences".
# Searched only when one of its unit words occurs (a set test), on the ASCII-lower-cased bytes.
_LENGTH_UNITS = _B({"word", "words", "sentence", "sentences", "paragraph", "paragraphs", "line", "lines",
                    "page", "pages", "character", "characters", "token", "tokens", "bullet"})
_LENGTH_PHRASE = re.compile(
    rb"(?:\d[\d,]*|\b(?:one|two|three|four|five|ten|a|single|few))[ \-]"
    rb"(?:words?|sentences?|paragraphs?|lines?|pages?|characters?|tokens?|bullet points?)\b"
)

_OFF_VERB = len(NUMERIC_FEATURES)


def _fill(prompt: str, out: np.ndarray) -> None:
    """Write the 19 features of ``prompt`` into the zeroed float32 row ``out``."""
    raw = prompt.encode("utf-8", "surrogatepass")
    words = raw.translate(_WORD_TABLE).split()
    out[0] = len(prompt) // 4
    out[1] = 1.0 if (b"```" in raw or not _CODE_B.isdisjoint(words)) else 0.0
    out[2] = 1.0 if (not _LENGTH_B.isdisjoint(words)
                     or (not _LENGTH_UNITS.isdisjoint(words) and _LENGTH_PHRASE.search(raw.lower()))) else 0.0
    out[3] = 1.0 if prompt.rstrip().endswith("?") else 0.0
    out[4] = 1.0 if not _FORMAT_B.isdisjoint(words) else 0.0
    out[5] = sum(map(_CLAUSE_B.__contains__, words))
    verb = _OTHER
    for w in words[:_MAX_LEADING_SKIP + 1]:
        if w not in _FILLERS_B:
            verb = _VERB_B.get(w, _OTHER)
            break
    out[_OFF_VERB + verb] = 1.0


def extract(prompt: str) -> np.ndarray:
    """The 19 float32 features of one prompt, in ``LEXICAL_FEATURE_NAMES`` order.

    Every column is float32 (the one-hot columns included): the ONNX converter and runtime take
    one float32 tensor, and training on the same dtype keeps the tree thresholds identical.
    """
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be str, not {type(prompt).__name__}")
    out = np.zeros(N_FEATURES, dtype=np.float32)
    _fill(prompt, out)
    return out


def extract_many(prompts: Sequence[str] | Iterable[str]) -> np.ndarray:
    """An (n, 19) float32 matrix: row i is ``extract(prompts[i])`` (the same code path)."""
    prompts = list(prompts)
    out = np.zeros((len(prompts), N_FEATURES), dtype=np.float32)
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise TypeError(f"prompt {i} must be str, not {type(p).__name__}")
        _fill(p, out[i])
    return out


def leading_verb(prompt: str) -> str:
    """The verb class name that ``extract`` one-hot encodes (for reports and debugging)."""
    row = extract(prompt)
    return VERB_CLASSES[int(np.argmax(row[_OFF_VERB:]))]
