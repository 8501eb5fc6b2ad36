// Issue 24, fair share: `expect` patterns run on RE2 (docs/protocol.md §3, "Agents";
// docs/security.md, "Fair share"), on the real stack. A viewer's pattern made to backtrack
// catastrophically (8 s for `^(a|a)+b$` over 29 a's on JavaScript's RegExp, with /healthz and other
// tenants' requests stalled behind it on the edge's thread) answers at its timeout, while
// /healthz and another tenant's GET answer in their usual time; patterns RE2 cannot run in
// linear time are refused with 400 saying why.
import { describe, expect, it } from "vitest";
import { Api, fetchOutput, onSharedStack, until } from "./harness.js";

const suite = onSharedStack();
const { url, api, globex } = suite;

/** The line the session prints: a run of `a`s that a backtracking engine splits every way. */
const LINE = `${"a".repeat(29)}!`;

/** What a request that must not be slowed may take while a pattern runs (normally 5-20 ms). */
const PROBE_MS = 500;

async function viewerOf(id: string): Promise<Api> {
  const res = await api.request<{ token: string }>("POST", `/v1/sessions/${id}/tokens`, { role: "viewer", ttlSec: 600 });
  expect(res.status).toBe(201);
  return new Api(url, res.body.token);
}

/** A session that printed LINE and waits (cat), and a viewer token for it. */
async function lineSession(): Promise<{ id: string; offset: number; viewer: Api }> {
  const s = await suite.session({ command: "/bin/sh", args: ["-c", `printf '%s\\n' ${LINE}; exec cat`] });
  await until(async () => (await fetchOutput(api, s.id, 0)).bytes.toString("utf8") === `${LINE}\r\n`, 15_000, `${LINE} printed`);
  return { id: s.id, offset: Buffer.byteLength(`${LINE}\r\n`), viewer: await viewerOf(s.id) };
}

describe("expect patterns run in linear time (RE2)", () => {
  it("answers catastrophic patterns at their timeout while /healthz and another tenant's GET answer as usual", async () => {
    const { id, offset, viewer } = await lineSession();
    const other = await suite.session({ command: "/bin/cat" }, globex);
    const probes: Record<string, () => Promise<number>> = {
      healthz: async () => (await fetch(`${url}/healthz`)).status,
      "globex GET": async () => (await globex.request("GET", `/v1/sessions/${other.id}`)).status,
    };
    /** One round of probes: each one's time in ms (each must answer 200). */
    const round = async (): Promise<number[]> => {
      const times: number[] = [];
      for (const [name, probe] of Object.entries(probes)) {
        const at = performance.now();
        expect(await probe(), name).toBe(200);
        times.push(performance.now() - at);
      }
      return times;
    };
    const baseline: number[] = [];
    for (let i = 0; i < 5; i++) baseline.push(...(await round()));

    // Exponential on a backtracking engine: an alternation of equals, nested pluses, nested stars.
    for (const [pattern, flags] of [
      ["^(a|a)+b$", "m"],
      ["(\\w+\\s?)+$", ""],
      ["(.*a){12}$", ""],
    ] as const) {
      const at = performance.now();
      let answered = false;
      const answer = viewer.expectRequest(id, { pattern, flags, from: 0, timeoutSec: 1 }).finally(() => (answered = true));
      const during: number[] = [];
      while (!answered) during.push(...(await round()));
      const res = await answer;
      const tookMs = performance.now() - at;
      console.info(
        `expect ${pattern} (${flags || "no flags"}): ${Math.round(tookMs)} ms; probes before ` +
          `${Math.round(Math.max(...baseline))} ms at most, during ${Math.round(Math.max(...during))} ms at most (${during.length})`,
      );
      expect(res.status, pattern).toBe(200);
      expect(res.body, pattern).toEqual({ matched: false, reason: "timeout", offset });
      expect(tookMs, pattern).toBeLessThan(2500);
      expect(during.length, pattern).toBeGreaterThan(0);
      expect(Math.max(...during), pattern).toBeLessThan(PROBE_MS);
    }

    // The pattern still matches when the text lets it, with the line's raw byte range.
    const found = await viewer.expectOutput(id, { pattern: "^(a|a)+!$", flags: "m", from: 0, timeoutSec: 1 });
    expect(found).toEqual({ matched: true, match: LINE, groups: ["a"], start: 0, end: LINE.length });
  });

  it("keeps a costly pattern over a 4 MiB replay from holding the edge: matched in turns, a few such expects per session", async () => {
    // Lines of 27 random characters and a pattern that wants 28 before a line break: nothing
    // matches, and RE2's DFA meets a new state at nearly every character (its slowest case, about
    // 1 µs a character), over and over, as the replay hands the output over in small chunks.
    const s = await suite.session({ command: "/bin/sh", args: ["-c", "head -c 3100000 /dev/urandom | base64 -w 27; exec cat"] });
    const offset = await until(async () => {
      const at = (await api.get(s.id)).offset;
      return at >= 4_250_000 ? at : undefined;
    }, 30_000, "4 MiB of output");
    const viewer = await viewerOf(s.id);
    const other = await suite.session({ command: "/bin/cat" }, globex);
    const probe = async () => {
      const at = performance.now();
      expect((await globex.request("GET", `/v1/sessions/${other.id}`)).status).toBe(200);
      return performance.now() - at;
    };
    const pattern = "[a-z][^\\n]{28}\\n"; // 32 instructions: four fit in a session's 128
    const at = performance.now();
    let answered = 0;
    const answers = Array.from({ length: 16 }, () =>
      viewer.expectRequest(s.id, { pattern, from: 0, timeoutSec: 1 }).finally(() => answered++),
    );
    const during: number[] = [];
    while (answered < 16) during.push(await probe());
    const results = await Promise.all(answers);
    const tookMs = performance.now() - at;
    console.info(`16 expects of ${pattern} over ${offset} bytes: ${Math.round(tookMs)} ms; globex GET during: ${Math.round(Math.max(...during))} ms at most`);
    const waited = results.filter((r) => r.status === 200);
    expect(waited).toHaveLength(4);
    for (const r of waited) expect(r.body).toEqual({ matched: false, reason: "timeout", offset: expect.any(Number) });
    for (const r of results.filter((r) => r.status !== 200)) {
      expect(r.status).toBe(429);
      expect(r.body).toMatchObject({ error: { code: "QUOTA_EXCEEDED", message: expect.stringMatching(/compile to \d+ RE2 instructions together/) } });
    }
    // Answered about their 1 s timeout, not after matching the whole replay in one piece: at
    // ~1 µs a character that is over 4 s for one expect and 17 s for the four that wait, so 6 s
    // (3 s measured on a quiet machine, 3.02 s once on a slow one) still tells the two apart.
    expect(tookMs).toBeLessThan(6000);
    // Another tenant's GET meanwhile waits at most a few turns, never one expect's whole replay
    // (over 4 s): 1.6 s was seen on a slow machine, hence 3 s.
    expect(Math.max(...during)).toBeLessThan(3000);
  });

  it("refuses with 400 what RE2 cannot run in linear time, saying why, and what is too large", async () => {
    const { id, viewer } = await lineSession();
    const why = "expect patterns use RE2 syntax and run in linear time";
    for (const [pattern, message] of [
      ["(a)\\1", `pattern: backreferences (\\1) are not supported: ${why}`],
      ["(?<x>a+)!\\k<x>", `pattern: backreferences (\\k<name>) are not supported: ${why}`],
      ["a+(?=!)", `pattern: lookahead ((?=) is not supported: ${why}`],
      ["(?<!b)a+", `pattern: lookbehind ((?<!) is not supported: ${why}`],
    ]) {
      const res = await viewer.expectRequest(id, { pattern, timeoutSec: 1 });
      expect(res.status, pattern).toBe(400);
      expect(res.body, pattern).toEqual({ error: { code: "INVALID_REQUEST", message } });
    }
    // Larger than a search may cost: the window times the program (128 instructions at most).
    for (const pattern of ["\\w{1,255}!", "(.*a){40}!", "a{1000}".repeat(500)]) {
      const res = await viewer.expectRequest(id, { pattern, timeoutSec: 1 });
      expect(res.status, pattern).toBe(400);
      expect(res.body, pattern).toMatchObject({ error: { code: "INVALID_REQUEST", message: expect.stringMatching(/^pattern: too large: /) } });
    }
    // Nothing was left waiting: the session still takes its 16 expects at once.
    const waits = Array.from({ length: 16 }, () => viewer.expectRequest(id, { pattern: "never", literal: true, timeoutSec: 1 }));
    for (const res of await Promise.all(waits)) expect(res.status).toBe(200);
  });
});
