// Issue 2 acceptance: real bash sessions through wrangler dev (workerd) and a real runner.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { line, liveSessionProcesses, onSharedStack, until } from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { api } = suite;

function session(body: Record<string, unknown> = {}) {
  return suite.session(body);
}

function connect(id: string, query?: string) {
  return suite.connect(id, { query });
}

/** Whether `sleep <seconds>` runs in the terminal session led by `sid`. */
function sleepRunning(sid: number, seconds: string): boolean {
  return liveSessionProcesses(sid).some((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${seconds}\0`;
    } catch {
      return false;
    }
  });
}

describe("a bash session end to end", () => {
  it("runs the Daytona example: prompt, answer, resize, stty size, exit 0", async () => {
    const s = await session({ cols: 300, rows: 100 });
    expect(s).toMatchObject({ status: "running", cols: 300, rows: 100, command: "/bin/bash", args: ["-l"] });
    expect(s.pid).toBeGreaterThan(0);

    const client = connect(s.id);
    await client.opened;
    const hello = await client.waitForMessage((m) => m.type === "hello", "hello");
    expect(hello.session).toMatchObject({ id: s.id, status: "running", cols: 300, rows: 100 });
    expect(client.messages[0].type).toBe("hello");

    client.send(
      'printf "Accept terms? (y/n): " && read confirm && if [ "$confirm" = "y" ]; then echo "Accepted"; else echo "Declined"; fi\n',
    );
    await client.waitForOutput(/Accept terms\? \(y\/n\): $/);
    client.send("y\n");
    await client.waitForOutput(line("Accepted"));
    expect(client.text).not.toMatch(line("Declined"));

    const resized = await api.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 210, rows: 110 });
    expect(resized.status).toBe(200);
    expect(resized.body).toMatchObject({ cols: 210, rows: 110 });
    await client.waitForMessage((m) => m.type === "resize", "resize message");
    expect(client.messages.find((m) => m.type === "resize")).toEqual({ type: "resize", cols: 210, rows: 110 });

    client.send("stty size\n");
    await client.waitForOutput(line("110 210"));

    await api.input(s.id, "exit\n");
    const waited = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=20`);
    expect(waited.status).toBe(200);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: 0, signal: null });

    const exit = await client.waitForMessage((m) => m.type === "exit", "exit message");
    // `exit` says where output ends, and comes after every byte below that.
    expect(exit).toEqual({ type: "exit", status: "exited", exitCode: 0, signal: null, reason: "exit", offset: client.nextOffset });
    expect(await client.waitForClose()).toBe(4010);
    expect(client.offsetErrors).toEqual([]);
    // Every byte the client saw is counted in the session's offset.
    expect(client.nextOffset).toBe((await api.get(s.id)).offset);
  });

  it("ends a long-running loop on DELETE, records the signal, and leaves no process behind", async () => {
    const s = await session();
    const client = connect(s.id);
    await client.opened;
    client.send('while true; do echo "Running... $(date)"; sleep 1; done\n');
    await client.waitForOutput(/\r\nRunning\.\.\. \S/);
    expect(liveSessionProcesses(s.pid as number).length).toBeGreaterThan(0);

    const deleted = await api.request("DELETE", `/v1/sessions/${s.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: s.id, status: "exited", exitCode: null, signal: "SIGHUP" });
    expect((await api.get(s.id)).status).toBe("exited");
    await until(() => liveSessionProcesses(s.pid as number).length === 0, 5000, "the session's processes to end");
    expect(await client.waitForClose()).toBe(4010);

    // Deleting again answers the same record; the process is long gone.
    const again = await api.request("DELETE", `/v1/sessions/${s.id}`);
    expect(again.body).toMatchObject({ status: "exited", signal: "SIGHUP" });
  });

  it("interrupts sleep 30 with Ctrl+C within a second ($? is 130), and with the SIGINT route", async () => {
    const s = await session();
    const client = connect(s.id);
    await client.opened;

    // Ctrl+C reaches `sleep` only once it runs in the foreground: a key typed before that (while
    // bash starts, or between reading the line and starting the command) goes to bash instead.
    // The prompt, and the shell-integration mark (OSC 133 B) that ends it.
    await client.waitForOutput(new RegExp(String.raw`\$ (?:\x1b\]133;B\x07)?$`));
    client.send("sleep 30\n");
    await until(() => sleepRunning(s.pid as number, "30"), 5000, "sleep 30 to run");
    const start = performance.now();
    client.send("\x03");
    client.send('echo "rc=$?"\n');
    await client.waitForOutput(line("rc=130"), 5000);
    expect(performance.now() - start).toBeLessThan(1000);

    client.send("sleep 31\n");
    await until(() => sleepRunning(s.pid as number, "31"), 5000, "sleep 31 to run");
    const signalled = await api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGINT" });
    expect(signalled).toMatchObject({ status: 202, body: { signal: "SIGINT" } });
    client.send('echo "rc2=$?"\n');
    await client.waitForOutput(line("rc2=130"), 5000);
    expect((await api.get(s.id)).status).toBe("running");
  });

  it("reports exit 7 and keeps it readable after exit", async () => {
    const s = await session();
    await api.input(s.id, "exit 7\n");
    const waited = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=20`);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: 7, signal: null });
    const later = await api.get(s.id);
    expect(later).toMatchObject({ status: "exited", exitCode: 7, signal: null, pid: s.pid });
    expect(later.exitedAt).not.toBeNull();

    // Input to an exited session is refused and changes nothing.
    const refused = await api.request("POST", `/v1/sessions/${s.id}/input`, { data: "echo hi\n" });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: { code: "SESSION_EXITED", message: expect.any(String) } });
    expect(await api.get(s.id)).toEqual(later);
  });

  it("runs a command without a shell and reports a signal death", async () => {
    const s = await session({ command: "/bin/sleep", args: ["30"] });
    expect(s).toMatchObject({ status: "running", command: "/bin/sleep", args: ["30"] });
    const res = await api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGTERM" });
    expect(res.status).toBe(202);
    const waited = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=10`);
    expect(waited.body).toMatchObject({ status: "exited", exitCode: null, signal: "SIGTERM" });
  });

  it("wait answers the running session when its timeout passes", async () => {
    const s = await session({ command: "/bin/sleep", args: ["30"] });
    const waited = await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=0.2`);
    expect(waited).toMatchObject({ status: 200, body: { id: s.id, status: "running" } });
  });
});
