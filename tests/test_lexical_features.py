"""The 19 lexical features of seed 002 Section 3.2, worked out by hand for a few prompts."""

import numpy as np
import pytest

from predictors.length.lexical import (
    LEXICAL_FEATURE_NAMES,
    N_FEATURES,
    VERB_CLASSES,
    extract,
    extract_many,
    leading_verb,
)

SEED_ORDER = (
    "prompt_token_len", "has_code_keyword", "has_length_constraint", "ends_with_question",
    "has_format_keyword", "clause_count",
    "verb_what", "verb_write", "verb_explain", "verb_summarize", "verb_how", "verb_list",
    "verb_implement", "verb_compare", "verb_describe", "verb_generate", "verb_why", "verb_define",
    "verb_other",
)


def vec(token_len, code, length, question, fmt, clauses, verb):
    one_hot = [1.0 if v == verb else 0.0 for v in VERB_CLASSES]
    return np.array([token_len, code, length, question, fmt, clauses] + one_hot, dtype=np.float32)


# Each case: prompt, then the 19 values derived by hand (comments give the working).
CASES = [
    # 42 characters -> 42 // 4 = 10; "2,000-word" is a count phrase; no code/format/clause words;
    # no "?"; leading word "write".
    ("Write a 2,000-word essay on climate change", vec(10, 0, 1, 0, 0, 0, "write")),
    # 43 characters -> 10; ends with "?"; "can", "you", "please" are skipped fillers -> "explain";
    # "why" is not a clause word; no keyword of any set.
    ("Can you please explain why the sky is blue?", vec(10, 0, 0, 1, 0, 0, "explain")),
    # 82 characters -> 20; code: "implement", "python", "function"; length: "briefly";
    # format: "json", "list"; clauses: "that", "if" -> 2; ends with "."; verb "implement".
    ("Implement a Python function that returns a JSON list of primes, briefly, if n > 1.",
     vec(20, 1, 1, 0, 1, 2, "implement")),
    # 90 characters -> 22; "hello" skipped -> "what"; format: "list"; clauses: "when", "which"
    # -> 2; ends with "?"; "tuple" is not a code keyword; "which one?" is not a count phrase.
    ("Hello! What is the difference between a list and a tuple, and when should I use which one?",
     vec(22, 0, 0, 1, 1, 2, "what")),
]


def test_names_follow_the_seed():
    assert LEXICAL_FEATURE_NAMES == SEED_ORDER
    assert N_FEATURES == 19 and len(VERB_CLASSES) == 13


@pytest.mark.parametrize("prompt,want", CASES, ids=[c[0][:20] for c in CASES])
def test_hand_worked_vectors(prompt, want):
    got = extract(prompt)
    assert got.dtype == np.float32 and got.shape == (19,)
    np.testing.assert_array_equal(got, want, err_msg=str(dict(zip(LEXICAL_FEATURE_NAMES, got.tolist()))))


def test_empty_prompt_is_all_zero_but_other():
    np.testing.assert_array_equal(extract(""), vec(0, 0, 0, 0, 0, 0, "other"))


def test_clause_words_count_every_occurrence():
    # "that" x2, "which" x1, "because" x1; 60 chars -> 15; leading "describe"
    p = "Describe a tool that works, which is fast because that is it"
    assert len(p) == 60
    np.testing.assert_array_equal(extract(p), vec(15, 0, 0, 0, 0, 4, "describe"))


@pytest.mark.parametrize("prompt,verb", [
    ("Summarise this article", "summarize"),
    ("summarize: x", "summarize"),
    ("What's the time", "what"),
    ("Please could you compare A and B", "compare"),
    ("I want you to define entropy", "define"),
    ("Create a poem", "other"),
    ("123 ... ", "other"),
    ("Translate to French", "other"),
])
def test_leading_verb(prompt, verb):
    assert leading_verb(prompt) == verb


def test_question_ignores_trailing_whitespace_and_fence_is_code():
    assert extract("Why?  \n")[3] == 1.0
    assert extract("fix this\n```\nx = 1\n```")[1] == 1.0


def test_extract_many_is_extract_row_by_row():
    prompts = [c[0] for c in CASES] + ["", "List three colours"]
    m = extract_many(prompts)
    assert m.dtype == np.float32 and m.shape == (len(prompts), 19)
    np.testing.assert_array_equal(m, np.stack([extract(p) for p in prompts]))
    assert extract_many([]).shape == (0, 19)


def test_non_string_is_refused():
    with pytest.raises(TypeError):
        extract(None)
    with pytest.raises(TypeError):
        extract_many(["ok", 3])
