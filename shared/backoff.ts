// Reconnect delays: exponential with full jitter, capped (AWS architecture blog's "full jitter").

export interface BackoffOptions {
  baseMs?: number;
  maxMs?: number;
  random?: () => number;
}

export function backoffDelay(attempt: number, { baseMs = 100, maxMs = 5000, random = Math.random }: BackoffOptions = {}): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 20));
  return baseMs / 2 + random() * (ceiling - baseMs / 2);
}
