"""Probes: what this machine's memory and arithmetic deliver, measured on each backend.

- `timing`: repetitions, median, spread, time cap, progress line;
- `devices`: how each backend is timed (CUDA events, MPS and MLX synchronisation);
- `bandwidth`: streaming copy and read-only reduction, in GB/s;
- `matmul`: matmul throughput per dtype in GFLOP/s, and the intensity sweep;
- `store`: one measurement per backend per quantity in a run.

The claims built on these live in `claims/topics/measured.py`.
"""

from __future__ import annotations

from claims.probes import bandwidth, matmul, store, timing
from claims.probes.timing import Measurement, Policy

__all__ = ["Measurement", "Policy", "bandwidth", "matmul", "store", "timing"]
