// The SDK's one error type: every failure carries the API's error code (docs/protocol.md §2), or a
// client-side code for what never reached an answer.
import type { ErrorCode } from "../shared/errors.js";

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
