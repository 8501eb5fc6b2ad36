// Issue 16, `GET .../recording` (docs/protocol.md §3, "Recordings") on the real stack: asciicast
// v2 from the output log, with the times the runner read each chunk, `r` events at resizes, the
// header's size as it was at the first exported byte, `o` events that concatenate to exactly
// `GET .../output`, and the real `asciinema cat` printing the same bytes. An 8 MiB log streams in
// pieces.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { spawnPty } from "../runner/process/pty.js";
import { toolPath } from "../scripts/test-tools.js";
import type { Session } from "../shared/session.js";
import { TENANTS } from "./global-setup.js";
import { onSharedStack, sha256, until } from "./harness.js";

const suite = onSharedStack();
const { url, api: acme, globex } = suite;
const scratch = suite.cleanup.tempFolder("ptybroker-cast-");

type Header = { version: number; width: number; height: number; timestamp: number };
type Event = [number, string, string];

function session(body: Record<string, unknown>): Promise<Session> {
  return suite.session(body);
}

async function ended(id: string): Promise<Session> {
  return until(
    async () => {
      const res = await acme.request<Session>("GET", `/v1/sessions/${id}/wait?timeoutSec=5`);
      return res.body.status === "starting" || res.body.status === "running" ? undefined : res.body;
    },
    20_000,
    `${id} to end`,
  );
}

/** The recording's body and headers, as fetched; `pieces` counts the body's reads. */
async function recording(id: string, query = "", key: string = TENANTS.acme): Promise<{ status: number; type: string | null; text: string; pieces: number }> {
  const res = await fetch(`${url}/v1/sessions/${id}/recording${query}`, { headers: { authorization: `Bearer ${key}` } });
  let pieces = 0;
  const parts: Buffer[] = [];
  const reader = res.body?.getReader();
  for (let read = await reader?.read(); read && !read.done; read = await reader?.read()) {
    pieces++;
    parts.push(Buffer.from(read.value));
  }
  return { status: res.status, type: res.headers.get("content-type"), text: Buffer.concat(parts).toString("utf8"), pieces };
}

/** Parses a cast: every line JSON, a header first, then events. */
function parse(text: string): { header: Header; events: Event[] } {
  expect(text.endsWith("\n")).toBe(true);
  const lines = text.slice(0, -1).split("\n").map((line) => JSON.parse(line) as unknown);
  const [header, ...events] = lines as [Header, ...Event[]];
  expect(Object.keys(header).sort()).toEqual(["height", "timestamp", "version", "width"]);
  expect(header.version).toBe(2);
  for (const event of events) {
    expect(event).toHaveLength(3);
    expect(typeof event[0]).toBe("number");
    expect(["o", "r"]).toContain(event[1]);
  }
  return { header, events };
}

/**
 * What `asciinema cat` prints for a cast file. It opens /dev/tty, so it runs on a terminal of
 * its own, with output processing off (`stty -opost`) so its bytes arrive as it wrote them.
 */
function asciinemaCat(file: string): Promise<Buffer> {
  const pty = spawnPty({
    command: "/bin/sh",
    args: ["-c", 'stty -opost && exec "$0" cat "$1"', toolPath("asciinema"), file],
    cwd: scratch,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: scratch, LANG: "C.UTF-8", TERM: "xterm-256color" },
    cols: 100,
    rows: 30,
  });
  const parts: Buffer[] = [];
  pty.onData((bytes) => parts.push(Buffer.from(bytes)));
  return new Promise((resolve, reject) =>
    pty.onExit((exit) => (exit.exitCode === 0 ? resolve(Buffer.concat(parts)) : reject(new Error(`asciinema cat: ${JSON.stringify(exit)}: ${Buffer.concat(parts).toString()}`)))),
  );
}

function outputOf(events: Event[]): Buffer {
  return Buffer.from(events.filter((e) => e[1] === "o").map((e) => e[2]).join(""), "utf8");
}

describe("recordings", () => {
  it("records a terminal session: read times with its pause, the resize as an r event, o events equal to the output, and asciinema cat agrees", async () => {
    // The session's own sleep is the pause being recorded; `read` holds it until the resize is done.
    const s = await session({ command: "/bin/sh", args: ["-c", "printf 'one €\\n'; read x; sleep 0.6; printf 'two %s\\n' \"$x\""] });
    const client = suite.connect(s.id);
    await client.waitForOutput("one €\r\n");
    expect((await acme.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 100, rows: 30 })).status).toBe(200);
    await client.waitForMessage((m) => m.type === "resize", "the resize");
    await acme.input(s.id, "go\n");
    const done = await ended(s.id);

    const cast = await recording(s.id);
    expect(cast.status).toBe(200);
    expect(cast.type).toBe("application/x-asciicast");
    const { header, events } = parse(cast.text);
    expect(header).toEqual({ version: 2, width: 80, height: 24, timestamp: Math.floor(Date.parse(s.createdAt) / 1000) });
    const times = events.map((e) => e[0]);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(events.filter((e) => e[1] === "r")).toEqual([[expect.any(Number), "r", "100x30"]]);
    const output = await acme.outputRange(s.id, 0, done.offset);
    expect(outputOf(events)).toEqual(output);
    expect(output.toString()).toBe("one €\r\ngo\r\ntwo go\r\n");
    // The r event comes after the first line and before the echo of what was typed then.
    const at = (text: string) => events.findIndex((e) => e[1] === "o" && e[2].includes(text));
    const resizeAt = events.findIndex((e) => e[1] === "r");
    expect(at("one")).toBeLessThan(resizeAt);
    expect(resizeAt).toBeLessThan(at("go\r\n"));
    // The session slept 0.6 s between reading "go" and printing "two".
    expect(events[at("two")][0] - events[at("go\r\n")][0]).toBeGreaterThanOrEqual(0.5);

    const file = join(scratch, "session.cast");
    writeFileSync(file, cast.text);
    expect(await asciinemaCat(file)).toEqual(output);
  });

  it("exports a range: the header has the size at its first byte, and o events equal that range of the output", async () => {
    const s = await session({ command: "/bin/sh", args: ["-c", "printf 'before\\n'; read x; printf 'after\\n'"], cols: 90, rows: 20 });
    const client = suite.connect(s.id);
    await client.waitForOutput("before\r\n");
    await acme.request("POST", `/v1/sessions/${s.id}/resize`, { cols: 120, rows: 40 });
    await client.waitForMessage((m) => m.type === "resize", "the resize");
    await acme.input(s.id, "x\n");
    const done = await ended(s.id);
    const from = Buffer.byteLength("before\r\n");
    const whole = await acme.outputRange(s.id, 0, done.offset);

    const tail = parse((await recording(s.id, `?from=${from}`)).text);
    expect([tail.header.width, tail.header.height]).toEqual([120, 40]);
    expect(outputOf(tail.events)).toEqual(whole.subarray(from));
    const head = parse((await recording(s.id, `?from=0&to=${from}`)).text);
    expect([head.header.width, head.header.height]).toEqual([90, 20]);
    expect(outputOf(head.events)).toEqual(whole.subarray(0, from));
    expect(head.events.some((e) => e[1] === "r")).toBe(false);
  });

  it("records a pty: false session's stdout and stderr as o events in offset order", async () => {
    const s = await session({ pty: false, command: "/bin/sh", args: ["-c", "echo out-1; echo err-1 >&2; read x; echo out-2; echo err-2 >&2"] });
    const client = suite.connect(s.id);
    await client.waitForOutput("out-1\nerr-1\n");
    await acme.input(s.id, "\n");
    const done = await ended(s.id);
    const { header, events } = parse((await recording(s.id)).text);
    expect([header.width, header.height]).toEqual([80, 24]); // no terminal: the session's size
    expect(outputOf(events)).toEqual(await acme.outputRange(s.id, 0, done.offset));
    expect(events.filter((e) => e[1] === "r")).toEqual([]);
  });

  it("streams an 8 MiB log in pieces, every byte in order", async () => {
    const size = 8 * 1024 * 1024;
    const s = await session({ pty: false, command: "/bin/sh", args: ["-c", `head -c ${size} /dev/zero | tr '\\0' 'a'`] });
    const done = await ended(s.id);
    expect(done.offset).toBe(size);
    const cast = await recording(s.id);
    expect(cast.pieces).toBeGreaterThan(1);
    const { events } = parse(cast.text);
    expect(sha256(outputOf(events))).toBe(sha256(Buffer.alloc(size, "a")));
  });

  it("lets a viewer token read it; another tenant gets 404; a bad range is 400", async () => {
    const s = await session({ command: "/bin/echo", args: ["hi"] });
    await ended(s.id);
    const token = (await acme.request<{ token: string }>("POST", `/v1/sessions/${s.id}/tokens`, { role: "viewer" })).body.token;
    const viewed = await recording(s.id, "", token);
    expect(viewed.status).toBe(200);
    expect(outputOf(parse(viewed.text).events).toString()).toBe("hi\r\n");
    const other = await recording(s.id, "", TENANTS.globex);
    expect(other.status).toBe(404);
    expect(JSON.parse(other.text)).toMatchObject({ error: { code: "NOT_FOUND" } });
    expect((await globex.request("GET", `/v1/sessions/${s.id}/recording`)).status).toBe(404);
    for (const query of ["?from=-1", "?from=x", "?to=1.5", "?from=5&to=2"]) {
      const bad = await recording(s.id, query);
      expect(bad.status).toBe(400);
      expect(JSON.parse(bad.text)).toMatchObject({ error: { code: "INVALID_REQUEST" } });
    }
  });
});
