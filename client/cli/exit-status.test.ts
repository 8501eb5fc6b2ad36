// `ptybroker exec`'s exit status from an exec answer, and the note the CLI prints for how a session
// ended: pure logic, no server.
import { describe, expect, it } from "vitest";
import { endNote, execExitStatus } from "./exit-status.js";

describe("execExitStatus", () => {
  it("the command's own exit code, 0 and 3 alike", () => {
    expect(execExitStatus({ exitCode: 0, signal: null, timedOut: false })).toBe(0);
    expect(execExitStatus({ exitCode: 3, signal: null, timedOut: false })).toBe(3);
  });

  it("128 + the signal's number when a signal killed it, as a shell says", () => {
    expect(execExitStatus({ exitCode: null, signal: "SIGKILL", timedOut: false })).toBe(137);
    expect(execExitStatus({ exitCode: null, signal: "SIGTERM", timedOut: false })).toBe(143);
    expect(execExitStatus({ exitCode: null, signal: "SIGINT", timedOut: false })).toBe(130);
    expect(execExitStatus({ exitCode: null, signal: "SIGSEGV", timedOut: false })).toBe(139);
  });

  it("124 when its timeout killed it (the SIGKILL that did is not the reason)", () => {
    expect(execExitStatus({ exitCode: null, signal: "SIGKILL", timedOut: true })).toBe(124);
  });

  it("255 when the answer names neither a code nor a known signal", () => {
    expect(execExitStatus({ exitCode: null, signal: null, timedOut: false })).toBe(255);
    expect(execExitStatus({ exitCode: null, signal: "SIGNOPE", timedOut: false })).toBe(255);
  });
});

describe("endNote", () => {
  it("says out of memory for a session killed at its memory limit, with the signal that did it", () => {
    expect(endNote({ status: "exited", signal: "SIGKILL", reason: "oom" })).toBe(
      "out of memory: the session passed its memory limit and was killed (SIGKILL)",
    );
    expect(endNote({ status: "exited", signal: null, reason: "oom" })).toBe(
      "out of memory: the session passed its memory limit and was killed",
    );
  });

  it("names the signal of another end by a signal, and the status of a session that did not exit", () => {
    expect(endNote({ status: "exited", signal: "SIGHUP", reason: "deleted" })).toBe("session ended by SIGHUP");
    expect(endNote({ status: "lost", signal: null, reason: "runner_lost" })).toBe("session lost");
    expect(endNote({ status: "failed", signal: null, reason: "failed" })).toBe("session failed");
  });

  it("says nothing when the exit code says it all", () => {
    expect(endNote({ status: "exited", signal: null, reason: "exit" })).toBeNull();
  });
});
