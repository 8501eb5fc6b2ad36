// Reconnect delays: exponential growth, capped, with jitter between a small floor and the
// ceiling so that runners restarted together do not redial in step.

export interface BackoffOptions {
  baseMs?: number;
  maxMs?: number;
  random?: () => number;
}

export function backoffDelay(
  attempt: number,
  { baseMs = 100, maxMs = 5000, random = Math.random }: BackoffOptions = {},
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 20));
  const floor = Math.min(baseMs / 2, ceiling);
  return floor + random() * (ceiling - floor);
}
