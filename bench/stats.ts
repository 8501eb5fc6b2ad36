// Summaries of repeated measurements: medians with their range, and percentiles.

export interface Summary {
  n: number;
  median: number;
  min: number;
  max: number;
}

/** Nearest-rank percentile (p in 0..100) of `values`. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarize(values: number[]): Summary {
  return {
    n: values.length,
    median: percentile(values, 50),
    min: Math.min(...values),
    max: Math.max(...values),
  };
}

/** `12.3 (11.0–14.2)`: the median and the range of several runs, with `digits` decimals. */
export function medianRange(values: number[], digits = 1): string {
  const s = summarize(values);
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
}
