// The SDK's one error type: every failure carries the API's error code (docs/protocol.md §2), or a
// client-side code for what never reached an answer.
import { CloseCode, type ErrorCode, ErrorStatus } from "../shared/errors.js";

/** `NETWORK`: the request got no answer. `CLOSED`: the terminal was closed by the caller. */
export type ClientErrorCode = ErrorCode | "NETWORK" | "CLOSED";

export class PtyBrokerError extends Error {
  readonly code: ClientErrorCode;
  /** The HTTP status, or 0 when there was no answer. */
  readonly status: number;
  /** Seconds to wait before retrying (429 answers). */
  readonly retryAfterSec: number | undefined;

  constructor(code: ClientErrorCode, message: string, status = 0, retryAfterSec?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PtyBrokerError";
    this.code = code;
    this.status = status;
    this.retryAfterSec = retryAfterSec;
  }
}

/** The HTTP status an API error code stands for (docs/protocol.md §2); 0 for a code that is not the API's. */
export function statusOf(code: string): number {
  return (ErrorStatus as Record<string, number | undefined>)[code] ?? 0;
}

/** Errors a retry would only repeat: a bad credential, a session that is not there. */
export function isFatal(error: unknown): error is PtyBrokerError {
  return (
    error instanceof PtyBrokerError &&
    (error.code === "UNAUTHORIZED" || error.code === "FORBIDDEN" || error.code === "NOT_FOUND")
  );
}

const REFUSING_CLOSES: Record<number, "UNAUTHORIZED" | "FORBIDDEN" | "NOT_FOUND"> = {
  [CloseCode.Unauthorized]: "UNAUTHORIZED",
  [CloseCode.Forbidden]: "FORBIDDEN",
  [CloseCode.NotFound]: "NOT_FOUND",
};

/**
 * The refusal a WebSocket close code stands for (docs/protocol.md §5, "Refusals and close
 * codes"), with its error code's HTTP status, or undefined for a close a redial may get past.
 */
export function closeRefusal(code: number, reason: string): PtyBrokerError | undefined {
  const refused = REFUSING_CLOSES[code];
  return refused && new PtyBrokerError(refused, reason || `closed with ${code}`, ErrorStatus[refused]);
}
