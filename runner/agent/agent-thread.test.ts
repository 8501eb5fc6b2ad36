// The agent thread (agent-thread.ts, agent-worker.ts) with a real worker: a terminal's screen kept
// there answers `screen` exactly as the same AgentHost on this thread does, for the same output
// and resizes in the same order; sessions are kept apart; a stopped thread starts again for the
// next terminal. The e2e suites (test/agent, test/screen) run every session through it.
import { afterAll, describe, expect, it } from "vitest";
import type { RunnerLinkMessage } from "../../shared/protocol.js";
import { AgentHost, type AgentLayer } from "./agent-host.js";
import { AgentThreadHost, closeAgentThread } from "./agent-thread.js";

afterAll(() => closeAgentThread());

/** A host of either kind whose messages to the edge are kept; `screen()` asks for one and waits for it. */
function host(kind: "thread" | "here", key: string, cols = 40, rows = 10) {
  const sent: RunnerLinkMessage[] = [];
  const failures: string[] = [];
  const port = {
    send: (message: RunnerLinkMessage) => sent.push(message),
    type: () => undefined,
    screenBehind: () => undefined,
    failed: (error: string) => failures.push(error),
  };
  const options = { cols, rows, shellIntegration: false };
  const layer: AgentLayer = kind === "thread" ? new AgentThreadHost(key, port, options) : new AgentHost(key, port, options);
  let calls = 0;
  return {
    layer,
    failures,
    async screen(): Promise<unknown> {
      const id = ++calls;
      layer.handle({ type: "screen", id } as Parameters<AgentLayer["handle"]>[0]);
      const deadline = Date.now() + 10_000;
      for (;;) {
        const answer = sent.find((m) => m.type === "screen_result" && m.id === id);
        if (answer && answer.type === "screen_result") return answer.screen;
        if (Date.now() > deadline) throw new Error(`no screen_result ${id} within 10 s`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
  };
}

const utf8 = (text: string) => new TextEncoder().encode(text);

/** Output a full-screen program might draw: colours, moves, a title, the alternate screen, wide characters. */
const PIECES = [
  "plain line\r\n\x1b[1;31mred bold\x1b[0m and \x1b[38;5;42mpalette\x1b[0m\r\n",
  "\x1b]0;a title\x07\x1b[5;10Hmoved here \u00e9\u20ac \u4e2d\u6587",
  "\x1b[?1049h\x1b[2J\x1b[Halternate screen\r\n\x1b[7mreversed\x1b[27m",
  "\x1b[?1049l back on the main screen\r\n",
  "x".repeat(3000),
];

describe("AgentThreadHost", () => {
  it("answers `screen` as the same host on this thread does, after output and resizes in order", async () => {
    const there = host("thread", "s1");
    const here = host("here", "s1-here");
    let offset = 0;
    for (const [i, piece] of PIECES.entries()) {
      const bytes = utf8(piece);
      for (const h of [there, here]) h.layer.output(offset, bytes);
      offset += bytes.byteLength;
      if (i === 1) for (const h of [there, here]) h.layer.resize(60, 12);
      expect(await there.screen()).toEqual(await here.screen());
    }
    const last = (await there.screen()) as { offset: number; cols: number; rows: number };
    expect([last.offset, last.cols, last.rows]).toEqual([offset, 60, 12]);
    expect([...there.failures, ...here.failures]).toEqual([]);
    there.layer.dispose();
    here.layer.dispose();
  });

  it("keeps sessions apart, and starts again after the thread was stopped", async () => {
    const a = host("thread", "a");
    const b = host("thread", "b");
    a.layer.output(0, utf8("only in a"));
    b.layer.output(0, utf8("only in b"));
    expect(await a.screen()).toMatchObject({ lines: ["only in a", ...Array(9).fill("")] });
    expect(await b.screen()).toMatchObject({ lines: ["only in b", ...Array(9).fill("")] });
    a.layer.dispose();
    b.layer.dispose();

    await closeAgentThread();
    const c = host("thread", "c");
    c.layer.output(0, utf8("after a restart"));
    expect(await c.screen()).toMatchObject({ offset: 15, lines: ["after a restart", ...Array(9).fill("")] });
    c.layer.dispose();
  });
});
