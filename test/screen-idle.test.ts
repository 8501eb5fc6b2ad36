// Idle screens on the real stack (docs/architecture.md, "Idle screens"): a runner with a short
// RUNNER_SCREEN_IDLE_MS drops an idle session's emulator (its debug event `agent.screen`,
// outcome "dropped", read from the runner's output) and makes it again when next needed; the
// screen while dropped and after, `run`, and a command typed across a drop stay exact: the screen
// equals what a fresh emulator draws from the session's whole output, read back from the edge.
// On an edge and a runner of this file's own, stopped by PID.
import { beforeAll, describe, expect, it, onTestFailed } from "vitest";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import { Api, type SuiteStack, renderScreen, startSuiteStack, until } from "./harness.js";
import { SuiteCleanup } from "./cleanup.js";

const KEY = "screen-idle-key";
const IDLE_MS = 300;
const cleanup = new SuiteCleanup();
let stack: SuiteStack;
let edge: Edge;
let api: Api;
let runner: ManagedProcess;

beforeAll(async () => {
  stack = await startSuiteStack(
    {
      apiKeys: `idle:${KEY}`,
      runners: [{ runnerId: "screen-idle", env: { RUNNER_SCREEN_IDLE_MS: String(IDLE_MS), LOG_LEVEL: "debug" } }],
    },
    cleanup,
  );
  edge = stack.edge;
  api = new Api(edge.url, KEY);
  [runner] = stack.runners;
}, 90_000);

/** The runner's `agent.screen` events for one session, in order: "dropped", "restored". */
function screenEvents(id: string): string[] {
  const outcomes: string[] = [];
  for (const line of runner.output().split("\n")) {
    if (!line.includes('"event":"agent.screen"') || !line.includes(id)) continue;
    const event = JSON.parse(line.slice(line.indexOf("{"))) as { outcome: string };
    outcomes.push(event.outcome);
  }
  return outcomes;
}

/** Waits until the session's emulator is dropped once more than `before` times. */
async function droppedAgain(id: string, before: number): Promise<number> {
  return until(
    async () => {
      const dropped = screenEvents(id).filter((o) => o === "dropped").length;
      return dropped > before ? dropped : undefined;
    },
    20_000,
    `the screen of ${id} to be dropped`,
  );
}

/** The session's screen equals what a fresh emulator draws from its whole output (the session is quiet). */
async function exactScreen(id: string): Promise<void> {
  const screen = await until(
    async () => {
      const [state, s] = await Promise.all([api.screen(id), api.get(id)]);
      return state.offset === s.offset ? state : undefined;
    },
    20_000,
    `the screen of ${id} to settle`,
  );
  const drawn = await renderScreen(await api.outputRange(id, 0, screen.offset), screen.cols, screen.rows);
  expect(screen.lines).toEqual(drawn.lines);
  expect(screen.cursor).toMatchObject(drawn.cursor);
  expect(screen.title).toBe(drawn.title);
  expect(screen.alternate).toBe(drawn.alternate);
}

describe("an idle session's screen", () => {
  it("drops its emulator, answers screen and run exactly, and reports a command typed across a drop", { timeout: 90_000 }, async () => {
    onTestFailed(() => console.error(`---- runner ${runner.pid} ----\n${runner.output().slice(-6000)}`));
    const s = await api.create({ cols: 80, rows: 24 });
    cleanup.session(api, s.id);
    expect((await api.run(s.id, "echo one")).output).toBe("one\n");

    let dropped = await droppedAgain(s.id, 0);
    // While dropped: the screen it showed (answered from its checkpoint, no emulator made).
    await exactScreen(s.id);
    expect(screenEvents(s.id).at(-1)).toBe("dropped");

    // `run` makes it again; its output and the screen after it are exact.
    expect(await api.run(s.id, "printf 'a\\tb\\n'")).toMatchObject({ output: "a\tb\n", exitCode: 0 });
    expect(screenEvents(s.id)).toContain("restored");
    await exactScreen(s.id);

    // Half a command typed, the screen dropped mid-prompt, the rest typed (with an edit).
    dropped = await droppedAgain(s.id, dropped);
    await api.inputAt(s.id, "echo hal");
    await droppedAgain(s.id, dropped);
    await api.inputAt(s.id, "fX\x7f and half\r");
    const command = await until(
      async () => (await api.commands(s.id)).find((c) => c.command.startsWith("echo half")),
      20_000,
      "the typed command to be reported",
    );
    expect(command).toMatchObject({ command: "echo half and half", exitCode: 0 });
    await exactScreen(s.id);
  });
});
