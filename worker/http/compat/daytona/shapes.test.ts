// Daytona's shapes as pure logic: the close at exit (codes and reasons as its daemon's
// closeClientsWithExitCode makes them), cwd in the workspace, PtySessionInfo. The routes and the
// socket, with Daytona's own client, are in test/compat-daytona.test.ts.
import { describe, expect, it } from "vitest";
import type { Session } from "../../../../shared/session.js";
import { closeReason, exitClose, ptyInfo, shown, workspaceCwd } from "./shapes.js";

function ended(fields: Partial<Session>): Session {
  return {
    id: "s",
    status: "exited",
    command: "/bin/bash",
    args: ["-l"],
    cwd: null,
    cols: 80,
    rows: 24,
    pty: true,
    pid: null,
    tags: [],
    label: null,
    createdAt: "2026-01-01T00:00:00.000Z",
    exitedAt: "2026-01-01T00:00:01.000Z",
    exitCode: null,
    signal: null,
    error: null,
    reason: "exit",
    offset: 0,
    retainedFrom: 0,
    clients: 0,
    timeoutSec: 0,
    idleTimeoutSec: 0,
    detachedTimeoutSec: 0,
    expiresAt: null,
    sandbox: null,
    network: null,
    limits: null,
    ...fields,
  };
}

describe("exitClose", () => {
  it("closes 1000 for exit code 0 and 1011 with Daytona's reasons otherwise", () => {
    expect(exitClose(ended({ exitCode: 0 }))).toEqual({ code: 1000, reason: '{"exitCode":0}' });
    expect(exitClose(ended({ exitCode: 3 }))).toEqual({ code: 1011, reason: '{"exitCode":3,"exitReason":"non-zero exit"}' });
    expect(exitClose(ended({ exitCode: 130 }))).toEqual({ code: 1011, reason: '{"exitCode":130,"exitReason":"Ctrl+C"}' });
    expect(exitClose(ended({ exitCode: 143 }))).toEqual({ code: 1011, reason: '{"exitCode":143,"exitReason":"SIGTERM"}' });
  });

  it("reports a signal as 128 + its number, and DELETE as Daytona's kill (137)", () => {
    expect(exitClose(ended({ signal: "SIGKILL" }))).toEqual({ code: 1011, reason: '{"exitCode":137,"exitReason":"SIGKILL"}' });
    expect(exitClose(ended({ signal: "SIGHUP" }))).toEqual({ code: 1011, reason: '{"exitCode":129,"exitReason":"signal 1"}' });
    expect(exitClose(ended({ signal: "SIGHUP", reason: "deleted" }))).toEqual({
      code: 1011,
      reason: '{"exitCode":137,"exitReason":"SIGKILL"}',
    });
    // A held session deleted before it started: no process, the same close.
    expect(exitClose(ended({ reason: "deleted" })).code).toBe(1011);
  });

  it("closes a session lost or failed with an error its SDK reports, within 123 bytes", () => {
    const lost = exitClose(ended({ status: "lost", reason: "runner_lost", error: "the runner's link was gone ".repeat(10) }));
    expect(lost.code).toBe(1011);
    expect(new TextEncoder().encode(lost.reason).byteLength).toBeLessThanOrEqual(123);
    expect(JSON.parse(lost.reason).error).toMatch(/^the runner's link was gone .*\.\.\.$/);
    expect(JSON.parse(exitClose(ended({ status: "failed", reason: "failed" })).reason)).toEqual({ error: "PTY session failed (failed)" });
    expect(new TextEncoder().encode(closeReason({ error: "é".repeat(200) })).byteLength).toBeLessThanOrEqual(123);
  });
});

describe("shapes", () => {
  it("takes ~ as the workspace and paths in it as relative", () => {
    expect([undefined, "", "~", "~/"].map(workspaceCwd)).toEqual([undefined, undefined, undefined, undefined]);
    expect(workspaceCwd("~/src/app")).toBe("src/app");
    expect(workspaceCwd("src")).toBe("src");
    expect(workspaceCwd("/etc")).toBe("/etc"); // left for POST /v1/sessions to refuse
  });

  it("shows a session as PtySessionInfo, and only terminals that have not ended", () => {
    const running = ended({ status: "running", exitedAt: null, reason: null, cwd: "src", cols: 100, rows: 30 });
    const asked = { spec: { command: "/bin/bash", args: ["-l"], cwd: "src", env: { A: "1" }, cols: 100, rows: 30 }, lazy: true };
    expect(ptyInfo(running, asked)).toEqual({
      id: "s",
      cwd: "~/src",
      envs: { TERM: "xterm-256color", A: "1" },
      cols: 100,
      rows: 30,
      createdAt: "2026-01-01T00:00:00.000Z",
      active: true,
      lazyStart: true,
    });
    expect(shown(running)).toBe(true);
    expect(shown(ended({ status: "starting" }))).toBe(true);
    expect(shown(ended({}))).toBe(false);
    expect(shown(ended({ status: "running", pty: false }))).toBe(false);
  });
});
