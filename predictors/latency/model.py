"""The latency predictor's network and loss: seed 001, Sec. 3.2.1 component 4 and Table 7.

``LatencyMLP`` maps the raw 16 features of ``sarathi_ext.core.features`` (in FEATURE_NAMES order)
to milliseconds. Everything between is inside the module, so the exported TorchScript file needs
no preprocessing code beside it:

  input   z = (x - mean) / std with mean and std of the train split (registered buffers). A column
          that does not vary in the train split (the four GPU-memory features on engines that
          report none, the bias of Table 2) gets scale 0: the training data says nothing about it,
          and a deployment that does report memory must not push unseen magnitudes into weights
          that were never fitted. Other stds are floored at STD_FLOOR.
  hidden  (128, 64, 32), ReLU, dropout 0.1 (Table 7: "three-layer MLP").
  output  ms = y_mean + y_std * head(h). The target is scaled, not log-transformed: Eq. 5's
          Huber delta and the scheduler's target T* are both in ms, and a log target would make
          the loss relative (a 1 ms miss at 100 ms would cost less than at 10 ms) while LPRS's
          Score (Eq. 10) is absolute. The affine head only starts the network at the train mean
          with unit-scale outputs; the loss is computed on ms.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
from torch import nn

from sarathi_ext.core.features import NUM_FEATURES

HIDDEN_SIZES: tuple[int, ...] = (128, 64, 32)  # Table 7
DROPOUT = 0.1  # Table 7
STD_FLOOR = 1e-6
CONSTANT_REL = 1e-9  # a column whose std is below this fraction of max(1, |mean|) is constant


class LatencyMLP(nn.Module):
    """Raw features [N, 16] (float32) -> predicted batch latency [N] in ms."""

    def __init__(self, hidden_sizes: Sequence[int] = HIDDEN_SIZES, dropout: float = DROPOUT,
                 in_features: int = NUM_FEATURES) -> None:
        super().__init__()
        self.hidden_sizes = [int(h) for h in hidden_sizes]
        self.dropout = float(dropout)
        self.in_features = int(in_features)
        layers: list[nn.Module] = []
        width = self.in_features
        for h in self.hidden_sizes:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(self.dropout)]
            width = h
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)
        self.register_buffer("mean", torch.zeros(self.in_features))
        self.register_buffer("std", torch.ones(self.in_features))
        self.register_buffer("scale", torch.ones(self.in_features))  # 1/std, 0 for constant columns
        self.register_buffer("y_mean", torch.zeros(()))
        self.register_buffer("y_std", torch.ones(()))

    @torch.no_grad()
    def set_normalisation(self, X: np.ndarray, y: np.ndarray) -> None:
        """Standardisation constants from the train split (never from val or test)."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        mean, std = X.mean(axis=0), X.std(axis=0)
        constant = std <= CONSTANT_REL * np.maximum(1.0, np.abs(mean))
        std = np.maximum(std, STD_FLOOR)
        scale = np.where(constant, 0.0, 1.0 / std)
        self.mean.copy_(torch.from_numpy(mean))
        self.std.copy_(torch.from_numpy(std))
        self.scale.copy_(torch.from_numpy(scale))
        self.y_mean.fill_(float(y.mean()))
        self.y_std.fill_(float(max(y.std(), STD_FLOOR)))

    def predict_numpy(self, X: np.ndarray) -> np.ndarray:
        """Eager prediction in eval mode: [N, 16] -> float64 ms [N] (evaluation, not the hot path;
        the scheduler uses ``artifact.load_predictor``). Leaves the module's train/eval mode as
        it was."""
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                x = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
                return self(x).numpy().astype(np.float64)
        finally:
            self.train(was_training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x - self.mean) * self.scale
        return self.net(z).squeeze(-1) * self.y_std + self.y_mean


def asymmetric_huber(pred: torch.Tensor, target: torch.Tensor, weight: Optional[torch.Tensor] = None,
                     delta: float = 1.0, under_ratio: float = 2.0) -> torch.Tensor:
    """Eq. 5: L = (1/N) sum_i w_i l_i(y_i, y_hat_i), with l_i the Huber loss of e = y - y_hat,

        huber(e) = e^2 / 2               if |e| <= delta
                   delta (|e| - delta/2) otherwise,

    multiplied by ``under_ratio`` where the prediction is below the truth (y_hat < y): an
    underestimate lets LPRS pick a chunk that overruns T*, which delays every running decode,
    so it costs more than an overestimate (Sec. 3.2.1, "a stronger penalty on latency
    underestimation"). Without ``weight`` every w_i = 1. In the linear region the minimiser is
    the under_ratio / (1 + under_ratio) quantile (2/3 for the default 2.0), so the fitted
    predictor under-predicts about a third of the time by design.
    """
    if delta <= 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    if under_ratio < 1:
        raise ValueError(f"under_ratio must be >= 1, got {under_ratio}")
    err = target - pred
    a = err.abs()
    huber = torch.where(a <= delta, 0.5 * a * a, delta * (a - 0.5 * delta))
    loss = torch.where(err > 0, huber * under_ratio, huber)
    if weight is not None:
        loss = loss * weight
    return loss.mean()
