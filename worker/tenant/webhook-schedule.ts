// When a webhook delivery is tried again (docs/protocol.md, "Webhooks"): the delay doubles from
// a base (WEBHOOK_RETRY_BASE_MS, 30 s by default) up to a cap (WEBHOOK_RETRY_CAP_MS, 1 h), and no
// attempt is made more than 24 h after the event. Pure, so its end is tested without waiting a day.

/** How long after its event a delivery is still tried. */
export const DELIVERY_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface RetryPolicy {
  baseMs: number;
  capMs: number;
  windowMs: number;
}

/** The delay before attempt `attempt + 1`, once `attempt` (≥ 1) attempts have failed. */
export function retryDelay(attempt: number, policy: RetryPolicy): number {
  const doubled = policy.baseMs * 2 ** Math.min(Math.max(attempt - 1, 0), 40);
  return Math.min(policy.capMs, doubled);
}

/**
 * When the next attempt is due after attempt number `attempt` failed at `failedAt`, for an
 * event of `createdAt`; null when that would fall past the window (the delivery has failed).
 */
export function nextAttemptAt(createdAt: number, attempt: number, failedAt: number, policy: RetryPolicy): number | null {
  const next = failedAt + retryDelay(attempt, policy);
  return next > createdAt + policy.windowMs ? null : next;
}

function positive(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isSafeInteger(n) && n > 0 ? n : fallback;
}

/** The policy from the edge's variables (the window is always 24 h). */
export function retryPolicy(vars: { WEBHOOK_RETRY_BASE_MS?: string; WEBHOOK_RETRY_CAP_MS?: string }): RetryPolicy {
  const baseMs = positive(vars.WEBHOOK_RETRY_BASE_MS, 30_000);
  return { baseMs, capMs: Math.max(baseMs, positive(vars.WEBHOOK_RETRY_CAP_MS, 3_600_000)), windowMs: DELIVERY_WINDOW_MS };
}
