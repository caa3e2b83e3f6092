"""Loading labelled prompts for the lexical length predictor; bad rows name file and line."""

import json
import math
from pathlib import Path

import pytest

from predictors.length import data
from predictors.length.data import LengthDataError, read_castillo, read_gpteacher, split_by_prompt

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "prompts").is_dir(),
                                reason=f"shared data folder {DATA}/prompts is absent")


def row(**kw):
    base = {"prompt_text": "Sort the numbers", "model": "m1", "dataset": "Alpaca",
            "output_sizes": [10, 30, 20], "output_mean": 20.0}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not ...}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_castillo_median_and_mean(tmp_path):
    f = write_jsonl(tmp_path / "c.jsonl", [row(), row(prompt_text="b", output_sizes=[1, 2, 3, 100], model="m2")])
    got = read_castillo(f)
    assert [r.length for r in got] == [20.0, 2.5]
    assert [r.length for r in read_castillo(f, label="mean")] == [20.0, 20.0]
    assert [r.prompt for r in read_castillo(f, models=["m2"])] == ["b"]


@pytest.mark.parametrize("bad,line,msg", [
    (row(prompt_text=...), 2, "missing prompt field 'prompt_text'"),
    (row(prompt_text=None), 2, "missing prompt field"),
    (row(prompt_text=5), 2, "not a string"),
    (row(output_sizes=...), 2, "missing length field 'output_sizes'"),
    (row(output_sizes=[]), 2, "non-empty list"),
    (row(output_sizes=[10, 0, 3]), 2, "positive length"),
    (row(output_sizes=[10, -4]), 2, "positive length"),
    (row(output_sizes=[10, "x"]), 2, "not a number"),
])
def test_castillo_bad_rows_name_file_and_line(tmp_path, bad, line, msg):
    f = write_jsonl(tmp_path / "bad.jsonl", [row(), bad, row()])
    with pytest.raises(LengthDataError, match=msg) as e:
        read_castillo(f)
    assert str(e.value).startswith(f"{f}:{line}:")
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)


def test_castillo_mean_label_checks_output_mean(tmp_path):
    f = write_jsonl(tmp_path / "m.jsonl", [row(), row(), row(output_mean=0)])
    with pytest.raises(LengthDataError, match=rf"^{f}:3: .*positive length"):
        read_castillo(f, label="mean")
    g = write_jsonl(tmp_path / "n.jsonl", [row(output_mean=...)])
    with pytest.raises(LengthDataError, match=rf"^{g}:1: missing length field 'output_mean'"):
        read_castillo(g, label="mean")


def test_castillo_invalid_json_line(tmp_path):
    f = tmp_path / "j.jsonl"
    f.write_text(json.dumps(row()) + "\n\n{not json\n")
    with pytest.raises(LengthDataError, match=rf"^{f}:3: not valid JSON"):
        read_castillo(f)


def test_gpteacher_prompt_label_and_errors(tmp_path):
    good = [{"instruction": "Write code", "input": "x=1", "response": "one two three four"},
            {"instruction": "Say hi", "input": "", "response": "hi"}]
    f = tmp_path / "g.json"
    f.write_text(json.dumps(good, indent=2))
    got = read_gpteacher(f)
    assert [r.prompt for r in got] == ["Write code\nx=1", "Say hi"]
    assert [r.length for r in got] == [math.ceil(4 * 4 / 3), math.ceil(4 / 3)]  # 6, 2

    bad = good + [{"instruction": "Empty", "input": "", "response": "   "}]
    f.write_text(json.dumps(bad, indent=2))  # element 3 opens on line 12 (1 + 5 + 5 + 1)
    with pytest.raises(LengthDataError, match=rf"^{f}:12: field 'response' is empty"):
        read_gpteacher(f)
    f.write_text(json.dumps([good[0], {"input": "x", "response": "y"}], indent=2))
    with pytest.raises(LengthDataError, match=rf"^{f}:7: missing prompt field 'instruction'"):
        read_gpteacher(f)
    f.write_text(json.dumps([{"instruction": "a"}]))
    with pytest.raises(LengthDataError, match=rf"^{f}:1: missing length field 'response'"):
        read_gpteacher(f)


def test_split_by_prompt_keeps_a_prompts_rows_together():
    rows = [data.LabelledPrompt(f"prompt {i % 50}", 10.0 + i, "castillo", f"m{i % 13}") for i in range(650)]
    train, test = split_by_prompt(rows, 0.3, seed=7)
    assert len(train) + len(test) == 650 and train and test
    assert not {r.prompt for r in train} & {r.prompt for r in test}
    again = split_by_prompt(rows, 0.3, seed=7)
    assert again == (train, test)
    other = split_by_prompt(rows, 0.3, seed=8)
    assert {r.prompt for r in other[1]} != {r.prompt for r in test}


@needs_data
def test_real_sources_load():
    c = data.load_source("castillo-validate", DATA)
    assert len(c) == 26733 and all(r.length > 0 for r in c)
    g = data.load_source("gpteacher", DATA)
    assert len(g) == 4535 + 7673 + 1923
    s = data.load_source("sharegpt", DATA)
    assert len(s) > 3000
