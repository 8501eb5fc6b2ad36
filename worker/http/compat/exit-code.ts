// Exit codes as a shell reports them, for the compatibility surfaces (opencode/, daytona/): a
// process's own code, or 128 + the number of the signal that ended it.
import type { Session } from "../../../shared/session.js";

/** Linux signal numbers. */
const SIGNAL_NUMBERS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGILL: 4,
  SIGTRAP: 5,
  SIGABRT: 6,
  SIGBUS: 7,
  SIGFPE: 8,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

/** The process's exit code, or 128 + its signal's number; null when there is neither (lost, failed). */
export function shellExitCode(session: Pick<Session, "exitCode" | "signal">): number | null {
  if (session.exitCode !== null) return session.exitCode;
  return session.signal ? 128 + (SIGNAL_NUMBERS[session.signal] ?? 0) : null;
}
