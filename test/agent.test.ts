// Issue 15, the agent layer (docs/protocol.md §3, "Agents") on the real stack: `input` answers
// the offset it was accepted at and applies an Idempotency-Key once; `expect` matches the output
// from an offset (escapes removed, raw byte offsets back); `run` types a command into a login
// shell with shell integration and answers its own output and exit code; `commands` lists what
// the shell ran, typed by anyone, and framed clients hear of each one. Every byte range an answer
// names is read back with `GET .../output` and compared byte for byte.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MAX_RUN_OUTPUT_BYTES } from "../shared/agent.js";
import type { Session } from "../shared/session.js";
import { Api, TermClient, fetchOutput, onSharedStack, stripEscapes, until } from "./harness.js";

const suite = onSharedStack();
const { url, api } = suite;

/** A session; `{}` is the default: `/bin/bash -l` with shell integration. */
function session(body: Record<string, unknown> = {}): Promise<Session> {
  return suite.session(body);
}

function connect(id: string, query = "from=0"): TermClient {
  return suite.connect(id, { query });
}

/** The raw output from `from`, once it holds `needle` (polled with a deadline). */
async function outputOnce(id: string, from: number, needle: string): Promise<Buffer> {
  return until(
    async () => {
      const { bytes } = await fetchOutput(api, id, from);
      return bytes.includes(needle) ? bytes : undefined;
    },
    15_000,
    `${JSON.stringify(needle)} in the output of ${id}`,
  );
}

/** Once the output from `from`, escapes removed, ends with the prompt (`$ `): the shell is quiet. */
async function atPrompt(id: string, from: number): Promise<void> {
  await until(
    async () => stripEscapes((await fetchOutput(api, id, from)).bytes.toString("utf8")).endsWith("$ "),
    15_000,
    `${id} at its prompt`,
  );
}

function count(haystack: Buffer, needle: string): number {
  let n = 0;
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + 1)) n++;
  return n;
}

function isoTime(value: string): number {
  const t = Date.parse(value);
  expect(Number.isNaN(t), `${value} is an ISO time`).toBe(false);
  expect(new Date(t).toISOString()).toBe(value);
  return t;
}

const busyError = { error: { code: "BUSY", message: expect.any(String) } };

describe("input offsets and expect", () => {
  it("matches, from an input's offset, output that came before the request; never the echoed command line", async () => {
    const s = await session();
    // Typed at the prompt, so the shell (not the terminal's cooked mode) echoes it.
    await atPrompt(s.id, 0);
    const typed = await api.inputAt(s.id, "echo READY-42\r");
    expect(typed.bytes).toBe(Buffer.byteLength("echo READY-42\r"));
    expect(typed.offset).toBeLessThanOrEqual((await api.get(s.id)).offset);

    // The output is in before expect is asked: the echoed command line, then the output line.
    const after = await until(
      async () => {
        const { bytes } = await fetchOutput(api, s.id, typed.offset);
        return count(bytes, "READY-42") >= 2 ? bytes : undefined;
      },
      15_000,
      "READY-42 echoed and printed",
    );
    const echoed = after.indexOf("READY-42");
    const at = typed.offset + after.lastIndexOf("READY-42\r\n");
    expect(after.subarray(0, echoed).toString("utf8")).toMatch(/echo $/);
    expect(at).toBeGreaterThan(typed.offset + echoed);

    const found = await api.expectOutput(s.id, { pattern: "READY-(\\d+)", from: typed.offset, timeoutSec: 10 });
    expect(found).toEqual({ matched: true, match: "READY-42", groups: ["42"], start: at, end: at + 8 });
    expect((await api.outputRange(s.id, at, at + 8)).toString("utf8")).toBe("READY-42");
    expect(await api.expectOutput(s.id, { pattern: "READY-42", literal: true, from: typed.offset, timeoutSec: 10 })).toEqual({
      ...found,
      groups: [],
    });

    // Without `from`, the search starts at the offset the request arrived at: READY-42 is older.
    await atPrompt(s.id, at);
    const quietAt = (await api.get(s.id)).offset;
    const missed = await api.expectOutput(s.id, { pattern: "READY-42", literal: true, timeoutSec: 1 });
    expect(missed).toEqual({ matched: false, reason: "timeout", offset: quietAt });

    // An expect waiting from an offset matches what is typed after it, not the older line.
    const from = (await api.get(s.id)).offset;
    const pending = api.expectOutput(s.id, { pattern: "READY-(\\d+)", from, timeoutSec: 20 });
    const second = await api.inputAt(s.id, "echo READY-49\r");
    expect(second.offset).toBeGreaterThanOrEqual(from);
    const later = await until(
      async () => {
        const { bytes } = await fetchOutput(api, s.id, second.offset);
        return count(bytes, "READY-49") >= 2 ? bytes : undefined;
      },
      15_000,
      "READY-49 echoed and printed",
    );
    const at2 = second.offset + later.lastIndexOf("READY-49\r\n");
    expect(await pending).toEqual({ matched: true, match: "READY-49", groups: ["49"], start: at2, end: at2 + 8 });

    // literal: the pattern is text, not a regular expression (as one, `(c)*` matches at once, empty).
    const third = await api.inputAt(s.id, "echo 'x(c)*'\r");
    const lit = await api.expectOutput(s.id, { pattern: "(c)*", literal: true, from: third.offset, timeoutSec: 10 });
    const printed = await outputOnce(s.id, third.offset, "x(c)*\r\n");
    const at3 = third.offset + printed.lastIndexOf("(c)*\r\n");
    expect(lit).toEqual({ matched: true, match: "(c)*", groups: [], start: at3, end: at3 + 4 });
  });

  it("matches across escape sequences and multi-byte characters, with groups and raw byte offsets", async () => {
    const s = await session();
    // Printed: `café \e[1mprix=42\e[0m|A\e[1mB\e[0m\r\n`; the echo holds neither `prix=42` nor `AB`.
    const typed = await api.inputAt(s.id, "printf 'caf\\303\\251 \\033[1m%s=%s\\033[0m|A\\033[1mB\\033[0m\\n' prix 42\r");
    const printed = "café \x1b[1mprix=42\x1b[0m|A\x1b[1mB\x1b[0m\r\n";
    const after = await outputOnce(s.id, typed.offset, printed);
    const base = typed.offset + after.indexOf(printed);
    const byteAt = (text: string) => base + Buffer.byteLength(printed.slice(0, printed.indexOf(text)));

    const groups = await api.expectOutput(s.id, { pattern: "é (p\\w+)=(\\d+)(x)?", from: typed.offset, timeoutSec: 10 });
    const start = byteAt("é");
    const end = byteAt("\x1b[0m|");
    expect(groups).toEqual({ matched: true, match: "é prix=42", groups: ["prix", "42", null], start, end });
    expect((await api.outputRange(s.id, start, end)).toString("utf8")).toBe("é \x1b[1mprix=42");

    const across = await api.expectOutput(s.id, { pattern: "AB", literal: true, from: typed.offset, timeoutSec: 10 });
    expect(across).toEqual({ matched: true, match: "AB", groups: [], start: byteAt("A\x1b"), end: byteAt("\x1b[0m\r\n") });
    expect((await api.outputRange(s.id, byteAt("A\x1b"), byteAt("\x1b[0m\r\n"))).toString("utf8")).toBe("A\x1b[1mB");

    // Flags apply; `\r\n` is read as `\n`.
    const folded = await api.expectOutput(s.id, {
      pattern: "PRIX=(\\d+)\\|AB\\n",
      flags: "i",
      from: typed.offset,
      timeoutSec: 10,
    });
    expect(folded).toEqual({
      matched: true,
      match: "prix=42|AB\n",
      groups: ["42"],
      start: byteAt("prix"),
      end: byteAt("\x1b[0m\r\n") + Buffer.byteLength("\x1b[0m\r\n"),
    });
  });

  it("matches text that arrives in pieces, a character split between them too", async () => {
    const s = await session();
    await atPrompt(s.id, 0);
    // Two writes 0.3 s apart reach the edge as separate output; the second starts mid-character.
    const typed = await api.inputAt(s.id, "printf 'SP\\303'; sleep 0.3; printf '\\251LIT-%s\\n' ok\r");
    const found = await api.expectOutput(s.id, { pattern: "SPéLIT-(\\w+)", from: typed.offset, timeoutSec: 10 });
    const after = await outputOnce(s.id, typed.offset, "SPéLIT-ok\r\n");
    const at = typed.offset + after.lastIndexOf("SPéLIT-ok\r\n");
    expect(found).toEqual({ matched: true, match: "SPéLIT-ok", groups: ["ok"], start: at, end: at + Buffer.byteLength("SPéLIT-ok") });
  });

  it("answers timeout with the offset reached", async () => {
    const s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const typed = await api.inputAt(s.id, "echo quiet-$((2+3))\r");
    await outputOnce(s.id, typed.offset, "quiet-5\r\n");
    await atPrompt(s.id, typed.offset);
    const offset = (await api.get(s.id)).offset;
    const res = await api.expectRequest(s.id, { pattern: "never-(seen)", from: 0, timeoutSec: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ matched: false, reason: "timeout", offset });
  });

  it("answers exited, with the final offset, when the session ends first; matches an ended session's history", async () => {
    const s = await session();
    const pending = api.expectOutput(s.id, { pattern: "never-seen", literal: true, timeoutSec: 30 });
    // The expect is waiting (it cannot match); then the shell prints and exits.
    await api.inputAt(s.id, 'echo "by""e-$((3*3))"; exit 7\r');
    const ended = await api.request<Session>("GET", `/v1/sessions/${s.id}/wait?timeoutSec=20`);
    expect(ended.body).toMatchObject({ status: "exited", exitCode: 7 });
    expect(await pending).toEqual({ matched: false, reason: "exited", offset: ended.body.offset });

    // After the end: from the current offset nothing can come; from 0 the history is searched.
    expect(await api.expectOutput(s.id, { pattern: "anything", timeoutSec: 5 })).toEqual({
      matched: false,
      reason: "exited",
      offset: ended.body.offset,
    });
    const all = (await fetchOutput(api, s.id, 0)).bytes;
    const at = all.indexOf("bye-9\r\n");
    expect(at).toBeGreaterThanOrEqual(0);
    expect(await api.expectOutput(s.id, { pattern: "bye-(\\d)", from: 0, timeoutSec: 5 })).toEqual({
      matched: true,
      match: "bye-9",
      groups: ["9"],
      start: at,
      end: at + 5,
    });
  });

  it("refuses a bad regular expression or flags with 400", async () => {
    const s = await session({ command: "/bin/cat" });
    for (const body of [{ pattern: "(" }, { pattern: "a[" }, { pattern: "x", flags: "q" }, { pattern: "x", flags: "gg" }]) {
      const res = await api.expectRequest(s.id, { ...body, timeoutSec: 1 });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ error: { code: "INVALID_REQUEST" } });
    }
  });

  it("lets a viewer token expect, read commands and the screen, but not run or type; a writer may run", async () => {
    const s = await session();
    const typed = await api.inputAt(s.id, 'echo "view""er-ok"\r');
    await outputOnce(s.id, typed.offset, "viewer-ok\r\n");
    const tokens = await Promise.all(
      (["viewer", "writer"] as const).map(async (role) => {
        const res = await api.request<{ token: string }>("POST", `/v1/sessions/${s.id}/tokens`, { role, ttlSec: 600 });
        expect(res.status).toBe(201);
        return new Api(url, res.body.token);
      }),
    );
    const [viewer, writer] = tokens as [Api, Api];
    expect(await viewer.expectOutput(s.id, { pattern: "viewer-(ok)", from: typed.offset, timeoutSec: 10 })).toMatchObject({
      matched: true,
      match: "viewer-ok",
      groups: ["ok"],
    });
    expect((await viewer.request("GET", `/v1/sessions/${s.id}/commands`)).status).toBe(200);
    expect((await viewer.request("GET", `/v1/sessions/${s.id}/screen`)).status).toBe(200);

    const refused = await viewer.runRequest(s.id, "echo from-viewer");
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: "FORBIDDEN" } });
    expect((await viewer.inputRequest(s.id, { data: "echo typed-by-viewer\r" })).status).toBe(403);

    const ran = await writer.run(s.id, "echo from-writer");
    expect(ran).toMatchObject({ exitCode: 0, output: "from-writer\n", timedOut: false });
    // The viewer's refused command never reached the shell.
    expect((await fetchOutput(api, s.id, 0)).bytes.includes("from-viewer")).toBe(false);
  });
});

describe("Idempotency-Key", () => {
  it("types a repeated input once and answers the same; a different body under the same key is 409", async () => {
    const s = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const data = 'echo "typ""ed-$((20+1))"\r';
    const key = `retry-${randomUUID()}`;
    const first = await api.inputRequest(s.id, { data }, key);
    expect(first.status).toBe(202);
    expect(first.body).toEqual({ bytes: Buffer.byteLength(data), offset: expect.any(Number) });
    await outputOnce(s.id, first.body.offset, "typed-21\r\n");
    // Output moved on since; the repeat still answers the first answer.
    const again = await api.inputRequest(s.id, { data }, key);
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);

    // Two at once with a new key (a client retrying while the first is in flight).
    const key2 = `race-${randomUUID()}`;
    const data2 = 'echo "typ""ed-$((20+2))"\r';
    const pair = await Promise.all([api.inputRequest(s.id, { data: data2 }, key2), api.inputRequest(s.id, { data: data2 }, key2)]);
    expect(pair.map((r) => r.status)).toEqual([202, 202]);
    expect(pair[1].body).toEqual(pair[0].body);

    // The same key with another body is refused and types nothing.
    const clash = await api.inputRequest(s.id, { data: 'echo "cla""sh"\r' }, key);
    expect(clash.status).toBe(409);
    expect(clash.body).toMatchObject({ error: { code: "CONFLICT" } });
    const clashEncoded = await api.inputRequest(s.id, { data: Buffer.from(data).toString("base64"), encoding: "base64" }, key2);
    expect(clashEncoded.status).toBe(409);

    // Keys: 1..128 visible ASCII characters.
    for (const bad of ["x".repeat(129), "a b", "caf\u00e9", ""]) {
      const res = await api.inputRequest(s.id, { data: 'echo "b""ad"\r' }, bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body).toMatchObject({ error: { code: "INVALID_REQUEST" } });
    }
    const longest = await api.inputRequest(s.id, { data: 'echo "lon""gest"\r' }, `${"k".repeat(120)}!~#$%&*+`);
    expect(longest.status).toBe(202);

    const last = await api.inputAt(s.id, 'echo "do""ne"\r');
    const all = await outputOnce(s.id, 0, "done\r\n");
    expect(last.offset).toBeLessThan(all.indexOf("done\r\n"));
    expect(count(all, "typed-21\r\n")).toBe(1);
    expect(count(all, "typed-22\r\n")).toBe(1);
    expect(count(all, "clash")).toBe(0);
    expect(count(all, "bad")).toBe(0);
    expect(count(all, "longest\r\n")).toBe(1);

    // After the session ended a repeat still answers the first answer; a new key is refused.
    await api.inputAt(s.id, "exit\r");
    await api.request("GET", `/v1/sessions/${s.id}/wait?timeoutSec=20`);
    expect((await api.get(s.id)).status).toBe("exited");
    const late = await api.inputRequest(s.id, { data }, key);
    expect(late.status).toBe(202);
    expect(late.body).toEqual(first.body);
    const fresh = await api.inputRequest(s.id, { data }, `late-${randomUUID()}`);
    expect(fresh.status).toBe(409);
    expect(fresh.body).toMatchObject({ error: { code: "SESSION_EXITED" } });
  });
});

describe("run", () => {
  /** `from`/`to` hold the command's output: read back raw, escapes removed, it is `output`. */
  async function checkRange(id: string, result: { from: number; to: number; output: string }): Promise<Buffer> {
    expect(result.to).toBeGreaterThanOrEqual(result.from);
    expect(result.to).toBeLessThanOrEqual((await api.get(id)).offset);
    const raw = result.to > result.from ? await api.outputRange(id, result.from, result.to) : Buffer.alloc(0);
    expect(stripEscapes(raw.toString("utf8"))).toBe(result.output);
    return raw;
  }

  it("answers exit codes and the command's own output only; cd and variables carry over", async () => {
    const s = await session();
    const began = Date.now();
    const ok = await api.run(s.id, "true");
    expect(ok).toEqual({
      command: "true",
      exitCode: 0,
      output: "",
      from: expect.any(Number),
      to: expect.any(Number),
      startedAt: expect.any(String),
      durationMs: expect.any(Number),
      timedOut: false,
      truncated: false,
    });
    expect(isoTime(ok.startedAt)).toBeGreaterThanOrEqual(began - 1000);
    expect(ok.durationMs).toBeGreaterThanOrEqual(0);
    await checkRange(s.id, ok);
    expect(await api.run(s.id, "false")).toMatchObject({ command: "false", exitCode: 1, output: "", timedOut: false });
    expect(await api.run(s.id, "(exit 2)")).toMatchObject({ command: "(exit 2)", exitCode: 2, output: "", timedOut: false });

    const hello = await api.run(s.id, "echo hello");
    expect(hello).toMatchObject({ exitCode: 0, output: "hello\n" });
    expect((await checkRange(s.id, hello)).toString("utf8")).toContain("hello\r\n");
    const two = await api.run(s.id, "printf 'one\\ntwo\\n'");
    expect(two.output).toBe("one\ntwo\n");
    await checkRange(s.id, two);
    const styled = await api.run(s.id, "printf '\\033[1m%s\\033[0m plain\\n' bold");
    expect(styled).toMatchObject({ exitCode: 0, output: "bold plain\n" });
    expect((await checkRange(s.id, styled)).toString("utf8")).toContain("\x1b[1mbold\x1b[0m plain\r\n");
    // Standard error is the terminal's too.
    expect(await api.run(s.id, "echo oops >&2")).toMatchObject({ exitCode: 0, output: "oops\n" });
    expect(await api.run(s.id, "exit_code_is() { return $1; }")).toMatchObject({ exitCode: 0, output: "" });
    // A command line longer than the terminal is wide (the shell redraws it as it wraps).
    const long = await api.run(s.id, `echo oops >&2; echo ${"w".repeat(100)}; exit_code_is 4`);
    expect(long).toMatchObject({ exitCode: 4, output: `oops\n${"w".repeat(100)}\n` });
    await checkRange(s.id, long);

    expect(await api.run(s.id, "cd /tmp")).toMatchObject({ exitCode: 0, output: "" });
    expect(await api.run(s.id, "pwd")).toMatchObject({ exitCode: 0, output: "/tmp\n" });
    expect(await api.run(s.id, "X=5")).toMatchObject({ exitCode: 0, output: "" });
    expect(await api.run(s.id, "echo $X")).toMatchObject({ exitCode: 0, output: "5\n" });
    expect(await api.run(s.id, "exit_code_is 9")).toMatchObject({ exitCode: 9, output: "" });

    // Runs follow one another in the output.
    const a = await api.run(s.id, "echo first");
    const b = await api.run(s.id, "echo second");
    expect(b.from).toBeGreaterThanOrEqual(a.to);
  });

  it("times out leaving the command running (BUSY meanwhile), and works again after SIGINT", async () => {
    const s = await session();
    await api.run(s.id, "true");
    const slow = await api.runRequest(s.id, "sleep 30", 1);
    expect(slow.status).toBe(200);
    expect(slow.body).toMatchObject({ command: "sleep 30", exitCode: null, output: "", timedOut: true, truncated: false });

    const busy = await api.runRequest(s.id, "echo not-typed");
    expect(busy.status).toBe(409);
    expect(busy.body).toEqual(busyError);

    const sig = await api.request("POST", `/v1/sessions/${s.id}/signal`, { signal: "SIGINT" });
    expect(sig.status).toBe(202);
    const back = await api.run(s.id, "echo back");
    expect(back).toMatchObject({ exitCode: 0, output: "back\n", timedOut: false });
    expect(back.from).toBeGreaterThanOrEqual(slow.body.from);

    // sleep ended by SIGINT: 128 + 2, as the shell tells it.
    const sleep = (await api.commands(s.id)).find((c) => c.command === "sleep 30");
    expect(sleep).toMatchObject({ command: "sleep 30", exitCode: 130 });
    expect((await fetchOutput(api, s.id, 0)).bytes.includes("not-typed")).toBe(false);
  });

  it("is BUSY while a line is half typed or continued, and runs once it is erased, abandoned or finished", async () => {
    const s = await session();
    const client = connect(s.id);
    await client.waitForMessage((m) => m.type === "hello", "hello");
    await api.run(s.id, "true");
    const busyWhile = async (what: string) => {
      const res = await api.runRequest(s.id, "echo should-not-run");
      expect(res.status, what).toBe(409);
      expect(res.body, what).toEqual(busyError);
    };

    // Half a line typed by someone at the terminal: run does not type into it.
    client.send("echo half");
    await client.waitForOutput("echo half");
    await busyWhile("a half-typed line");
    // Erased with Ctrl+U: the prompt is empty again.
    client.send("\x15");
    expect(await api.run(s.id, "echo after-erase")).toMatchObject({ exitCode: 0, output: "after-erase\n" });

    client.send("echo abandoned");
    await client.waitForOutput("echo abandoned");
    await busyWhile("another half-typed line");
    // Abandoned with Ctrl+C: a new prompt.
    client.send("\x03");
    expect(await api.run(s.id, "echo after-abandon")).toMatchObject({ exitCode: 0, output: "after-abandon\n" });

    // A line continued (PS2) is not a prompt either; finished, it is one command.
    client.send("echo one\\\r");
    await client.waitForOutput("> ");
    await busyWhile("a continued line");
    client.send("two\r");
    expect(await api.run(s.id, "echo after-continued")).toMatchObject({ exitCode: 0, output: "after-continued\n" });
    const list = await api.commands(s.id);
    expect(list.map((c) => c.command)).toEqual([
      "true",
      "echo after-erase",
      "echo after-abandon",
      expect.stringContaining("echo one"),
      "echo after-continued",
    ]);
    const continued = list[3] as (typeof list)[number];
    expect(continued.exitCode).toBe(0);
    expect(stripEscapes((await api.outputRange(s.id, continued.from, continued.to)).toString("utf8"))).toBe("onetwo\n");
    expect((await fetchOutput(api, s.id, 0)).bytes.includes("should-not-run")).toBe(false);
  });

  it("is refused with NO_SHELL_INTEGRATION for a program that is not an integrated shell, typing nothing", async () => {
    const cat = await session({ command: "/bin/cat" });
    const res = await api.runRequest(cat.id, "echo into-cat");
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: { code: "NO_SHELL_INTEGRATION", message: expect.any(String) } });
    expect((await api.get(cat.id)).offset).toBe(0);
    // A bash of the caller's own choosing runs without the marks: only the default shell has them.
    const bash = await session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const plain = await api.runRequest(bash.id, "echo into-plain-bash");
    expect(plain.status).toBe(409);
    expect(plain.body).toEqual({ error: { code: "NO_SHELL_INTEGRATION", message: expect.any(String) } });
    expect((await fetchOutput(api, bash.id, 0)).bytes.includes("into-plain-bash")).toBe(false);
  });

  it("truncates 5 MB of output to 1 MiB and still names its whole byte range", { timeout: 120_000 }, async () => {
    const s = await session();
    await api.run(s.id, "true");
    const big = await api.run(s.id, "head -c 5000000 /dev/zero | tr '\\0' a; echo", { timeoutSec: 90 });
    expect(big).toMatchObject({ exitCode: 0, timedOut: false, truncated: true });
    expect(Buffer.byteLength(big.output)).toBe(MAX_RUN_OUTPUT_BYTES);
    expect(big.output === "a".repeat(MAX_RUN_OUTPUT_BYTES)).toBe(true);
    expect(big.to - big.from).toBeGreaterThanOrEqual(5_000_002);
    const raw = await api.outputRange(s.id, big.from, big.to);
    const text = stripEscapes(raw.toString("latin1"));
    expect(text.length).toBe(5_000_001);
    expect(text === `${"a".repeat(5_000_000)}\n`).toBe(true);
    // The shell is at its prompt again.
    expect(await api.run(s.id, "echo after")).toMatchObject({ exitCode: 0, output: "after\n", truncated: false });
  });

  it("shares the shell's state with typing over the WebSocket, both ways", async () => {
    const s = await session();
    const client = connect(s.id);
    await client.waitForMessage((m) => m.type === "hello", "hello");
    await api.run(s.id, "true");

    client.send("cd /var\r");
    await client.waitForMessage((m) => m.type === "command" && m.command === "cd /var", "command cd /var");
    const pwd = await api.run(s.id, "pwd");
    expect(pwd).toMatchObject({ exitCode: 0, output: "/var\n" });
    client.send("Y=7\r");
    await client.waitForMessage((m) => m.type === "command" && m.command === "Y=7", "command Y=7");
    expect(await api.run(s.id, "echo $Y")).toMatchObject({ exitCode: 0, output: "7\n" });

    await api.run(s.id, "cd /usr");
    client.send("pwd\r");
    const typed = await client.waitForMessage(
      (m) => m.type === "command" && m.command === "pwd" && m.from > pwd.to,
      "the typed pwd",
    );
    expect(typed.exitCode).toBe(0);
    expect(stripEscapes((await api.outputRange(s.id, typed.from, typed.to)).toString("utf8"))).toBe("/usr\n");

    // The terminal saw the run's command too, with the range `run` answered.
    const seen = client.commands.find((c) => c.command === "pwd" && c.from === pwd.from);
    expect(seen).toMatchObject({ type: "command", exitCode: 0, from: pwd.from, to: pwd.to });
    await client.waitForOutput("/usr\r\n");
    expect(client.offsetErrors).toEqual([]);
  });
});

describe("commands", () => {
  it("lists commands typed over the WebSocket with their exit codes, and tells framed clients as each ends", async () => {
    const s = await session();
    const client = connect(s.id);
    await client.waitForMessage((m) => m.type === "hello", "hello");
    const watcher = connect(s.id, "from=live");
    await watcher.waitForMessage((m) => m.type === "live", "live");
    const ready = await api.run(s.id, "true");

    const typed: [string, number][] = [
      ["true", 0],
      ["false", 1],
      ["(exit 3)", 3],
      ["echo hi", 0],
    ];
    for (const [command] of typed) {
      const before = client.commands.length;
      // Before `false`: an empty line and a line abandoned with Ctrl+C, which run nothing. Typing
      // waits for the prompt after ^C: the terminal flushes what is queued when it sends SIGINT.
      // Each waits for the next prompt (its OSC 133 A): a Ctrl+C flushes what the shell has not read.
      if (command === "false") {
        for (const keys of ["\r", "   \r", "echo abandoned", "\x03"]) {
          const prompts = count(client.output, "\x1b]133;A");
          client.send(keys);
          if (keys === "echo abandoned") await client.waitForOutput("echo abandoned");
          else await client.waitFor(() => count(client.output, "\x1b]133;A") > prompts, `the prompt after ${JSON.stringify(keys)}`);
        }
      }
      client.send(`${command}\r`);
      await client.waitFor(
        () => client.commands.length > before && client.commands.at(-1)?.command === command,
        `command message for ${command}`,
      );
    }

    const list = await api.commands(s.id);
    expect(list.map((c) => [c.command, c.exitCode])).toEqual([["true", 0], ...typed]);
    expect(list.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(list[0]).toMatchObject({ from: ready.from, to: ready.to });
    for (const [i, c] of list.entries()) {
      expect(Object.keys(c).sort()).toEqual(["command", "endedAt", "exitCode", "from", "seq", "startedAt", "to"]);
      expect(c.to).toBeGreaterThanOrEqual(c.from);
      expect(isoTime(c.endedAt)).toBeGreaterThanOrEqual(isoTime(c.startedAt));
      const previous = list[i - 1];
      if (previous) expect(c.from).toBeGreaterThanOrEqual(previous.to);
    }
    const hi = list[4] as (typeof list)[number];
    expect(stripEscapes((await api.outputRange(s.id, hi.from, hi.to)).toString("utf8"))).toBe("hi\n");

    // Every framed client got the same, in order.
    const messages = list.map(({ seq, command, exitCode, from, to }) => ({ type: "command", seq, command, exitCode, from, to }));
    expect(client.commands).toEqual(messages);
    await watcher.waitFor(() => watcher.commands.length === messages.length, "the watcher's command messages");
    expect(watcher.commands).toEqual(messages);

    // limit: the newest, oldest first.
    expect(await api.commands(s.id, 2)).toEqual(list.slice(-2));
    expect(await api.commands(s.id, 1)).toEqual(list.slice(-1));
  });
});
