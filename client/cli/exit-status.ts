// The exit status `ptybroker exec` gives for a command's end, as a shell reports it: the command's
// own exit code, 128 + the signal's number when a signal killed it, and timeout(1)'s 124 when
// exec's timeout did (the server kills it with SIGKILL then: 124 says why, 137 would not). And
// what `attach`, `run` and `exec` say about an end the status alone does not explain.
import { constants } from "node:os";
import type { ExecResult } from "../../shared/session.js";
import type { ExitInfo } from "../index.js";

/** timeout(1)'s status for a command that ran out of time (`run-cmd` and `exec`). */
export const TIMED_OUT_STATUS = 124;

/** Neither an exit code nor a signal we know the number of (the server reported neither). */
export const UNKNOWN_END_STATUS = 255;

export function execExitStatus(result: Pick<ExecResult, "exitCode" | "signal" | "timedOut">): number {
  if (result.timedOut) return TIMED_OUT_STATUS;
  if (result.exitCode !== null) return result.exitCode;
  const number = result.signal ? (constants.signals as Record<string, number | undefined>)[result.signal] : undefined;
  return number === undefined ? UNKNOWN_END_STATUS : 128 + number;
}

/** What the CLI says of a session killed for passing its memory limit (`reason: "oom"`). */
export const OOM_NOTE = "out of memory: the session passed its memory limit and was killed";

/**
 * The note `attach` and `run` print when a session ends, or null when its exit code says it all:
 * a session that did not exit (`lost`, `failed`), one killed for memory, one ended by a signal.
 */
export function endNote(end: Pick<ExitInfo, "status" | "signal" | "reason">): string | null {
  if (end.status !== "exited") return `session ${end.status}`;
  if (end.reason === "oom") return end.signal ? `${OOM_NOTE} (${end.signal})` : OOM_NOTE;
  if (end.signal) return `session ended by ${end.signal}`;
  return null;
}
