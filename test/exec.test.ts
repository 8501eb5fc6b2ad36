// Issue 16, `POST /v1/exec` (docs/protocol.md §3, "Exec") on the real stack: one command run to
// completion without a terminal, stdin written then closed, stdout and stderr answered apart
// (together at most maxOutputBytes, the first bytes in output order), a timeout that SIGKILLs;
// underneath a `pty: false` session whose id stays readable and replayable and which counts
// toward the tenant's quota and create rate. A 20 MiB flood ends with every byte in the log.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { lookUpUser, tenantUserName } from "../runner/isolation/session-user.js";
import type { ExecResult, Session } from "../shared/session.js";
import { SHARED_RETAIN_BYTES } from "./global-setup.js";
import {
  Api,
  type ApiResponse,
  SuiteCleanup,
  alive,
  fetchOutput,
  onSharedStack,
  pidsRunning,
  sha256,
  startSuiteStack,
  until,
} from "./harness.js";

const suite = onSharedStack();
const { url, api: acme, globex } = suite;
const runnerToken = inject("runnerToken");
const MiB = 1 << 20;
/** A sandboxed session's workspace, inside (runner/isolation/sandbox.ts). */
const SANDBOX_HOME = "/workspace";

/**
 * `POST /v1/exec` as it answers; the session it made on the shared edge is purged at the end
 * (those on an edge of a describe's own go with that edge).
 */
async function execRequest(api: Api, body: unknown): Promise<ApiResponse<ExecResult>> {
  const res = await api.request<ExecResult>("POST", "/v1/exec", body);
  if (res.status === 200 && typeof res.body?.id === "string" && api.url === url) suite.cleanup.session(api, res.body.id);
  return res;
}

/** `POST /v1/exec`, 200 or throw. */
async function exec(body: Record<string, unknown>, api: Api = acme): Promise<ExecResult> {
  const res = await execRequest(api, body);
  if (res.status !== 200) throw new Error(`exec failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

function sh(script: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { command: "/bin/sh", args: ["-c", script], ...extra };
}



const invalid = { error: { code: "INVALID_REQUEST", message: expect.any(String) } };

describe("exec", () => {
  it("writes stdin and closes it, answers exit 3 with stdout and stderr apart; the id is a pty: false session that replays", async () => {
    const result = await exec(sh("tr a-z A-Z; echo to-err >&2; exit 3", { stdin: "hello\nworld\n" }));
    expect(result).toEqual({
      id: expect.any(String),
      exitCode: 3,
      signal: null,
      stdout: "HELLO\nWORLD\n",
      stderr: "to-err\n",
      truncated: false,
      durationMs: expect.any(Number),
      timedOut: false,
      reason: "exit",
    });
    expect(Number.isInteger(result.durationMs) && result.durationMs >= 0).toBe(true);

    const s = await acme.get(result.id);
    expect(s).toMatchObject({
      id: result.id,
      status: "exited",
      reason: "exit",
      exitCode: 3,
      signal: null,
      pty: false,
      command: "/bin/sh",
      args: ["-c", "tr a-z A-Z; echo to-err >&2; exit 3"],
      offset: 19,
      retainedFrom: 0,
    });
    expect((await fetchOutput(acme, result.id, 0)).bytes.toString()).toBe("HELLO\nWORLD\nto-err\n");
    expect((await acme.outputStream(result.id, "stdout", 0, 19)).toString()).toBe("HELLO\nWORLD\n");
    expect((await acme.outputStream(result.id, "stderr", 0, 19)).toString()).toBe("to-err\n");

    // Replayed over the WebSocket: 0x01 then 0x03, one offset space, then the exit.
    const client = suite.connect(result.id, { query: "from=0" });
    const exit = await client.waitForMessage((m) => m.type === "exit", "exit");
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 3, signal: null, reason: "exit", offset: 19 });
    expect(client.offsetErrors).toEqual([]);
    expect(client.stdout.toString()).toBe("HELLO\nWORLD\n");
    expect(client.stderr.toString()).toBe("to-err\n");
    expect(client.stderrFrames.map((f) => f.offset)).toEqual([12]);

    // The id is the tenant's, and no one else's.
    expect((await globex.request("GET", `/v1/sessions/${result.id}`)).status).toBe(404);
    expect((await globex.request("GET", `/v1/sessions/${result.id}/output`)).status).toBe(404);
  });

  it("takes args, cwd and env; runs as the tenant's user with none of the runner's environment", async () => {
    const user = lookUpUser(tenantUserName("acme"));
    expect(user).not.toBeNull();
    const uid = (user as NonNullable<typeof user>).uid;
    expect(uid).toBeGreaterThan(0);
    const encoded = Buffer.from(runnerToken).toString("base64");
    const result = await exec(
      sh(
        `id -u; pwd; echo "$GREETING"; t=$(echo ${encoded} | base64 -d); ` +
          `for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' 2>/dev/null < "$f"; done | ` +
          `grep -a -c -F -e "$t" -e RUNNER_TOKEN= -e REDIS_URL= -e BROKER_URL= -e OUTPUT_RETAIN_BYTES=`,
        { cwd: "exec/here", env: { GREETING: "hi there" } },
      ),
    );
    expect(result).toMatchObject({
      exitCode: 1, // grep -c found nothing
      stdout: `${uid}\n${SANDBOX_HOME}/exec/here\nhi there\n0\n`,
      stderr: "",
      timedOut: false,
    });
    expect(await exec({ command: "/bin/echo", args: ["a  b", "c"] })).toMatchObject({ exitCode: 0, stdout: "a  b c\n", stderr: "" });
    expect(await exec({ command: "/bin/true" })).toMatchObject({ exitCode: 0, signal: null, stdout: "", stderr: "", truncated: false });
  });

  it("writes 1 MiB of stdin (a pipe holds 64 KiB) and refuses one byte more with 413", async () => {
    expect(await exec({ command: "/usr/bin/wc", args: ["-c"], stdin: "x".repeat(MiB) })).toMatchObject({
      exitCode: 0,
      stdout: `${MiB}\n`,
    });
    const before = (await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length;
    const res = await execRequest(acme, { command: "/usr/bin/wc", args: ["-c"], stdin: "x".repeat(MiB + 1) });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: { code: "PAYLOAD_TOO_LARGE", message: expect.any(String) } });
    expect((await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length).toBe(before);
  });

  it("kills at timeoutSec with SIGKILL: timedOut, exitCode null, the output so far; the session says timeout", async () => {
    const result = await exec(sh("echo started; echo err-started >&2; exec sleep 1000", { timeoutSec: 1 }));
    expect(result).toEqual({
      id: expect.any(String),
      exitCode: null,
      signal: "SIGKILL",
      stdout: "started\n",
      stderr: "err-started\n",
      truncated: false,
      durationMs: expect.any(Number),
      timedOut: true,
      reason: "timeout",
    });
    expect(result.durationMs).toBeGreaterThanOrEqual(1000);
    const s = await acme.get(result.id);
    expect(s).toMatchObject({ status: "exited", reason: "timeout", exitCode: null, signal: "SIGKILL", pty: false, offset: 20 });
    expect(alive(s.pid as number)).toBe(false);
    expect((await fetchOutput(acme, result.id, 0)).bytes.toString()).toBe("started\nerr-started\n");
  });

  it("answers at most maxOutputBytes of stdout and stderr together, the first in output order, truncated beyond; the log has it all", async () => {
    // Exactly the cap: not truncated. One byte over: truncated, the last byte left out.
    expect(await exec(sh("printf %0100d 0", { maxOutputBytes: 100 }))).toMatchObject({
      stdout: "0".repeat(100),
      truncated: false,
    });
    expect(await exec(sh("printf %0101d 0", { maxOutputBytes: 100 }))).toMatchObject({
      stdout: "0".repeat(100),
      stderr: "",
      truncated: true,
      exitCode: 0,
    });

    // 60 bytes to stdout, 60 to stderr, 60 to stdout: the answer is the first 100 bytes of the
    // log, in the order the runner read them (the log says which), each in its own field.
    const [a, b, c] = ["a", "b", "c"].map((ch) => ch.repeat(60));
    const result = await exec(sh(`printf ${a}; sleep 0.2; printf ${b} >&2; sleep 0.2; printf ${c}`, { maxOutputBytes: 100 }));
    expect(result).toMatchObject({ exitCode: 0, signal: null, truncated: true, timedOut: false });
    const log = await fetchOutput(acme, result.id, 0);
    expect(log.bytes.byteLength).toBe(180);
    expect((await acme.outputStream(result.id, "stdout", 0, 180)).toString()).toBe(`${a}${c}`);
    expect((await acme.outputStream(result.id, "stderr", 0, 180)).toString()).toBe(b);
    expect(result.stdout).toBe((await acme.outputStream(result.id, "stdout", 0, 100)).toString());
    expect(result.stderr).toBe((await acme.outputStream(result.id, "stderr", 0, 100)).toString());
    expect(Buffer.byteLength(result.stdout) + Buffer.byteLength(result.stderr)).toBe(100);
  });

  it("ends when the command exits though a child still holds stdout open, and the child is gone", async () => {
    // A sleep no other process runs: the host finds it by its command line (the pid the session
    // prints is its sandbox's, and that sandbox may be gone when the exec answers). sh exits only
    // once the child runs it.
    const sleep = `sleep 1000.${process.pid}`;
    const result = await exec(
      sh(`${sleep} & c=$!; until [ "$(tr '\\0' ' ' < /proc/$c/cmdline)" = "${sleep} " ]; do sleep 0.01; done; echo "child=$c"; echo hi`, { timeoutSec: 30 }),
    );
    expect(result).toMatchObject({ exitCode: 0, signal: null, stderr: "", timedOut: false, truncated: false });
    expect(result.stdout, result.stdout).toMatch(/^child=\d+\nhi\n$/);
    // Any still running at the end gets SIGKILL (by its pid only).
    for (const pid of pidsRunning(sleep)) suite.cleanup.strayProcess(pid, sleep);
    await until(() => pidsRunning(sleep).length === 0, 10_000, "the background child to end");
    expect(await acme.get(result.id)).toMatchObject({ status: "exited", reason: "exit", exitCode: 0 });
  });

  it("completes a 20 MiB stdout flood with every byte in the log", async () => {
    const size = 20 * MiB;
    expect(SHARED_RETAIN_BYTES).toBeGreaterThanOrEqual(size); // the shared runner's OUTPUT_RETAIN_BYTES keeps it all
    const lineText = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV\n";
    const expected = Buffer.from(lineText.repeat(Math.ceil(size / lineText.length))).subarray(0, size);
    const result = await exec(sh(`yes ${lineText.trimEnd()} | head -c ${size}`, { timeoutSec: 300 }));
    expect(result).toMatchObject({ exitCode: 0, signal: null, stderr: "", truncated: true, timedOut: false });
    expect(result.stdout.length).toBe(MiB);
    expect(result.stdout === expected.subarray(0, MiB).toString()).toBe(true);
    const s = await acme.get(result.id);
    expect(s).toMatchObject({ status: "exited", offset: size, retainedFrom: 0 });
    const log = await fetchOutput(acme, result.id, 0);
    expect(log.from).toBe(0);
    expect(log.bytes.byteLength).toBe(size);
    expect(sha256(log.bytes)).toBe(sha256(expected));
  }, 90_000);
});

describe("exec: bad input and roles", () => {
  it("refuses a missing or empty command, bad timeouts and a terminal size with 400, and runs nothing", async () => {
    const before = (await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length;
    const bodies: unknown[] = [
      {},
      { args: ["-c", "echo hi"] },
      { command: "" },
      { command: 5 },
      { command: "/bin/true", timeoutSec: 0 },
      { command: "/bin/true", timeoutSec: 3601 },
      { command: "/bin/true", timeoutSec: 1.5 },
      { command: "/bin/true", stdin: 5 },
      { command: "/bin/true", args: "-c" },
      { command: "/bin/true", cwd: "../../etc" },
      { command: "/bin/true", cols: 80 },
    ];
    for (const body of bodies) {
      const res = await execRequest(acme, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toEqual(invalid);
    }
    const notJson = await acme.request("POST", "/v1/exec", undefined, '{"command":');
    expect(notJson).toMatchObject({ status: 400, body: invalid });
    expect((await acme.request("GET", "/v1/sessions?limit=1000")).body.sessions.length).toBe(before);
  });

  it("answers 403 to session tokens, viewer or writer, and 401 without a key", async () => {
    const target = await suite.session({ pty: false, command: "/bin/sleep", args: ["60"] });
    for (const role of ["viewer", "writer"]) {
      const minted = await acme.request("POST", `/v1/sessions/${target.id}/tokens`, { role });
      expect(minted.status).toBe(201);
      const res = await execRequest(new Api(url, minted.body.token as string), { command: "/bin/true" });
      expect(res.status, role).toBe(403);
      expect(res.body).toEqual({ error: { code: "FORBIDDEN", message: expect.any(String) } });
    }
    const anonymous = await execRequest(new Api(url, null), { command: "/bin/true" });
    expect(anonymous.status).toBe(401);
    expect((await execRequest(new Api(url, runnerToken), { command: "/bin/true" })).status).toBe(401);
  });
});

describe("exec: quota and create rate", () => {
  const key = "exec-quota-acme";
  // This block's own edge, runner and workspace, stopped and removed after it.
  const own = new SuiteCleanup();
  const workspace = own.tempFolder("ptybroker-exec-quota-");
  // The gate file, written by the test into acme's workspace: /workspace/go inside the sandbox.
  const gate = { host: join(workspace, "acme", "go"), inside: `${SANDBOX_HOME}/go` };
  let small: Api;

  beforeAll(async () => {
    const { edge } = await startSuiteStack(
      {
        apiKeys: `acme:${key}`,
        vars: { MAX_SESSIONS_PER_TENANT: "2", MAX_CREATES_PER_MINUTE: "5" },
        runners: [{ runnerId: "exec-quota", env: { RUNNER_WORKSPACE: workspace } }],
      },
      own,
    );
    small = new Api(edge.url, key);
  });

  it("counts a running exec as a session (429 QUOTA_EXCEEDED with Retry-After when full) and against the create rate", async () => {
    const live = (sessions: Session[]) => sessions.filter((x) => x.status === "starting" || x.status === "running");
    // 1: a session; 2: an exec that runs until the gate file appears.
    const sleeper = await small.create({ command: "/bin/sleep", args: ["60"] });
    const pending = execRequest(small, sh(`while [ ! -e ${gate.inside} ]; do sleep 0.05; done; echo released`, { timeoutSec: 60 }));
    await until(
      async () => live((await small.request("GET", "/v1/sessions")).body.sessions).length === 2,
      10_000,
      "the exec's session to be running",
    );
    const full = { status: 429, body: { error: { code: "QUOTA_EXCEEDED", message: expect.any(String) } } };
    const third = await small.request("POST", "/v1/sessions", { command: "/bin/sleep", args: ["60"] });
    expect(third).toMatchObject(full);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    const refused = await execRequest(small, { command: "/bin/true" });
    expect(refused).toMatchObject(full);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await small.request("GET", "/v1/sessions")).body.sessions).toHaveLength(2);

    writeFileSync(gate.host, "");
    const released = await pending;
    expect(released).toMatchObject({ status: 200, body: { exitCode: 0, stdout: "released\n", timedOut: false } });
    await small.destroy(sleeper.id);

    // 3, 4, 5: the minute's creates, by exec; the 6th is refused, exec and create alike.
    for (let i = 0; i < 3; i++) expect(await exec({ command: "/bin/true" }, small)).toMatchObject({ exitCode: 0 });
    const rate = await execRequest(small, { command: "/bin/true" });
    expect(rate).toMatchObject(full);
    expect(Number(rate.headers.get("retry-after"))).toBeGreaterThan(0);
    const create = await small.request("POST", "/v1/sessions", { command: "/bin/true" });
    expect(create).toMatchObject(full);
    expect(live((await small.request("GET", "/v1/sessions")).body.sessions)).toEqual([]);
  });
});
