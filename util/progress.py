"""One-line progress reports with a rate and an ETA, for long-running work."""

import sys
import time
from typing import Dict, Optional


def format_duration(seconds: float) -> str:
  seconds = max(0, int(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def format_count(x: float) -> str:
  for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if abs(x) >= scale:
      return f"{x / scale:.1f}{unit}"
  return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


class Progress:
  """Prints `label done/total (pct) | rate unit/s | extra | ETA` at most every `interval`
  s (no ETA for a `total` of None); the rate counts from `start`, so a resumed run's
  only what it did itself."""

  def __init__(self, label: str, total: Optional[float], unit: str, start: float = 0,
               interval: float = 2.0):
    self.label, self.total, self.unit = label, total, unit
    self.start_count = self.done = start
    self.interval = interval
    self.t0 = self._last = time.time()

  def rate(self) -> float:
    elapsed = time.time() - self.t0
    return (self.done - self.start_count) / elapsed if elapsed > 0 else 0.0

  def update(self, done: float, extra: Optional[Dict[str, str]] = None, force=False):
    self.done = done
    now = time.time()
    if not force and now - self._last < self.interval:
      return
    self._last = now
    rate = self.rate()
    parts = [f"{self.label} {format_count(self.done)}"]
    if self.total:
      parts[0] += f"/{format_count(self.total)} ({100.0 * self.done / self.total:.1f}%)"
    parts.append(f"{format_count(rate)} {self.unit}/s")
    parts += [f"{k} {v}" for k, v in (extra or {}).items()]
    if self.total and rate > 0:
      parts.append(f"ETA {format_duration((self.total - self.done) / rate)}")
    parts.append(f"elapsed {format_duration(now - self.t0)}")
    print(" | ".join(parts), file=sys.stderr, flush=True)
